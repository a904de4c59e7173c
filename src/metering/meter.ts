import type { Clock } from "../clock";
import type { BudgetTarget } from "../services/budget-target";
import type { BudgetLedger } from "./budget-ledger";
import type { OverrunMonitor } from "./overrun-monitor";
import { chargeFor, estimateCharge, type Charge, type GrantedLimits, type ReservationPlan } from "./reservation";
import type { UpstreamUsage } from "./usage";
import type { UsageWriter } from "./usage-writer";
import type { UsageRow } from "../store/usage-ledger";
import type { CostBounds } from "./worst-case";
import type { AccessEntry } from "../http/access-log";
import type { BudgetWatcher } from "../webhooks/budget-watcher";

/** A reservation held by one in-flight request, until `Meter.finish` settles it. */
export interface MeteringTicket {
  requestId: string;
  /** The request's access-log line, which shows the model and what was charged. */
  access?: AccessEntry;
  target: BudgetTarget;
  /** The model id as the client asked for it (`model`, or the first of `models`). */
  model: string;
  bounds: CostBounds;
  plan: ReservationPlan;
  /** The limits sent upstream, sized to what was granted. */
  limits: GrantedLimits;
  grantedNano: number;
  /** A grant call's reservation on its app's daily ceiling, settled to the same cost as the call. */
  ceilingReservationId?: string;
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

/** Resolves once this process's settles begun so far are done: what a read waits for to see them. */
export interface SettleBarrier {
  settled(): Promise<void>;
}

/**
 * Read-your-writes for a read of this process's ledger rows: the settles under way (which
 * queue the rows), then the rows still queued in the writer.
 */
export async function ownWritesVisible(settles: SettleBarrier, writer: UsageWriter): Promise<void> {
  await settles.settled();
  if (writer.stats.pending > 0) await writer.flush();
}

/** Settles reservations to actual cost and records the ledger row. */
export class Meter implements SettleBarrier {
  /** Settles under way: a JSON answer does not wait for its own (see ChatService). */
  private readonly settling = new Set<Promise<unknown>>();

  constructor(
    private readonly budget: BudgetLedger,
    private readonly writer: UsageWriter,
    private readonly clock: Clock,
    readonly overruns: OverrunMonitor,
    private readonly watcher: BudgetWatcher,
  ) {}

  /**
   * Settles the call and records its row. `durable`: resolves only once the row is on disk
   * (written with the settle on PostgreSQL; a group commit of the usage writer otherwise),
   * for an answer that must not be lost to a crash after its client has it.
   */
  finish(ticket: MeteringTicket, outcome: RequestOutcome, durable = false): Promise<Charge> {
    const done = this.settle(ticket, outcome, durable);
    this.settling.add(done);
    const forget = () => this.settling.delete(done);
    done.then(forget, forget);
    return done;
  }

  /**
   * Read-your-writes for a caller of this process: a budget or ledger read waits for the
   * settles already begun (a Redis or PostgreSQL round trip each, or nothing at all).
   */
  async settled(): Promise<void> {
    if (this.settling.size > 0) await Promise.allSettled([...this.settling]);
  }

  private async settle(ticket: MeteringTicket, outcome: RequestOutcome, durable: boolean): Promise<Charge> {
    const charge: Charge = outcome.producedNothing
      ? { costNano: 0, source: "computed", promptTokens: 0, completionTokens: 0 }
      : chargeFor(ticket.bounds, outcome.usage, () => estimateCharge(ticket.bounds, ticket.limits, Math.max(1, outcome.completionEvents), ticket.grantedNano));
    // Settling is idempotent in the ledger and the row's primary key is the request id,
    // so a second finish for the same ticket changes nothing. An overrun freezes the
    // account there (BudgetLedger.settle), and here in the row, so a restart keeps it.
    const overrunNano = Math.max(0, charge.costNano - ticket.grantedNano);
    if (overrunNano > 0) {
      this.overruns.record(ticket.model, { requestId: ticket.requestId, reservedNano: ticket.grantedNano, costNano: charge.costNano });
    }
    const { target } = ticket;
    const row: UsageRow = {
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
      reservedNano: ticket.grantedNano,
      overrunNano,
      frozenCapNano: overrunNano > 0 ? target.capNano : null,
    };
    if (ticket.access) {
      ticket.access.model = ticket.model;
      ticket.access.costNano = charge.costNano;
    }
    // A grant call's second reservation (its app's daily ceiling) settles to the same cost,
    // without a row of its own. Durably, the grant's row counts for both: the usage writer's
    // stores add a grant row to its day's total too (src/store/*/usage-ledger.ts), and on
    // PostgreSQL without Redis this settle moves the day's totals row itself.
    const ceilingSettled = ticket.ceilingReservationId ? this.budget.settle(ticket.ceilingReservationId, charge.costNano) : null;
    if (this.budget.recordsRows) {
      await this.budget.settle(ticket.requestId, charge.costNano, row);
    } else if (durable) {
      // Side by side: a settle does not fail (a ledger retries its own), and the row's
      // commit need not wait for a Redis round trip.
      await Promise.all([this.budget.settle(ticket.requestId, charge.costNano), this.writer.enqueueDurable(row)]);
    } else {
      await this.budget.settle(ticket.requestId, charge.costNano);
      this.writer.enqueue(row);
    }
    await ceilingSettled;
    this.watcher.note(target);
    return charge;
  }
}
