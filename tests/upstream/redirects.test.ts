/**
 * Upstream requests never follow redirects (src/upstream/client.ts, `send`): a 3xx is an
 * upstream error, for chat calls (502, nothing charged: no generation began) and for
 * `/models`, `/generation` and `/key` alike (each fails as it fails on any other error
 * status). Real servers and Bun's real fetch: one at the upstream's address answering 307,
 * another behind its Location that would answer every request with a 200 (and counts them).
 * Followed, the redirect would have sent the call there and taken its answer as the upstream's.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chatTestApp } from "../helpers/chat-app";
import { errorOf } from "../helpers/test-app";
import { UpstreamClient } from "../../src/upstream/client";
import { lookUpGeneration } from "../../src/upstream/generation-record";

let elsewhereHits = 0;
/** The redirect's target: a 200 for every route the proxy asks an upstream for. */
const elsewhere = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: async (request) => {
    elsewhereHits++;
    const path = new URL(request.url).pathname;
    if (path.endsWith("/models")) return Response.json({ data: [{ id: "elsewhere/model", pricing: { prompt: "0", completion: "0" } }] });
    if (path.endsWith("/key")) return Response.json({ data: { limit: 10, limit_remaining: 9 } });
    if (path.endsWith("/generation")) return Response.json({ data: { id: "gen-elsewhere", total_cost: 0.001, tokens_prompt: 1, tokens_completion: 1 } });
    const body = (await request.json()) as { stream?: boolean };
    const completion = { id: "gen-elsewhere", object: "chat.completion", model: "openai/gpt-4o-mini", choices: [] };
    const usage = { prompt_tokens: 1, completion_tokens: 1, cost: 0.000001 };
    if (!body.stream) return Response.json({ ...completion, usage });
    const sse = `data: ${JSON.stringify({ ...completion, object: "chat.completion.chunk", usage })}\n\ndata: [DONE]\n\n`;
    return new Response(sse, { headers: { "content-type": "text/event-stream" } });
  },
});
/** The upstream's address: every request is redirected (307 keeps the method and the body). */
const redirecting = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (request) => {
    const { pathname, search } = new URL(request.url);
    return new Response("moved", { status: 307, headers: { location: `http://127.0.0.1:${elsewhere.port}${pathname}${search}` } });
  },
});
const baseUrl = `http://127.0.0.1:${redirecting.port}/api/v1`;
const realFetch = (url: string, init: RequestInit) => fetch(url, init);

afterAll(() => {
  elsewhere.stop(true);
  redirecting.stop(true);
});

describe("a redirect from the upstream is not followed", () => {
  for (const stream of [false, true]) {
    test(`chat, ${stream ? "stream" : "JSON"}: 502 upstream, nothing charged, nothing sent where it pointed`, async () => {
      const t = await chatTestApp({ fetchUpstream: realFetch, env: { UPSTREAM_BASE_URL: baseUrl } });
      await t.connect("alice", 5);
      const from = elsewhereHits;
      const res = await t.chat({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 20, stream });
      const error = await errorOf(res);
      expect({ status: error.status, code: error.code }).toEqual({ status: 502, code: "upstream" });
      expect(error.message).toContain("HTTP 307");
      await t.flush();
      expect(await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!)).toMatchObject({ status: "upstream_307", costNano: 0 });
      expect(elsewhereHits).toBe(from);
    });
  }

  const upstream = new UpstreamClient(realFetch, baseUrl, "sk-or-operator", 5000);
  const askedElsewhere = async (call: () => Promise<unknown>) => {
    const from = elsewhereHits;
    await call();
    return elsewhereHits - from;
  };

  test("GET /models fails as on any error status", async () => {
    expect(await askedElsewhere(async () => await expect(upstream.listModels()).rejects.toThrow("GET /models answered 307"))).toBe(0);
  });

  test("GET /key fails as on any error status", async () => {
    expect(await askedElsewhere(async () => await expect(upstream.keyInfo("sk-or-user")).rejects.toThrow("GET /key answered 307"))).toBe(0);
  });

  test("GET /generation finds no record, as on any error status", async () => {
    expect(await askedElsewhere(async () => expect(await lookUpGeneration(upstream, "gen-1")).toEqual({ found: false, why: "HTTP 307" }))).toBe(0);
  });
});
