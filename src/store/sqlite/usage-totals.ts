import type { Database } from "bun:sqlite";
import type { BudgetAccount } from "../../budget/accounts";
import type { UsageTotalsRepository } from "../usage-totals";

export class SqliteUsageTotalsRepository implements UsageTotalsRepository {
  private readonly spentStmt;
  private readonly frozenStmt;

  constructor(db: Database) {
    this.spentStmt = db.query<{ spent_nano: number }, [string]>("SELECT spent_nano FROM usage_totals WHERE account = ?");
    this.frozenStmt = db.query<{ frozen_cap_nano: number | null }, [string]>("SELECT frozen_cap_nano FROM usage_totals WHERE account = ?");
  }

  async spentNano(account: BudgetAccount): Promise<number> {
    return this.spentStmt.get(account)?.spent_nano ?? 0;
  }

  async frozenCapNano(account: BudgetAccount): Promise<number | null> {
    return this.frozenStmt.get(account)?.frozen_cap_nano ?? null;
  }
}
