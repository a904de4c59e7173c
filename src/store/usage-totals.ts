import type { Database } from "bun:sqlite";
import type { BudgetAccount } from "../metering/accounts";

/** Settled spend per budget account, as durably recorded (the ledger rebuilds from this). */
export class UsageTotalsRepository {
  private readonly spentStmt;
  private readonly frozenStmt;

  constructor(db: Database) {
    this.spentStmt = db.query<{ spent_nano: number }, [string]>("SELECT spent_nano FROM usage_totals WHERE account = ?");
    this.frozenStmt = db.query<{ frozen_cap_nano: number | null }, [string]>("SELECT frozen_cap_nano FROM usage_totals WHERE account = ?");
  }

  spentNano(account: BudgetAccount): number {
    return this.spentStmt.get(account)?.spent_nano ?? 0;
  }

  /** The cap an overrun froze the account at; null when none did. */
  frozenCapNano(account: BudgetAccount): number | null {
    return this.frozenStmt.get(account)?.frozen_cap_nano ?? null;
  }
}
