/**
 * Request bodies built to cost a JSON service as much as they can within MAX_BODY_BYTES
 * (4 MiB by default): deep nesting, many values, huge strings and numbers, invalid UTF-8,
 * and the wrong content types. Used by tests/security/hostile-bodies.test.ts against every
 * route, and by scripts/bench/hostile-bodies.ts to time them.
 */
import { MAX_JSON_DEPTH, MAX_JSON_VALUES } from "../../src/http/json-bounds";

export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

export type HostileBody = string | Uint8Array | ReadableStream<Uint8Array> | FormData;

export interface HostileShape {
  name: string;
  headers: Record<string, string>;
  /** A fresh body for each request (a stream can be sent once). */
  body(): HostileBody;
  /** What every route must answer, when the shape is past a bound. */
  expect?: { status: number; message: string };
}

const JSON_TYPE: Record<string, string> = { "content-type": "application/json" };
const TOO_DEEP = { status: 400, message: `request body nests deeper than ${MAX_JSON_DEPTH} levels` };
const TOO_MANY = { status: 400, message: `request body holds more than ${MAX_JSON_VALUES} JSON values` };
const NOT_JSON = { status: 400, message: "request body must be JSON (content-type application/json)" };
const TOO_LARGE = { status: 413, message: `request body exceeds ${DEFAULT_MAX_BODY_BYTES} bytes` };

/** `levels` arrays nested in each other. */
export const nested = (levels: number) => "[".repeat(levels) + "]".repeat(levels);
const repeated = (unit: string, times: number, separator = ",") => Array(times).fill(unit).join(separator);
const utf8 = (text: string) => new TextEncoder().encode(text);

/** The bytes as a stream in 64 KiB chunks: the request declares no length (chunked on the wire). */
export function chunked(bytes: Uint8Array): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.subarray(at, (at += 64 * 1024)));
    },
  });
}

/** A string field that fills the body to `bytes` bytes. */
function stringOfSize(bytes: number, unit = "a"): string {
  const frame = '{"x":""}';
  return `{"x":"${unit.repeat(Math.floor((bytes - frame.length) / unit.length))}"}`;
}

export function hostileShapes(): HostileShape[] {
  const deepArrays = utf8(nested(100_000));
  const deepObjects = utf8('{"a":'.repeat(100_000) + "0" + "}".repeat(100_000));
  const review = utf8(`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":${nested(100_000)}}]}`);
  const zeros = utf8(`[${repeated("0", 1_000_000)}]`);
  const zerosInMessages = utf8(`{"model":"openai/gpt-4o-mini","messages":[${repeated("0", 1_000_000)}]}`);
  const distinctKeys = utf8(`{${Array.from({ length: 350_000 }, (_, i) => `"${i.toString(36)}":0`).join(",")}}`);
  // The costliest body that is parsed: one value under the bound, none of them valid anywhere.
  const underTheBound = utf8(`{"model":5,"name":5,"appUserId":5,"messages":[${repeated("0", MAX_JSON_VALUES - 5)}]}`);
  const duplicateKeys = utf8(`{${repeated('"appUserId":0', MAX_JSON_VALUES - 1)}}`);
  const bigString = utf8(stringOfSize(DEFAULT_MAX_BODY_BYTES));
  const escapes = utf8(stringOfSize(DEFAULT_MAX_BODY_BYTES, '\\"'));
  const overLimit = utf8(stringOfSize(DEFAULT_MAX_BODY_BYTES + 1));
  const invalidUtf8 = new Uint8Array([
    ...utf8('{"appUserId":"'),
    0xc0,
    0xaf,
    0xff,
    0xfe,
    0xed,
    0xa0,
    0x80,
    0xf4,
    0x90,
    0x80,
    0x80,
    ...utf8('","name":"\u00ff"}'),
  ]);
  const form = new FormData();
  form.set("appUserId", nested(100_000));
  form.set(repeated("a", 50_000, "."), "1");

  const shape = (name: string, body: () => HostileBody, expected?: HostileShape["expect"], headers = JSON_TYPE) => ({
    name,
    headers,
    body,
    expect: expected,
  });
  return [
    shape("depth: 10^5 arrays", () => deepArrays, TOO_DEEP),
    shape("depth: 10^5 objects", () => deepObjects, TOO_DEEP),
    shape("depth: the review's body (10^5 levels in messages[0].content)", () => review, TOO_DEEP),
    shape("depth: 10^5 arrays, chunked", () => chunked(deepArrays), TOO_DEEP),
    shape("depth: 10^5 arrays as application/json; charset=utf-16", () => deepArrays, TOO_DEEP, { "content-type": "application/json; charset=utf-16" }),
    shape("values: 10^6 zeros", () => zeros, TOO_MANY),
    shape("values: 10^6 zeros in messages", () => zerosInMessages, TOO_MANY),
    shape("values: 10^6 zeros, chunked", () => chunked(zeros), TOO_MANY),
    shape("values: 350,000 distinct keys", () => distinctKeys, TOO_MANY),
    shape("values: one under the bound, all invalid", () => underTheBound),
    shape("values: one under the bound, all the same key", () => duplicateKeys),
    shape("string: 4 MiB", () => bigString),
    shape("string: 4 MiB of escaped quotes", () => escapes),
    shape("string: 4 MiB of escaped quotes, chunked", () => chunked(escapes)),
    shape("string: one byte over MAX_BODY_BYTES, chunked", () => chunked(overLimit), TOO_LARGE),
    shape(
      "numbers: 1e999, -1e999, -0, 1e-999",
      () =>
        '{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1e999,"temperature":-1e999,"n":-0,"x":1e-999,"monthlyUsd":1e999,"name":-0}',
    ),
    shape("numbers: one of 10^6 digits", () => `{"monthlyUsd":${"9".repeat(1_000_000)},"max_tokens":${"9".repeat(1_000_000)}}`),
    shape("utf-8: invalid bytes, overlong and surrogate encodings", () => invalidUtf8),
    shape("utf-8: lone surrogates", () => '{"appUserId":"\\ud800","name":"\\udfff","model":"\\ud800","messages":[{"role":"\\udc00","content":"\\ud83d"}]}'),
    shape("malformed: cut short", () => '{"appUserId":["a",'),
    shape("malformed: control bytes", () => "\u0000\u0001\u00ff"),
    shape("content-type: multipart, a 10^5-deep field and a 50,000-dot name", () => form, NOT_JSON, {}),
    shape("content-type: urlencoded, 10^5 keys", () => repeated("a[b][c]=1", 100_000, "&"), NOT_JSON, { "content-type": "application/x-www-form-urlencoded" }),
    shape("content-type: text/plain, 10^5 levels", () => deepArrays, undefined, { "content-type": "text/plain" }),
    shape("content-type: octet-stream, 10^5 levels", () => deepArrays, undefined, { "content-type": "application/octet-stream" }),
    shape("content-type: Application/JSON, 10^5 levels", () => deepArrays, undefined, { "content-type": "Application/JSON" }),
    shape("content-type: none, 10^5 levels", () => deepArrays, undefined, {}),
  ];
}

/** What `.length` says in the bodies of `schemaShapes`: large enough that looping to it stalls for seconds. */
export const HOSTILE_LENGTH = 10_000_000;

interface SchemaNode {
  type?: unknown;
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  anyOf?: SchemaNode[];
}

/**
 * Bodies aimed at a route's own schema: at every place where the schema puts an array or an
 * object, first an object whose `length` is HOSTILE_LENGTH, then a 1 MiB string, with the
 * path down to that place made of one-element arrays and one-key objects (so code that
 * walks the body by its schema gets there). Most are 400s; some are valid bodies (an object
 * with an extra `length` where an object belongs). What is tested is that none takes long.
 */
export function schemaShapes(schema: SchemaNode): HostileShape[] {
  const shapes: HostileShape[] = [];
  const bigString = JSON.stringify("s".repeat(1024 * 1024));
  const visit = (node: SchemaNode, path: string[], build: (leaf: string) => string) => {
    if (node.type === "array" || node.type === "object") {
      const where = path.join(".") || "(the body)";
      for (const [what, leaf] of [
        [`{"length":${HOSTILE_LENGTH}}`, `{"length":${HOSTILE_LENGTH}}`],
        ["a 1 MiB string", bigString],
      ] as const) {
        const body = utf8(build(leaf));
        shapes.push({ name: `schema: ${what} at ${where}`, headers: JSON_TYPE, body: () => body });
      }
    }
    for (const [key, child] of Object.entries(node.properties ?? {})) visit(child, [...path, key], (leaf) => build(`{${JSON.stringify(key)}:${leaf}}`));
    if (node.items) visit(node.items, [...path, "0"], (leaf) => build(`[${leaf}]`));
    for (const variant of node.anyOf ?? []) visit(variant, path, build);
  };
  visit(schema, [], (leaf) => leaf);
  return shapes;
}
