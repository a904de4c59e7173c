import { nanoToUsd, usdToNanoCeil, utcDayAt } from "../../money";
import type { UsageCursor } from "../../store/usage-ledger";
import type { GenerationRecord } from "../../upstream/generation-record";
import { invalid, isoTime, requireApp, utcDay, type OperatorContext } from "./input";

/** One ledger row that does not match the upstream's books, or cannot be checked against them. */
export interface ReconcileDifference {
  requestId: string;
  generationId: string | null;
  startedAt: string;
  status: string;
  source: string;
  ledgerUsd: number;
  /** What the upstream's record says the generation cost; null without a record. */
  upstreamUsd: number | null;
  /** `cost_differs`: the record says another cost; `no_record`: the upstream keeps none for its id; `no_generation_id`: charged, but with nothing to look up. */
  problem: "cost_differs" | "no_record" | "no_generation_id";
}

export interface ReconcileSummary {
  rowsChecked: number;
  differences: number;
  ledgerUsd: number;
  upstreamUsd: number;
}

const PAGE = 1000;

/**
 * The operator's check of the ledger against the upstream's books: every row of an app in a
 * range of days with a generation id is compared with the upstream's record of that
 * generation (`GET /generation`). Rows that cost nothing and name no generation (calls that
 * never reached the upstream) have nothing to compare.
 */
export class UsageReconcileOperations {
  constructor(private readonly context: OperatorContext) {}

  async *compare(
    appId: string,
    range: { from: string; to: string },
    lookUp: (generationId: string) => Promise<GenerationRecord>,
    summary: ReconcileSummary,
  ): AsyncGenerator<ReconcileDifference> {
    const { names } = this.context;
    const from = utcDay(names.from, range.from);
    const to = utcDayAt(utcDay(names.to, range.to)).end;
    if (to <= from) throw invalid(`${names.to} must not be before ${names.from}`);
    await requireApp(this.context, appId);
    for (let after: UsageCursor | undefined; ;) {
      const rows = await this.context.store.usageLedger.listForApp(appId, from, to, PAGE, after);
      for (const row of rows) {
        if (row.generationId === null && row.costNano === 0) continue;
        summary.rowsChecked++;
        summary.ledgerUsd += nanoToUsd(row.costNano);
        const base = {
          requestId: row.requestId,
          generationId: row.generationId,
          startedAt: isoTime(row.startedAt),
          status: row.status,
          source: row.source,
          ledgerUsd: nanoToUsd(row.costNano),
        };
        if (row.generationId === null) {
          summary.differences++;
          yield { ...base, upstreamUsd: null, problem: "no_generation_id" };
          continue;
        }
        const record = await lookUp(row.generationId);
        if (!record.found) {
          summary.differences++;
          yield { ...base, upstreamUsd: null, problem: "no_record" };
          continue;
        }
        summary.upstreamUsd += record.costUsd;
        // Both sides in whole nano-dollars, the upstream's rounded up as the ledger rounds it.
        if (usdToNanoCeil(record.costUsd) !== row.costNano) {
          summary.differences++;
          yield { ...base, upstreamUsd: record.costUsd, problem: "cost_differs" };
        }
      }
      if (rows.length < PAGE) return;
      const last = rows[rows.length - 1]!;
      after = { startedAt: last.startedAt, requestId: last.requestId };
    }
  }
}
