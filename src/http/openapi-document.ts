import type { AnyElysia, TSchema } from "elysia";
import type { ElysiaOpenAPIConfig } from "@elysiajs/openapi";
import { codesWithStatus } from "../errors";
import { ErrorEnvelope } from "../error-schema";

/** What openapi.json says beside the paths: info, servers, security schemes. */
export type Documentation = NonNullable<ElysiaOpenAPIConfig["documentation"]>;

type Method = "get" | "post" | "put" | "patch" | "delete";

/**
 * A request body, documented from the TypeBox schema that validates it. @elysiajs/openapi
 * leaves a body's content empty when the route has a function `parse` hook, and our auth
 * macro has one (it authenticates before any body is parsed).
 */
export interface DocumentedBody {
  path: string;
  method: Method;
  schema: TSchema;
  required: boolean;
}

/** Another media type of a response, beside the JSON one the route's schema gives (e.g. SSE). */
export interface DocumentedContent {
  path: string;
  method: Method;
  status: number;
  mediaType: string;
  schema: TSchema;
}

export interface DocumentSources {
  documentation: Documentation;
  requestBodies: DocumentedBody[];
  extraContent: DocumentedContent[];
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the generated document is walked and patched field by field
type Json = Record<string, any>;

const OPENAPI_VERSION = "3.1.2";
export const ERROR_SCHEMA_REF = "#/components/schemas/Error";
/** The envelope as the generator prints it: how an error response is recognised. */
const ERROR_ENVELOPE_JSON = plainJson(ErrorEnvelope);

/**
 * The OpenAPI document of every route registered in `app`'s tree, finished so that a real
 * linter accepts it (tests/openapi-lint.test.ts): request bodies and extra media types filled
 * in, every error response referring to the one Error schema, and no OpenAPI 3.0 leftovers.
 */
export async function buildOpenApiDocument(app: AnyElysia, sources: DocumentSources): Promise<Json> {
  // The generator is loaded when the document is first asked for: imported at start, it
  // and the parts of TypeBox it brings held 1.6 MB in every process, whether or not it
  // ever serves its docs (ARCHITECTURE.md §7 "OpenAPI generator on first use").
  const { toOpenAPISchema } = await import("@elysiajs/openapi");
  // staticFile off: by default the generator drops every path with a "." in it, and
  // /api/v1/grants/popup.js is an endpoint apps include (the document's own files are hidden).
  const generated = plainJson(toOpenAPISchema(app, { staticFile: false }, undefined, undefined, OPENAPI_VERSION));
  const { documentation } = sources;
  const document: Json = {
    openapi: OPENAPI_VERSION,
    ...plainJson(documentation),
    paths: generated.paths,
    components: {
      ...plainJson(documentation.components ?? {}),
      schemas: { ...generated.components.schemas, Error: ERROR_ENVELOPE_JSON },
    },
  };
  for (const body of sources.requestBodies) {
    operation(document, body.path, body.method).requestBody = {
      required: body.required,
      content: { "application/json": { schema: plainJson(body.schema) } },
    };
  }
  for (const extra of sources.extraContent) {
    const response = operation(document, extra.path, extra.method).responses?.[String(extra.status)];
    if (!response?.content) throw new Error(`openapi.json: ${extra.method} ${extra.path} documents no ${extra.status} content to add ${extra.mediaType} to`);
    response.content[extra.mediaType] = { schema: plainJson(extra.schema) };
  }
  referToErrorSchema(document);
  dropNullable(document);
  return document;
}

function operation(document: Json, path: string, method: Method): Json {
  const found = document.paths[path]?.[method];
  if (!found) throw new Error(`openapi.json: no operation ${method} ${path}`);
  return found;
}

/**
 * Replaces each error response's copy of the envelope by a reference to the shared schema,
 * and says which codes its status stands for (from the code → status table), after the
 * route's own description where it has one.
 */
function referToErrorSchema(document: Json): void {
  for (const item of Object.values<Json>(document.paths)) {
    for (const op of Object.values<Json>(item)) {
      for (const [status, response] of Object.entries<Json>(op.responses ?? {})) {
        const schema = response.content?.["application/json"]?.schema;
        if (Number(status) < 400 || !Bun.deepEquals(schema, ERROR_ENVELOPE_JSON)) continue;
        const codes = codesWithStatus(Number(status)).map((code) => `\`${code}\``);
        const generic = response.description === ERROR_ENVELOPE_JSON.description || /^Response for status \d+$/.test(response.description);
        const own = generic ? "" : `${response.description} `;
        response.description = `${own}\`error.code\`: ${codes.length > 1 ? "one of " : ""}${codes.join(", ")}.`;
        response.content = { "application/json": { schema: { $ref: ERROR_SCHEMA_REF } } };
      }
    }
  }
}

/**
 * OpenAPI 3.1 schemas are JSON Schema, which has no `nullable`: Elysia's t.Nullable adds it
 * for OpenAPI 3.0 while also putting "null" in `type`, so the keyword is dropped where the
 * schema already allows null. Anywhere else it stays, and the linter reports it.
 */
function dropNullable(node: unknown): void {
  if (Array.isArray(node)) {
    node.forEach(dropNullable);
    return;
  }
  if (typeof node !== "object" || node === null) return;
  const schema = node as Json;
  const allowsNull = (Array.isArray(schema.type) && schema.type.includes("null")) || schema.anyOf?.some((s: Json) => s?.type === "null");
  if (schema.nullable === true && allowsNull) delete schema.nullable;
  Object.values(schema).forEach(dropNullable);
}

/** A TypeBox schema (or any value) as the plain JSON the document is served as. */
function plainJson<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
