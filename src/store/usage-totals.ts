import type { BudgetAccount } from "../budget/accounts";

/** Settled spend per budget account, as durably recorded (the ledger rebuilds from this). */
export interface UsageTotalsRepository {
  spentNano(account: BudgetAccount): Promise<number>;
  /** The cap an overrun froze the account at; null when none did. */
  frozenCapNano(account: BudgetAccount): Promise<number | null>;
}
