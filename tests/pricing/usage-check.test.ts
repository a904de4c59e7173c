/**
 * Where "absurd" begins (src/pricing/usage-check.ts): a reported cost past ABSURD_MULTIPLE
 * times the reservation plus a dollar, or a token count past ABSURD_MULTIPLE times the
 * request's bound plus ABSURD_TOKEN_SLACK. Up to there an overrun can be true and is
 * charged as billed; the routes' tests (tests/routes/upstream-usage-numbers.test.ts) show
 * what each outcome does to a call.
 */
import { expect, test } from "bun:test";
import { ABSURD_COST_SLACK_NANO, ABSURD_MULTIPLE, ABSURD_TOKEN_SLACK, usageProblem } from "../../src/pricing/usage-check";

const reservedNano = 2_000_000; // $0.002
const usage = (costUsd: number | null, promptTokens = 9, completionTokens = 3) => ({ costUsd, promptTokens, completionTokens });

test("a cost up to the multiple of the reservation and the slack can be true; one nano-dollar more cannot", () => {
  const bound = ABSURD_MULTIPLE * reservedNano + ABSURD_COST_SLACK_NANO;
  expect(usageProblem(usage(bound / 1e9), bound, { reservedNano })).toBeNull();
  expect(usageProblem(usage((bound + 1) / 1e9), bound + 1, { reservedNano })).toContain(`over ${ABSURD_MULTIPLE} times the $0.002 reserved`);
  // A call that reserved nothing (a free model) may still overrun by up to the slack.
  expect(usageProblem(usage(0.5), 500_000_000, { reservedNano: 0 })).toBeNull();
});

test("token counts up to the multiple of the request's bounds and the slack can be true; one more cannot", () => {
  const allowed = { reservedNano, promptTokens: 100, outputTokens: 50 };
  const prompt = ABSURD_MULTIPLE * 100 + ABSURD_TOKEN_SLACK;
  const output = ABSURD_MULTIPLE * 50 + ABSURD_TOKEN_SLACK;
  expect(usageProblem(usage(0.001, prompt, output), 1_000_000, allowed)).toBeNull();
  expect(usageProblem(usage(0.001, prompt + 1, output), 1_000_000, allowed)).toContain("prompt token count");
  expect(usageProblem(usage(0.001, prompt, output + 1), 1_000_000, allowed)).toContain("completion token count");
  // Bounds unknown (a call settled from the journal): only the counts' form and the cost are checked.
  expect(usageProblem(usage(0.001, prompt + 1, output + 1), 1_000_000, { reservedNano })).toBeNull();
});

test("numbers that are not counts cannot be true, whatever the bounds", () => {
  const allowed = { reservedNano: Number.MAX_SAFE_INTEGER };
  expect(usageProblem(usage(-1e-12), 0, allowed)).toContain("not an amount");
  expect(usageProblem(usage(Infinity), Infinity, allowed)).toContain("not an amount");
  expect(usageProblem(usage(1e300), Infinity, allowed)).toContain("past what the service counts exactly");
  expect(usageProblem(usage(null, 1.5), 10, allowed)).toContain("not a whole number of tokens");
  expect(usageProblem(usage(null, 9, -1), 10, allowed)).toContain("not a whole number of tokens");
  expect(usageProblem(usage(null, 9, 2 ** 53), 10, allowed)).toContain("not a whole number of tokens");
  expect(usageProblem(usage(0, 0, 0), 0, allowed)).toBeNull();
});
