/**
 * The first upstream call of an event-loop turn is issued at once, the others started in
 * the same turn together at its end (src/upstream/turn-batched-fetch.ts); each still gets
 * its own answer or failure.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { turnBatchedFetch } from "../../src/upstream/turn-batched-fetch";
import type { FetchUpstream } from "../../src/upstream/client";

/** Resolves after every immediate queued before it: the end of the current turn. */
const endOfTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function recordingFetch() {
  const issued: string[] = [];
  const fetchNow: FetchUpstream = async (url) => {
    issued.push(url);
    return new Response(`answer to ${url}`);
  };
  return { issued, fetchNow };
}

describe("turnBatchedFetch", () => {
  test("the first call of a turn goes at once, the rest of the turn's together after it, in order", async () => {
    const { issued, fetchNow } = recordingFetch();
    const batched = turnBatchedFetch(fetchNow);
    const answers = ["a", "b", "c"].map((url) => batched(url, {}));
    await Promise.resolve();
    expect(issued).toEqual(["a"]);
    await endOfTurn();
    expect(issued).toEqual(["a", "b", "c"]);
    expect(await Promise.all(answers.map(async (answer) => (await answer).text()))).toEqual(["answer to a", "answer to b", "answer to c"]);
  });

  test("each turn starts afresh: its first call goes at once, the next waits for its end", async () => {
    const { issued, fetchNow } = recordingFetch();
    const batched = turnBatchedFetch(fetchNow);
    const calls = [batched("one", {}), batched("two", {})];
    await endOfTurn();
    expect(issued).toEqual(["one", "two"]);
    calls.push(batched("three", {}), batched("four", {}));
    expect(issued).toEqual(["one", "two", "three"]);
    await endOfTurn();
    expect(issued).toEqual(["one", "two", "three", "four"]);
    expect(await Promise.all(calls.map(async (call) => (await call).text()))).toEqual(["one", "two", "three", "four"].map((url) => `answer to ${url}`));
  });

  test("a call that fails, by a throw or a rejection, fails alone", async () => {
    const issued: string[] = [];
    const fetchNow: FetchUpstream = (url) => {
      issued.push(url);
      if (url === "throws") throw new TypeError("bad url");
      if (url === "rejects") return Promise.reject(new Error("refused"));
      return Promise.resolve(new Response(url));
    };
    const batched = turnBatchedFetch(fetchNow);
    const results = await Promise.allSettled(["before", "throws", "rejects", "after"].map((url) => batched(url, {})));
    expect(issued).toEqual(["before", "throws", "rejects", "after"]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled"]);
    expect(String((results[1] as PromiseRejectedResult).reason)).toContain("bad url");
    expect(String((results[2] as PromiseRejectedResult).reason)).toContain("refused");
    expect(await (results[3] as PromiseFulfilledResult<Response>).value.text()).toBe("after");
  });

  describe("with Bun's fetch against a real server", () => {
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (request) => new Response(`echo ${await request.text()}`),
    });
    afterAll(() => server.stop(true));

    test("concurrent calls each get their own answer", async () => {
      const batched = turnBatchedFetch((url, init) => fetch(url, init));
      const bodies = Array.from({ length: 50 }, (_, i) => `call ${i}`);
      const answers = await Promise.all(bodies.map(async (body) => (await batched(`http://127.0.0.1:${server.port}/`, { method: "POST", body })).text()));
      expect(answers).toEqual(bodies.map((body) => `echo ${body}`));
    });

    test("an aborted call rejects and the others in its batch are answered", async () => {
      const batched = turnBatchedFetch((url, init) => fetch(url, init));
      const abort = new AbortController();
      const url = `http://127.0.0.1:${server.port}/`;
      const calls = [batched(url, { method: "POST", body: "kept" }), batched(url, { method: "POST", body: "dropped", signal: abort.signal })];
      abort.abort(new Error("client left"));
      const [kept, dropped] = (await Promise.allSettled(calls)) as [PromiseSettledResult<Response>, PromiseSettledResult<Response>];
      expect(kept.status).toBe("fulfilled");
      expect(await (kept as PromiseFulfilledResult<Response>).value.text()).toBe("echo kept");
      expect(dropped.status).toBe("rejected");
    });
  });
});
