import type { Clock } from "../clock";
import type { CallJournalRepository, JournalEntry } from "../store/call-journal";
import type { MeteringTicket } from "./meter";

/** Resolves in a later turn of the event loop, after the I/O waiting now. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * This process's side of the call journal (src/store/call-journal.ts): a call is recorded
 * before it goes upstream, learns its generation id before its first byte is relayed, and
 * is handed to the reconciler when its usage was not seen. Its row (Meter.finish) ends it.
 *
 * The entries of one event-loop turn are written together, in the next turn (a group
 * commit, as the usage writer does for JSON answers): a call waits for one transaction,
 * shared with the other calls of its turn, before it goes upstream.
 */
export class InFlightCalls {
  /** A turn's new calls and generation ids, one transaction (one commit on SQLite). */
  private readonly changes = new TurnBatch<Change>((batch) =>
    this.journal.record({
      open: batch.flatMap((c) => (c.kind === "open" ? [c.entry] : [])),
      identify: batch.flatMap((c) => (c.kind === "identify" ? [c.id] : [])),
    }),
  );

  constructor(
    private readonly journal: CallJournalRepository,
    /** This process's instance id: the owner its entries name. */
    readonly owner: string,
    private readonly clock: Clock,
  ) {}

  /** Records the call; resolves once the record is committed (a failure rejects: the call must not go upstream unrecorded). */
  begin(ticket: MeteringTicket): Promise<void> {
    const { target } = ticket;
    const entry: JournalEntry = {
      requestId: ticket.requestId,
      owner: this.owner,
      account: target.account,
      ceilingReservationId: ticket.ceilingReservationId ?? null,
      ceilingReservedNano: ticket.ceilingReservedNano ?? null,
      ceilingCapNano: ticket.ceilingCapNano ?? null,
      appId: target.appId,
      appUserId: target.appUserId,
      grantId: target.grantId,
      payer: target.payer,
      period: target.period.id,
      model: ticket.model,
      streamed: ticket.streamed,
      startedAt: ticket.startedAt,
      reservedNano: ticket.grantedNano,
      capNano: target.capNano,
      generationId: null,
      reconcileReason: null,
      attempts: 0,
    };
    return this.changes.add({ kind: "open", entry });
  }

  /** The call's generation id, committed before the caller relays a byte of the answer (a group commit, as `begin`'s). */
  identify(requestId: string, generationId: string): Promise<void> {
    return this.changes.add({ kind: "identify", id: { requestId, generationId } });
  }

  /**
   * The call's usage was not seen (`reason`: the row's status): its reservation stays held
   * and the reconciler settles it from the upstream's record of `generationId`, or at the
   * reservation when there is none.
   */
  handOver(requestId: string, reason: string, generationId: string | null): Promise<void> {
    return this.journal.toReconcile(requestId, reason, generationId, this.clock.now());
  }
}

type Change = { kind: "open"; entry: JournalEntry } | { kind: "identify"; id: { requestId: string; generationId: string } };

/** Items added in one event-loop turn, written together in the next; each `add` resolves (or rejects) with that write. */
class TurnBatch<T> {
  private items: T[] = [];
  private written: Promise<void> | null = null;

  constructor(private readonly write: (items: T[]) => Promise<void>) {}

  add(item: T): Promise<void> {
    this.items.push(item);
    this.written ??= this.writeNextTurn();
    return this.written;
  }

  private async writeNextTurn(): Promise<void> {
    await nextTurn();
    const batch = this.items;
    this.items = [];
    this.written = null;
    await this.write(batch);
  }
}
