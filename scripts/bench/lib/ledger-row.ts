/**
 * The ledger row the benches write for a call: the service's shape (src/budget/usage-row.ts)
 * for one app in one period, a mix of JSON and streamed calls, a settled cost from the
 * upstream. Used where a bench writes rows itself instead of calling the service.
 */
import { userAccount } from "../../../src/budget/accounts";
import type { UsageRow } from "../../../src/budget/usage-row";

export const BENCH_ROW_COST_NANO = 16_050;

/** The budget account of a bench user: the app's, this period's. */
export const benchAccount = (user: string) => userAccount("benchapp", "2026-11", user);

/** Call number `i` of `user`, request id `requestId`, the calls starting 1 ms apart from `at` (ms). */
export function benchLedgerRow(requestId: string, user: string, i: number, at: number): UsageRow {
  return {
    requestId,
    account: benchAccount(user),
    appId: "benchapp",
    appUserId: user,
    grantId: null,
    period: "2026-11",
    model: "openai/gpt-4o-mini",
    generationId: `gen-${at}-${i.toString(36).padStart(12, "0")}`,
    promptTokens: 27,
    completionTokens: 20,
    costNano: BENCH_ROW_COST_NANO,
    source: "upstream",
    status: "ok",
    streamed: i % 2 === 0,
    startedAt: at + i,
    finishedAt: at + i + 3,
  };
}
