import { Elysia, type TSchema } from "elysia";
import { openapi } from "@elysiajs/openapi";

export interface DocumentedBody {
  path: string;
  method: "post" | "put" | "patch";
  schema: TSchema;
  required: boolean;
}

/**
 * GET {prefix}/openapi.json and the docs page at {prefix}/docs.
 *
 * @elysiajs/openapi leaves a request body's content empty when the route has a function
 * `parse` hook, and our auth macro has one (it authenticates before any body is parsed).
 * So request bodies are filled in here, from the same TypeBox schemas that validate them,
 * on the generated document before it is served.
 */
export function apiDocs(prefix: string, bodies: DocumentedBody[], documentation: Parameters<typeof openapi>[0] extends infer C ? C extends { documentation?: infer D } ? D : never : never) {
  const specPath = `${prefix}/openapi.json`;
  return new Elysia()
    .onAfterHandle({ as: "global" }, ({ request, response }) => {
      if (request.method !== "GET" || !request.url.endsWith(specPath)) return;
      const paths = (response as { paths?: Record<string, Record<string, { requestBody?: unknown }>> }).paths ?? {};
      for (const body of bodies) {
        const operation = paths[body.path]?.[body.method];
        if (operation) operation.requestBody = { required: body.required, content: { "application/json": { schema: body.schema } } };
      }
    })
    .use(
      openapi({
        path: `${prefix}/docs`,
        specPath,
        // The page loads the spec by this absolute path (the default is relative to the page).
        scalar: { url: specPath },
        exclude: { paths: [`${prefix}/docs`, specPath] },
        documentation,
      }),
    );
}
