/**
 * The client library as an app gets it, with `openai` 6 (the repository's own devDependency,
 * linked offline): the tarball of `npm pack`, installed into a fresh app outside the
 * repository (scratch-app.ts), then
 * - npm's install prints no warning (no ERESOLVE for the peer range, no EBADENGINE) on the
 *   Node this runs on, the project's Node 20;
 * - the examples of the root README and of the package's own README, a file of type
 *   assertions and the chat calls compiled with tsc --strict under NodeNext resolution:
 *   a missing entry, a missing declaration or a type that degraded to `any` fails it;
 * - the installed entry imported by plain Node, and the examples and the chat calls run with
 *   Bun against a real server.
 * tests/client/pack-openai7.test.ts does the same with `openai` 7 from the npm registry.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/server";
import { BROWSER_PRELUDE, CHAT_CALLS, expectChatCalls, expectReadmeOutput, serverWithUsers, TYPE_CHECKS } from "./consumer-code";
import { markdownExample, pointedAt, run, scratchApp, type ScratchApp } from "./scratch-app";

// npm pack builds the package; tsc checks a project against openai's declarations.
setDefaultTimeout(120_000);

const ROOT_SERVER_EXAMPLE = () => markdownExample("README.md", "## Client library (server side)");
const PACKAGE_SERVER_EXAMPLE = () => markdownExample("packages/client/README.md", "## Server side");

let app: ScratchApp;

beforeAll(async () => {
  app = await scratchApp(join(REPO_ROOT, "node_modules", "openai"), ["--offline", "--ignore-scripts"]);
});
afterAll(() => app?.remove());

describe("npm pack of @metered-proxy/client, with openai 6", () => {
  test("the tarball holds the built entries, their declarations, the README and the changelog, not the sources", () => {
    expect(app.packedFiles).toEqual(
      expect.arrayContaining([
        "package.json",
        "README.md",
        "CHANGELOG.md",
        "dist/server.js",
        "dist/server.d.ts",
        "dist/webhooks.js",
        "dist/browser.js",
        "dist/browser.d.ts",
      ]),
    );
    expect(app.packedFiles.filter((p) => !p.startsWith("dist/"))).toEqual(["CHANGELOG.md", "README.md", "package.json"]);
  });

  test("both READMEs install the tarball by the name npm pack gives it, and npm would publish it, to public access", async () => {
    const manifest = JSON.parse(readFileSync(join(REPO_ROOT, "packages/client/package.json"), "utf8")) as Record<string, unknown>;
    expect(app.tarball).toBe(`metered-proxy-client-${manifest.version as string}.tgz`);
    expect(readFileSync(join(REPO_ROOT, "packages/client/README.md"), "utf8")).toContain(`npm install ./${app.tarball} openai`);
    expect(readFileSync(join(REPO_ROOT, "README.md"), "utf8")).toContain(`npm install /path/to/${app.tarball} openai`);
    expect(manifest.private).toBeUndefined();
    // --dry-run sends nothing; --offline keeps npm from asking the registry anything.
    const dryRun = await run(["npm", "publish", "--dry-run", "--offline", "--json"], join(REPO_ROOT, "packages/client"));
    const report = JSON.parse(dryRun.stdout) as Record<string, { id: string; files: Array<{ path: string }> }>;
    expect(report["@metered-proxy/client"]!.id).toBe(`@metered-proxy/client@${manifest.version as string}`);
    expect(report["@metered-proxy/client"]!.files.map((f) => f.path).sort()).toEqual([...app.packedFiles].sort());
    expect(dryRun.stderr).toContain("with tag latest and public access (dry-run)");
  });

  test("npm installs it beside openai 6 without a warning: the peer range takes it, no engine refuses this Node", async () => {
    expect(app.openaiVersion).toMatch(/^6\./);
    expect(app.installOutput).not.toContain("ERESOLVE");
    expect(app.installOutput).not.toContain("EBADENGINE");
    expect(app.installOutput).not.toMatch(/npm warn/i);
    const nodeMajor = Number((await run(["node", "--version"], app.dir)).stdout.trim().replace(/^v/, "").split(".")[0]);
    expect(nodeMajor).toBeGreaterThanOrEqual(20);
  });

  test("an app's TypeScript compiles against the installed package: both READMEs' examples, type assertions, chat calls", async () => {
    await app.compile({
      "root-readme-server.ts": ROOT_SERVER_EXAMPLE(),
      "root-readme-browser.ts": BROWSER_PRELUDE + markdownExample("README.md", "## Client library (browser side)"),
      "package-readme-server.ts": PACKAGE_SERVER_EXAMPLE(),
      "package-readme-browser.ts": BROWSER_PRELUDE + markdownExample("packages/client/README.md", "## Browser side"),
      "type-checks.ts": TYPE_CHECKS,
      "chat-calls.ts": CHAT_CALLS,
    });
  });

  test("plain Node imports the installed ./server entry", async () => {
    const script = "const m = await import('@metered-proxy/client/server'); console.log(JSON.stringify(Object.keys(m).sort()));";
    const names = JSON.parse((await run(["node", "--input-type=module", "-e", script], app.dir)).stdout) as string[];
    expect(names).toEqual(expect.arrayContaining(["createServerClient", "toProxyError", "verifyWebhook", "ProxyError", "BudgetExceededError", "ERROR_CODES"]));
  });

  test("the root README's example runs as written against a real server", async () => {
    const { server, secretKey, stop } = await serverWithUsers();
    try {
      const lines = expectReadmeOutput(await app.runWithBun("run-root-readme.ts", pointedAt(ROOT_SERVER_EXAMPLE(), server.baseUrl, secretKey)));
      // Its listUsage line also prints the page's cursor: one row, so no next page.
      expect(lines[2]!.split(" ")[1]).toBe("null");
    } finally {
      await stop();
    }
  });

  test("the package README's example runs as written against a real server", async () => {
    const { server, secretKey, stop } = await serverWithUsers();
    try {
      expectReadmeOutput(await app.runWithBun("run-package-readme.ts", pointedAt(PACKAGE_SERVER_EXAMPLE(), server.baseUrl, secretKey)));
    } finally {
      await stop();
    }
  });

  test("chat calls: answers JSON and streamed; the service's refusals thrown as our classes, JSON and streamed", async () => {
    const { server, secretKey, stop } = await serverWithUsers();
    try {
      expectChatCalls(await app.runWithBun("run-chat-calls.ts", CHAT_CALLS, { PROXY_URL: server.baseUrl, SECRET_KEY: secretKey }));
    } finally {
      await stop();
    }
  });
});
