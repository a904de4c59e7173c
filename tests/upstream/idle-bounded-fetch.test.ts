/**
 * idleBoundedFetch (src/upstream/idle-bounded-fetch.ts) against a real server, with its
 * clock in the test's hands: an idle connection is reused while the pool was emptied less
 * than the bound ago, and a request after that opens a fresh one. The relay in front of the
 * server counts the connections Bun's fetch opened (its keep-alive is set far above the
 * test's run, so it closes nothing itself). tests/e2e/upstream-idle-connections.test.ts
 * shows what the bound is for.
 */
import { afterAll, expect, test } from "bun:test";
import { idleBoundedFetch } from "../../src/upstream/idle-bounded-fetch";
import { startIdleClosingRelay } from "../helpers/idle-closing-relay";

const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: async (request) => Response.json({ got: await request.text() }) });
const relay = startIdleClosingRelay(server.port!, 10 * 60_000);
afterAll(() => {
  relay.stop();
  server.stop(true);
});

test("idle connections are reused within the bound; the first request past it opens a fresh one", async () => {
  let now = 0;
  const send = idleBoundedFetch(1000, () => now);
  const post = async () => {
    const res = await send(`${relay.url}/chat`, { method: "POST", body: "{}" });
    expect(res.status).toBe(200);
    await res.text();
  };
  await post();
  now = 400;
  await post();
  now = 999;
  await post();
  expect(relay.connections).toBe(1);
  // The pool was emptied at 0: at 1000 its connection may have been idle that long.
  now = 1000;
  await post();
  expect(relay.connections).toBe(2);
  now = 1500;
  await post();
  expect(relay.connections).toBe(2);
});
