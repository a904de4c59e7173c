/**
 * A process stops while PostgreSQL refuses its ledger rows (the writer's stall: README,
 * "Seen before the current code"): two proxy processes on one PostgreSQL, without and with
 * Redis, the usage ledger made to refuse every insert (a trigger), calls answered by one
 * process, which is then stopped with SIGTERM and gives up on its rows at the shutdown's
 * deadline.
 * Its calls stay in the call journal; once the ledger accepts rows again, the other
 * process reconciles them from the upstream's records: every answered call has exactly one
 * row, the ledger equals what the upstream billed, and every process reports that spend.
 * No timing thresholds: waits poll for a state.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { OPERATOR_AUTH, pollUntil } from "../helpers/cluster";
import { shortChat, startPgCluster, type PgCluster } from "../helpers/pg-cluster";

const ask = shortChat;

// Without Redis the budget's settle writes the row (and retries it); with Redis the usage writer does.
describe.each([
  ["without Redis", false, "budget settles not written at shutdown"],
  ["with Redis", true, "usage rows not written at shutdown"],
] as const)("on PostgreSQL %s", (_label, withRedis, givenUp) => {
  let cluster: PgCluster;
  beforeAll(async () => {
    cluster = await startPgCluster({ instances: 2, redis: withRedis, env: { RECONCILE_POLL_MS: "100", RL_CHAT_LIMIT: "10000", DATABASE_TIMEOUT_MS: "1000" } });
    await cluster.connect("rhea", 10);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  test("rows a stopping process could not write are reconciled by another: one row per answered call, equal to the upstream's bill", async () => {
    const [survivor, stopping] = cluster.servers as [(typeof cluster.servers)[0], (typeof cluster.servers)[0]];
    await cluster.sql.unsafe(`
      CREATE FUNCTION test_refuse_rows() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'ledger refused by the test'; END $$;
      CREATE TRIGGER test_refuse_rows BEFORE INSERT ON usage_ledger FOR EACH ROW EXECUTE FUNCTION test_refuse_rows();`);

    const answered: string[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await cluster.chat(stopping, "rhea", ask(i % 2 === 1));
      const text = await res.text();
      expect(res.status).toBe(200);
      if (i % 2 === 1) expect(text).toContain("[DONE]");
      answered.push(res.headers.get("x-request-id")!);
    }
    if (withRedis) {
      // A stream's row is queued as the stream ends, which may be just after its client read [DONE].
      const health = await pollUntil("every answered call's row queued", async () => {
        const h = (await (await stopping.fetch("/healthz", { headers: OPERATOR_AUTH })).json()) as { writer: { pending: number } };
        return h.writer.pending === answered.length ? h : undefined;
      });
      expect(health.writer).toMatchObject({ failing: true, pending: answered.length });
    }
    expect((await cluster.ledger("rhea")).length).toBe(0);

    stopping.proc.kill("SIGTERM");
    await stopping.proc.exited;
    cluster.servers.splice(cluster.servers.indexOf(stopping), 1);
    expect(stopping.stdout.some((l) => l.includes(givenUp))).toBe(true);
    const [journaled] = await cluster.sql`SELECT count(*)::int AS n FROM call_journal`;
    expect(journaled.n).toBe(answered.length);

    await cluster.sql.unsafe(`DROP TRIGGER test_refuse_rows ON usage_ledger`);
    await pollUntil("the stopped process's calls reconciled", async () => {
      const [open] = await cluster.sql`SELECT count(*)::int AS n FROM call_journal`;
      return open.n === 0 ? true : undefined;
    });

    const ledger = await cluster.ledger("rhea");
    expect(ledger.map((r) => r.request_id).sort()).toEqual([...answered].sort());
    const rows = await cluster.sql`SELECT source FROM usage_ledger`;
    expect(rows.every((r: { source: string }) => r.source === "generation")).toBe(true);
    const billedNano = Math.round(cluster.billedUsd() * 1e9);
    const spent = ledger.reduce((sum, r) => sum + r.cost_nano, 0);
    // Nano-dollars, rounded up per call.
    expect(Math.abs(spent - billedNano)).toBeLessThanOrEqual(answered.length);
    const [totals] = await cluster.sql`SELECT sum(spent_nano)::bigint AS spent, sum(request_count)::int AS n FROM usage_totals WHERE account LIKE 'u/%'`;
    expect(Number(totals.spent)).toBe(spent);
    expect(totals.n).toBe(answered.length);
    const status = await cluster.status(survivor, "rhea");
    expect(Math.round(status.usage.monthlyUsd * 1e9)).toBe(spent);
  });
});
