import type { BudgetAccount } from "../budget/accounts";
import type { AccountTruth } from "../budget/truth";

/** Settled spend per budget account, as durably recorded (the ledger rebuilds from this). */
export interface UsageTotalsRepository {
  spentNano(account: BudgetAccount): Promise<number>;
  /** The cap an overrun froze the account at; null when none did. */
  frozenCapNano(account: BudgetAccount): Promise<number | null>;
  /**
   * The account's settled spend and freeze and the holds the call journal lists on it (its
   * calls, or for a grant-day account its grant calls' holds on that day), from one snapshot
   * of the store: what counters that may have lost data are rebuilt from (src/budget/truth.ts).
   */
  truth(account: BudgetAccount): Promise<AccountTruth>;
}
