/**
 * SIGKILL in the middle of steady load (JSON and streamed calls, several users), against a
 * real proxy process in front of the mock upstream served over HTTP. Nothing gets to run on
 * a SIGKILL: what survives is what the usage writer had committed to SQLite. The tests
 * check that this is a sound file, that it holds nothing twice and nothing the upstream did
 * not serve, that what is missing is only the writer's last unflushed batch, and that a new
 * process on the same file (and, in Redis mode, the same Redis) rebuilds budgets that admit
 * and refuse exactly as the stored ledger says.
 *
 * What a SIGKILL can lose, read off src/metering/usage-writer.ts: rows wait in memory and
 * are written in one transaction per batch, on a timer started by the first row after a
 * flush (USAGE_FLUSH_MS) or at 1000 rows. So the lost rows are exactly the ones queued
 * after the last committed batch, and every one of them was metered later than every row
 * in the file. A JSON answer leaves the proxy only after its row is committed, so no JSON
 * call its client finished is lost (tests/reliability/sigkill-answered-json.test.ts shows
 * it on its own); a stream whose row is lost was finished by its client no earlier than the
 * newest row in the file. Those are the bounds asserted; how many rows that was is printed.
 *
 * No timing thresholds: the kill lands once the clients have seen enough calls complete,
 * and the slow streams it must interrupt are checked (in the mock's log) to be open.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { Database } from "bun:sqlite";
import { SseReader, eventually, nano, startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { startRedis, type TestRedis } from "../helpers/redis";
import { userAccount } from "../../src/budget/accounts";
import { periodAt } from "../../src/money";
import { duplicates, readLedgerFile, sumRowsPerAccount, type LedgerFile } from "./ledger-file";

setDefaultTimeout(60_000);

const MODEL = "openai/gpt-4o-mini";
const FLUSH_MS = 200;
const USERS = ["ana", "bo", "cy", "di"];
const CAP_USD = 5;
const WORKERS = 8;
/** Calls the clients must have seen complete before the kill: steady load, not a warm-up. */
const COMPLETED_BEFORE_KILL = 150;
/** Streams of ~20 s, opened first: they hold reservations when the kill lands. */
const SLOW_STREAMS = 4;

interface Call {
  user: string;
  streamed: boolean;
  requestId: string | null;
  /** Client clock when the whole answer was read (JSON parsed, or `[DONE]` seen). */
  finishedAt: number | null;
}

const body = (text: string, stream: boolean, extra: Record<string, unknown> = {}) => ({
  model: MODEL,
  messages: [{ role: "user", content: text }],
  stream,
  ...extra,
});

/** One call, recorded; an error after the kill leaves it unfinished, one before fails the test. */
async function runCall(stack: ProxyStack, call: Call, directive: string, killed: () => boolean): Promise<void> {
  try {
    const res = await stack.chat(call.user, body(`Load call. ${directive}`, call.streamed));
    call.requestId = res.headers.get("x-request-id");
    if (res.status !== 200) throw new Error(`chat answered ${res.status}: ${await res.text()}`);
    if (call.streamed) {
      const text = await new SseReader(res).rest();
      if (!text.includes("data: [DONE]")) return;
    } else {
      await res.json();
    }
    call.finishedAt = Date.now();
  } catch (err) {
    if (!killed()) throw err;
  }
}

/** Runs WORKERS loops of alternating JSON and streamed calls until `stop()` is true. */
function driveLoad(stack: ProxyStack, calls: Call[], stop: () => boolean): Promise<void> {
  const worker = async (w: number) => {
    for (let n = 0; !stop(); n++) {
      const call: Call = { user: USERS[(w + n) % USERS.length]!, streamed: (w + n) % 2 === 0, requestId: null, finishedAt: null };
      calls.push(call);
      // Pauses differ per worker so that the workers do not fall into step: steady, not bursty, traffic.
      await runCall(stack, call, call.streamed ? `[[mock tokens=6 pause_ms=${5 + 4 * w}]]` : "[[mock tokens=8]]", stop);
    }
  };
  return Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w))).then(() => {});
}

const accountOf = (stack: ProxyStack, user: string) => userAccount(stack.appId, periodAt(Date.now()).id, user);

for (const mode of ["embedded", "redis"] as const) {
  describe(`SIGKILL under load (${mode} budgets)`, () => {
    let redis: TestRedis | undefined;
    let stack: ProxyStack;
    const calls: Call[] = [];
    let ledger: LedgerFile;
    /** The file once the restarted process has settled what the killed one left open. */
    let settled: LedgerFile;
    let killedAt = 0;

    beforeAll(async () => {
      if (mode === "redis") redis = await startRedis();
      stack = await startProxyStack({
        env: { USAGE_FLUSH_MS: String(FLUSH_MS), RL_CHAT_LIMIT: "100000", ...(redis ? { REDIS_URL: redis.url } : {}) },
      });
      for (const user of USERS) await stack.connect(user, CAP_USD);
      await stack.connect("fresh", CAP_USD);

      const slow = Array.from({ length: SLOW_STREAMS }, (_, n): Call => ({
        user: USERS[n % USERS.length]!,
        streamed: true,
        requestId: null,
        finishedAt: null,
      }));
      let killed = false;
      const slowDone = Promise.all(slow.map((call) => runCall(stack, call, "[[mock tokens=40 pause_ms=500]]", () => killed)));
      const load = driveLoad(stack, calls, () => killed);
      await eventually("the clients completed enough calls", () => calls.filter((c) => c.finishedAt !== null).length >= COMPLETED_BEFORE_KILL);
      // The kill must interrupt requests that hold reservations: the slow streams are open.
      const slowServed = stack.mock.served.filter((s) => s.scenario?.tokens === 40);
      expect(slowServed.length).toBe(SLOW_STREAMS);
      expect(slowServed.filter((s) => s.completed)).toEqual([]);
      killed = true;
      stack.server.proc.kill("SIGKILL");
      killedAt = Date.now();
      await stack.server.proc.exited;
      await Promise.all([load, slowDone]);
      expect(slow.every((c) => c.finishedAt === null)).toBe(true);
      ledger = readLedgerFile(stack.databasePath);
    });

    afterAll(async () => {
      await stack?.stop();
      await redis?.stop();
    });

    test("the file is sound, holds each served request at most once, with totals equal to its rows", () => {
      expect(stack.server.proc.signalCode).toBe("SIGKILL");
      expect(ledger.integrity).toEqual(["ok"]);
      expect(ledger.rows.length).toBeGreaterThan(0);

      const served = new Map(stack.mock.served.map((s) => [s.id, s]));
      for (const row of ledger.rows) {
        // Every row is a request the upstream served, priced as the upstream priced it.
        expect(row.generation_id).not.toBeNull();
        const s = served.get(row.generation_id!);
        expect(s).toBeDefined();
        expect(row).toMatchObject({ status: "ok", source: "upstream", cost_nano: nano(s!.costUsd) });
      }
      expect(duplicates(ledger.rows.map((r) => r.request_id))).toEqual([]);
      expect(duplicates(ledger.rows.map((r) => r.generation_id))).toEqual([]);
      expect(ledger.totals).toEqual(sumRowsPerAccount(ledger.rows));
    });

    test("only the last unflushed batch is lost: no finished JSON call, and only streams finished after the newest row in the file", () => {
      const rowIds = new Set(ledger.rows.map((r) => r.request_id));
      const finished = calls.filter((c) => c.finishedAt !== null);
      const lost = finished.filter((c) => !rowIds.has(c.requestId!));
      const newestRow = Math.max(...ledger.rows.map((r) => r.finished_at));
      // Rows of calls the client never saw finish (cut by the kill) may or may not be there;
      // rows of calls it did see finish are missing only if they were queued after the last flush.
      expect(lost.filter((c) => !c.streamed)).toEqual([]);
      if (mode === "embedded") {
        // Embedded budgets settle without I/O, so a stream's row is queued before its last
        // bytes leave: the same bound holds for streams. (With Redis, a stream's settle is a
        // round trip after the end of the stream, so its client can finish first.)
        for (const call of lost) expect(call.finishedAt!).toBeGreaterThanOrEqual(newestRow);
      }
      const inLastWindow = finished.filter((c) => c.finishedAt! >= newestRow).length;
      console.log(
        `[sigkill ${mode}] calls finished by clients: ${finished.length}; rows in file: ${ledger.rows.length}; ` +
          `finished but lost: ${lost.length} (${lost.filter((c) => c.streamed).length} streamed); ` +
          `finished at or after the newest row: ${inLastWindow}; newest row ${killedAt - newestRow} ms before the kill (flush interval ${FLUSH_MS} ms)`,
      );
    });

    test("a new process on the same file settles every call the killed one left open: at the upstream's records, or at the reservation for a call not yet answered; nothing stays held", async () => {
      await stack.restartServer();
      // Embedded: the new process owns the file, so it takes the journal at once. Redis:
      // once the killed process's leases run out (about 5 s).
      await eventually("every call the killed process left open is settled", () => openJournalEntries(stack.databasePath) === 0);
      settled = readLedgerFile(stack.databasePath);
      // Every generation the upstream served has its row, at what the upstream billed for it;
      // but a call the kill caught between sending its request and reading the answer's
      // headers never learnt its generation id, and is charged its whole reservation: never
      // less than the upstream billed, one such row per such generation.
      const rows = new Map(settled.rows.map((r) => [r.generation_id, r]));
      const unnamed = stack.mock.served.filter((s) => !rows.has(s.id));
      for (const s of stack.mock.served.filter((x) => rows.has(x.id))) {
        expect({ id: s.id, cost: rows.get(s.id)!.cost_nano }).toEqual({ id: s.id, cost: nano(s.costUsd) });
      }
      const atReservation = settled.rows.filter((r) => r.source === "reservation");
      expect(atReservation.every((r) => r.generation_id === null && r.status === "instance_died")).toBe(true);
      // A call journaled just before the kill may never have reached the upstream: its
      // request was still being sent. The journal cannot tell it from one the upstream took,
      // so it too is charged its reservation (never less than the upstream may have billed).
      // Every other row is exactly one generation the upstream served.
      expect(atReservation.length).toBeGreaterThanOrEqual(unnamed.length);
      expect(settled.rows.length - atReservation.length).toBe(stack.mock.served.length - unnamed.length);
      for (const s of unnamed) expect(nano(s.costUsd)).toBeLessThanOrEqual(Math.min(...atReservation.map((r) => r.cost_nano)));
      expect(duplicates(settled.rows.map((r) => r.request_id))).toEqual([]);
      expect(settled.totals).toEqual(sumRowsPerAccount(settled.rows));
      // The slow streams the kill cut are among them, settled from the records.
      expect(settled.rows.filter((r) => r.source === "generation").length).toBeGreaterThanOrEqual(SLOW_STREAMS);
      const spentByAccount = sumRowsPerAccount(settled.rows);
      for (const user of USERS) {
        const spentNano = spentByAccount.get(accountOf(stack, user))?.spentNano ?? 0;
        const expected = { usage: nano(spentNano / 1e9), remaining: nano(CAP_USD) - spentNano };
        const seen = await eventually(`${user}'s budget equals the settled rows`, async () => {
          const status = await stack.status(user);
          const got = { usage: nano(status.usage.monthlyUsd), remaining: nano(status.remainingUsd) };
          return got.usage === expected.usage && got.remaining === expected.remaining ? got : false;
        }).catch(async (err) => ({ error: String(err), status: await stack.status(user) }));
        expect(seen).toEqual(expected);
      }
    });

    test("after the restart, admission follows the rebuilt counters: 402 one nano-dollar short, the same max_tokens as a fresh user with the same headroom", async () => {
      const user = USERS[0]!;
      const spentNano = sumRowsPerAccount(settled.rows).get(accountOf(stack, user))?.spentNano ?? 0;
      expect(spentNano).toBeGreaterThan(0);
      const request = body("Edge call. [[mock tokens=4]]", false);

      // Headroom of one nano-dollar: nothing fits, and the error shows the stored spend.
      await stack.connect(user, (spentNano + 1) / 1e9);
      const refused = await stack.chat(user, request);
      expect(refused.status).toBe(402);
      const error = ((await refused.json()) as { error: { code: string; usedUsd: number; remainingUsd: number } }).error;
      expect(error.code).toBe("budget_exceeded");
      expect(nano(error.usedUsd)).toBe(spentNano);
      expect(nano(error.remainingUsd)).toBe(1);

      // Headroom of $0.0001 (about 100 completion tokens after the prompt): max_tokens is
      // clamped to it, and must come out exactly as for a user who never spent anything.
      const headroomNano = 100_000;
      await stack.connect(user, (spentNano + headroomNano) / 1e9);
      await stack.connect("fresh", headroomNano / 1e9);
      const before = stack.mock.served.length;
      for (const who of [user, "fresh"]) {
        const res = await stack.chat(who, request);
        expect(res.status).toBe(200);
        await res.json();
      }
      const [mine, fresh] = stack.servedSince(before);
      expect(fresh!.maxTokens).toBeGreaterThan(16);
      expect(fresh!.maxTokens).toBeLessThan(1000);
      expect(mine!.maxTokens).toBe(fresh!.maxTokens);
    });
  });
}

/** Calls in the file's call journal: in flight, or waiting for the reconciler. */
function openJournalEntries(databasePath: string): number {
  const db = new Database(databasePath);
  try {
    return db.query<{ n: number }, []>("SELECT count(*) AS n FROM call_journal").get()!.n;
  } finally {
    db.close();
  }
}
