/**
 * `npm start` as package.json writes it, run the way npm runs it (`sh -c`): it bundles the
 * service (scripts/bundle.ts) and execs Bun on the bundle. The bundle must be the whole
 * service (a demo-mode chat call, JSON and streamed, metered), serve the files it carries
 * (the docs page's script and style), and be the process the signal reaches (exec, so a
 * SIGTERM to what was started stops the service cleanly).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { bundleService } from "../../scripts/bundle";
import { RUNTIME_ENV } from "../../scripts/runtime-env";

const startScript = (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: { start: string } }).scripts.start;
const db = tempDatabase();
let server: RunningServer;

beforeAll(async () => {
  // npm puts node_modules/.bin (where `bun` is) on PATH; this Bun's own directory does the same here.
  server = await startServer({
    databaseUrl: db.databaseUrl,
    command: ["sh", "-c", startScript],
    env: { PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}` },
  });
});

afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

test("the started process is Bun running the bundle, not the source", () => {
  // The pid that was started (sh's) is Bun's now: `exec`.
  const [program, script] = readFileSync(`/proc/${server.proc.pid}/cmdline`, "utf8").split("\0");
  expect({ program: basename(program!), script }).toEqual({ program: "bun", script: "dist/server/index.js" });
});

test("the started process has Bun's runtime settings in its environment", () => {
  const environment = new Map(
    readFileSync(`/proc/${server.proc.pid}/environ`, "utf8")
      .split("\0")
      .map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]),
  );
  for (const [name, value] of Object.entries(RUNTIME_ENV)) expect({ name, value: environment.get(name) }).toEqual({ name, value });
});

test("the bundle serves and meters a demo-mode chat call, JSON and streamed", async () => {
  const secretKey = /secretKey:\s+(sk_live_\S+)/.exec(server.stdout.join("\n"))?.[1];
  expect(secretKey).toBeDefined();
  const json = { "content-type": "application/json" };
  const session = await server.fetch("/api/v1/sessions", {
    method: "POST",
    headers: { authorization: `Bearer ${secretKey}`, ...json },
    body: JSON.stringify({ appUserId: "npm-start", requestLimit: { monthlyUsd: 1 } }),
  });
  const { token } = (await session.json()) as { token: string };
  expect((await server.fetch("/api/v1/connections", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(200);

  const call = (stream: boolean) =>
    server.fetch("/api/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${secretKey}`, "x-service-user": "npm-start", ...json },
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream }),
    });
  const answer = await call(false);
  expect(answer.status).toBe(200);
  expect(((await answer.json()) as { object: string }).object).toBe("chat.completion");
  const streamed = await call(true);
  expect(streamed.status).toBe(200);
  expect(await streamed.text()).toContain("data: [DONE]");

  const usage = await server.fetch("/api/v1/usage?appUserId=npm-start", { headers: { authorization: `Bearer ${secretKey}` } });
  expect(usage.status).toBe(200);
  expect(((await usage.json()) as { data: unknown[] }).data).toHaveLength(2);
});

test("the files the bundle carries are served, byte for byte", async () => {
  for (const [path, file] of [
    ["/docs/swagger-ui.js", "swagger-ui-bundle.js"],
    ["/docs/swagger-ui.css", "swagger-ui.css"],
  ] as const) {
    const res = await server.fetch(path);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(readFileSync(join(REPO_ROOT, "node_modules/swagger-ui-dist", file)))).toBe(true);
  }
});

test("SIGTERM to the started process stops the service cleanly", async () => {
  expect(await server.stop()).toBe(0);
  expect(server.logLines().some((line) => line.msg === "stopped")).toBe(true);
});

test("bundles built at once into one directory leave one whole bundle and no staging", async () => {
  const outdir = join(db.dir, "bundle");
  const paths = await Promise.all([1, 2, 3].map(() => bundleService("src/index.ts", outdir)));
  expect(new Set(paths).size).toBe(1);
  expect(readdirSync(outdir).filter((name) => name.startsWith("."))).toEqual([]);
  // Whole: the bundle's operator CLI creates an app in a fresh database.
  const cli = Bun.spawnSync([process.execPath, paths[0]!, "cli", "app", "create", "--name", "bundled"], {
    cwd: db.dir,
    env: { PATH: process.env.PATH ?? "", DATABASE_URL: `sqlite:${join(db.dir, "bundled.sqlite")}` },
  });
  expect(cli.exitCode).toBe(0);
  expect(JSON.parse(cli.stdout.toString())).toMatchObject({ name: "bundled" });
});
