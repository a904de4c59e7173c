/**
 * Checks bodies against the upstream's wire format, as extracted from OpenRouter's OpenAPI
 * document into tests/fixtures/openrouter-schemas.json (scripts/extract-openrouter-schemas.ts),
 * and parses SSE text the way a browser's EventSource would.
 */
import Ajv2020, { type ErrorObject, type ValidateFunction } from "ajv/dist/2020";
import fixture from "../fixtures/openrouter-schemas.json";

// OpenAPI 3.1 is JSON Schema 2020-12. The spec's only formats are OpenAPI's numeric ones,
// which JSON Schema does not define: they are width hints, checked here as plain numbers.
const ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
for (const name of ["double", "float"]) ajv.addFormat(name, { type: "number", validate: () => true });
ajv.addFormat("int32", { type: "number", validate: (n: number) => n >= -(2 ** 31) && n < 2 ** 31 });
ajv.addFormat("int64", { type: "number", validate: (n: number) => Number.isSafeInteger(n) });
// GET /key's `expires_at`: an RFC 3339 date-time, with its offset.
ajv.addFormat("date-time", {
  type: "string",
  validate: (s: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i.test(s) && !Number.isNaN(Date.parse(s)),
});

const schemas = fixture.schemas;

function validator(schema: object): (body: unknown) => string[] {
  let compiled: ValidateFunction | undefined;
  return (body) => {
    compiled ??= ajv.compile(schema);
    return compiled(body) ? [] : describe(compiled.errors ?? []);
  };
}

function describe(errors: ErrorObject[]): string[] {
  return errors.map((e) => `${e.instancePath || "/"} ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`);
}

/** A non-streamed POST /chat/completions 200 body (ChatResult). Empty list = valid. */
export const validateChatCompletion = validator(schemas.chatCompletion);

/** The JSON of one SSE `data:` event of a streamed completion (ChatStreamChunk). */
export const validateChatChunk = validator(schemas.chatChunk);

/** A GET /models 200 body (ModelsListResponse). */
export const validateModels = validator(schemas.models);

/** A GET /generation 200 body (GenerationResponse): a generation's record. */
export const validateGeneration = validator(schemas.generation);

const anyError = validator(schemas.error);
const byStatus = new Map(Object.entries(schemas.errorsByStatus).map(([status, schema]) => [Number(status), validator(schema)]));

/**
 * An error body `{ error: { code, message, metadata? } }`; with `status`, against that
 * status's schema, which also requires `error.code` to equal the HTTP status, as OpenRouter
 * documents ("the HTTP Response will have the same status code as error.code").
 */
export function validateError(body: unknown, status?: number): string[] {
  if (status === undefined) return anyError(body);
  return checkErrorStatus(byStatus, body, status);
}

const generationByStatus = new Map(Object.entries(schemas.generationErrorsByStatus).map(([status, schema]) => [Number(status), validator(schema)]));

/** An error body of GET /generation, against that status's schema (and `error.code` equal to it). */
export function validateGenerationError(body: unknown, status: number): string[] {
  return checkErrorStatus(generationByStatus, body, status);
}

/** A POST /auth/keys 200 body: the key a PKCE code was exchanged for. */
export const validateAuthKeys = validator(schemas.authKeys);

/** A POST /auth/keys/code 200 body: a code made server-side. */
export const validateAuthKeysCode = validator(schemas.authKeysCode);

/** A GET /key 200 body: the current key's limit and usage. */
export const validateKey = validator(schemas.key);

const authKeysByStatus = new Map(Object.entries(schemas.authKeysErrorsByStatus).map(([status, schema]) => [Number(status), validator(schema)]));
const authKeysCodeByStatus = new Map(Object.entries(schemas.authKeysCodeErrorsByStatus).map(([status, schema]) => [Number(status), validator(schema)]));
const keyByStatus = new Map(Object.entries(schemas.keyErrorsByStatus).map(([status, schema]) => [Number(status), validator(schema)]));

/** An error body of POST /auth/keys, POST /auth/keys/code or GET /key, against that status's schema. */
export function validateKeyEndpointError(endpoint: "/auth/keys" | "/auth/keys/code" | "/key", body: unknown, status: number): string[] {
  const checks = endpoint === "/auth/keys" ? authKeysByStatus : endpoint === "/auth/keys/code" ? authKeysCodeByStatus : keyByStatus;
  return checkErrorStatus(checks, body, status);
}

function checkErrorStatus(checks: Map<number, (body: unknown) => string[]>, body: unknown, status: number): string[] {
  const check = checks.get(status);
  if (!check) return [`the spec defines no error body for HTTP ${status}`];
  const problems = check(body);
  const code = (body as { error?: { code?: unknown } } | null)?.error?.code;
  if (problems.length === 0 && code !== status) problems.push(`/error/code is ${String(code)}, not ${status}`);
  return problems;
}

export interface SseEvent {
  /** The event's data: its `data:` lines joined with "\n". */
  data?: string;
  /** A comment line's text after the ":" (and one optional space). */
  comment?: string;
}

/**
 * Parses an event stream per the WHATWG HTML "Server-sent events" interpretation rules:
 * lines end at CRLF, LF or CR; a line starting with ":" is a comment; `field:value` with one
 * optional space after the colon; `data` lines accumulate joined by LF; a blank line
 * dispatches the event (none when no data was seen); an unterminated last event is dropped.
 * Comments are returned in order among the events, since tests assert on keep-alives.
 * Fields other than `data` (event, id, retry) are not used by OpenRouter and are skipped.
 */
export function parseSseEvents(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  let data: string[] | null = null;
  // A leading U+FEFF is stripped once, as the decoding step of the spec does.
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const lines = body.split(/\r\n|\n|\r/);
  // The text after the last line terminator is an incomplete line: ignore it.
  lines.pop();
  for (const line of lines) {
    if (line === "") {
      if (data !== null) events.push({ data: data.join("\n") });
      data = null;
      continue;
    }
    if (line.startsWith(":")) {
      events.push({ comment: line.slice(line.startsWith(": ") ? 2 : 1) });
      continue;
    }
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      data ??= [];
      data.push(value);
    }
  }
  return events;
}

/** The data events' JSON payloads (everything but the `[DONE]` sentinel), parsed. */
export function sseJsonPayloads(text: string): unknown[] {
  return parseSseEvents(text)
    .filter((e): e is { data: string } => e.data !== undefined && e.data !== "[DONE]")
    .map((e) => JSON.parse(e.data) as unknown);
}

export interface CheckedStream {
  events: SseEvent[];
  /** Every JSON data payload, in order. */
  chunks: Array<Record<string, unknown>>;
  /** Whether the `[DONE]` sentinel closed the stream. */
  done: boolean;
  /** Every chunk that does not match ChatStreamChunk, non-JSON data, and data after `[DONE]`. */
  problems: string[];
}

/** Parses a whole relayed event stream and validates each data payload as a ChatStreamChunk. */
export function checkChatStream(text: string): CheckedStream {
  const events = parseSseEvents(text);
  const chunks: Array<Record<string, unknown>> = [];
  const problems: string[] = [];
  let done = false;
  events.forEach((event, i) => {
    if (event.data === undefined) return;
    if (done) problems.push(`event ${i}: data after [DONE]`);
    if (event.data === "[DONE]") {
      done = true;
      return;
    }
    let chunk: unknown;
    try {
      chunk = JSON.parse(event.data);
    } catch {
      problems.push(`event ${i}: data is not JSON: ${event.data.slice(0, 80)}`);
      return;
    }
    chunks.push(chunk as Record<string, unknown>);
    for (const p of validateChatChunk(chunk)) problems.push(`event ${i}: ${p}`);
  });
  return { events, chunks, done, problems };
}
