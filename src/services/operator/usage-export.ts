import { nanoToUsd, utcDayAt } from "../../money";
import type { UsageCursor } from "../../store/usage-ledger";
import type { UsageRow } from "../../budget/usage-row";
import { invalid, isoTime, requireApp, utcDay, type OperatorContext } from "./input";
import type { UsageExportRowView } from "./views";

export type ExportFormat = "csv" | "jsonl";

export interface ExportRequest {
  /** First day, `YYYY-MM-DD` (UTC), included. */
  from: string;
  /** Last day, `YYYY-MM-DD` (UTC), included. */
  to: string;
  /** jsonl when left out. */
  format?: string;
}

export interface UsageExport {
  format: ExportFormat;
  contentType: string;
  /**
   * The lines (no line ends), a store page at a time, so a large export is never held
   * whole: the CSV header first, then one line per ledger row, oldest first.
   */
  pages: AsyncIterable<string[]>;
}

/** Ledger rows are read this many at a time. */
const EXPORT_PAGE = 1000;

export const EXPORT_COLUMNS = [
  "requestId",
  "startedAt",
  "appUserId",
  "grantId",
  "model",
  "generationId",
  "promptTokens",
  "completionTokens",
  "costUsd",
  "source",
  "status",
  "streamed",
  "reservedUsd",
  "overrunUsd",
] as const;

const CONTENT_TYPES: Record<ExportFormat, string> = { csv: "text/csv; charset=utf-8", jsonl: "application/x-ndjson" };

/** An app's metered requests between two days, as CSV or JSON lines, for accounting. */
export class UsageExportOperations {
  constructor(private readonly context: OperatorContext) {}

  /** Checks everything before the first line, so a refusal is never half an export. */
  async export(appId: string, request: ExportRequest): Promise<UsageExport> {
    const { names } = this.context;
    const from = utcDay(names.from, request.from);
    const to = utcDayAt(utcDay(names.to, request.to)).end;
    const format = request.format ?? "jsonl";
    if (format !== "csv" && format !== "jsonl") throw invalid(`${names.format} must be csv or jsonl`);
    if (to <= from) throw invalid(`${names.to} must not be before ${names.from}`);
    await requireApp(this.context, appId);
    return { format, contentType: CONTENT_TYPES[format], pages: this.lines(appId, from, to, format) };
  }

  /**
   * The first store page is read before the first line is handed out (even the CSV
   * header), so whoever takes the first page sees a failing store before answering.
   */
  private async *lines(appId: string, fromMs: number, toMs: number, format: ExportFormat): AsyncGenerator<string[]> {
    const read = (after?: UsageCursor) => this.context.store.usageLedger.listForApp(appId, fromMs, toMs, EXPORT_PAGE, after);
    let page = await read();
    if (format === "csv") yield [EXPORT_COLUMNS.join(",")];
    for (;;) {
      yield page.map((row) => {
        const r = exported(row);
        return format === "csv" ? EXPORT_COLUMNS.map((c) => csvField(r[c])).join(",") : JSON.stringify(r);
      });
      const last = page[page.length - 1];
      if (page.length < EXPORT_PAGE || !last) return;
      page = await read({ startedAt: last.startedAt, requestId: last.requestId });
    }
  }
}

function exported(r: UsageRow): UsageExportRowView {
  return {
    requestId: r.requestId,
    startedAt: isoTime(r.startedAt),
    appUserId: r.appUserId,
    grantId: r.grantId,
    model: r.model,
    generationId: r.generationId,
    promptTokens: r.promptTokens,
    completionTokens: r.completionTokens,
    costUsd: nanoToUsd(r.costNano),
    source: r.source,
    status: r.status,
    streamed: r.streamed,
    reservedUsd: r.reservedNano === null || r.reservedNano === undefined ? null : nanoToUsd(r.reservedNano),
    overrunUsd: nanoToUsd(r.overrunNano ?? 0),
  };
}

/**
 * RFC 4180 §2: a field with a comma, quote or line break is quoted, its quotes doubled.
 * Text that a spreadsheet would read as a formula (it starts with =, +, -, @, a tab or a
 * carriage return: OWASP's "CSV injection") gets a leading apostrophe, which spreadsheets
 * show as text. An app's user ids are the app's users' own strings; the JSON lines
 * export keeps every value exactly.
 */
function csvField(value: unknown): string {
  let s = value === null || value === undefined ? "" : String(value);
  if (typeof value === "string" && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}
