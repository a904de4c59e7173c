import { Elysia, t } from "elysia";
import { Type } from "@sinclair/typebox";
import type { Guards } from "../http/guards";
import type { ChatBody, ChatService } from "../services/chat";
import type { PayerBudgets } from "../services/budget-target";
import type { IdempotencyService } from "../services/idempotency";
import { errorResponses } from "../error-schema";
import { handOverHeaders } from "../http/hand-over-headers";

const ContentPart = t.Object({ type: t.String() }, { additionalProperties: true });

/**
 * What the proxy relies on is validated; every other field (tools, temperature,
 * response_format, provider routing, ...) passes through untouched.
 */
export const ChatCompletionRequest = t.Object(
  {
    model: t.Optional(
      t.String({ minLength: 1, maxLength: 256, description: "OpenRouter model id, e.g. `openai/gpt-4o-mini`. Optional when `models` is given." }),
    ),
    models: t.Optional(
      t.Array(t.String({ minLength: 1, maxLength: 256 }), {
        minItems: 1,
        maxItems: 32,
        description: "Fallback model ids, tried in order by the upstream. The reservation is priced at the most expensive of them.",
      }),
    ),
    messages: t.Array(
      t.Object(
        {
          role: t.String({ minLength: 1 }),
          content: t.Optional(t.Union([t.String(), t.Array(ContentPart), t.Null()])),
        },
        { additionalProperties: true },
      ),
      { minItems: 1 },
    ),
    stream: t.Optional(t.Boolean()),
    // TypeBox's own Integer, not Elysia's: Elysia's is a transform (it coerces strings, for
    // query strings), and one transform anywhere makes Elysia decode the whole body on every
    // call (3 % of the service's CPU, ARCHITECTURE.md §7 "No transform in the chat body"). A
    // JSON body's number is a number.
    max_tokens: t.Optional(Type.Integer({ minimum: 1 })),
    max_completion_tokens: t.Optional(Type.Integer({ minimum: 1 })),
  },
  { additionalProperties: true },
);

const ChatCompletionResponse = t.Object(
  { id: t.String(), object: t.String(), model: t.String(), choices: t.Array(t.Unknown()), usage: t.Optional(t.Unknown()) },
  { additionalProperties: true, description: "OpenAI chat.completion (JSON), or with `stream: true` an event stream of chat.completion.chunk events." },
);

/** The answer to `stream: true`, documented beside the JSON one (src/app.ts). */
export const ChatCompletionStream = t.String({
  description:
    "Server-sent events relayed unchanged from the upstream as they come: `data: {chat.completion.chunk}` events, " +
    "the last chunk carrying `usage`, then `data: [DONE]`.",
});

const CHAT_DESCRIPTION = [
  "Send `x-service-user: <appUserId>` (or `x-service-grant`). Before the call goes upstream its worst-case cost is reserved against the budget:",
  "per-request fee + images × image price + web results × web-search price (the upstream engine's, WEB_SEARCH_RESULT_USD, where the model lists none) +",
  "prompt bound (with `tools`, plus the tool-use prompt the provider adds) × the highest input rate (prompt or cache write) +",
  "(max_tokens + reasoning budget) × n × the highest output rate (completion or internal reasoning), at the priciest of `model` and its `models` fallbacks;",
  'a premium `service_tier` or `speed: "fast"` multiplies every price by the operator\'s SERVICE_TIER_PRICE_MULTIPLIERS.',
  "`max_tokens` defaults to DEFAULT_MAX_TOKENS (4096) and is clamped to what the remaining budget affords; on reasoning models `reasoning.max_tokens` is always sent (an `effort` becomes its token budget).",
  "`provider.max_price` is set to the prices reserved on (the lower of these and the client's own), so the upstream refuses a pricier provider or routed model.",
  "Response headers `x-metering-max-tokens`, `x-metering-reasoning-max-tokens` and `x-metering-reserved-usd` say what was sent and reserved.",
  "400 `invalid_request` for an unknown model, a plugin or server tool whose cost cannot be bounded (unless the operator set PLUGIN_RESERVATIONS_USD), image output billed per image, per-page PDF parsing, a premium service tier or fast mode the operator has not priced, or a request the upstream refused (its 400/404/413/422).",
  "402 `not_connected`, `budget_exceeded` (with limitUsd, usedUsd, remainingUsd, resetsAt; also after an overrun until the period resets or the cap is raised, and when the user's own upstream key has less credit left than the call's max_tokens could cost) or `funding_invalid` (the user's own funding was refused upstream);",
  "502 `upstream` for any other upstream failure, a refusal of the service's own upstream key included (401, 402, 403 key limit: the operator's to fix; no user is marked).",
  "With an `Idempotency-Key` header, a retry of a call that finished replays its answer (`Idempotent-Replayed: true`) and is not charged again;",
  "409 `idempotency_conflict` while the first call runs, 422 `idempotency_mismatch` when the key was used for another request.",
].join(" ");

/** POST /chat/completions: the metered, OpenAI-compatible proxy. */
export function chatRoutes(chat: ChatService, budgets: PayerBudgets, idempotency: IdempotencyService, auth: Guards) {
  return new Elysia().use(auth).post(
    "/chat/completions",
    async ({ app, body, request, set, server, requestContext, deferredRateLimit }) => {
      const { requestId, payer, log } = requestContext;
      const declared = Number(request.headers.get("content-length"));
      // Known before the budget is: a refused call's line still says whose it was.
      log.appUserId = payer.appUserId;
      log.streamed = body.stream === true;
      // The key is looked up before the budget: a retry of a paid call gets its answer
      // even when that call used up the budget or the grant.
      const response = await idempotency.run(app.id, requestId, request.headers, payer, body, async (recorder) => {
        const target = await budgets.targetOf(app, payer);
        log.appUserId = target.appUserId;
        log.grantId = target.grantId;
        return chat.complete({
          requestId,
          log,
          target,
          body: body as ChatBody,
          bodyBytes: declared > 0 ? declared : Buffer.byteLength(JSON.stringify(body)),
          clientHeaders: request.headers,
          recorder,
          rateLimit: deferredRateLimit,
        });
      });
      log.headersAt = performance.now();
      // A quiet stream must outlive Bun's 10 s idle timeout; the relay's own stall
      // timeout bounds it instead.
      if (body.stream === true) server?.timeout(request, 0);
      return handOverHeaders(response, set.headers);
    },
    {
      secretKey: true,
      rateLimit: "chat",
      body: ChatCompletionRequest,
      response: { 200: ChatCompletionResponse, ...errorResponses(400, 401, 402, 409, 413, 422, 429, 502, 503) },
      detail: {
        tags: ["chat"],
        summary: "OpenAI-compatible chat completion, metered against the user's budget",
        description: CHAT_DESCRIPTION,
        security: [{ secretKey: [] }],
        parameters: [
          {
            name: "x-service-user",
            in: "header",
            required: false,
            schema: { type: "string" },
            description:
              "The app's id for the user whose budget pays (1 to 256 bytes of UTF-8, as at POST /sessions), percent-encoded (`encodeURIComponent`): " +
              "header values are bytes. An id of visible ASCII without `%` reads the same sent as it is; any other byte is 400.",
          },
          {
            name: "x-service-grant",
            in: "header",
            required: false,
            schema: { type: "string" },
            description: "A grant token (`gt_…`) instead of a user: exactly one of the two.",
          },
          {
            name: "idempotency-key",
            in: "header",
            required: false,
            schema: { type: "string", minLength: 1, maxLength: 255 },
            description:
              "Any unique string per logical call (1-255 visible ASCII). Retries with the same key are charged once; kept for IDEMPOTENCY_TTL_SECONDS (a day).",
          },
        ],
      },
    },
  );
}
