/**
 * The bare forwarder (../bare-forwarder.ts) written as an Elysia route with the service's
 * own body schema (src/routes/chat.ts ChatCompletionRequest): what the framework and the
 * body validation cost by themselves, with no auth, limits or metering. For measurement.
 *
 *   UPSTREAM_BASE_URL=… bun scripts/bench/variants/elysia-forwarder.ts
 */
import { Elysia } from "elysia";
import { ChatCompletionRequest } from "../../../src/routes/chat";

const upstream = process.env.UPSTREAM_BASE_URL;
if (!upstream) throw new Error("UPSTREAM_BASE_URL is required");
const target = `${upstream.replace(/\/+$/, "")}/chat/completions`;

const app = new Elysia()
  .post(
    "/api/v1/chat/completions",
    async ({ body }) => {
      const response = await fetch(target, {
        method: "POST",
        headers: { authorization: "Bearer bench", "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return new Response(response.body, {
        status: response.status,
        headers: { "content-type": response.headers.get("content-type") ?? "application/json" },
      });
    },
    { body: ChatCompletionRequest },
  )
  .listen({ hostname: "127.0.0.1", port: 0, idleTimeout: 0 });

console.log(JSON.stringify({ url: `http://127.0.0.1:${app.server!.port}`, port: app.server!.port }));
process.on("SIGTERM", () => void app.server!.stop(true).then(() => process.exit(0)));
