import type { Clock } from "../clock";
import type { Config } from "../config";
import type { BudgetLedger, JournaledCall } from "../budget/ledger";
import type { ChargeLog, MeteringTicket } from "../metering/meter";
import { clientPin } from "../pricing/price-pin";
import type { PricingCatalogue } from "../pricing/catalogue";
import { readRequestShape } from "../pricing/request-shape";
import { tierPriceMultiplier } from "../pricing/service-tier";
import { grantedLimits, planReservation, type ReservationPlan } from "../pricing/reservation";
import { grantDayAccount } from "../budget/accounts";
import { ApiError } from "../errors";
import { formatUsd, nanoToUsd, utcDayAt } from "../money";
import { costBounds } from "../pricing/worst-case";
import type { BudgetTarget } from "../budget/target";
import { budgetExceeded } from "./budget-target";
import type { ChatBody } from "./chat";
import type { DeferredRateLimit } from "../ratelimit/enforcement";

export interface ReservationRequest {
  requestId: string;
  target: BudgetTarget;
  body: ChatBody;
  /** Size of the client's JSON body: an upper bound on the tokens of its text. */
  bodyBytes: number;
  /** The request's access-line fields: told the model and the cost once metered. */
  log?: ChargeLog;
  /** The call's rate-limit check, to run in the same step as the reservation. */
  rateLimit?: DeferredRateLimit;
}

/** What a reservation reads and reserves against. */
export interface Reserving {
  catalogue: PricingCatalogue;
  budget: BudgetLedger;
  clock: Clock;
  /** Told of what each reservation found, for the budget webhooks (src/webhooks/budget-watcher.ts). */
  watcher: { note(target: BudgetTarget, refused?: boolean): void };
  config: Pick<Config, "pluginReservationsNano" | "imageTokensBound" | "webSearchResultNano" | "serviceTierMultipliers" | "defaultMaxTokens">;
}

/**
 * Reserves a chat call's worst case against its budget (ARCHITECTURE.md §3 "The hard cap"):
 * read what the body can be billed for (400 for what cannot be bounded), price it at the
 * priciest model that may serve it, reserve atomically between a minimal and the full
 * completion, then size max_tokens (and the reasoning budget) to what was granted.
 */
export async function reserveChat(reserving: Reserving, request: ReservationRequest): Promise<MeteringTicket> {
  const { body, target, requestId } = request;
  const { config, catalogue } = reserving;
  const shape = readRequestShape(body, config.pluginReservationsNano);
  const bounds = costBounds(catalogue, {
    shape,
    bodyBytes: request.bodyBytes,
    clientPin: clientPin(body),
    imageTokenBound: config.imageTokensBound,
    engineResultNano: config.webSearchResultNano,
    priceMultiplier: tierPriceMultiplier(body, config.serviceTierMultipliers),
  });
  const plan = planReservation(bounds, requestedMaxTokens(body), config.defaultMaxTokens, shape.reasoning);
  // The row's start, and the UTC day whose grant ceiling the call draws on: one instant.
  const startedAt = reserving.clock.now();
  // A grant call draws on its app's daily ceiling first, and then on its grant for at most
  // what the ceiling granted. Each reserve is atomic on its own account, so neither cap can
  // be passed; between the two, the ceiling may hold a little more than the grant took,
  // until the call settles (never less).
  const ceiling = target.dailyGrantCeilingNano === undefined ? null : await reserveDailyCeiling(reserving, request, plan, startedAt);
  const rateLimit = ceiling ? undefined : request.rateLimit;
  // The ceiling a grant call's day reservation was made under: an overrun freezes the day there.
  const ceilingCapNano = ceiling ? target.dailyGrantCeilingNano : undefined;
  const model = shape.modelIds[0]!;
  const streamed = body.stream === true;
  // A ledger that can journal the call in the reservation's own step does (one round trip before the upstream).
  const journal: JournaledCall | undefined = reserving.budget.journalsCalls
    ? {
        ceilingReservationId: ceiling?.reservationId ?? null,
        ceilingReservedNano: ceiling?.grantedNano ?? null,
        ceilingCapNano: ceilingCapNano ?? null,
        appId: target.appId,
        appUserId: target.appUserId,
        grantId: target.grantId,
        payer: target.payer,
        period: target.period.id,
        model,
        streamed,
        startedAt,
      }
    : undefined;
  // A deferred rate-limit check exists only beside a ledger that runs it (src/http/guards.ts).
  const outcome = await reserving.budget.reserve(
    target.account,
    requestId,
    target.capNano,
    plan.minNano,
    ceiling?.grantedNano ?? plan.desiredNano,
    rateLimit,
    journal,
  );
  // Its limit first: a call over its rate limit is a 429 whatever its budget (nothing was reserved).
  if (outcome.rateLimit) request.rateLimit!.decide(outcome.rateLimit);
  const release = async () => {
    await reserving.budget.settle(requestId, 0);
    if (ceiling) await reserving.budget.settle(ceiling.reservationId, 0);
  };
  if (!outcome.ok) {
    if (ceiling) await reserving.budget.settle(ceiling.reservationId, 0);
    reserving.watcher.note(target, true);
    throw budgetExceeded(target, outcome);
  }
  try {
    await target.admit?.();
  } catch (err) {
    await release();
    // A grant refused for its uses: the watcher reports it exhausted if that is why.
    reserving.watcher.note(target);
    throw err;
  }
  return {
    requestId,
    log: request.log,
    target,
    model,
    bounds,
    plan,
    limits: grantedLimits(plan, bounds, outcome.grantedNano),
    grantedNano: outcome.grantedNano,
    ceilingReservationId: ceiling?.reservationId,
    ceilingReservedNano: ceiling?.grantedNano,
    ceilingCapNano,
    streamed,
    startedAt,
    journaled: journal !== undefined,
  };
}

/**
 * Reserves a grant call against its app's daily ceiling on what grants spend
 * (grantDayAccount), or throws 402 `budget_exceeded` with that ceiling's figures. The
 * call's rate-limit check, when the ledger runs it, goes with this first reserve.
 */
async function reserveDailyCeiling(reserving: Reserving, request: ReservationRequest, plan: ReservationPlan, startedAt: number) {
  const { target } = request;
  const capNano = target.dailyGrantCeilingNano!;
  const account = grantDayAccount(target.appId, startedAt);
  const reservationId = `${request.requestId}/grant-day`;
  const outcome = await reserving.budget.reserve(account, reservationId, capNano, plan.minNano, plan.desiredNano, request.rateLimit);
  if (outcome.rateLimit) request.rateLimit!.decide(outcome.rateLimit);
  if (outcome.ok) return { reservationId, grantedNano: outcome.grantedNano };
  const day = utcDayAt(startedAt);
  const remaining = outcome.frozen ? 0 : Math.max(0, capNano - outcome.spentNano - outcome.reservedNano);
  throw new ApiError(
    "budget_exceeded",
    `this app's grants have used their daily ceiling: ${formatUsd(nanoToUsd(outcome.spentNano))} of ${formatUsd(nanoToUsd(capNano))} ` +
      `spent today (UTC), not enough for this request; it resets at ${new Date(day.end).toISOString()}`,
    { limitUsd: nanoToUsd(capNano), usedUsd: nanoToUsd(outcome.spentNano), remainingUsd: nanoToUsd(remaining), resetsAt: new Date(day.end).toISOString() },
  );
}

/** The client's completion limit: the lower of max_tokens and max_completion_tokens when both are sent. */
function requestedMaxTokens(body: ChatBody): number | null {
  const limits = [body.max_tokens, body.max_completion_tokens].filter((v): v is number => typeof v === "number");
  return limits.length > 0 ? Math.min(...limits) : null;
}
