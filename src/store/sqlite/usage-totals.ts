import type { Database } from "bun:sqlite";
import { grantDayOf, type BudgetAccount } from "../../budget/accounts";
import type { AccountTruth, JournaledHold } from "../../budget/truth";
import type { UsageTotalsRepository } from "../usage-totals";

type HoldRow = { request_id: string; amount_nano: number; cap_nano: number; owner: string };

export class SqliteUsageTotalsRepository implements UsageTotalsRepository {
  private readonly spentStmt;
  private readonly frozenStmt;
  private readonly totalsStmt;
  private readonly holdsStmt;
  private readonly dayHoldsStmt;
  private readonly readTruth;

  constructor(db: Database) {
    this.spentStmt = db.query<{ spent_nano: number }, [string]>("SELECT spent_nano FROM usage_totals WHERE account = ?");
    this.frozenStmt = db.query<{ frozen_cap_nano: number | null }, [string]>("SELECT frozen_cap_nano FROM usage_totals WHERE account = ?");
    this.totalsStmt = db.query<{ spent_nano: number; frozen_cap_nano: number | null }, [string]>(
      "SELECT spent_nano, frozen_cap_nano FROM usage_totals WHERE account = ?",
    );
    this.holdsStmt = db.query<HoldRow, [string]>("SELECT request_id, reserved_nano AS amount_nano, cap_nano, owner FROM call_journal WHERE account = ?");
    // A grant call's day hold is journaled beside its grant's (src/services/chat-reservation.ts):
    // its amount and cap, or (entries from before the journal kept them) the grant's own.
    this.dayHoldsStmt = db.query<HoldRow, [string, number, number]>(
      `SELECT ceiling_reservation AS request_id, COALESCE(ceiling_reserved_nano, reserved_nano) AS amount_nano,
         COALESCE(ceiling_cap_nano, cap_nano) AS cap_nano, owner
       FROM call_journal WHERE ceiling_reservation IS NOT NULL AND app_id = ? AND started_at >= ? AND started_at < ?`,
    );
    // One read transaction: servers beside one Redis may share the file, and a row and the
    // end of its journal entry must be seen together or not at all.
    this.readTruth = db.transaction((account: BudgetAccount): AccountTruth => {
      const totals = this.totalsStmt.get(account);
      const day = grantDayOf(account);
      const rows = day ? this.dayHoldsStmt.all(day.appId, day.start, day.end) : this.holdsStmt.all(account);
      const holds: JournaledHold[] = rows.map((r) => ({ requestId: r.request_id, amountNano: r.amount_nano, capNano: r.cap_nano, owner: r.owner }));
      return { spentNano: totals?.spent_nano ?? 0, frozenCapNano: totals?.frozen_cap_nano ?? null, holds };
    });
  }

  async spentNano(account: BudgetAccount): Promise<number> {
    return this.spentStmt.get(account)?.spent_nano ?? 0;
  }

  async frozenCapNano(account: BudgetAccount): Promise<number | null> {
    return this.frozenStmt.get(account)?.frozen_cap_nano ?? null;
  }

  async truth(account: BudgetAccount): Promise<AccountTruth> {
    return this.readTruth.deferred(account);
  }
}
