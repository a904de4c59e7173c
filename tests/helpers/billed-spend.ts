/**
 * Spend against an upstream that bills as OpenRouter documents (the mock), and the checks
 * every hard-cap suite makes (tests/metering/hard-cap-*.test.ts): the upstream's own bill
 * per user, the ledger agreeing with it, and no call costing more than it reserved.
 */
import { expect } from "bun:test";
import type { ChatTestApp } from "./chat-app";

const json = async (r: Response): Promise<any> => r.json();

export interface Run {
  statuses: number[];
}

/** `concurrent` calls at once, then one at a time until a 402 (at most `sequential`). */
export async function spend(t: ChatTestApp, user: string, body: () => Record<string, unknown>, concurrent = 8, sequential = 12): Promise<Run> {
  const call = () => t.chat(body(), { "x-service-user": user });
  const statuses = (await Promise.all(Array.from({ length: concurrent }, call))).map((r) => r.status);
  for (let i = 0; i < sequential && !statuses.includes(402); i++) statuses.push((await call()).status);
  return { statuses };
}

/** The upstream's bill per user: every generation it charged for, matched to the proxy's row by generation id. */
export async function billsByUser(t: ChatTestApp): Promise<Map<string, number>> {
  await t.flush();
  const rows = t.db.query<{ generation_id: string | null; app_user_id: string }, []>("SELECT generation_id, app_user_id FROM usage_ledger").all();
  const userOf = new Map(rows.map((r) => [r.generation_id, r.app_user_id]));
  const bills = new Map<string, number>();
  for (const served of t.mock.served) {
    if (served.costUsd === 0) continue;
    const user = userOf.get(served.id);
    expect(user, `generation ${served.id} was billed upstream but has no ledger row`).toBeDefined();
    bills.set(user!, (bills.get(user!) ?? 0) + served.costUsd);
  }
  return bills;
}

/** Some calls served, the rest refused for the budget; the upstream's bill within the cap and equal to the ledger's; no overrun. */
export async function expectWithinCap(t: ChatTestApp, user: string, capUsd: number, run: Run): Promise<void> {
  expect(run.statuses.filter((s) => s === 200).length, `statuses ${run.statuses}`).toBeGreaterThan(0);
  expect(
    run.statuses.every((s) => s === 200 || s === 402),
    `statuses ${run.statuses}`,
  ).toBe(true);
  expect(run.statuses).toContain(402);
  const bill = (await billsByUser(t)).get(user) ?? 0;
  expect(bill).toBeLessThanOrEqual(capUsd);
  const status = await json(await t.get(`/api/v1/status?appUserId=${user}`));
  expect(status.usage.monthlyUsd).toBeLessThanOrEqual(status.limits.monthlyUsd);
  expect(status.usage.monthlyUsd).toBeCloseTo(bill, 8);
  const overruns = t.db.query<{ n: number }, []>("SELECT count(*) AS n FROM usage_ledger WHERE overrun_nano > 0").get()!.n;
  expect(overruns, "calls that cost more than they reserved").toBe(0);
}
