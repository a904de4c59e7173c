/**
 * On PostgreSQL alone, a chat call's journal entry is opened by its reservation's own
 * statement (BudgetLedger.journalsCalls, src/store/postgres/budget-ledger.ts): one round trip
 * before the upstream. A granted call is journaled with what it was granted, a refused one
 * is not, a batch mixes both, and settling ends the entry with the reservation.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { PostgresBudgetLedger } from "../../src/store/postgres/budget-ledger";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import type { JournaledCall } from "../../src/budget/ledger";
import { memoryLogger } from "../../src/logger";
import { startPostgres, type TestPostgres } from "../helpers/postgres";

let pg: TestPostgres;
let sql: SQL;
let store: PostgresStore;
let ledger: PostgresBudgetLedger;
let trips = 0;

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.createDatabase();
  sql = new SQL(url, { max: 2 });
  store = await openPostgresStore(url, { poolSize: 8 });
  const run = store.database.run.bind(store.database);
  store.database.run = (work) => {
    trips++;
    return run(work);
  };
  ledger = new PostgresBudgetLedger(store.database, memoryLogger(), undefined, "instance-a");
  await ledger.start();
});
afterAll(async () => {
  await ledger?.close();
  await store?.close();
  await sql?.close({ timeout: 0 });
  await pg?.destroy();
});

let seq = 0;
const fresh = (label: string) => `${label}-${seq++}`;
const call = (over: Partial<JournaledCall> = {}): JournaledCall => ({
  ceilingReservationId: null,
  ceilingReservedNano: null,
  ceilingCapNano: null,
  appId: "app1",
  appUserId: "alice",
  grantId: null,
  payer: "user",
  period: "2026-01",
  model: "openai/gpt-4o-mini",
  streamed: true,
  startedAt: 1_767_225_600_000,
  ...over,
});
const entry = async (requestId: string) => (await sql`SELECT * FROM call_journal WHERE request_id = ${requestId}`)[0] as Record<string, unknown> | undefined;

test("the PostgreSQL ledger says it journals calls", () => {
  expect(ledger.journalsCalls).toBe(true);
});

test("a granted reservation opens the call's entry in its own statement, with what it was granted", async () => {
  const account = fresh("acct");
  const requestId = fresh("req");
  trips = 0;
  const outcome = await ledger.reserve(
    account,
    requestId,
    1000,
    100,
    700,
    undefined,
    call({ ceilingReservationId: `${requestId}/grant-day`, ceilingReservedNano: 800, ceilingCapNano: 5000, grantId: "g1" }),
  );
  expect(outcome).toEqual({ ok: true, grantedNano: 700, rateLimit: undefined });
  expect(trips).toBe(1);
  const row = await entry(requestId);
  expect(row).toMatchObject({
    request_id: requestId,
    owner: "instance-a",
    account,
    ceiling_reservation: `${requestId}/grant-day`,
    app_id: "app1",
    app_user_id: "alice",
    grant_id: "g1",
    payer: "user",
    period: "2026-01",
    model: "openai/gpt-4o-mini",
    streamed: true,
    generation_id: null,
    reconcile_reason: null,
    attempts: 0,
    next_attempt_at: null,
  });
  expect(Number(row!.reserved_nano)).toBe(700);
  expect(Number(row!.cap_nano)).toBe(1000);
  expect(Number(row!.started_at)).toBe(1_767_225_600_000);
  // The grant call's hold on its app's day, for a settle from the journal and a restart.
  expect(Number(row!.ceiling_reserved_nano)).toBe(800);
  expect(Number(row!.ceiling_cap_nano)).toBe(5000);

  // Its settle ends the entry with the reservation.
  await ledger.settle(requestId, 0);
  expect(await entry(requestId)).toBeUndefined();
});

test("a refused reservation leaves no entry; a batch of granted and refused calls journals only the granted", async () => {
  const account = fresh("acct");
  const ids = Array.from({ length: 6 }, () => fresh("req"));
  // 1,000 on the cap, 300 each at least: three fit, the other three are refused.
  const outcomes = await Promise.all(ids.map((id) => ledger.reserve(account, id, 1000, 300, 300, undefined, call())));
  const granted = ids.filter((_, i) => outcomes[i]!.ok);
  expect(granted).toHaveLength(3);
  const journaled = (await sql`SELECT request_id FROM call_journal WHERE account = ${account} ORDER BY request_id`).map(
    (r: { request_id: string }) => r.request_id,
  );
  expect(journaled).toEqual([...granted].sort());
});

test("a reservation without a call to journal opens no entry (a grant call's first, on its app's day)", async () => {
  const requestId = fresh("req");
  const outcome = await ledger.reserve(fresh("acct"), requestId, 1000, 100, 500);
  expect(outcome.ok).toBe(true);
  expect(await entry(requestId)).toBeUndefined();
});

test("a request id reserved twice fails alone and leaves the first call's entry as it was", async () => {
  const account = fresh("acct");
  const requestId = fresh("req");
  await ledger.reserve(account, requestId, 1000, 100, 400, undefined, call());
  await expect(ledger.reserve(account, requestId, 1000, 100, 200, undefined, call({ model: "other" }))).rejects.toThrow(/already holds a reservation/);
  const row = await entry(requestId);
  expect(row!.model).toBe("openai/gpt-4o-mini");
  expect(Number(row!.reserved_nano)).toBe(400);
});
