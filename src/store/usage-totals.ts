import type { Database } from "bun:sqlite";
import type { BudgetAccount } from "../metering/accounts";

/** Settled spend per budget account, as durably recorded (the ledger rebuilds from this). */
export class UsageTotalsRepository {
  private readonly spentStmt;

  constructor(db: Database) {
    this.spentStmt = db.query<{ spent_nano: number }, [string]>("SELECT spent_nano FROM usage_totals WHERE account = ?");
  }

  spentNano(account: BudgetAccount): number {
    return this.spentStmt.get(account)?.spent_nano ?? 0;
  }
}
