import type { MeteringTicket } from "../metering/meter";
import { withPricePin } from "../pricing/price-pin";
import { nanoToUsd } from "../money";
import type { ChatBody } from "./chat";

/**
 * The body sent upstream: the client's, field for field, except what the reservation
 * depends on: max_tokens clamped to what was granted, `reasoning.max_tokens` bounding
 * reasoning (an effort is replaced by its token budget: the two cannot be sent together,
 * and an off switch beside a budget is dropped: src/pricing/request-shape.ts reads such a
 * body as the budget, and reserved for it), `provider.max_price` pinning the prices
 * reserved on, and usage always requested.
 */
export function upstreamRequestBody(body: ChatBody, ticket: MeteringTicket): ChatBody {
  const { limits } = ticket;
  const out: ChatBody = {
    ...body,
    max_tokens: limits.maxTokens,
    usage: { ...body.usage, include: true },
    provider: withPricePin(body.provider, ticket.bounds.pin),
  };
  if (body.max_completion_tokens !== undefined) out.max_completion_tokens = limits.maxTokens;
  if (body.stream === true) out.stream_options = { ...body.stream_options, include_usage: true };
  if (limits.reasoningMaxTokens !== null) {
    const { effort: _effort, enabled: _enabled, ...reasoning } = (body.reasoning ?? {}) as Record<string, unknown>;
    out.reasoning = { ...reasoning, max_tokens: limits.reasoningMaxTokens };
    delete out.reasoning_effort;
  }
  return out;
}

/** Response headers that say what the proxy sent and reserved, so a client can see why an answer stopped. */
export function meteringHeaders(ticket: MeteringTicket, headers: Record<string, string>): void {
  headers["x-metering-max-tokens"] = String(ticket.limits.maxTokens);
  if (ticket.limits.reasoningMaxTokens !== null) headers["x-metering-reasoning-max-tokens"] = String(ticket.limits.reasoningMaxTokens);
  headers["x-metering-reserved-usd"] = String(nanoToUsd(ticket.grantedNano));
}
