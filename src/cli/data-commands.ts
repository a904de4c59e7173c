import { userAccount } from "../metering/accounts";
import { nanoToUsd, periodAt } from "../money";
import type { UsageRow } from "../store/usage-ledger";
import { APP, iso, print, refuse, text, UsageError, type Command, type Values } from "./shared";

/** Rows and connections are read in pages of this many, so a large app never loads at once. */
const PAGE = 1000;
const USER = { ...APP, user: { type: "string" } } as const;

/** `YYYY-MM-DD` as the UTC midnight that starts it, in ms. */
function day(values: Values, name: string): number {
  const raw = text(values, name)!;
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(raw) ? Date.parse(`${raw}T00:00:00Z`) : Number.NaN;
  if (Number.isNaN(ms)) throw new UsageError(`--${name} must be a date like 2026-11-01`);
  return ms;
}

const EXPORT_COLUMNS = ["requestId", "startedAt", "appUserId", "grantId", "model", "generationId", "promptTokens", "completionTokens", "costUsd", "source", "status", "streamed", "reservedUsd", "overrunUsd"] as const;

function exported(r: UsageRow): Record<(typeof EXPORT_COLUMNS)[number], string | number | boolean | null> {
  return {
    requestId: r.requestId, startedAt: iso(r.startedAt), appUserId: r.appUserId, grantId: r.grantId, model: r.model,
    generationId: r.generationId, promptTokens: r.promptTokens, completionTokens: r.completionTokens, costUsd: nanoToUsd(r.costNano),
    source: r.source, status: r.status, streamed: r.streamed,
    reservedUsd: r.reservedNano === null || r.reservedNano === undefined ? null : nanoToUsd(r.reservedNano), overrunUsd: nanoToUsd(r.overrunNano ?? 0),
  };
}

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
const csvField = (v: unknown) => {
  const s = v === null || v === undefined ? "" : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
};

export const DATA_COMMANDS: Command[] = [
  {
    name: "connections list",
    usage: "--app APP_ID",
    summary: "one JSON line per user connection of the app (active and revoked)",
    options: APP,
    async run(store, values) {
      const appId = text(values, "app")!;
      for (let after = ""; ; ) {
        const page = await store.connections.listForApp(appId, PAGE, after);
        for (const c of page) {
          print({ appUserId: c.appUserId, monthlyUsd: nanoToUsd(c.monthlyCapNano), fundingStatus: c.fundingStatus, connectedAt: iso(c.connectedAt), revokedAt: iso(c.revokedAt) });
        }
        if (page.length < PAGE) return 0;
        after = page[page.length - 1]!.appUserId;
      }
    },
  },
  {
    name: "connections show",
    usage: "--app APP_ID --user APP_USER_ID",
    summary: "one user's connection, with this month's recorded usage",
    options: USER,
    async run(store, values, now) {
      const appId = text(values, "app")!;
      const appUserId = text(values, "user")!;
      const c = await store.connections.find(appId, appUserId);
      if (!c) return refuse(`no connection for user ${appUserId} of app ${appId}`);
      const period = periodAt(now);
      const spent = await store.usageTotals.spentNano(userAccount(appId, period.id, appUserId));
      print({
        appUserId, monthlyUsd: nanoToUsd(c.monthlyCapNano), usedUsd: nanoToUsd(spent), period: period.id,
        fundingStatus: c.fundingStatus, connectedAt: iso(c.connectedAt), updatedAt: iso(c.updatedAt), revokedAt: iso(c.revokedAt),
      });
      return 0;
    },
  },
  {
    name: "connections revoke",
    usage: "--app APP_ID --user APP_USER_ID",
    summary: "revoke a user's connection: their calls are refused at once (402 not_connected)",
    options: USER,
    async run(store, values, now) {
      const appId = text(values, "app")!;
      const appUserId = text(values, "user")!;
      if (!(await store.connections.findActive(appId, appUserId))) return refuse(`no active connection for user ${appUserId} of app ${appId}`);
      await store.connections.revoke(appId, appUserId, now);
      print({ appId, appUserId, revoked: true });
      return 0;
    },
  },
  {
    name: "grants list",
    usage: "--app APP_ID",
    summary: "one JSON line per one-time grant of the app (ids, caps, uses; never tokens)",
    options: APP,
    async run(store, values) {
      const appId = text(values, "app")!;
      for (let after: { createdAt: number; id: string } | undefined; ; ) {
        const page = await store.grants.listForApp(appId, PAGE, after);
        for (const g of page) {
          print({ grantId: g.id, usd: nanoToUsd(g.usdCapNano), uses: g.uses, maxUses: g.maxUses, origin: g.origin, createdAt: iso(g.createdAt), expiresAt: iso(g.expiresAt), revokedAt: iso(g.revokedAt) });
        }
        if (page.length < PAGE) return 0;
        const last = page[page.length - 1]!;
        after = { createdAt: last.createdAt, id: last.id };
      }
    },
  },
  {
    name: "grants revoke",
    usage: "--app APP_ID --grant GRANT_ID",
    summary: "revoke a grant: calls with its token are refused at once",
    options: { ...APP, grant: { type: "string" } },
    async run(store, values, now) {
      const appId = text(values, "app")!;
      const grantId = text(values, "grant")!;
      const grant = await store.grants.find(grantId);
      if (!grant || grant.appId !== appId) return refuse(`no grant ${grantId} of app ${appId}`);
      await store.grants.revoke(grantId, now);
      print({ appId, grantId, revoked: true });
      return 0;
    },
  },
  {
    name: "usage export",
    usage: "--app APP_ID --from YYYY-MM-DD --to YYYY-MM-DD [--format csv|jsonl]",
    summary: "the app's ledger rows that started from --from to --to (both days included, UTC), oldest first",
    options: { ...APP, from: { type: "string" }, to: { type: "string" }, format: { type: "string" } },
    async run(store, values) {
      const appId = text(values, "app")!;
      const from = day(values, "from");
      const to = day(values, "to") + 24 * 60 * 60 * 1000;
      const format = text(values, "format", false) ?? "jsonl";
      if (format !== "csv" && format !== "jsonl") throw new UsageError("--format must be csv or jsonl");
      if (format === "csv") console.log(EXPORT_COLUMNS.join(","));
      for (let after: UsageRow | undefined; ; ) {
        const page = await store.usageLedger.listForApp(appId, from, to, PAGE, after && { startedAt: after.startedAt, requestId: after.requestId });
        for (const row of page) {
          const r = exported(row);
          console.log(format === "csv" ? EXPORT_COLUMNS.map((c) => csvField(r[c])).join(",") : JSON.stringify(r));
        }
        if (page.length < PAGE) return 0;
        after = page[page.length - 1];
      }
    },
  },
];
