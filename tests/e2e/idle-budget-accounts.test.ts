/**
 * Budget accounts left idle leave the embedded ledger's memory and come back exact: a real
 * server process (the bundle) on its own SQLite file, the mock upstream over HTTP, and
 * BUDGET_IDLE_SECONDS=1 so that forgetting happens within the test. /metrics shows how many
 * accounts the process holds; the users' budgets (status, 402 bodies, ledger rows) must read
 * the same before and after their accounts were forgotten and loaded again.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { pollUntil } from "../helpers/cluster";

setDefaultTimeout(60_000);

const TOKEN = "metrics-token-0123456789";
const USERS = Array.from({ length: 12 }, (_, i) => `user-${i}`);
const TIGHT = "tight";
let stack: ProxyStack;

beforeAll(async () => {
  stack = await startProxyStack({ env: { BUDGET_IDLE_SECONDS: "1", METRICS_TOKEN: TOKEN } });
  for (const user of USERS) await stack.connect(user, 5);
  await stack.connect(TIGHT, 0.0005);
});
afterAll(() => stack?.stop());

async function accountsInMemory(): Promise<number> {
  const res = await stack.server.fetch("/metrics", { headers: { authorization: `Bearer ${TOKEN}` } });
  const match = (await res.text()).match(/^proxy_budget_accounts_in_memory (\d+)$/m);
  if (!match) throw new Error("/metrics has no proxy_budget_accounts_in_memory");
  return Number(match[1]);
}

const ask = (user: string) => stack.chat(user, { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi [[mock tokens=40]]" }] });

interface BudgetError {
  error: { code: string; limitUsd: number; usedUsd: number; remainingUsd: number };
}

/** Everything a user's budget shows: the status view's numbers and the ledger rows' sum. */
async function budgetOf(user: string) {
  const status = await stack.status(user);
  const rows = await stack.usage(user);
  return { used: status.usage.monthlyUsd, remaining: status.remainingUsd, rows: rows.length, rowsUsd: rows.reduce((sum, r) => sum + r.costUsd, 0) };
}

test("idle accounts are forgotten, and a user's budget reads and refuses the same after", async () => {
  for (const user of USERS) expect((await ask(user)).status).toBe(200);
  // The tight user spends until not even a minimal completion fits.
  let refusal: BudgetError | null = null;
  for (let call = 0; call < 100 && !refusal; call++) {
    const res = await ask(TIGHT);
    if (res.status === 402) refusal = (await res.json()) as BudgetError;
    else expect(res.status).toBe(200);
  }
  expect(refusal?.error.code).toBe("budget_exceeded");
  const served = (await stack.usage(TIGHT)).length;
  await stack.waitForUsage(USERS[0]!, 1);
  const before = new Map(await Promise.all([...USERS, TIGHT].map(async (user) => [user, await budgetOf(user)] as const)));
  expect(await accountsInMemory()).toBeGreaterThanOrEqual(USERS.length + 1);

  // Nobody calls: within one to two sweeps of a second each, every account leaves memory.
  await pollUntil("every idle account forgotten", async () => ((await accountsInMemory()) === 0 ? true : undefined));

  // Loaded again from the ledger totals: the same spend, the same refusal, the same rows.
  for (const [user, budget] of before) expect({ user, ...(await budgetOf(user)) }).toEqual({ user, ...budget });
  const again = await ask(TIGHT);
  expect(again.status).toBe(402);
  expect(((await again.json()) as BudgetError).error).toEqual(refusal!.error);
  expect((await stack.usage(TIGHT)).length).toBe(served);
  expect(before.get(TIGHT)!.used).toBeLessThanOrEqual(0.0005);

  // A user with budget left is served as before, from the reloaded counters.
  expect((await ask(USERS[0]!)).status).toBe(200);
  const rows = await stack.waitForUsage(USERS[0]!, 2);
  const after = await budgetOf(USERS[0]!);
  expect(after.used).toBeCloseTo(before.get(USERS[0]!)!.used + rows[0]!.costUsd, 9);
  expect(await accountsInMemory()).toBeGreaterThanOrEqual(1);
});
