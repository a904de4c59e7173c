import { periodAt } from "../money";
import type { BudgetTarget } from "../budget/target";
import { grantDayAccount } from "../budget/accounts";
import type { JournalEntry } from "../store/call-journal";
import type { MeteredCall } from "./meter";

/** A grant call's second hold is on its app's day, of the day it started (src/services/chat-reservation.ts). */
export const dayAccountOf = (e: JournalEntry): string => grantDayAccount(e.appId, e.startedAt);

/** The call as the meter settles it, from what the journal kept of it (src/metering/reconciler.ts). */
export function meteredCallOf(entry: JournalEntry): MeteredCall {
  const period = periodAt(entry.startedAt);
  const target: BudgetTarget = {
    account: entry.account,
    capNano: entry.capNano,
    appId: entry.appId,
    appUserId: entry.appUserId,
    grantId: entry.grantId,
    period: { ...period, id: entry.period },
    resetsAt: period.end,
    // Only a chat call's refusal acts on the payer; settling from the journal marks no one.
    payer: entry.payer,
    markFundingInvalid: async () => {},
  };
  return {
    requestId: entry.requestId,
    ceilingReservationId: entry.ceilingReservationId,
    ceilingReservedNano: entry.ceilingReservedNano,
    ceilingCapNano: entry.ceilingCapNano,
    target,
    model: entry.model,
    streamed: entry.streamed,
    startedAt: entry.startedAt,
    reservedNano: entry.reservedNano,
  };
}
