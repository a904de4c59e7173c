/**
 * The mock upstream (packages/mock-upstream) stays out of what runs in production. The bundle
 * `npm start` runs and the single binary are built by the functions `npm start` and
 * `npm run build` call, and searched for code only the mock has; the mock is the file beside
 * each, which only demo mode loads (src/upstream/demo-upstream.ts). The binary keeps its demo
 * mode while that file is beside it; a binary alone stops with one line naming UPSTREAM_API_KEY.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundleService } from "../../scripts/bundle";
import { buildBinary } from "../../scripts/build";
import { freePort, startServer, tempDatabase } from "../helpers/server";
import { MOCK_UPSTREAM_FILE } from "../../src/upstream/demo-upstream";

/** Text only the mock's code holds: its directive syntax and two of its function names (minification keeps names). */
const MOCK_MARKERS = ["[[mock", "parseDirectives", "startMockUpstream"];

const markersIn = (file: string) => {
  const text = readFileSync(file).toString("latin1");
  return MOCK_MARKERS.filter((marker) => text.includes(marker));
};

let dir: string;
let binary: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "proxy-mock-outside-"));
  binary = join(dir, "bin", "metered-proxy");
  await buildBinary(binary);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("the bundle npm start runs holds no mock code: the mock is its own file beside it", async () => {
  const outdir = join(dir, "bundle");
  const entry = await bundleService("src/index.ts", outdir);
  expect(markersIn(entry)).toEqual([]);
  const beside = readdirSync(outdir).filter((name) => name.startsWith("mock-upstream-") && name.endsWith(".js"));
  expect(beside).toHaveLength(1);
  expect(markersIn(join(outdir, beside[0]!))).toEqual(MOCK_MARKERS);
});

test("the single binary holds no mock code: npm run build writes the mock beside it", () => {
  expect(markersIn(binary)).toEqual([]);
  expect(markersIn(join(dir, "bin", MOCK_UPSTREAM_FILE))).toEqual(MOCK_MARKERS);
});

test("the binary's demo mode serves with the mock beside it", async () => {
  const db = tempDatabase();
  const server = await startServer({ databaseUrl: db.databaseUrl, command: [binary] });
  try {
    const health = (await (await server.fetch("/healthz")).json()) as { mode: string };
    expect(health.mode).toBe("demo");
    // Ready only once the price list is in: the mock answered GET /models.
    expect((await server.fetch("/readyz")).status).toBe(200);
    const secretKey = /secretKey:\s+(sk_live_\S+)/.exec(server.stdout.join("\n"))?.[1];
    const json = { authorization: `Bearer ${secretKey}`, "content-type": "application/json" };
    const session = await server.fetch("/api/v1/sessions", {
      method: "POST",
      headers: json,
      body: JSON.stringify({ appUserId: "demo", requestLimit: { monthlyUsd: 1 } }),
    });
    const { token } = (await session.json()) as { token: string };
    expect((await server.fetch("/api/v1/connections", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    const answer = await server.fetch("/api/v1/chat/completions", {
      method: "POST",
      headers: { ...json, "x-service-user": "demo" },
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { object: string }).object).toBe("chat.completion");
  } finally {
    expect(await server.stop()).toBe(0);
    db.cleanup();
  }
});

test("a binary without the mock beside it refuses demo mode in one line naming UPSTREAM_API_KEY, exit 2, no store created", () => {
  const alone = join(dir, "alone");
  mkdirSync(join(alone, "cwd"), { recursive: true });
  copyFileSync(binary, join(alone, "metered-proxy"));
  const run = Bun.spawnSync([join(alone, "metered-proxy")], {
    cwd: join(alone, "cwd"),
    env: { PATH: process.env.PATH ?? "", PORT: String(freePort()), HOST: "127.0.0.1" },
  });
  const stderr = run.stderr.toString();
  expect(run.exitCode).toBe(2);
  expect(stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(stderr).toStartWith("cannot start: invalid configuration: UPSTREAM_API_KEY: unset, so demo mode");
  expect(stderr).toContain(join(alone, MOCK_UPSTREAM_FILE));
  expect(existsSync(join(alone, "cwd", "data/proxy.sqlite"))).toBe(false);
});
