import type { BudgetAccount } from "./accounts";

/**
 * A reservation the call journal still lists against an account: a call that may have
 * reached the upstream and has no ledger row yet (src/store/call-journal.ts). For a grant
 * call's hold on its app's day, the id is that reservation's (`<request id>/grant-day`).
 */
export interface JournaledHold {
  requestId: string;
  amountNano: number;
  /** The cap it was reserved under (an overrun freezes the account there). */
  capNano: number;
  /** The process running or reconciling the call (its instance id). */
  owner: string;
}

/**
 * What an account's live counters must never fall below (ARCHITECTURE.md §3 "The hard cap"):
 * the ledger's settled spend and freeze, plus the holds of the calls the journal still lists.
 * Read in one snapshot of the store, so that a call is counted exactly once: as a row when
 * its row was written before the read, or else as a hold (a row and the end of its journal
 * entry are one transaction).
 */
export interface AccountTruth {
  spentNano: number;
  frozenCapNano: number | null;
  holds: JournaledHold[];
}

export type TruthLoader = (account: BudgetAccount) => Promise<AccountTruth>;
