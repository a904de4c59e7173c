/** The operator commands on users' connections, grants and usage. */
import type { Page } from "../services/operator/views";
import { APP, print, text, UsageError, type Command } from "./shared";
import type { ReconcileSummary } from "../services/operator";
import { UpstreamClient } from "../upstream/client";
import { lookUpGeneration } from "../upstream/generation-record";

/** `usage reconcile`'s exit status when the ledger and the upstream's books differ (1 and 2 are taken: refused, usage). */
export const DIFFERENCES_FOUND = 3;

/** Lists are read in pages of this many, so a large app never loads at once. */
const PAGE = 1000;
const USER = { ...APP, user: { type: "string" } } as const;

/** Prints every item of a paged list, one JSON line each, following its cursors. */
async function printAll<T>(readPage: (request: { limit: number; cursor?: string }) => Promise<Page<T>>): Promise<void> {
  for (let cursor: string | undefined; ;) {
    const page = await readPage({ limit: PAGE, cursor });
    for (const item of page.data) print(item);
    if (page.nextCursor === null) return;
    cursor = page.nextCursor;
  }
}

export const DATA_COMMANDS: Command[] = [
  {
    name: "connections list",
    usage: "--app APP_ID",
    summary: "one JSON line per user connection of the app (active and revoked)",
    options: APP,
    async run(operator, values) {
      const appId = text(values, "app")!;
      await printAll((request) => operator.connections.list(appId, request));
    },
  },
  {
    name: "connections show",
    usage: "--app APP_ID --user APP_USER_ID",
    summary: "one user's connection, with this month's recorded usage",
    options: USER,
    async run(operator, values) {
      print(await operator.connections.show(text(values, "app")!, text(values, "user")!));
    },
  },
  {
    name: "connections revoke",
    usage: "--app APP_ID --user APP_USER_ID",
    summary: "revoke a user's connection: their calls are refused at once (402 not_connected)",
    options: USER,
    async run(operator, values) {
      print(await operator.connections.revoke(text(values, "app")!, text(values, "user")!));
    },
  },
  {
    name: "grants list",
    usage: "--app APP_ID",
    summary: "one JSON line per one-time grant of the app (ids, caps, uses; never tokens)",
    options: APP,
    async run(operator, values) {
      const appId = text(values, "app")!;
      await printAll((request) => operator.grants.list(appId, request));
    },
  },
  {
    name: "grants revoke",
    usage: "--app APP_ID --grant GRANT_ID",
    summary: "revoke a grant: calls with its token are refused at once",
    options: { ...APP, grant: { type: "string" } },
    async run(operator, values) {
      print(await operator.grants.revoke(text(values, "app")!, text(values, "grant")!));
    },
  },
  {
    name: "usage export",
    usage: "--app APP_ID --from YYYY-MM-DD --to YYYY-MM-DD [--format csv|jsonl]",
    summary: "the app's ledger rows that started from --from to --to (both days included, UTC), oldest first, as JSON lines (the default) or CSV",
    defaults: { "--format": "jsonl: JSON lines, one object per row, every value exact (csv: a header line, then a line per row)" },
    options: { ...APP, from: { type: "string" }, to: { type: "string" }, format: { type: "string" } },
    async run(operator, values) {
      const exported = await operator.usage.export(text(values, "app")!, {
        from: text(values, "from")!,
        to: text(values, "to")!,
        format: text(values, "format", false),
      });
      for await (const lines of exported.pages) for (const line of lines) console.log(line);
    },
  },
  {
    name: "usage reconcile",
    usage: "--app APP_ID --from YYYY-MM-DD --to YYYY-MM-DD",
    summary:
      "compare the app's ledger rows from --from to --to with the upstream's records of their generations: one JSON line per difference, " +
      `then a summary line; exit ${DIFFERENCES_FOUND} when any differs (needs UPSTREAM_API_KEY)`,
    options: { ...APP, from: { type: "string" }, to: { type: "string" } },
    async run(operator, values, _store, config) {
      if (!config.upstreamApiKey) throw new UsageError("usage reconcile asks the upstream for its records: set UPSTREAM_API_KEY (and UPSTREAM_BASE_URL)");
      const upstream = new UpstreamClient((url, init) => fetch(url, init), config.upstreamBaseUrl, config.upstreamApiKey, config.upstreamTimeoutMs);
      const summary: ReconcileSummary = { rowsChecked: 0, differences: 0, ledgerUsd: 0, upstreamUsd: 0 };
      const range = { from: text(values, "from")!, to: text(values, "to")! };
      for await (const difference of operator.reconcile.compare(text(values, "app")!, range, (id) => lookUpGeneration(upstream, id), summary))
        print(difference);
      print({ summary });
      return summary.differences > 0 ? DIFFERENCES_FOUND : 0;
    },
  },
];
