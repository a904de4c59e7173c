/**
 * Extracts the JSON Schemas of the upstream's responses from OpenRouter's OpenAPI document
 * into tests/fixtures/openrouter-schemas.json, so tests validate the mock (and anything
 * else that speaks the wire format) with a small, stable file instead of the whole document.
 *
 *   bun scripts/extract-openrouter-schemas.ts [path/to/openrouter-openapi.yaml]   (default: spec/openrouter-openapi.yaml)
 *
 * The spec is OpenAPI 3.1 (JSON Schema 2020-12: nullability is written as `type: [T, "null"]`),
 * so schemas are kept as they are, with three changes:
 * - every `$ref` is inlined (the reachable schemas have no cycles; a cycle fails loudly);
 * - `example`, `examples`, `discriminator` and `x-*` keys are dropped: they are annotations
 *   to OpenAPI tools, not constraints, and `discriminator` would need Ajv's restricted mode;
 * - a 3.0-style `nullable: true` (none today) is turned into a type union, just in case.
 */
import { resolve } from "node:path";

const here = import.meta.dir;
const specPath = resolve(here, "..", process.argv[2] ?? "spec/openrouter-openapi.yaml");
const outPath = resolve(here, "../tests/fixtures/openrouter-schemas.json");

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const text = await Bun.file(specPath).text();
const spec = Bun.YAML.parse(text) as JsonObject;

function at(root: Json, pointer: string[]): Json {
  let node: Json = root;
  for (const key of pointer) {
    if (node === null || typeof node !== "object" || Array.isArray(node) || !(key in node)) {
      throw new Error(`spec has no ${pointer.join(" → ")} (stopped at ${key})`);
    }
    node = node[key]!;
  }
  return node;
}

const DROPPED = new Set(["example", "examples", "discriminator"]);

/** Inlines `$ref`s (RFC 6901 pointers into this document) and drops annotation-only keys. */
function inline(node: Json, stack: string[]): Json {
  if (Array.isArray(node)) return node.map((item) => inline(item, stack));
  if (node === null || typeof node !== "object") return node;
  const ref = node.$ref;
  if (typeof ref === "string") {
    if (!ref.startsWith("#/")) throw new Error(`external $ref not supported: ${ref}`);
    if (stack.includes(ref)) throw new Error(`cyclic $ref: ${[...stack, ref].join(" → ")}`);
    const pointer = ref
      .slice(2)
      .split("/")
      .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
    const target = inline(at(spec, pointer), [...stack, ref]);
    // JSON Schema 2020-12 allows siblings next to $ref; merge them over the target.
    const siblings = Object.fromEntries(Object.entries(node).filter(([k]) => k !== "$ref"));
    return Object.keys(siblings).length === 0 ? target : { allOf: [target, inline(siblings, stack)] };
  }
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROPPED.has(key) || key.startsWith("x-")) continue;
    // `properties` maps names to schemas: a property may be called "example" or "x-…".
    out[key] = key === "properties" ? inlineMap(value, stack) : inline(value, stack);
  }
  if (out.nullable === true) {
    delete out.nullable;
    if (typeof out.type === "string") out.type = [out.type, "null"];
    else if (out.enum && Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  }
  return out;
}

function inlineMap(value: Json, stack: string[]): Json {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return inline(value, stack);
  return Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, inline(schema, stack)]));
}

function responseSchema(path: string, method: string, status: string, mediaType: string): Json {
  return inline(at(spec, ["paths", path, method, "responses", status, "content", mediaType, "schema"]), []);
}

const chatPost = ["paths", "/chat/completions", "post", "responses"];
const chatResponses = at(spec, chatPost) as JsonObject;

// The event-stream schema describes one SSE event as `{ data: ChatStreamChunk }`; what a
// client JSON.parses is the `data` part, so that is what the fixture holds.
const streamEvent = responseSchema("/chat/completions", "post", "200", "text/event-stream") as JsonObject;
const chatChunk = (streamEvent.properties as JsonObject).data!;

// Every error status of POST /chat/completions, and one schema that accepts any of them.
const errorsByStatus: JsonObject = {};
for (const status of Object.keys(chatResponses).filter((s) => /^[45]\d\d$/.test(s))) {
  errorsByStatus[status] = responseSchema("/chat/completions", "post", status, "application/json");
}
const distinctErrors = [...new Set(Object.values(errorsByStatus).map((s) => JSON.stringify(s)))].map((s) => JSON.parse(s) as Json);
const anyError: Json = distinctErrors.length === 1 ? distinctErrors[0]! : { anyOf: distinctErrors };

/** The error bodies of one operation, by HTTP status. */
function errorsOf(path: string, method: string): JsonObject {
  const responses = at(spec, ["paths", path, method, "responses"]) as JsonObject;
  const byStatus: JsonObject = {};
  for (const status of Object.keys(responses).filter((s) => /^[45]\d\d$/.test(s))) {
    byStatus[status] = responseSchema(path, method, status, "application/json");
  }
  return byStatus;
}

// GET /generation (a generation's record, which reconciliation reads) and its error statuses.
const generationErrorsByStatus = errorsOf("/generation", "get");

const info = spec.info as JsonObject;
const fixture = {
  $comment: "GENERATED by scripts/extract-openrouter-schemas.ts; do not edit by hand, run the script again.",
  source: {
    file: "spec/openrouter-openapi.yaml",
    openapi: spec.openapi,
    title: info.title,
    version: info.version,
    sha256: new Bun.CryptoHasher("sha256").update(text).digest("hex"),
  },
  dialect: "https://json-schema.org/draft/2020-12/schema",
  schemas: {
    chatCompletion: {
      $comment: "paths./chat/completions.post.responses.200.content.application/json.schema ($ref ChatResult)",
      ...(responseSchema("/chat/completions", "post", "200", "application/json") as JsonObject),
    },
    chatChunk: {
      $comment: "paths./chat/completions.post.responses.200.content.text/event-stream.schema.properties.data ($ref ChatStreamChunk)",
      ...(chatChunk as JsonObject),
    },
    models: {
      $comment: "paths./models.get.responses.200.content.application/json.schema ($ref ModelsListResponse)",
      ...(responseSchema("/models", "get", "200", "application/json") as JsonObject),
    },
    error: {
      $comment: "any of paths./chat/completions.post.responses.{4xx,5xx}.content.application/json.schema",
      ...(anyError as JsonObject),
    },
    errorsByStatus,
    generation: {
      $comment: "paths./generation.get.responses.200.content.application/json.schema ($ref GenerationResponse)",
      ...(responseSchema("/generation", "get", "200", "application/json") as JsonObject),
    },
    generationErrorsByStatus,
    // The user-funded connection: the PKCE flow's two operations, and the key's own record.
    authKeys: {
      $comment: "paths./auth/keys.post.responses.200.content.application/json.schema (exchange a code for a key)",
      ...(responseSchema("/auth/keys", "post", "200", "application/json") as JsonObject),
    },
    authKeysErrorsByStatus: errorsOf("/auth/keys", "post"),
    authKeysCode: {
      $comment: "paths./auth/keys/code.post.responses.200.content.application/json.schema (create a code)",
      ...(responseSchema("/auth/keys/code", "post", "200", "application/json") as JsonObject),
    },
    authKeysCodeErrorsByStatus: errorsOf("/auth/keys/code", "post"),
    key: {
      $comment: "paths./key.get.responses.200.content.application/json.schema (the current key)",
      ...(responseSchema("/key", "get", "200", "application/json") as JsonObject),
    },
    keyErrorsByStatus: errorsOf("/key", "get"),
  },
};

await Bun.write(outPath, JSON.stringify(fixture, null, 1) + "\n");
console.log(`wrote ${outPath} (${Object.keys(errorsByStatus).length} error statuses) from ${specPath}`);
