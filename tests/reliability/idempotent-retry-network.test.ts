/**
 * Issue 7, durability 3: a request retried by a client after a network error is not
 * charged twice when it carries the same Idempotency-Key. The official `openai` SDK talks
 * to a real proxy process through a TCP relay that breaks chosen connections after the
 * request reached the proxy, so the SDK sees a genuine socket error and retries.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import OpenAI from "openai";
import { startCuttingProxy, type CuttingProxy } from "../helpers/cutting-proxy";
import { nano, startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { MODEL, completionText } from "../e2e/clients/harness";

setDefaultTimeout(60_000);

let stack: ProxyStack;
const relays: CuttingProxy[] = [];

beforeAll(async () => {
  stack = await startProxyStack();
});

afterAll(async () => {
  for (const relay of relays) relay.stop();
  await stack?.stop();
});

/** An SDK client for `user` whose connections go through a relay that cuts the ones `cutAfter` picks. */
function clientThrough(user: string, cutAfter: (connection: number) => number | null, maxRetries = 2) {
  const relay = startCuttingProxy(stack.server.port, cutAfter);
  relays.push(relay);
  const client = new OpenAI({ baseURL: `${relay.url}/api/v1`, apiKey: stack.secretKey, defaultHeaders: { "x-service-user": user }, maxRetries });
  return { client, relay };
}

/** The user's charged rows and what the mock served for them, once every row is written. */
async function chargesOf(user: string, expectedRows: number) {
  const rows = await stack.waitForUsage(user, expectedRows);
  const generationIds = new Set(rows.map((r) => r.generationId));
  const served = stack.mock.served.filter((s) => generationIds.has(s.id));
  return { rows, served, spentUsd: (await stack.status(user)).usage.monthlyUsd };
}

describe("a JSON call whose answer is lost on the way back", () => {
  test("with an Idempotency-Key, the SDK's retry gets the same answer and the user is charged once", async () => {
    await stack.connect("keyed", 5);
    // The first connection dies just before the answer's first byte reaches the client.
    const { client, relay } = clientThrough("keyed", (i) => (i === 0 ? 0 : null));
    const servedBefore = stack.mock.served.length;
    const completion = await client.chat.completions.create(
      { model: MODEL, messages: [{ role: "user", content: "hi [[mock tokens=6]]" }] },
      { headers: { "Idempotency-Key": "net-json-1" } },
    );
    expect(completion.choices[0]!.message.content).toBe(completionText(6));
    expect(relay.cuts).toBe(1);
    expect(relay.connections).toBe(2);
    expect(stack.mock.served.length - servedBefore).toBe(1);
    const { rows, spentUsd } = await chargesOf("keyed", 1);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.generationId).toBe(completion.id);
    expect(nano(spentUsd)).toBe(nano(rows[0]!.costUsd));
  });

  test("without one, the same lost answer is paid twice (why the key exists)", async () => {
    await stack.connect("unkeyed", 5);
    const { client, relay } = clientThrough("unkeyed", (i) => (i === 0 ? 0 : null));
    await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi [[mock tokens=6]]" }] });
    expect(relay.cuts).toBe(1);
    const { rows, served } = await chargesOf("unkeyed", 2);
    expect(rows).toHaveLength(2);
    expect(served).toHaveLength(2);
  });
});

describe("a stream cut mid-way by the network", () => {
  test("the app's retry with the same key gets the whole stream (after 409s while the proxy still drains it), charged once", async () => {
    await stack.connect("streamer", 5);
    // Connection 0 dies after about one event; the retries pass.
    const { client, relay } = clientThrough("streamer", (i) => (i === 0 ? 700 : null), 6);
    const body = { model: MODEL, messages: [{ role: "user" as const, content: "hi [[mock tokens=8 pause_ms=50]]" }], stream: true as const };
    const options = { headers: { "Idempotency-Key": "net-sse-1" } };

    let firstAttemptText = "";
    await expect(
      (async () => {
        for await (const chunk of await client.chat.completions.create(body, options)) firstAttemptText += chunk.choices[0]?.delta?.content ?? "";
      })(),
    ).rejects.toThrow();
    expect(relay.cuts).toBe(1);
    expect(firstAttemptText.length).toBeLessThan(completionText(8).length);

    let text = "";
    for await (const chunk of await client.chat.completions.create(body, options)) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe(completionText(8));

    const { rows, served, spentUsd } = await chargesOf("streamer", 1);
    expect(served).toHaveLength(1);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: "client_disconnected", source: "upstream" });
    expect(nano(rows[0]!.costUsd)).toBe(nano(served[0]!.costUsd));
    expect(nano(spentUsd)).toBe(nano(rows[0]!.costUsd));
  });
});
