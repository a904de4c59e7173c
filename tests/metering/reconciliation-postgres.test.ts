/**
 * Two instances on one PostgreSQL database reconcile, side by side, the calls a third left
 * when it stopped (its lease dropped, its streams handed over and unsettled): every call is
 * taken by one of them at a time (claimDue's FOR UPDATE SKIP LOCKED, then its owner's live
 * lease), looked up once per round, and settled once, at its reservation once
 * RECONCILE_GIVE_UP_SECONDS have passed since its hand-over. Apps through app.handle, on their
 * own pools and ledgers (PostgreSQL alone, no Redis), one mock upstream behind all three (its
 * records withheld), one clock.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { createApp } from "../../src/app";
import { connectDependencies, openDeps, type Deps } from "../../src/deps";
import { loadConfig } from "../../src/config";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { usdToNanoFloor } from "../../src/money";
import { createMockUpstream } from "../../packages/mock-upstream/src";
import { openPostgresStore } from "../../src/store/postgres";
import { postgresEngine } from "../../src/store/postgres/engine";
import type { FetchUpstream } from "../../src/upstream/client";
import { createAppWithKey } from "../../src/services/operator/secret-keys";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { leaveAfterFirstChunk } from "../helpers/leave-stream";

const CALLS = 40;
const GIVE_UP_SECONDS = 60;

let pg: TestPostgres;
let url: string;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  pg = await startPostgres();
  url = await pg.createDatabase();
});
afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  await pg?.destroy();
});

const clock = new ManualClock(Date.UTC(2026, 0, 15, 12));
// Records that never appear: the mock's own clock does not move.
const mock = createMockUpstream({ generationRecordDelayMs: 365 * 86_400_000, now: () => Date.UTC(2026, 0, 15, 12) });
const lookups: string[] = [];
const fetchUpstream: FetchUpstream = (u, init) => {
  const target = new URL(u);
  if (target.pathname.endsWith("/generation")) lookups.push(target.searchParams.get("id")!);
  return mock.fetch(new Request(u, init));
};

interface Instance {
  deps: Deps;
  app: ReturnType<typeof createApp>;
  /** A clean stop: its writer drained, its lease dropped (its journal entries are the others' at once), its pool closed. */
  close(): Promise<void>;
}

async function instance(): Promise<Instance> {
  const store = await openPostgresStore(url, { poolSize: 4 });
  const config = loadConfig({
    UPSTREAM_API_KEY: "sk-or-test-upstream-key",
    UPSTREAM_BASE_URL: "http://upstream.test/api/v1",
    DATABASE_URL: url,
    DISCONNECT_DRAIN_MS: "30",
    RL_CHAT_LIMIT: "1000",
    RECONCILE_GIVE_UP_SECONDS: String(GIVE_UP_SECONDS),
    RECONCILE_CONCURRENCY: "4",
  });
  const deps = await openDeps(config, { engine: postgresEngine(store), clock, logger: memoryLogger(), fetchUpstream });
  await connectDependencies(deps);
  await deps.catalogue.refresh();
  const app = createApp(deps);
  let closed: Promise<void> | null = null;
  const close = () =>
    (closed ??= (async () => {
      await app.decorator.reconciler.stop();
      await deps.usageWriter.close();
      await deps.budgetBackend.close();
      await store.close();
    })());
  closers.push(close);
  return { deps, app, close };
}

test("two instances reconciling one database's calls side by side settle each once, at its give-up time", async () => {
  const left = await instance();
  const { app: created, key } = await createAppWithKey(left.deps.store.apps, "reconciled-on-postgres", ["http://localhost:3000"], clock.now());
  await left.deps.store.connections.approve(created.id, "alice", usdToNanoFloor(5), clock.now());
  const account = `u/${created.id}/2026-01/alice`;
  const calls = await Promise.all(
    Array.from({ length: CALLS }, () =>
      left.app.handle(
        new Request("http://localhost/api/v1/chat/completions", {
          method: "POST",
          headers: { authorization: `Bearer ${key.secretKey}`, "content-type": "application/json", "x-service-user": "alice" },
          body: JSON.stringify({
            model: "openai/gpt-4o-mini",
            messages: [{ role: "user", content: "Hi. [[mock tokens=30 pause_ms=20 no_cancel]]" }],
            max_tokens: 60,
            stream: true,
          }),
        }),
      ),
    ),
  );
  for (const res of calls) {
    expect(res.status).toBe(200);
    await leaveAfterFirstChunk(res);
  }
  await left.app.decorator.chat.idle(10_000);
  expect(await left.deps.store.callJournal.counts()).toEqual({ running: 0, reconciling: CALLS });
  const held = (await left.deps.budget.snapshot(account)).reservedNano;
  expect(held).toBeGreaterThan(0);
  // Stopped before its reconciler ran: its calls, still held, are the others' now.
  await left.close();

  const [a, b] = await Promise.all([instance(), instance()]);
  const rounds = () => Promise.all([a.app.decorator.reconciler.runRound(), b.app.decorator.reconciler.runRound()]);
  await rounds();
  expect(lookups).toHaveLength(CALLS);
  expect(new Set(lookups).size).toBe(CALLS);
  expect(await a.deps.store.callJournal.counts()).toEqual({ running: 0, reconciling: CALLS });

  clock.advance(GIVE_UP_SECONDS * 1000);
  await rounds();
  // Each generation looked up twice in all (once a round), by whichever instance held it.
  const perGeneration = new Map<string, number>();
  for (const id of lookups) perGeneration.set(id, (perGeneration.get(id) ?? 0) + 1);
  expect(new Set(perGeneration.values())).toEqual(new Set([2]));
  const [sa, sb] = [a.app.decorator.reconciler.stats, b.app.decorator.reconciler.stats];
  expect(sa.atReservation + sb.atReservation).toBe(CALLS);
  expect(sa.fromRecords + sb.fromRecords).toBe(0);
  expect(sa.heldNano + sb.heldNano).toBe(held);

  const sql = new SQL(url, { max: 1 });
  try {
    const rows: Array<{ cost_nano: string; reserved_nano: string; source: string; status: string }> =
      await sql`SELECT cost_nano, reserved_nano, source, status FROM usage_ledger`;
    expect(rows).toHaveLength(CALLS);
    for (const row of rows) {
      expect(row).toMatchObject({ source: "reservation", status: "client_disconnected" });
      expect(Number(row.cost_nano)).toBe(Number(row.reserved_nano));
    }
    expect(await sql`SELECT request_id FROM budget_reservations`).toHaveLength(0);
    expect(await sql`SELECT request_id FROM call_journal`).toHaveLength(0);
  } finally {
    await sql.close({ timeout: 0 });
  }
  expect(await a.deps.budget.snapshot(account)).toEqual({ spentNano: held, reservedNano: 0 });
  expect(await a.deps.store.usageTotals.spentNano(account)).toBe(held);
});
