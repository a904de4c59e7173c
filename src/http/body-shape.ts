import { Elysia } from "elysia";
import { CloneType, type TSchema } from "@sinclair/typebox";
import { TypeCompiler, type TypeCheck } from "@sinclair/typebox/compiler";
import { ApiError } from "../errors";
import { describeValueError } from "./error-handler";

/**
 * Bodies reach Elysia's cleaning only in the shape their schema declares.
 *
 * Before it validates a body, Elysia cleans it (its `normalize` option, on by default) with
 * code that exact-mirror generates from the schema, and that code trusts the body's types:
 * for an array of objects, arrays or unions it allocates `new Array(value.length)` and loops
 * to `value.length`, and it spreads (`{...value}`) an object that keeps extra properties.
 * So `"content": {"length": 4294967295}` in a chat message, 70 bytes, loops four billion
 * times (measured: 3.3 s for a length of 3 * 10^7; about 8 minutes for this one), and a
 * 1 MB string where a message belongs is spread into a million properties (1.9 s). The
 * json-bounds.ts scan cannot see this: the body is small and flat.
 *
 * So where the schema has such a part, the body is checked against the schema first, in a
 * transform hook (after parsing, before cleaning), with extra properties allowed: a body
 * that fails this check would fail Elysia's validation after cleaning too (cleaning only
 * drops extra properties), so it is refused now with the message Elysia's would carry,
 * and one that passes has real arrays and objects where the cleaning loops and spreads.
 * The check is TypeBox's compiled one, as Elysia's: 0.15 us for the bench's chat body,
 * 33 us for a 2,048-message conversation with 128 tools.
 */
export class BodyShapes {
  /** By route path, then method: no key is built per request. */
  private readonly checkers = new Map<string, Map<string, TypeCheck<TSchema>>>();

  /** Reads the built app's routes: a checker for each body schema whose cleaning loops or spreads. */
  learn(routes: ReadonlyArray<{ method: string; path: string; hooks: unknown }>): void {
    for (const { method, path, hooks } of routes) {
      const schema = (hooks as { body?: unknown }).body;
      if (!isSchema(schema) || !cleaningLoopsOrSpreads(schema)) continue;
      const byMethod = this.checkers.get(path) ?? new Map<string, TypeCheck<TSchema>>();
      byMethod.set(method, TypeCompiler.Compile(allowingExtraProperties(CloneType(schema))));
      this.checkers.set(path, byMethod);
    }
  }

  /** The routes ("METHOD /path") whose bodies are checked. */
  get routes(): string[] {
    return [...this.checkers].flatMap(([path, byMethod]) => [...byMethod.keys()].map((method) => `${method} ${path}`));
  }

  check(method: string, route: string, body: unknown): void {
    const checker = this.checkers.get(route)?.get(method);
    // No body: Elysia's validation says what is missing, and its cleaning has nothing to walk.
    if (checker === undefined || body === undefined || checker.Check(body)) return;
    throw new ApiError("invalid_request", describeValueError("body", checker.Errors(body).First()));
  }
}

/** The hook; `route` is the matched route's path with its `:params`, as in `app.routes`. */
export function bodyShapeGuard(shapes: BodyShapes) {
  return new Elysia().onTransform({ as: "global" }, ({ request, route, body }) => shapes.check(request.method, route, body));
}

function isSchema(value: unknown): value is TSchema {
  return typeof value === "object" && value !== null;
}

/**
 * Whether exact-mirror's cleaning of `schema` loops over an array's length (an array whose
 * items are not a single primitive type) or spreads an object (one that keeps extra
 * properties), anywhere inside. Walks our own schemas, not a body: recursion is safe.
 */
function cleaningLoopsOrSpreads(schema: TSchema): boolean {
  if (schema.type === "array") {
    const items = schema.items as TSchema | undefined;
    if (!items || Array.isArray(items) || !isPrimitive(items)) return true;
  }
  if (schema.type === "object" && schema.additionalProperties !== undefined && schema.additionalProperties !== false) return true;
  return children(schema).some(cleaningLoopsOrSpreads);
}

/** One primitive type (a union has no `type` of its own, and exact-mirror checks each item against it). */
function isPrimitive(schema: TSchema): boolean {
  return ["string", "number", "integer", "boolean", "null"].includes(schema.type as string);
}

/** Elysia sets `additionalProperties: false` on body schemas and strips extra properties before it checks; so does not this check. */
function allowingExtraProperties(schema: TSchema): TSchema {
  if (schema.additionalProperties === false) delete schema.additionalProperties;
  children(schema).forEach(allowingExtraProperties);
  return schema;
}

function children(schema: TSchema): TSchema[] {
  const nested: unknown[] = [...Object.values((schema.properties as object | undefined) ?? {}), schema.additionalProperties];
  for (const key of ["items", "anyOf", "allOf", "oneOf"]) nested.push(...[schema[key] as unknown].flat());
  return nested.filter(isSchema);
}
