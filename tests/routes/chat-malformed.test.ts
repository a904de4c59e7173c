import { expect, test } from "bun:test";
import { chatTestApp } from "../helpers/chat-app";

test("an upstream 200 whose body is not JSON is 502 and costs the user nothing (clients retry 502s)", async () => {
  const t = await chatTestApp({ fetchUpstream: async () => new Response("<html>gateway hiccup</html>", { headers: { "content-type": "text/html" } }) });
  await t.connect("alice", 1);
  const res = await t.chat({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });
  expect(res.status).toBe(502);
  await t.flush();
  const row = (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;
  expect(row).toMatchObject({ status: "upstream_malformed", costNano: 0 });
  expect(t.logs.some((l) => l.includes("not JSON"))).toBe(true);
});
