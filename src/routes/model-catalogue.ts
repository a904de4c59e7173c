import { Type } from "@sinclair/typebox";
import { Elysia, t } from "elysia";
import type { PricingCatalogue } from "../pricing/catalogue";
import { ApiError } from "../errors";
import type { Guards } from "../http/guards";
import { errorResponses } from "../error-schema";

/** The upstream's page size when a client pages without naming one (its spec's `limit` default). */
const DEFAULT_PAGE_SIZE = 500;

/**
 * The upstream's ModelsListResponse (spec/openrouter-openapi.yaml): `data`, `total_count`
 * and `links.next` are all required there, and OpenRouter's own SDK refuses a list without
 * them, so the proxy keeps the whole shape, not only `data`.
 */
const ModelList = t.Object(
  {
    data: t.Array(t.Object({ id: t.String() }, { additionalProperties: true }), {
      description:
        "OpenRouter's Model objects as the upstream listed them: id, name, context_length, pricing (USD per unit, as strings), top_provider, supported_parameters, ...",
    }),
    total_count: Type.Integer({ minimum: 0, description: "How many models the catalogue lists in all (every page together)." }),
    links: t.Object({
      next: t.Nullable(t.String({ description: "The path of the next page (same query, the next `offset`), or null on the last page." })),
    }),
  },
  { additionalProperties: true },
);

const PageQuery = t.Object({
  offset: t.Optional(t.Integer({ minimum: 0, description: "Models to skip. With neither `offset` nor `limit`, the whole list is one page." })),
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 1000, description: `Models per page (default ${DEFAULT_PAGE_SIZE} once paging).` })),
});

/**
 * One page of the catalogue, paged as the upstream pages its own list: the whole list when
 * neither `offset` nor `limit` is given, else `limit` (default 500) models from `offset`.
 * Paging matters to clients that page by count: OpenRouter's SDK asks for the next offset
 * whenever a page holds 500 models or more, and would loop on a list that ignored `offset`.
 */
export function catalogueListPage(listing: readonly unknown[], path: string, query: { offset?: number; limit?: number }) {
  const total = listing.length;
  if (query.offset === undefined && query.limit === undefined) {
    return { data: listing as Array<{ id: string }>, total_count: total, links: { next: null } };
  }
  const offset = query.offset ?? 0;
  const limit = query.limit ?? DEFAULT_PAGE_SIZE;
  const end = offset + limit;
  const next = end < total ? `${path}?offset=${end}&limit=${limit}` : null;
  return { data: listing.slice(offset, end) as Array<{ id: string }>, total_count: total, links: { next } };
}

/**
 * GET /models: the catalogue the proxy prices requests by, as the upstream lists it, so
 * `client.models.list()` in an OpenAI SDK (or OpenRouter's) shows what can be called and at what price.
 */
export function modelCatalogueRoutes(catalogue: Pick<PricingCatalogue, "listing">, auth: Guards) {
  return new Elysia().use(auth).get(
    "/models",
    ({ query, path }) => {
      const listing = catalogue.listing;
      if (listing.length === 0) throw new ApiError("unavailable", "the model catalogue has not been loaded from the upstream yet; try again shortly");
      return catalogueListPage(listing, path, query);
    },
    {
      secretKey: true,
      query: PageQuery,
      response: { 200: ModelList, ...errorResponses(400, 401, 503) },
      detail: {
        tags: ["chat"],
        summary: "The models that can be called, with the prices requests are reserved on",
        description:
          "The upstream's `GET /models` as last fetched (refreshed every PRICING_REFRESH_SECONDS), in its list shape (`data`, `total_count`, `links.next`) and paged as it pages. A chat call naming a model not listed here is 400 `invalid_request`.",
        security: [{ secretKey: [] }],
      },
    },
  );
}
