import { Elysia, t } from "elysia";
import type { Deps } from "../deps";
import { ApiError } from "../errors";
import type { Guards } from "../http/guards";
import { errorResponses } from "./models";

const ModelList = t.Object(
  {
    data: t.Array(t.Object({ id: t.String() }, { additionalProperties: true }), {
      description:
        "OpenRouter's Model objects as the upstream listed them: id, name, context_length, pricing (USD per unit, as strings), top_provider, supported_parameters, ...",
    }),
  },
  { additionalProperties: true },
);

/**
 * GET /models: the catalogue the proxy prices requests by, as the upstream lists it, so
 * `client.models.list()` in an OpenAI SDK shows what can be called and at what price.
 */
export function modelCatalogueRoutes(deps: Deps, auth: Guards) {
  return new Elysia().use(auth).get(
    "/models",
    () => {
      const data = deps.catalogue.listing;
      if (data.length === 0) throw new ApiError("unavailable", "the model catalogue has not been loaded from the upstream yet; try again shortly");
      return { data: data as Array<{ id: string }> };
    },
    {
      secretKey: true,
      response: { 200: ModelList, ...errorResponses(401, 503) },
      detail: {
        tags: ["chat"],
        summary: "The models that can be called, with the prices requests are reserved on",
        description:
          "The upstream's `GET /models` as last fetched (refreshed every PRICING_REFRESH_SECONDS). A chat call naming a model not listed here is 400 `invalid_request`.",
        security: [{ secretKey: [] }],
      },
    },
  );
}
