/**
 * A small value that fits a JSON Schema (the subset structured outputs and tool parameters
 * use: https://json-schema.org/draft/2020-12/json-schema-validation): what the mock answers
 * with for `response_format: {type: "json_schema"}` and for a tool call's arguments, so that
 * a client that parses the answer against its schema (the `openai` SDK's `parse()` with zod)
 * gets a value that passes. Deterministic: the same schema always gives the same value.
 *
 * Only required properties are filled in, arrays hold `minItems` items, numbers sit at their
 * lower bound (or 0), strings are a short word (or a sample of their `format`) stretched or cut
 * to their length bounds. `pattern` cannot be generated and is not tried.
 */

type Json = Record<string, unknown>;

/** Deeper than this a (recursive) schema gets null: a recursion that required itself would never end. */
const MAX_DEPTH = 32;

/** A sample for each string `format` a structured-output schema is likely to name. */
const FORMAT_SAMPLES: Record<string, string> = {
  "date-time": "2026-01-01T00:00:00Z",
  date: "2026-01-01",
  time: "00:00:00Z",
  duration: "P1D",
  email: "mock@example.com",
  uri: "https://example.com/",
  url: "https://example.com/",
  uuid: "00000000-0000-4000-8000-000000000000",
  hostname: "example.com",
  ipv4: "127.0.0.1",
  ipv6: "::1",
};

const isObject = (value: unknown): value is Json => value !== null && typeof value === "object" && !Array.isArray(value);

/** A value of `schema`; `$ref`s are looked up in the schema itself (`#/$defs/…`, `#/definitions/…`). */
export function schemaInstance(schema: unknown): unknown {
  return instanceOf(schema, schema, 0);
}

function instanceOf(schema: unknown, root: unknown, depth: number): unknown {
  if (!isObject(schema) || depth > MAX_DEPTH) return null;
  if (typeof schema.$ref === "string") return instanceOf(resolveRef(root, schema.$ref), root, depth + 1);
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const key of ["anyOf", "oneOf"] as const) {
    const options = schema[key];
    if (Array.isArray(options) && options.length > 0) {
      // The first option that is not `null`, so the answer says something.
      const chosen = options.find((o) => !(isObject(o) && o.type === "null")) ?? options[0];
      return instanceOf(chosen, root, depth + 1);
    }
  }
  if (Array.isArray(schema.allOf) && schema.allOf.length > 0) return instanceOf(mergeAll(schema, root), root, depth + 1);
  switch (typeOf(schema)) {
    case "object":
      return objectInstance(schema, root, depth);
    case "array":
      return arrayInstance(schema, root, depth);
    case "string":
      return stringInstance(schema);
    case "integer":
      return numberInstance(schema, true);
    case "number":
      return numberInstance(schema, false);
    case "boolean":
      return false;
    default:
      return null;
  }
}

/** The schema's type: its `type` (the first that is not "null" of a list), else what its keywords imply. */
function typeOf(schema: Json): string | null {
  const type = schema.type;
  if (typeof type === "string") return type;
  if (Array.isArray(type)) return (type.find((t) => t !== "null") ?? type[0] ?? null) as string | null;
  if (isObject(schema.properties) || Array.isArray(schema.required)) return "object";
  if (schema.items !== undefined || Array.isArray(schema.prefixItems)) return "array";
  return null;
}

/** A JSON pointer into the root schema (RFC 6901): `#/$defs/Item`. Null when it leads nowhere. */
function resolveRef(root: unknown, ref: string): unknown {
  if (!ref.startsWith("#")) return null;
  let at: unknown = root;
  for (const raw of ref
    .slice(1)
    .split("/")
    .filter((p) => p !== "")) {
    const part = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    at = isObject(at) ? at[part] : Array.isArray(at) ? at[Number(part)] : undefined;
  }
  return at ?? null;
}

/** `allOf` as one object schema: every part's properties and required names together, the rest of the first part. */
function mergeAll(schema: Json, root: unknown): Json {
  const parts = (schema.allOf as unknown[]).map((p) => (isObject(p) && typeof p.$ref === "string" ? resolveRef(root, p.$ref) : p)).filter(isObject);
  const { allOf: _allOf, ...rest } = schema;
  const merged: Json = { ...parts[0], ...rest };
  const objects = [rest, ...parts].filter((p) => isObject(p.properties) || Array.isArray(p.required));
  if (objects.length > 0) {
    merged.type = "object";
    merged.properties = Object.assign({}, ...objects.map((p) => p.properties ?? {}));
    merged.required = [...new Set(objects.flatMap((p) => (Array.isArray(p.required) ? p.required : [])))];
  }
  return merged;
}

function objectInstance(schema: Json, root: unknown, depth: number): Json {
  const properties = isObject(schema.properties) ? schema.properties : {};
  const out: Json = {};
  for (const name of Array.isArray(schema.required) ? schema.required : []) {
    if (typeof name === "string") out[name] = instanceOf(properties[name] ?? {}, root, depth + 1);
  }
  return out;
}

function arrayInstance(schema: Json, root: unknown, depth: number): unknown[] {
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
  const min = Number.isSafeInteger(schema.minItems) ? (schema.minItems as number) : 0;
  const out = prefix.map((item) => instanceOf(item, root, depth + 1));
  while (out.length < min) out.push(instanceOf(schema.items ?? {}, root, depth + 1));
  return out;
}

function stringInstance(schema: Json): string {
  const sample = typeof schema.format === "string" ? FORMAT_SAMPLES[schema.format] : undefined;
  if (sample !== undefined) return sample;
  const min = Number.isSafeInteger(schema.minLength) ? (schema.minLength as number) : 0;
  const max = Number.isSafeInteger(schema.maxLength) ? (schema.maxLength as number) : Infinity;
  return "mock".padEnd(min, "x").slice(0, Math.max(min, Math.min(max, 4)));
}

/** 0, moved into the schema's bounds (onto its lower bound when it has one) and onto its `multipleOf`. */
function numberInstance(schema: Json, integer: boolean): number {
  const num = (key: string) => (typeof schema[key] === "number" ? (schema[key] as number) : undefined);
  const step = num("multipleOf") ?? (integer ? 1 : undefined);
  const onStep = (value: number, round: (x: number) => number) => (step === undefined ? value : round(value / step) * step);
  const bound = (key: string, exclusiveKey: string, sign: 1 | -1) => {
    const inclusive = num(key);
    const exclusive = num(exclusiveKey);
    const candidates = [inclusive, exclusive === undefined ? undefined : exclusive + sign * (step ?? 1)].filter((n) => n !== undefined);
    return candidates.length === 0 ? sign * -Infinity : sign === 1 ? Math.max(...candidates) : Math.min(...candidates);
  };
  const low = bound("minimum", "exclusiveMinimum", 1);
  const high = bound("maximum", "exclusiveMaximum", -1);
  const value = Math.min(Math.max(0, low), high);
  return onStep(value, value < 0 ? Math.floor : Math.ceil);
}
