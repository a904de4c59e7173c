/**
 * The openapi.json a real app serves passes a real linter: Redocly CLI (an exact-pinned
 * devDependency) with its recommended rules as redocly.yaml adjusts them, run through the
 * CLI's JS entry by the Bun running these tests. Offline: telemetry is off in redocly.yaml.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestApp } from "./helpers/test-app";
import { REPO_ROOT } from "./helpers/server";

const REDOCLY_CLI = join(REPO_ROOT, "node_modules/@redocly/cli/bin/cli.js");
const CONFIG = join(REPO_ROOT, "redocly.yaml");

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }>;
}

let dir: string;
let served: Record<string, any>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "openapi-lint-"));
  const res = await makeTestApp().call("/api/v1/openapi.json");
  expect(res.status).toBe(200);
  served = (await res.json()) as Record<string, any>;
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Lints `document` as a file; the exit code and the linter's JSON report. */
async function lint(name: string, document: unknown): Promise<{ code: number; report: LintReport; stderr: string }> {
  const file = join(dir, name);
  await Bun.write(file, JSON.stringify(document, null, 2));
  const proc = Bun.spawn([process.execPath, REDOCLY_CLI, "lint", file, "--config", CONFIG, "--lint-config", "error", "--format", "json"], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", HOME: dir, REDOCLY_SUPPRESS_NOTIFICATIONS: "true" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (!stdout.trimStart().startsWith("{")) throw new Error(`redocly lint printed no report (exit ${code}):\n${stdout}\n${stderr}`);
  return { code, report: JSON.parse(stdout) as LintReport, stderr };
}

const summary = (report: LintReport) => report.problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);

describe("redocly lint on the served openapi.json", () => {
  test("passes with no error and no warning", async () => {
    const { code, report, stderr } = await lint("openapi.json", served);
    expect(summary(report)).toEqual([]);
    expect(report.totals).toEqual({ errors: 0, warnings: 0, ignored: 0 });
    expect({ code, stderr: code === 0 ? "" : stderr }).toEqual({ code: 0, stderr: "" });
  });

  test("the lint can fail: without servers, with an OpenAPI 3.0 keyword and an undeclared security scheme", async () => {
    const broken = structuredClone(served);
    delete broken.servers;
    broken.components.schemas.Error.properties.error.properties.message.nullable = true;
    broken.paths["/api/v1/status"].get.security = [{ apiKey: [] }];
    const { code, report } = await lint("broken.json", broken);
    expect(code).not.toBe(0);
    expect(
      report.problems
        .filter((p) => p.severity === "error")
        .map((p) => p.ruleId)
        .sort(),
    ).toEqual(["no-empty-servers", "security-defined", "struct"]);
  });
});
