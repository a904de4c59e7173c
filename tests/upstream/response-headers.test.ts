/**
 * What of the upstream's answer headers reaches the app (src/upstream/headers.ts): the
 * generation id, and the proxy's own RateLimit-* fields, never the upstream's
 * `x-ratelimit-*`, which tell the operator's key's quota (the mock sends them on every
 * answer, as OpenRouter does) and would contradict the limits the app is held to.
 */
import { expect, test } from "bun:test";
import { chatTestApp } from "../helpers/chat-app";

const ask = (stream: boolean) => ({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 20, stream });

for (const stream of [false, true]) {
  test(`${stream ? "stream" : "JSON"}: the upstream's x-ratelimit-* stay behind; the proxy's ratelimit-* and the generation id go to the app`, async () => {
    const t = await chatTestApp({ env: { RL_CHAT_LIMIT: "7" } });
    await t.connect("alice", 5);
    const res = await t.chat(ask(stream));
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    // The mock announced its own quota on this very answer.
    const sent = await t.mock.fetch(
      new Request("http://upstream.test/api/v1/chat/completions", {
        method: "POST",
        headers: { authorization: "Bearer sk-or-test-upstream-key", "content-type": "application/json" },
        body: JSON.stringify(ask(stream)),
      }),
    );
    expect(sent.headers.get("x-ratelimit-remaining")).not.toBeNull();
    await sent.arrayBuffer();

    const relayed = [...res.headers.keys()];
    expect(relayed.filter((name) => name.startsWith("x-ratelimit"))).toEqual([]);
    expect(res.headers.get("ratelimit-limit")).toBe("7");
    expect(res.headers.get("ratelimit-remaining")).toBe("6");
    expect(res.headers.get("x-generation-id")).toBe(t.mock.served[0]!.id);
  });
}
