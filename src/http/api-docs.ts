import { Elysia } from "elysia";
import { buildOpenApiDocument, type DocumentSources } from "./openapi-document";
import { DOCS_ASSETS, DOCS_PAGE_HEADERS, DOCS_PATH, renderDocsPage } from "../pages/docs-page";

const HIDDEN = { detail: { hide: true } };

/**
 * GET {prefix}/openapi.json (a fixed operator interface, ARCHITECTURE.md §4), the reference
 * page at /docs with its files, and a redirect from {prefix}/docs, where the page used to be,
 * so that old links still land on it. GET / says where these are: the first address a
 * newcomer opens, which would otherwise be a bare 404.
 */
export function apiDocs(prefix: string, sources: DocumentSources) {
  const specPath = `${prefix}/openapi.json`;
  const plugin = new Elysia({ name: "api-docs" });
  // Built on the first request, when createApp has registered every route (the plugin sees
  // the whole app's routes, as @elysiajs/openapi's does); routes are not added later.
  // A build that failed is tried again by the next request, not kept.
  let built: Promise<{ document: Record<string, unknown>; page: string }> | undefined;
  const current = async () =>
    (built ??= buildOpenApiDocument(plugin, sources).then(
      (document) => ({ document, page: renderDocsPage(document, specPath) }),
      (err: unknown) => {
        built = undefined;
        throw err;
      },
    ));

  const { title, version } = sources.documentation.info as { title: string; version: string };
  const index = { name: title, version, docs: DOCS_PATH, openapi: specPath, health: "/healthz", api: prefix };
  plugin
    .get("/", () => index, HIDDEN)
    .get(specPath, async () => (await current()).document, HIDDEN)
    .get(
      DOCS_PATH,
      async ({ set }) => {
        Object.assign(set.headers, DOCS_PAGE_HEADERS);
        return (await current()).page;
      },
      HIDDEN,
    )
    .get(`${prefix}/docs`, ({ redirect }) => redirect(DOCS_PATH, 301), HIDDEN);
  for (const [name, asset] of Object.entries(DOCS_ASSETS)) {
    plugin.get(
      `${DOCS_PATH}/${name}`,
      ({ set }) => {
        set.headers["content-type"] = asset.contentType;
        set.headers["x-content-type-options"] = "nosniff";
        // The renderer's version is pinned, and an upgrade ships a new binary: an hour of
        // caching spares reloads without keeping an old copy for long.
        set.headers["cache-control"] = "public, max-age=3600";
        return asset.body();
      },
      HIDDEN,
    );
  }
  return plugin;
}
