import type { Clock } from "../clock";
import type { Logger } from "../logger";
import type { BudgetTarget } from "../services/budget-target";
import type { BudgetLedger } from "./budget-ledger";
import type { ModelPrice } from "./pricing";
import { chargeFor, estimateCharge, type Charge, type ReservationPlan } from "./reservation";
import type { UpstreamUsage } from "./usage";
import type { UsageWriter } from "./usage-writer";

/** A reservation held by one in-flight request, until `Meter.finish` settles it. */
export interface MeteringTicket {
  requestId: string;
  target: BudgetTarget;
  model: string;
  price: ModelPrice;
  plan: ReservationPlan;
  promptBoundTokens: number;
  grantedNano: number;
  streamed: boolean;
  startedAt: number;
}

export interface RequestOutcome {
  status: string;
  usage: UpstreamUsage | null;
  generationId: string | null;
  /** Completion events relayed (streams); the basis of an estimate. */
  completionEvents: number;
  /** True when the upstream produced nothing billable: the request costs nothing. */
  producedNothing: boolean;
}

/** Settles reservations to actual cost and records the ledger row. */
export class Meter {
  constructor(
    private readonly budget: BudgetLedger,
    private readonly writer: UsageWriter,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  async finish(ticket: MeteringTicket, outcome: RequestOutcome): Promise<Charge> {
    const charge: Charge = outcome.producedNothing
      ? { costNano: 0, source: "computed", promptTokens: 0, completionTokens: 0 }
      : chargeFor(ticket.price, outcome.usage, () =>
          estimateCharge(ticket.plan, ticket.price, ticket.promptBoundTokens, Math.max(1, outcome.completionEvents), ticket.grantedNano),
        );
    // Settling is idempotent in the ledger and the row's primary key is the request id,
    // so a second finish for the same ticket changes nothing.
    await this.budget.settle(ticket.requestId, charge.costNano);
    if (charge.costNano > ticket.grantedNano) {
      // Only possible when the catalogue's price is below the upstream's: worth an alert.
      this.logger.warn("actual cost exceeded the reservation", {
        requestId: ticket.requestId,
        model: ticket.model,
        reservedNano: ticket.grantedNano,
        costNano: charge.costNano,
      });
    }
    const { target } = ticket;
    this.writer.enqueue({
      requestId: ticket.requestId,
      account: target.account,
      appId: target.appId,
      appUserId: target.appUserId,
      grantId: target.grantId,
      period: target.period.id,
      model: ticket.model,
      generationId: outcome.generationId,
      promptTokens: charge.promptTokens,
      completionTokens: charge.completionTokens,
      costNano: charge.costNano,
      source: charge.source,
      status: outcome.status,
      streamed: ticket.streamed,
      startedAt: ticket.startedAt,
      finishedAt: this.clock.now(),
    });
    return charge;
  }
}
