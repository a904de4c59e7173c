import type { Clock } from "../clock";
import type { BudgetTarget } from "../budget/target";
import type { BudgetLedger } from "../budget/ledger";
import type { OverrunMonitor } from "./overrun-monitor";
import { chargeFor, reservationCharge, type Charge, type GrantedLimits, type ReservationPlan } from "../pricing/reservation";
import type { UpstreamUsage } from "../pricing/usage";
import type { UsageWriter } from "./usage-writer";
import type { UsageRow } from "../budget/usage-row";
import type { CostBounds } from "../pricing/worst-case";
import type { InvalidUsageMonitor } from "./invalid-usage";

/**
 * Where a call's access line learns what the meter charged: the model and the cost (the
 * request's AccessFields, src/request/context.ts). Only that: a stream's ticket keeps it
 * until the stream is metered, so it must not hold the client's request.
 */
export interface ChargeLog {
  model?: string;
  costNano?: number;
}

/** A reservation held by one in-flight request, until `Meter.finish` settles it. */
export interface MeteringTicket {
  requestId: string;
  /** The request's access line, which shows the model and what was charged. */
  log?: ChargeLog;
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
  /** What that reservation holds (it may be more than the grant's own, never less), and the ceiling it was made under. */
  ceilingReservedNano?: number;
  ceilingCapNano?: number;
  streamed: boolean;
  startedAt: number;
  /** Recorded in the call journal by its reservation (BudgetLedger.journalsCalls): nothing left to record before the upstream. */
  journaled?: boolean;
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

/** What a call was charged, and its row's status (UPSTREAM_USAGE_INVALID where the upstream's numbers could not be taken). */
export interface SettledCharge extends Charge {
  status: string;
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
  if (writer.stats.pending === 0) return;
  await writer.flush();
  // A ledger that settles after the row (BudgetLedger.settlesAfterRow) began those settles as the rows were written.
  await settles.settled();
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
    /** Checks the upstream's numbers behind a charge; counts the calls charged their reservations instead. */
    readonly invalidUsage: InvalidUsageMonitor,
    /**
     * Told of every settled call (the budget watcher marks its account for a threshold
     * check): called on the request path too, so it must not do I/O.
     */
    private readonly onSettled: (target: BudgetTarget) => void,
  ) {}

  /**
   * Settles the call and records its row. `durable`: resolves only once the row is on disk
   * (written with the settle on PostgreSQL; a group commit of the usage writer otherwise),
   * for an answer that must not be lost to a crash after its client has it.
   */
  finish(ticket: MeteringTicket, outcome: RequestOutcome, durable = false): Promise<SettledCharge> {
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

  /**
   * Gives back a call's holds with no row: it was refused before anything was sent (its
   * journal entry could not be written), so there is nothing to record.
   */
  async release(ticket: MeteringTicket): Promise<void> {
    await Promise.all([this.budget.settle(ticket.requestId, 0), ticket.ceilingReservationId ? this.budget.settle(ticket.ceilingReservationId, 0) : undefined]);
  }

  /**
   * Settles a call the reconciler resolved (src/metering/reconciler.ts): its row first, on
   * disk, then its holds. In that order because a dead process's Redis hold is released by
   * reloading the account's spend from the store, which must have the row by then.
   */
  finishReconciled(call: MeteredCall, charge: Charge, status: string, generationId: string | null): Promise<SettledCharge> {
    // The journal keeps no token bounds: the record's cost and the form of its counts are checked.
    const checked = this.invalidUsage.checked(charge, status, call);
    const done = this.record(call, checked.charge, checked.status, generationId, "reconciled");
    this.settling.add(done);
    const forget = () => this.settling.delete(done);
    done.then(forget, forget);
    return done;
  }

  /**
   * The row first, then the holds, for a ledger that settles after the row: the settle starts
   * in the step its row is written (UsageWriter.onWritten), and counts among the settles under
   * way from then on (a read's barrier). A JSON answer waits for its row, not for the settle;
   * the reconciler waits for both.
   */
  private async settleAfterRow(row: UsageRow, write: "queued" | "durable" | "reconciled", settleHolds: () => Promise<void>): Promise<void> {
    let settled!: Promise<void>;
    const written = new Promise<void>((resolve) =>
      this.writer.onWritten(row, () => {
        settled = settleHolds();
        this.settling.add(settled);
        const forget = () => this.settling.delete(settled);
        settled.then(forget, forget);
        resolve();
      }),
    );
    if (write === "queued") return this.writer.enqueue(row);
    const durable = this.writer.enqueueDurable(row);
    if (write === "durable") {
      await durable;
      return;
    }
    await written;
    await settled;
  }

  private settle(ticket: MeteringTicket, outcome: RequestOutcome, durable: boolean): Promise<SettledCharge> {
    const found: Charge = outcome.producedNothing
      ? { costNano: 0, source: "computed", promptTokens: 0, completionTokens: 0 }
      : (chargeFor(ticket.bounds, outcome.usage) ?? reservationCharge(ticket.grantedNano));
    const call = meteredCallOf(ticket);
    const { charge, status } = this.invalidUsage.checked(found, outcome.status, call, found.reported && tokenBoundsOf(ticket));
    if (ticket.log) {
      ticket.log.model = ticket.model;
      ticket.log.costNano = charge.costNano;
    }
    return this.record(call, charge, status, outcome.generationId, durable ? "durable" : "queued");
  }

  private async record(
    call: MeteredCall,
    charge: Charge,
    status: string,
    generationId: string | null,
    write: "queued" | "durable" | "reconciled",
  ): Promise<SettledCharge> {
    // Settling is idempotent in the ledger and the row's primary key is the request id,
    // so a second finish for the same call changes nothing. An overrun freezes the account
    // there (BudgetLedger.settle), and here in the row, so a restart keeps it.
    const overrunNano = Math.max(0, charge.costNano - call.reservedNano);
    if (overrunNano > 0) this.overruns.record(call.model, { requestId: call.requestId, reservedNano: call.reservedNano, costNano: charge.costNano });
    const row: UsageRow = {
      requestId: call.requestId,
      account: call.target.account,
      appId: call.target.appId,
      appUserId: call.target.appUserId,
      grantId: call.target.grantId,
      period: call.target.period.id,
      model: call.model,
      generationId,
      promptTokens: charge.promptTokens,
      completionTokens: charge.completionTokens,
      costNano: charge.costNano,
      source: charge.source,
      status,
      streamed: call.streamed,
      startedAt: call.startedAt,
      finishedAt: this.clock.now(),
      reservedNano: call.reservedNano,
      overrunNano,
      frozenCapNano: overrunNano > 0 ? call.target.capNano : null,
    };
    // Only rare overruns add the field, so the common row keeps its shape.
    const dayFrozenCapNano = dayFreezeOf(call, charge.costNano);
    if (dayFrozenCapNano !== null) row.dayFrozenCapNano = dayFrozenCapNano;
    const settleHolds = async () => {
      // A grant call's second reservation (its app's daily ceiling) settles to the same cost,
      // without a row of its own. Durably, the grant's row counts for both: the usage writer's
      // stores add a grant row to its day's total too (src/store/*/usage-ledger.ts), and on
      // PostgreSQL without Redis this settle moves the day's totals row itself.
      const ceiling = call.ceilingReservationId ? this.budget.settle(call.ceilingReservationId, charge.costNano) : null;
      if (this.budget.recordsRows) await this.budget.settle(call.requestId, charge.costNano, row);
      else await this.budget.settle(call.requestId, charge.costNano);
      await ceiling;
    };
    if (this.budget.recordsRows) await settleHolds();
    else if (this.budget.settlesAfterRow) await this.settleAfterRow(row, write, settleHolds);
    else if (write === "reconciled") {
      await this.writer.enqueueDurable(row);
      await settleHolds();
    } else if (write === "durable") {
      // Side by side: a settle does not fail (a ledger retries its own), and the row's
      // commit need not wait for a Redis round trip.
      await Promise.all([settleHolds(), this.writer.enqueueDurable(row)]);
    } else {
      await settleHolds();
      this.writer.enqueue(row);
    }
    this.onSettled(call.target);
    return { ...charge, status };
  }
}

/** What a ledger row and its settle need of a call: this process's ticket, or the journal's record of it. */
export interface MeteredCall {
  requestId: string;
  /** A grant call's reservation on its app's day, settled to the same cost; null otherwise. */
  ceilingReservationId: string | null;
  /**
   * What that reservation holds and the ceiling it was made under; null for a user's call,
   * and for a journal entry from before the journal kept them (its day's freeze then stays
   * in the live counters only).
   */
  ceilingReservedNano: number | null;
  ceilingCapNano: number | null;
  /** Whose budget: the account and cap, the app, user or grant, the period (and, for thresholds, the rest). */
  target: BudgetTarget;
  model: string;
  streamed: boolean;
  startedAt: number;
  reservedNano: number;
}

/**
 * The ceiling a grant call that cost more than its daily ceiling's reservation freezes its
 * app's day at (the ceiling's settle does so in the live counters; the row carries it to the
 * day's totals), or null.
 */
function dayFreezeOf(call: MeteredCall, costNano: number): number | null {
  if (call.ceilingReservedNano === null || call.ceilingCapNano === null || costNano <= call.ceilingReservedNano) return null;
  return call.ceilingCapNano;
}

/** The most prompt and output tokens the call's request allowed (the output of every choice). */
function tokenBoundsOf(ticket: MeteringTicket): { promptTokens: number; outputTokens: number } {
  const { models, choices, predictionTokens } = ticket.bounds;
  return { promptTokens: Math.max(...models.map((m) => m.promptTokens)), outputTokens: choices * (ticket.limits.outputTokens + predictionTokens) };
}

function meteredCallOf(ticket: MeteringTicket): MeteredCall {
  return {
    requestId: ticket.requestId,
    ceilingReservationId: ticket.ceilingReservationId ?? null,
    ceilingReservedNano: ticket.ceilingReservedNano ?? null,
    ceilingCapNano: ticket.ceilingCapNano ?? null,
    target: ticket.target,
    model: ticket.model,
    streamed: ticket.streamed,
    startedAt: ticket.startedAt,
    reservedNano: ticket.grantedNano,
  };
}
