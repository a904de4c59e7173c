/**
 * A JSON call answered 200 is on disk before its answer leaves (ARCHITECTURE.md §3 "The hard
 * cap"): 24 concurrent calls are answered, then the proxy is SIGKILLed before anything else
 * runs. The usage writer's interval is set far beyond the test (USAGE_FLUSH_MS=10000, its largest), so
 * only the rows committed for the answers themselves can be there. After a restart on the
 * same file every answered call is counted once, at what the upstream billed, and the
 * user's budget shows it: in embedded mode and with Redis (whose counters outlive the kill).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eventually, nano, startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { startRedis, type TestRedis } from "../helpers/redis";
import { duplicates, readLedgerFile } from "./ledger-file";

const CALLS = 24;
const CAP_USD = 5;

for (const mode of ["embedded", "redis"] as const) {
  describe(`SIGKILL right after ${CALLS} answered JSON calls (${mode} budgets)`, () => {
    let redis: TestRedis | undefined;
    let stack: ProxyStack;
    const answered: string[] = [];

    beforeAll(async () => {
      if (mode === "redis") redis = await startRedis();
      stack = await startProxyStack({ env: { USAGE_FLUSH_MS: "10000", ...(redis ? { REDIS_URL: redis.url } : {}) } });
      await stack.connect("ana", CAP_USD);
      const responses = await Promise.all(
        Array.from({ length: CALLS }, (_, i) =>
          stack.chat("ana", { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: `Call ${i}. [[mock tokens=8]]` }] }),
        ),
      );
      for (const res of responses) {
        expect(res.status).toBe(200);
        await res.json();
        answered.push(res.headers.get("x-request-id")!);
      }
      stack.server.proc.kill("SIGKILL");
      await stack.server.proc.exited;
    });

    afterAll(async () => {
      await stack?.stop();
      await redis?.stop();
    });

    test("every answered call has its row in the file, once, at the upstream's cost", () => {
      const ledger = readLedgerFile(stack.databasePath);
      const rows = new Map(ledger.rows.map((r) => [r.request_id, r]));
      expect(answered.filter((id) => !rows.has(id))).toEqual([]);
      expect(duplicates(ledger.rows.map((r) => r.request_id))).toEqual([]);
      const billed = new Map(stack.mock.served.map((s) => [s.id, s.costUsd]));
      for (const id of answered) {
        const row = rows.get(id)!;
        expect({ id, cost: row.cost_nano }).toEqual({ id, cost: nano(billed.get(row.generation_id!)!) });
      }
    });

    test("after a restart the user's budget counts every answered call, and nothing twice", async () => {
      await stack.restartServer();
      const billedNano = stack.mock.served.reduce((sum, s) => sum + nano(s.costUsd), 0);
      expect(stack.mock.served).toHaveLength(CALLS);
      const seen = await eventually("the budget shows every answered call", async () => {
        const status = await stack.status("ana");
        return nano(status.usage.monthlyUsd) === billedNano ? status : false;
      });
      expect(nano(seen.remainingUsd)).toBe(nano(CAP_USD) - billedNano);
      expect((await stack.usage("ana")).map((r) => r.requestId).sort()).toEqual([...answered].sort());
    });
  });
}
