import type { UsageRow } from "../../src/budget/usage-row";

/** Ledger row number `i` of app1's `user` in 2026-01, as the usage writer's tests queue it. */
export function usageRow(i: number, user = "alice", costNano = 1000 + i): UsageRow {
  return {
    requestId: `req-${i}`,
    account: `u/app1/2026-01/${user}`,
    appId: "app1",
    appUserId: user,
    grantId: null,
    period: "2026-01",
    model: "m",
    generationId: `gen-${i}`,
    promptTokens: 10,
    completionTokens: 5,
    costNano,
    source: "upstream",
    status: "ok",
    streamed: false,
    startedAt: 1_000 + i,
    finishedAt: 2_000 + i,
  };
}
