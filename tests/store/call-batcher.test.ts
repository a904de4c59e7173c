/**
 * CallBatcher (src/store/call-batcher.ts): calls that arrive while a batch is under
 * way go together in the next one; a call with nothing under way goes at once, alone.
 */
import { expect, test } from "bun:test";
import { CallBatcher } from "../../src/store/call-batcher";

/** A `send` whose batches finish only when the test says so. */
function controlledSend() {
  const batches: number[][] = [];
  const finishers: Array<(fail?: Error) => void> = [];
  const send = (inputs: number[]) => {
    batches.push(inputs);
    return new Promise<string[]>((resolve, reject) => finishers.push((fail) => (fail ? reject(fail) : resolve(inputs.map((n) => `r${n}`)))));
  };
  return { batches, send, finish: (at: number, fail?: Error) => finishers[at]!(fail) };
}

test("a call with nothing under way goes alone at once; the calls made meanwhile go together next, each with its own answer", async () => {
  const { batches, send, finish } = controlledSend();
  const batcher = new CallBatcher(send, 100);
  const first = batcher.call(1);
  expect(batches).toEqual([[1]]);
  const waiting = [2, 3, 4].map((n) => batcher.call(n));
  expect(batches).toEqual([[1]]);
  finish(0);
  expect(await first).toBe("r1");
  await Bun.sleep(0);
  expect(batches).toEqual([[1], [2, 3, 4]]);
  finish(1);
  expect(await Promise.all(waiting)).toEqual(["r2", "r3", "r4"]);
  // Nothing under way again: the next call goes at once.
  const later = batcher.call(5);
  expect(batches).toEqual([[1], [2, 3, 4], [5]]);
  finish(2);
  expect(await later).toBe("r5");
});

test("a queue longer than the largest batch goes in several, in arrival order", async () => {
  const { batches, send, finish } = controlledSend();
  const batcher = new CallBatcher(send, 2);
  const calls = [1, 2, 3, 4, 5, 6].map((n) => batcher.call(n));
  for (let at = 0; at < 4; at++) {
    await Bun.sleep(0);
    finish(at);
  }
  expect(await Promise.all(calls)).toEqual(["r1", "r2", "r3", "r4", "r5", "r6"]);
  expect(batches).toEqual([[1], [2, 3], [4, 5], [6]]);
});

test("a failed batch fails each of its calls, and the calls queued behind it still go", async () => {
  const { batches, send, finish } = controlledSend();
  const batcher = new CallBatcher(send, 10);
  const first = batcher.call(1);
  const second = [batcher.call(2), batcher.call(3)];
  finish(0);
  await first;
  await Bun.sleep(0);
  const fourth = batcher.call(4);
  finish(1, new Error("database away"));
  const settled = await Promise.allSettled(second);
  expect(settled.map((s) => (s.status === "rejected" ? String(s.reason) : s.status))).toEqual(["Error: database away", "Error: database away"]);
  await Bun.sleep(0);
  expect(batches).toEqual([[1], [2, 3], [4]]);
  finish(2);
  expect(await fourth).toBe("r4");
});

test("an answer of the wrong length fails the batch rather than misplacing answers", async () => {
  const batcher = new CallBatcher<number, string>(async (inputs) => inputs.slice(1).map(String), 10);
  await expect(batcher.call(1)).rejects.toThrow("a batch of 1 calls was answered with 0 results");
});
