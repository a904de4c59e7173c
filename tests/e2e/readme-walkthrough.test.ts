/**
 * The README's walk-through, run as written: the shell block of "Five-minute walk-through"
 * is taken from README.md itself and run with bash against a real `npm start`-like server
 * (demo mode), with only BASE's port and KEY filled in. Each of the five steps must do
 * what the README says, including `/usage` right after the calls.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cliCreateApp, REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";

const db = tempDatabase();
let server: RunningServer;
let secretKey = "";
beforeAll(async () => {
  ({ secretKey } = await cliCreateApp(db.databaseUrl, "My app", ["http://localhost:3000"]));
  server = await startServer({ databaseUrl: db.databaseUrl });
});
afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

function walkthroughScript(): string {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Five-minute walk-through"));
  const block = /Then, in another terminal:\s*```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error("README.md: the walk-through's shell block was not found");
  expect(block).toContain("BASE=http://localhost:8787/api/v1");
  expect(block).toContain("KEY=sk_live_...");
  return block.replace("BASE=http://localhost:8787/api/v1", `BASE=${server.baseUrl}/api/v1`).replace(/KEY=sk_live_\.\.\.[^\n]*/, `KEY=${secretKey}`);
}

test("the five steps pass as written", async () => {
  // Each command's output on its own line, so the steps can be told apart: curl is wrapped,
  // the README's own lines are run unchanged.
  const script = `curl() { command curl "$@"; echo; }\n${walkthroughScript()}`;
  const proc = Bun.spawn(["bash", "-e", "-c", script], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ code, err }).toEqual({ code: 0, err: "" });
  const lines = out.split("\n").filter((l) => l.trim() !== "");
  const approved = JSON.parse(lines[0]!);
  expect(approved).toMatchObject({ connected: true, limits: { monthlyUsd: 5 } });
  expect(JSON.parse(lines[1]!)).toMatchObject({ connected: true, limits: { monthlyUsd: 5 }, usage: { monthlyUsd: 0 }, remainingUsd: 5 });
  const json = JSON.parse(lines[2]!);
  expect(json.object).toBe("chat.completion");
  const stream = lines.slice(3, -1);
  expect(stream.some((l) => l.startsWith("data: {"))).toBe(true);
  expect(stream).toContain("data: [DONE]");
  const usage = JSON.parse(lines[lines.length - 1]!);
  expect(usage.data).toHaveLength(2);
  expect(usage.data.map((r: { streamed: boolean }) => r.streamed).sort()).toEqual([false, true]);
  expect(usage.data.every((r: { costUsd: number; status: string }) => r.costUsd > 0 && r.status === "ok")).toBe(true);
});
