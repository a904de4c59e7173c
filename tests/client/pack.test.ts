/**
 * The client library as an app gets it: `npm pack` in packages/client (its prepack builds
 * dist/), the tarball installed into a fresh project outside the repository with `openai`
 * linked from the repository's node_modules (offline), then
 * - the README's example and a file of type assertions compiled with tsc --strict under
 *   NodeNext resolution, which honours the package's `exports`: a missing entry, a missing
 *   declaration or a type that degraded to `any` fails it;
 * - the installed entry imported by plain Node, and the README's example run as written
 *   (with bun) against a real server.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cliCreateApp, connectOverHttp, REPO_ROOT, startServer, tempDatabase } from "../helpers/server";

// npm pack builds the package; tsc checks a project against openai's declarations.
setDefaultTimeout(120_000);

const PACKAGE_DIR = join(REPO_ROOT, "packages", "client");
const TSC = join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc");
const work = mkdtempSync(join(tmpdir(), "client-pack-"));
const consumer = join(work, "app");

/** Runs a command to its end; fails the test with its output unless it exits 0. */
async function run(command: string[], cwd: string): Promise<string> {
  const proc = Bun.spawn(command, { cwd, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${command.join(" ")} exited with ${code}:\n${stdout}\n${stderr}`);
  return stdout;
}

/** The TypeScript block of README "Client library (server side)". */
function readmeExample(): string {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Client library (server side)"));
  const block = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error("README.md: the client library's example was not found");
  return block;
}

/** Type assertions an app relies on; each @ts-expect-error fails tsc if its type were `any`. */
const TYPE_CHECKS = `
import OpenAI from "openai";
import {
  BudgetExceededError, createServerClient, ERROR_CODES, ProxyError, RateLimitedError,
  type ErrorCode, type UsageRow, type UserStatus, type WebhookEvent,
} from "@metered-proxy/client/server";

const client = createServerClient({ baseUrl: "http://localhost:8787", secretKey: "sk_live_x", fetch: globalThis.fetch });
export async function checks(): Promise<void> {
  const status: UserStatus = await client.getStatus("alice");
  const remaining: number = status.remainingUsd;
  const row: UsageRow | undefined = (await client.listUsage("alice", { limit: 10, cursor: "c", period: "2026-01" })).data[0];
  const session: { token: string; expiresAt: number } = await client.createSession({ appUserId: "alice" });
  const openai: OpenAI = client.chat({ grant: "gt_x" }, { maxRetries: 0 });
  const codes: readonly ErrorCode[] = ERROR_CODES;
  console.log(remaining, row?.reservedUsd, session.token, openai.baseURL, codes);
  // @ts-expect-error the codes are a closed list
  const teapot: ErrorCode = "teapot";
  // @ts-expect-error a user id is a string
  await client.getStatus(42);
  // @ts-expect-error a payer is required
  client.chat({});
  // @ts-expect-error limitUsd is a number
  const limit: string = ({} as BudgetExceededError).limitUsd;
  console.log(teapot, limit);
}
export function onError(err: unknown): number | null {
  if (err instanceof RateLimitedError) return err.retryAfter;
  if (err instanceof ProxyError) return err.status;
  return null;
}

// The browser entry, as an app's page uses it.
import { createBrowserClient, GrantDeniedError, PopupClosedError, type ConnectionStatus, type ConnectOutcome } from "@metered-proxy/client/browser";
const browserClient = createBrowserClient({ baseUrl: "http://localhost:8787", appId: "app1", getSessionToken: async () => "token" });
export async function browserChecks(): Promise<void> {
  const connection: ConnectionStatus = await browserClient.getConnection();
  const funding: "ok" | "invalid" = connection.fundingStatus;
  const outcome: ConnectOutcome = await browserClient.connect({ monthlyUsd: 5 });
  if (outcome.type === "connected") console.log(outcome.monthlyUsd.toFixed(2));
  const grant = await browserClient.requestGrant({ usd: 1, maxUses: 3 });
  const token: string = grant.grantToken;
  console.log(funding, token, GrantDeniedError.name, PopupClosedError.name);
  // @ts-expect-error an outcome's type is one of three
  const wrong: ConnectOutcome["type"] = "approved";
  // @ts-expect-error the session token comes from a function
  createBrowserClient({ baseUrl: "x", appId: "a", getSessionToken: "token" });
  console.log(wrong);
}
export function onEvent(event: WebhookEvent): string {
  if (event.type === "grant.exhausted") return event.data.reason;
  // @ts-expect-error connection.revoked has no monthlyUsd
  if (event.type === "connection.revoked") return String(event.data.monthlyUsd);
  return event.type;
}
`;

/** What `npm pack --json` said it packed. */
let packedFiles: string[] = [];

beforeAll(async () => {
  const packed = JSON.parse(await run(["npm", "pack", "--json", "--pack-destination", work], PACKAGE_DIR)) as Array<{
    filename: string;
    files: Array<{ path: string }>;
  }>;
  packedFiles = packed[0]!.files.map((f) => f.path);
  mkdirSync(consumer);
  writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  const tarball = join(work, packed[0]!.filename);
  await run(
    ["npm", "install", "--no-save", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", tarball, join(REPO_ROOT, "node_modules", "openai")],
    consumer,
  );
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("npm pack of @metered-proxy/client", () => {
  test("the tarball holds the built entry and its declarations, not the sources", () => {
    expect(packedFiles).toEqual(
      expect.arrayContaining(["package.json", "dist/server.js", "dist/server.d.ts", "dist/webhooks.js", "dist/browser.js", "dist/browser.d.ts"]),
    );
    expect(packedFiles.filter((p) => !p.startsWith("dist/") && p !== "package.json")).toEqual([]);
  });

  test("an app's TypeScript compiles against the installed package: tsc --strict, NodeNext", async () => {
    writeFileSync(join(consumer, "readme-example.ts"), readmeExample());
    writeFileSync(join(consumer, "type-checks.ts"), TYPE_CHECKS);
    const compilerOptions = {
      strict: true,
      noEmit: true,
      target: "ES2022",
      module: "NodeNext",
      moduleResolution: "NodeNext",
      lib: ["ES2022", "DOM"],
      types: [],
    };
    writeFileSync(join(consumer, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["readme-example.ts", "type-checks.ts"] }));
    await run([process.execPath, TSC, "-p", "."], consumer);
  });

  test("plain Node imports the installed ./server entry", async () => {
    const script = "const m = await import('@metered-proxy/client/server'); console.log(JSON.stringify(Object.keys(m).sort()));";
    const names = JSON.parse(await run(["node", "--input-type=module", "-e", script], consumer)) as string[];
    expect(names).toEqual(expect.arrayContaining(["createServerClient", "toProxyError", "verifyWebhook", "ProxyError", "BudgetExceededError", "ERROR_CODES"]));
  });

  test("the README's example runs as written against a real server", async () => {
    const db = tempDatabase();
    const { secretKey } = await cliCreateApp(db.databaseUrl, "readme");
    const server = await startServer({ databaseUrl: db.databaseUrl });
    try {
      // Alice approves in her browser between the README's first and second steps.
      await connectOverHttp(server, secretKey, "alice", 5);
      const example = readmeExample();
      expect(example).toContain('baseUrl: "http://localhost:8787", secretKey: "sk_live_..."');
      writeFileSync(
        join(consumer, "run-example.ts"),
        example.replace('baseUrl: "http://localhost:8787", secretKey: "sk_live_..."', `baseUrl: "${server.baseUrl}", secretKey: "${secretKey}"`),
      );
      const lines = (await run([process.execPath, "run-example.ts"], consumer)).trim().split("\n");
      expect(lines[0]).toBe("true 5");
      expect(lines[1]).toBeTruthy();
      const [cost, cursor] = lines[2]!.split(" ");
      expect(Number(cost)).toBeGreaterThan(0);
      expect(cursor).toBe("null");
    } finally {
      await server.stop();
      db.cleanup();
    }
  });
});
