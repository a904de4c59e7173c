import { expect, test } from "bun:test";
import { join } from "node:path";
import { REPO_ROOT } from "./helpers/server";

// Held: the child's loop is held before its timers run, so both fall due in one turn, as
// they did on a loaded CI machine.
test.each([
  ["", 0],
  [" (both timers due in one turn)", 60],
])("a rejection nothing handled and an exception from a timer are logged, and the process keeps running%s", async (_, holdMs) => {
  const proc = Bun.spawn([process.execPath, join(REPO_ROOT, "tests/helpers/stray-errors-child.ts")], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, STRAY_ERRORS_HOLD_MS: String(holdMs) },
  });
  const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  const lines = stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(code).toBe(0);
  expect(lines.at(-1)).toMatchObject({ level: "info", msg: "alive" });
  const errors = lines.filter((l) => l.level === "error");
  expect(errors.map((l) => l.msg)).toEqual([
    "a promise was rejected and nothing handled it; the service keeps running",
    "an exception was thrown outside any request and nothing caught it; the service keeps running",
  ]);
  expect(String(errors[0]!.error)).toContain("a rejection nobody awaited");
  expect(String(errors[1]!.error)).toContain("an exception thrown from a timer");
});
