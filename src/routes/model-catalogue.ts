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

const ListedModel = t.Object({ id: t.String() }, { additionalProperties: true, description: "OpenRouter's Model object, as the list shows it." });

/** `/api/v1/models/openai/gpt-4o` → `/api/v1/models`: the list's path, `segments` below it being the id. */
const listPathOf = (path: string, segments: number) => path.split("/").slice(0, -segments).join("/");

const PageQuery = t.Object({
  offset: t.Optional(t.Integer({ minimum: 0, description: "Models to skip. With neither `offset` nor `limit`, the whole list is one page." })),
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 1000, description: `Models per page (default ${DEFAULT_PAGE_SIZE} once paging).` })),
});

type Listed = { id: string; links?: unknown };

/**
 * A model as this proxy lists it: the upstream's entry, its `links.details` (OpenRouter's
 * `/api/v1/models/{id}/endpoints`, which the proxy does not serve) pointing at the proxy's own
 * `{listPath}/{id}` instead, so that a link followed from the list answers.
 */
function asListedHere(model: Listed, listPath: string): Listed {
  if (model.links === null || typeof model.links !== "object") return model;
  return { ...model, links: { ...model.links, details: `${listPath}/${model.id}` } };
}

/**
 * One page of the catalogue, paged as the upstream pages its own list: the whole list when
 * neither `offset` nor `limit` is given, else `limit` (default 500) models from `offset`.
 * Paging matters to clients that page by count: OpenRouter's SDK asks for the next offset
 * whenever a page holds 500 models or more, and would loop on a list that ignored `offset`.
 */
export function catalogueListPage(listing: readonly unknown[], path: string, query: { offset?: number; limit?: number }) {
  const total = listing.length;
  const here = (models: readonly unknown[]) => (models as Listed[]).map((m) => asListedHere(m, path));
  if (query.offset === undefined && query.limit === undefined) {
    return { data: here(listing), total_count: total, links: { next: null } };
  }
  const offset = query.offset ?? 0;
  const limit = query.limit ?? DEFAULT_PAGE_SIZE;
  const end = offset + limit;
  const next = end < total ? `${path}?offset=${end}&limit=${limit}` : null;
  return { data: here(listing.slice(offset, end)), total_count: total, links: { next } };
}

/** The listed model `id`, as the list shows it (`listPath`: the list's own path), or a 404. */
function listedModel(catalogue: Pick<PricingCatalogue, "listing">, id: string, listPath: string): Listed {
  const listing = catalogue.listing as Listed[];
  if (listing.length === 0) throw new ApiError("unavailable", "the model catalogue has not been loaded from the upstream yet; try again shortly");
  const model = listing.find((m) => m.id === id);
  if (!model) throw new ApiError("not_found", `no model ${JSON.stringify(id)} in the catalogue (GET ${listPath} lists them)`);
  return asListedHere(model, listPath);
}

/**
 * GET /models: the catalogue the proxy prices requests by, as the upstream lists it, so
 * `client.models.list()` in an OpenAI SDK (or OpenRouter's) shows what can be called and at what price.
 * GET /models/{author}/{slug}: one of them, where each entry's `links.details` points; the
 * `openai` SDK's `models.retrieve(id)` sends the id as one segment, `/` encoded as `%2F`, so
 * that form is served too.
 */
export function modelCatalogueRoutes(catalogue: Pick<PricingCatalogue, "listing">, auth: Guards) {
  const one = {
    secretKey: true as const,
    response: { 200: ListedModel, ...errorResponses(401, 404, 503) },
    detail: {
      tags: ["chat"],
      summary: "One model of the catalogue, as the list shows it",
      description:
        "The model with id `{author}/{slug}` (e.g. `openai/gpt-4o-mini`, or `openai/gpt-4o-mini:free`) as `GET /api/v1/models` lists it: the upstream's Model object. The id may also come as one segment with its `/` encoded (`/models/openai%2Fgpt-4o-mini`, what `client.models.retrieve(id)` of the `openai` SDK sends). 404 `not_found` for a model the catalogue does not list.",
      security: [{ secretKey: [] }],
    },
  };
  return new Elysia()
    .use(auth)
    .get("/models/:author/:slug", ({ params, path }) => listedModel(catalogue, `${params.author}/${params.slug}`, listPathOf(path, 2)), one)
    .get("/models/:author", ({ params, path }) => listedModel(catalogue, params.author, listPathOf(path, 1)), {
      ...one,
      detail: { ...one.detail, hide: true },
    })
    .get(
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
            "The upstream's `GET /models` as last fetched (refreshed every PRICING_REFRESH_SECONDS), in its list shape (`data`, `total_count`, `links.next`) and paged as it pages; each model's `links.details` is its `GET /api/v1/models/{author}/{slug}` here. A chat call naming a model not listed here is 400 `invalid_request`.",
          security: [{ secretKey: [] }],
        },
      },
    );
}
