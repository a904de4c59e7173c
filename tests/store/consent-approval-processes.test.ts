/**
 * One consent token approved by processes sharing one SQLite file (the CLI, or a second
 * server with REDIS_URL): bun:sqlite is synchronous, so in one process approvals cannot
 * interleave at all, and only separate processes can race the token's check against its
 * use. BEGIN IMMEDIATE must serialize them: one grant, however many approve at once.
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { openSqliteStore } from "../../src/store/sqlite";
import { REPO_ROOT, tempDatabase } from "../helpers/server";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

setDefaultTimeout(60_000);
const db = tempDatabase();
afterAll(() => db.cleanup());

const CHILD = `${REPO_ROOT}/tests/helpers/approve-consent-child.ts`;

/** Reads lines from a child's stdout as they come. */
async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
      yield buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
    }
  }
}

test("six processes approving one consent token at once: exactly one grant is created", async () => {
  const store = openSqliteStore(db.path);
  const { app } = await createAppWithKey(store.apps, "raced", ["https://r.example"], Date.now());
  const token = await store.grants.createConsentRequest(
    { appId: app.id, usdCapNano: 1_000_000_000, maxUses: null, ttlSeconds: 60, origin: "https://r.example", state: "" },
    Date.now(),
    60_000,
  );
  await store.close();

  const children = Array.from({ length: 6 }, () =>
    Bun.spawn([process.execPath, CHILD, db.path, token], { cwd: REPO_ROOT, stdin: "pipe", stdout: "pipe", stderr: "inherit" }),
  );
  const outputs = children.map((child) => lines(child.stdout));
  // Every child has its store open before any of them approves.
  for (const output of outputs) expect((await output.next()).value).toBe("ready");
  for (const child of children) {
    child.stdin.write("go\n");
    await child.stdin.flush();
  }
  const kinds = await Promise.all(outputs.map(async (output) => (await output.next()).value));
  expect(await Promise.all(children.map((c) => c.exited))).toEqual([0, 0, 0, 0, 0, 0]);

  expect(kinds.filter((k) => k === "approved")).toHaveLength(1);
  expect(kinds.filter((k) => k === "unusable")).toHaveLength(5);
  const check = openSqliteStore(db.path);
  expect(await check.grants.listForApp(app.id, 10)).toHaveLength(1);
  await check.close();
});
