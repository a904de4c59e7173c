/**
 * The packed client library with `openai` 7, the other major its peer range admits. openai 7
 * asks for Node 22, so it cannot be a devDependency of this repository (npm would warn on the
 * project's Node 20): the scratch app (scratch-app.ts) installs it from the npm registry at
 * test time, and the app runs under Bun, as an app on this machine would. What
 * tests/client/pack.test.ts checks with openai 6 is checked here with 7: the package
 * README's examples, the type assertions and the chat calls compile against openai 7's
 * declarations, and the example and the chat calls run against a real server.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { BROWSER_PRELUDE, CHAT_CALLS, expectChatCalls, expectReadmeOutput, serverWithUsers, TYPE_CHECKS } from "./consumer-code";
import { markdownExample, pointedAt, scratchApp, type ScratchApp } from "./scratch-app";

// npm fetches openai from the registry (or its cache); tsc checks against its declarations.
setDefaultTimeout(180_000);

/** The release the client was last tested with before 0.2 (its peer pinned it), and the newest 7.x to date. */
const OPENAI_7 = "7.57.0";
const PACKAGE_SERVER_EXAMPLE = () => markdownExample("packages/client/README.md", "## Server side");

let app: ScratchApp;

beforeAll(async () => {
  // --ignore-scripts: nothing of the two packages needs one. The EBADENGINE warning npm
  // prints for openai 7 on Node 20 is expected here: Bun runs the app.
  app = await scratchApp(`openai@${OPENAI_7}`, ["--ignore-scripts"]);
});
afterAll(() => app?.remove());

describe(`npm pack of @metered-proxy/client, with openai ${OPENAI_7}`, () => {
  test("npm installs it beside openai 7: the peer range takes it", () => {
    expect(app.openaiVersion).toBe(OPENAI_7);
    expect(app.installOutput).not.toContain("ERESOLVE");
  });

  test("the package README's examples, the type assertions and the chat calls compile against openai 7's declarations", async () => {
    await app.compile({
      "package-readme-server.ts": PACKAGE_SERVER_EXAMPLE(),
      "package-readme-browser.ts": BROWSER_PRELUDE + markdownExample("packages/client/README.md", "## Browser side"),
      "type-checks.ts": TYPE_CHECKS,
      "chat-calls.ts": CHAT_CALLS,
    });
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
