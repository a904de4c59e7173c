/**
 * The start-up log says which optional doors are open and what production still needs: the
 * admin API and the metrics route when their tokens are set, webhooks allowed to private
 * addresses, and, in production, a PUBLIC_URL left unset (users who link their own upstream
 * account would be sent back to localhost). A plain start says none of it.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { startServer, tempDatabase } from "../helpers/server";

setDefaultTimeout(60_000);

const ADMIN = "admin API on: /api/v1/admin/ answers requests with Authorization: Bearer $ADMIN_TOKEN";
const METRICS = "metrics on: GET /metrics answers requests with Authorization: Bearer $METRICS_TOKEN";
const PRIVATE_WEBHOOKS =
  "WEBHOOK_ALLOW_PRIVATE_ADDRESSES is on: webhooks may go to private, loopback and other non-public addresses, and http to this machine (local development only)";

let upstream: RunningMockUpstream;
beforeAll(async () => {
  upstream = await startMockUpstream({ recordServed: false });
});
afterAll(async () => {
  await upstream?.stop();
});

/** The log lines (level and message) a server started with `env` wrote before it was healthy. */
async function startLog(env: Record<string, string>): Promise<Array<{ level: unknown; msg: unknown }>> {
  const db = tempDatabase();
  try {
    const server = await startServer({ databaseUrl: db.databaseUrl, env });
    expect(await server.stop()).toBe(0);
    return server.logLines().map(({ level, msg }) => ({ level, msg }));
  } finally {
    db.cleanup();
  }
}

describe("the start-up log", () => {
  test("names the admin API, the metrics route and private webhook targets when they are on", async () => {
    const log = await startLog({
      ADMIN_TOKEN: "start-notes-admin-token-0123456789abcdef",
      METRICS_TOKEN: "start-notes-metrics-token",
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true",
    });
    expect(log).toEqual(
      expect.arrayContaining([
        { level: "info", msg: ADMIN },
        { level: "info", msg: METRICS },
        { level: "warn", msg: PRIVATE_WEBHOOKS },
      ]),
    );
  });

  test("in production, warns that PUBLIC_URL is unset, with the callback users would be sent to; set, it says nothing", async () => {
    const production = { NODE_ENV: "production", UPSTREAM_API_KEY: "sk-or-start-notes", UPSTREAM_BASE_URL: upstream.url };
    // The harness sets PUBLIC_URL; empty is unset.
    const unset = await startLog({ ...production, PUBLIC_URL: "" });
    const warning = unset.find((l) => typeof l.msg === "string" && l.msg.startsWith("PUBLIC_URL is not set"));
    expect(warning?.level).toBe("warn");
    expect(warning?.msg).toMatch(/would be sent back to http:\/\/localhost:\d+\/api\/v1\/connect\/funding\/callback\. Set it to the address browsers reach/);
    const set = await startLog(production);
    expect(set.some((l) => String(l.msg).startsWith("PUBLIC_URL"))).toBe(false);
  });

  test("a plain start names none of them", async () => {
    const log = await startLog({});
    const said = log.map((l) => String(l.msg));
    expect(said.filter((m) => m.startsWith("admin API") || m.startsWith("metrics on") || m.startsWith("WEBHOOK_") || m.startsWith("PUBLIC_URL"))).toEqual([]);
  });
});
