import type { BudgetAccount } from "../../budget/accounts";
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
}
