/**
 * Whether a key with a credit limit can pay for a chat request, decided once, before any
 * provider is asked, the way OpenRouter refuses ("402 Payment Required - Insufficient credits
 * or quota to complete request", the spec's words for every paid endpoint):
 *
 * - nothing left (the limit reached, or overrun): refused whatever the request, with the
 *   spec's example message; OpenRouter's limits page says the same of a negative balance,
 *   "you may see 402 errors, including for free models";
 * - something left, but less than the request's worst case: the input side (prompt tokens,
 *   request fee, images, web results, cache writes) plus `max_tokens` completion tokens (the
 *   model's own maximum when the request sets none) for each of its `n` choices, at the
 *   serving provider's prices.
 *   Refused with how many tokens the rest affords, in the words OpenRouter answers with.
 *
 * The check holds nothing back: concurrent calls are each checked against the same rest, and
 * a call is billed in full when it ends (./generation.ts), so what max_tokens does not bound
 * (reasoning tokens) or calls racing each other can take a key past its limit. The rest then
 * shows negative at GET /key and the next call is refused.
 */
import { billFor, type BilledWork } from "./billing";
import type { MockKeyAccount } from "./keys";
import type { MockModel } from "./models";

export interface CreditRefusal {
  status: 402;
  /** undefined: the spec's example message (./errors.ts). */
  message: string | undefined;
}

/** Null when `account` can pay for the request's worst case at `now`; else the 402 to answer. */
export function creditRefusal(
  account: MockKeyAccount,
  now: number,
  model: MockModel,
  priceMultiplier: number,
  work: BilledWork,
  maxTokens: number | null,
  choices = 1,
): CreditRefusal | null {
  const remaining = account.usage.remaining(account.limitUsd, account.usageLimitType, now);
  if (remaining === null) return null;
  if (remaining <= 0) return { status: 402, message: undefined };
  const requested = (maxTokens ?? model.maxCompletionTokens ?? Math.max(0, model.contextLength - work.promptTokens)) * choices;
  const worst = billFor(model, priceMultiplier, { ...work, contentTokens: requested, reasoningTokens: 0 }).costUsd;
  if (worst <= remaining) return null;
  const inputSide = billFor(model, priceMultiplier, { ...work, contentTokens: 0, reasoningTokens: 0 }).costUsd;
  const perToken = requested > 0 ? (worst - inputSide) / requested : 0;
  const affordable = perToken > 0 ? Math.max(0, Math.floor((remaining - inputSide) / perToken)) : 0;
  return {
    status: 402,
    message:
      `This request requires more credits, or fewer max_tokens. You requested up to ${requested} tokens, but can only afford ${affordable}. ` +
      "To increase, visit https://openrouter.ai/settings/keys and create a key with a higher limit",
  };
}
