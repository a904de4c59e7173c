/**
 * An example app on the metered model proxy, using only @metered-proxy/client (README "Quick
 * start with the example app"). Its backend holds the app's secret key: it mints the user's
 * session token for the page and makes the metered chat calls. Its page (index.html) uses
 * the browser entry to connect the user through the hosted connect page, and shows the
 * streamed answers and the budget errors.
 *
 *   PROXY_URL=http://localhost:8787 APP_ID=app… SECRET_KEY=sk_live_… bun examples/chat-app/server.ts
 *
 * One demo user ("demo-user"): a real app takes the user from its own login.
 */
// First: the settings, checked (a missing one ends the process with what to set).
import { APP_ID, HOST, PORT, PROXY_URL, SECRET_KEY } from "./settings";
import { join } from "node:path";
// The package as built in this repository (npm test builds it; `npx tsc -p packages/client` does too).
import { createServerClient, ProxyError } from "../../packages/client/dist/server.js";

const proxy = createServerClient({ baseUrl: PROXY_URL, secretKey: SECRET_KEY });
/** The page's origin: the one the app must have registered (`app create --origin`). */
const ORIGIN = `http://${HOST}:${PORT}`;
const USER = "demo-user";
const HERE = import.meta.dir;
const CLIENT_DIST = join(HERE, "..", "..", "packages", "client", "dist");

/** An error of the service as the page reads it: the class name, and what a program needs to act. */
function errorAnswer(err: unknown): Response {
  // Chat calls and sessions throw the service's errors as their own classes (client 0.2).
  if (!(err instanceof ProxyError)) throw err;
  // The class name, the code and message, and the fields of its kind (BudgetExceededError: limitUsd, usedUsd, remainingUsd, resetsAt).
  return Response.json({ error: { ...err, name: err.name, message: err.message } }, { status: err.status });
}

/** POST /api/chat {prompt}: the answer streamed as plain text, metered against the user's budget. */
async function chat(request: Request): Promise<Response> {
  const { prompt } = (await request.json()) as { prompt: string };
  let stream;
  try {
    stream = await proxy.chat({ user: USER }).chat.completions.create({
      model: "openai/gpt-4o-mini",
      messages: [{ role: "user", content: prompt }],
      stream: true,
    });
  } catch (err) {
    return errorAnswer(err);
  }
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      for await (const chunk of stream) {
        const text = chunk.choices[0]?.delta?.content;
        if (text) controller.enqueue(encoder.encode(text));
      }
      controller.close();
    },
  });
  return new Response(body, { headers: { "content-type": "text/plain; charset=utf-8" } });
}

const server = Bun.serve({
  hostname: HOST,
  port: PORT,
  async fetch(request) {
    const { pathname } = new URL(request.url);
    if (pathname === "/api/session" && request.method === "POST") {
      return Response.json(await proxy.createSession({ appUserId: USER, requestLimit: { monthlyUsd: 5 } }));
    }
    if (pathname === "/api/chat" && request.method === "POST") return chat(request);
    if (/^\/client\/[a-z-]+\.js$/.test(pathname)) {
      return new Response(Bun.file(join(CLIENT_DIST, pathname.slice("/client/".length))), { headers: { "content-type": "text/javascript" } });
    }
    if (pathname === "/") {
      const config = { proxyUrl: PROXY_URL, appId: APP_ID, origin: ORIGIN };
      const html = (await Bun.file(join(HERE, "index.html")).text()).replace("__CONFIG__", JSON.stringify(config));
      return new Response(html, { headers: { "content-type": "text/html; charset=utf-8" } });
    }
    return new Response("not found", { status: 404 });
  },
});
console.log(`example app on http://${server.hostname}:${server.port}`);
