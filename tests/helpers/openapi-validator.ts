/**
 * The service's published openapi.json, read the way a client would, with ajv validators for
 * its response schemas: OpenAPI 3.1 schemas are JSON Schema 2020-12. The document's shared
 * schemas (components.schemas) are registered once, and `#/components/schemas/…` references
 * are pointed at them.
 */
import { expect } from "bun:test";
import Ajv2020, { type ValidateFunction } from "ajv/dist/2020";

export type Json = Record<string, any>;

const METHODS = ["get", "post", "put", "patch", "delete", "head", "options", "trace"];
const COMPONENTS_ID = "urn:metered-proxy:openapi-components";

export interface PublishedDocument {
  spec: Json;
  /** Every operation, with its method and path. */
  operations(): Array<{ method: string; path: string; op: Json }>;
  /** One operation; throws if the document lacks it. */
  operation(method: string, path: string): Json;
  /** Compiles a schema taken from the document (references included); throws if it does not compile. */
  compile(schema: Json): ValidateFunction;
  /** The validator of an operation's documented JSON response for this status. */
  responseValidator(method: string, path: string, status: number): ValidateFunction;
  /** Validates a real response against the document; returns ajv's errors (empty when it conforms). */
  conformance(method: string, path: string, res: Response): Promise<unknown[]>;
}

/** Fetches GET /api/v1/openapi.json through `call` and prepares its validators. */
export async function publishedDocument(call: (path: string) => Promise<Response>): Promise<PublishedDocument> {
  const res = await call("/api/v1/openapi.json");
  expect(res.status).toBe(200);
  const spec = (await res.json()) as Json;
  // Strict mode refuses unknown formats and keywords, so a schema that promises something
  // ajv cannot check fails here.
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  ajv.addFormat("date-time", {
    type: "string",
    validate: (s: string) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(s) && !Number.isNaN(Date.parse(s)),
  });
  ajv.addSchema({ $id: COMPONENTS_ID, $defs: pointAtComponents(spec.components?.schemas ?? {}) });

  const validators = new Map<string, ValidateFunction>();
  const document: PublishedDocument = {
    spec,
    operations: () =>
      Object.entries<Json>(spec.paths).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((method) => ({ method, path, op: item[method] as Json }))),
    operation(method, path) {
      const op = spec.paths?.[path]?.[method];
      if (!op) throw new Error(`${method.toUpperCase()} ${path} is not in openapi.json`);
      return op as Json;
    },
    compile: (schema) => ajv.compile(pointAtComponents(schema)),
    responseValidator(method, path, status) {
      const key = `${method} ${path} ${status}`;
      let validate = validators.get(key);
      if (!validate) {
        const schema = document.operation(method, path).responses?.[String(status)]?.content?.["application/json"]?.schema;
        if (!schema) throw new Error(`${key}: no application/json response documented`);
        validate = document.compile(schema);
        validators.set(key, validate);
      }
      return validate;
    },
    async conformance(method, path, res) {
      if (res.status === 204) {
        const documented = document.operation(method, path).responses?.["204"];
        expect(documented).toBeDefined();
        expect(documented.content).toBeUndefined();
        expect(await res.text()).toBe("");
        return [];
      }
      expect(res.headers.get("content-type") ?? "").toContain("application/json");
      const validate = document.responseValidator(method, path, res.status);
      return validate(await res.json()) ? [] : (validate.errors ?? [{ message: "invalid" }]);
    },
  };
  return document;
}

function pointAtComponents(schema: Json): Json {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${COMPONENTS_ID}#/$defs/`)) as Json;
}
