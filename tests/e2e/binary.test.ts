import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { startMockUpstream, type RunningMockUpstream } from "../../src/upstream/mock";
import { checkChatStream } from "../helpers/openrouter-spec";

// The single binary, built the way `npm run build` builds it, serving a real streamed call
// and running the operator CLI, with no source tree or node_modules needed at run time.
let dir: string;
let binary: string;
let upstream: RunningMockUpstream;
let db: ReturnType<typeof tempDatabase>;
let server: RunningServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "proxy-binary-"));
  binary = join(dir, "metered-proxy");
  const build = Bun.spawnSync([process.execPath, "build", "--compile", "--minify-syntax", "src/index.ts", "--outfile", binary], {
    cwd: REPO_ROOT,
    stderr: "pipe",
  });
  if (build.exitCode !== 0) throw new Error(build.stderr.toString());
  upstream = await startMockUpstream();
  db = tempDatabase();
  server = await startServer({ databaseUrl: db.databaseUrl, command: [binary], env: { UPSTREAM_BASE_URL: upstream.url, UPSTREAM_API_KEY: "sk-or-binary" } });
});

afterAll(async () => {
  await server?.stop();
  await upstream?.stop();
  db?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

test("the binary's CLI creates an app, and the binary's server serves a streamed call with it", async () => {
  const cli = Bun.spawnSync([binary, "cli", "app", "create", "--name", "bin"], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", DATABASE_URL: db.databaseUrl },
  });
  expect(cli.exitCode).toBe(0);
  const { secretKey } = JSON.parse(cli.stdout.toString());
  const auth = { authorization: `Bearer ${secretKey}`, "content-type": "application/json" };
  const { token } = (await (
    await server.fetch("/api/v1/sessions", { method: "POST", headers: auth, body: JSON.stringify({ appUserId: "u1", requestLimit: { monthlyUsd: 1 } }) })
  ).json()) as { token: string };
  expect((await server.fetch("/api/v1/connections", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  const res = await server.fetch("/api/v1/chat/completions", {
    method: "POST",
    headers: { ...auth, "x-service-user": "u1" },
    body: JSON.stringify({ model: "openai/gpt-4o-mini", stream: true, messages: [{ role: "user", content: "hello" }] }),
  });
  expect(res.status).toBe(200);
  const stream = checkChatStream(await res.text());
  expect(stream.problems).toEqual([]);
  expect(stream.done).toBe(true);
  expect((await server.fetch("/healthz")).status).toBe(200);
  const health = Bun.spawnSync([binary, "healthcheck"], { env: { PATH: process.env.PATH ?? "", PORT: String(server.port) } });
  expect(health.exitCode).toBe(0);
});

test("the binary serves the API reference, its renderer's files embedded", async () => {
  const page = await server.fetch("/docs");
  expect(page.status).toBe(200);
  expect(page.headers.get("content-security-policy")).toContain("sandbox allow-scripts");
  const html = await page.text();
  for (const [file, source] of [
    ["/docs/swagger-ui.js", "node_modules/swagger-ui-dist/swagger-ui-bundle.js"],
    ["/docs/swagger-ui.css", "node_modules/swagger-ui-dist/swagger-ui.css"],
  ] as const) {
    expect(html).toContain(`"${file}"`);
    const res = await server.fetch(file);
    expect({ file, status: res.status }).toEqual({ file, status: 200 });
    expect((await res.text()) === (await Bun.file(join(REPO_ROOT, source)).text())).toBe(true);
  }
});
