import { grantDayOf, type BudgetAccount } from "../../budget/accounts";
import type { AccountTruth, JournaledHold } from "../../budget/truth";
import type { UsageTotalsRepository } from "../usage-totals";
import { num, numOrNull, type PostgresDatabase } from "./database";

export class PostgresUsageTotalsRepository implements UsageTotalsRepository {
  constructor(private readonly db: PostgresDatabase) {}

  async spentNano(account: BudgetAccount): Promise<number> {
    const [row] = await this.db.run((sql) => sql`SELECT spent_nano FROM usage_totals WHERE account = ${account}`);
    return row ? num(row.spent_nano) : 0;
  }

  async frozenCapNano(account: BudgetAccount): Promise<number | null> {
    const [row] = await this.db.run((sql) => sql`SELECT frozen_cap_nano FROM usage_totals WHERE account = ${account}`);
    return row ? numOrNull(row.frozen_cap_nano) : null;
  }

  /**
   * One statement, so one snapshot: a row and the end of its journal entry are one
   * transaction, and are seen together or not at all. A grant call's day hold is journaled
   * beside its grant's, with its own amount and cap (or, before migration 20, the grant's).
   */
  async truth(account: BudgetAccount): Promise<AccountTruth> {
    const day = grantDayOf(account);
    const [row] = await this.db.run((sql) =>
      day
        ? sql`SELECT t.spent_nano, t.frozen_cap_nano, (
              SELECT COALESCE(json_agg(json_build_object('r', ceiling_reservation, 'a', COALESCE(ceiling_reserved_nano, reserved_nano),
                'c', COALESCE(ceiling_cap_nano, cap_nano), 'o', owner)), '[]'::json)::text
              FROM call_journal WHERE ceiling_reservation IS NOT NULL AND app_id = ${day.appId}
                AND started_at >= ${day.start} AND started_at < ${day.end}) AS holds
            FROM (SELECT 1) AS one LEFT JOIN usage_totals t ON t.account = ${account}`
        : sql`SELECT t.spent_nano, t.frozen_cap_nano, (
              SELECT COALESCE(json_agg(json_build_object('r', request_id, 'a', reserved_nano, 'c', cap_nano, 'o', owner)), '[]'::json)::text
              FROM call_journal WHERE account = ${account}) AS holds
            FROM (SELECT 1) AS one LEFT JOIN usage_totals t ON t.account = ${account}`,
    );
    const parsed = JSON.parse(String(row!.holds)) as Array<{ r: string; a: number; c: number; o: string }>;
    const holds: JournaledHold[] = parsed.map((h) => ({ requestId: h.r, amountNano: Number(h.a), capNano: Number(h.c), owner: h.o }));
    return { spentNano: row!.spent_nano === null ? 0 : num(row!.spent_nano), frozenCapNano: numOrNull(row!.frozen_cap_nano), holds };
  }
}
