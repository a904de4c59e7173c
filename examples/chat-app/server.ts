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
import { join } from "node:path";
// The package as built in this repository (npm test builds it; `npx tsc -p packages/client` does too).
import { createServerClient, ProxyError } from "../../packages/client/dist/server.js";

// What `app create` printed; said plainly when missing, since it is the first step a newcomer can skip.
const missing = ["APP_ID", "SECRET_KEY"].filter((name) => !process.env[name]);
if (missing.length > 0) {
  console.error(
    `${missing.join(" and ")} must be set: the appId and secretKey that \`npm run cli -- app create\` printed (README "Quick start with the example app")`,
  );
  process.exit(2);
}

const PROXY_URL = process.env.PROXY_URL || "http://localhost:8787";
const APP_ID = process.env.APP_ID!;
const proxy = createServerClient({ baseUrl: PROXY_URL, secretKey: process.env.SECRET_KEY! });
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
  hostname: process.env.HOST ?? "127.0.0.1",
  port: Number(process.env.PORT ?? 3000),
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
      const html = (await Bun.file(join(HERE, "index.html")).text()).replace("__CONFIG__", JSON.stringify({ proxyUrl: PROXY_URL, appId: APP_ID }));
      return new Response(html, { headers: { "content-type": "text/html; charset=utf-8" } });
    }
    return new Response("not found", { status: 404 });
  },
});
console.log(`example app on http://${server.hostname}:${server.port}`);
