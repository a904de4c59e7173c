import type { Deps } from "../deps";
import type { AccessEntry } from "../http/access-log";
import type { MeteringTicket } from "../metering/meter";
import { clientPin } from "../metering/price-pin";
import type { PricingCatalogue } from "../metering/pricing";
import { readRequestShape } from "../metering/request-shape";
import { grantedLimits, planReservation } from "../metering/reservation";
import { costBounds } from "../metering/worst-case";
import { budgetExceeded, type BudgetTarget } from "./budget-target";
import type { ChatBody } from "./chat";
import type { DeferredRateLimit } from "../ratelimit/macro";

export interface ReservationRequest {
  requestId: string;
  target: BudgetTarget;
  body: ChatBody;
  /** Size of the client's JSON body: an upper bound on the tokens of its text. */
  bodyBytes: number;
  /** The request's access-log entry: told the model and the cost once metered. */
  access?: AccessEntry;
  /** The call's rate-limit check, to run in the same step as the reservation. */
  rateLimit?: DeferredRateLimit;
}

/**
 * Reserves a chat call's worst case against its budget (ARCHITECTURE.md §3 "The hard cap"):
 * read what the body can be billed for (400 for what cannot be bounded), price it at the
 * priciest model that may serve it, reserve atomically between a minimal and the full
 * completion, then size max_tokens (and the reasoning budget) to what was granted.
 */
export async function reserveChat(deps: Deps, catalogue: PricingCatalogue, request: ReservationRequest): Promise<MeteringTicket> {
  const { body, target, requestId } = request;
  const { config } = deps;
  const shape = readRequestShape(body, config.pluginReservationsNano);
  const bounds = costBounds(catalogue, { shape, bodyBytes: request.bodyBytes, clientPin: clientPin(body), imageTokenBound: config.imageTokensBound });
  const plan = planReservation(bounds, requestedMaxTokens(body), config.defaultMaxTokens, shape.reasoning);
  // A deferred rate-limit check exists only beside a ledger that runs it (src/http/guards.ts).
  const outcome = await deps.budget.reserve(target.account, requestId, target.capNano, plan.minNano, plan.desiredNano, request.rateLimit);
  // Its limit first: a call over its rate limit is a 429 whatever its budget (nothing was reserved).
  if (outcome.rateLimit) request.rateLimit!.decide(outcome.rateLimit);
  if (!outcome.ok) {
    deps.budgetWatcher.note(target, true);
    throw budgetExceeded(target, outcome);
  }
  try {
    await target.admit?.();
  } catch (err) {
    await deps.budget.settle(requestId, 0);
    // A grant refused for its uses: the watcher reports it exhausted if that is why.
    deps.budgetWatcher.note(target);
    throw err;
  }
  return {
    requestId,
    access: request.access,
    target,
    model: shape.modelIds[0]!,
    bounds,
    plan,
    limits: grantedLimits(plan, bounds, outcome.grantedNano),
    grantedNano: outcome.grantedNano,
    streamed: body.stream === true,
    startedAt: deps.clock.now(),
  };
}

/** The client's completion limit: the lower of max_tokens and max_completion_tokens when both are sent. */
function requestedMaxTokens(body: ChatBody): number | null {
  const limits = [body.max_tokens, body.max_completion_tokens].filter((v): v is number => typeof v === "number");
  return limits.length > 0 ? Math.min(...limits) : null;
}
