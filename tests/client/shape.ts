/**
 * Field-by-field shapes of the client library's types, written so that the compiler forces
 * them to match the types (every field, its JSON kind, nullable, optional), and compared at
 * run time with what the service documents or sends. A type that drifts fails tsc; a
 * schema or payload that drifts fails the test.
 */

type JsonKind<V> = [V] extends [string]
  ? "string"
  : [V] extends [number]
    ? "number"
    : [V] extends [boolean]
      ? "boolean"
      : [V] extends [readonly unknown[]]
        ? "array"
        : "object";
type FieldKind<V> = null extends V ? `${JsonKind<NonNullable<V>>}|null` : JsonKind<V>;
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- `{}` accepts Pick<T, K> exactly when K is optional
type Field<T, K extends keyof T> = `${{} extends Pick<T, K> ? "optional " : ""}${FieldKind<Exclude<T[K], undefined>>}`;

/** Each field of T with its kind, e.g. `{ generationId: "string|null", limitUsd: "optional number" }`. */
export type Shape<T> = { [K in keyof T]-?: Field<T, K> };

/** `shapeOf<UserStatus>()({...})`: the literal must list exactly T's fields with their kinds. */
export const shapeOf =
  <T>() =>
  (shape: Shape<T>): Record<string, string> =>
    shape as Record<string, string>;

/** The same shape read off a JSON Schema object of openapi.json (`integer` is a number). */
export function schemaShape(schema: Record<string, any>): Record<string, string> {
  const required = new Set<string>(schema.required ?? []);
  return Object.fromEntries(
    Object.entries<Record<string, any>>(schema.properties ?? {}).map(([name, property]) => {
      const types: string[] = Array.isArray(property.type) ? property.type : [property.type];
      const base = types.filter((t) => t !== "null").map((t) => (t === "integer" ? "number" : t));
      if (base.length !== 1) throw new Error(`${name}: expected one JSON type besides null, got ${JSON.stringify(property.type)}`);
      const kind = types.includes("null") ? `${base[0]}|null` : base[0]!;
      return [name, required.has(name) ? kind : `optional ${kind}`];
    }),
  );
}

/** Whether a JSON value fits a kind of a shape: `number|null` takes both 3 and null. */
export function fitsKind(value: unknown, kind: string): boolean {
  const allowed = kind.replace(/^optional /, "").split("|");
  if (value === null) return allowed.includes("null");
  return allowed.includes(Array.isArray(value) ? "array" : typeof value);
}
