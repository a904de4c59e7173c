/**
 * A webhook receiver as an app would run one: its own process (`bun tests/helpers/webhook-receiver.ts`),
 * verifying every request with the `standardwebhooks` package, the reference implementation
 * of the signing scheme. Tests steer it over HTTP:
 * - `POST /_control {"secret": "whsec_…", "fail": N, "status": 500}`: the secret to verify with,
 *   and answer the next N deliveries with `status` instead of 204;
 * - `GET /_received`: every delivery so far, `{webhookId, verified, status, event}` each.
 * It prints `listening <port>` once ready.
 */
import { Webhook } from "standardwebhooks";

interface Received {
  webhookId: string | null;
  verified: boolean;
  /** What the receiver answered. */
  status: number;
  event: { type: string; timestamp: string; data: Record<string, unknown> } | null;
}

let secret = "";
let failNext = 0;
let failStatus = 500;
const received: Received[] = [];

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: Number(process.env.PORT ?? 0),
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/_control") {
      const control = (await request.json()) as { secret?: string; fail?: number; status?: number };
      if (control.secret !== undefined) secret = control.secret;
      if (control.fail !== undefined) failNext = control.fail;
      if (control.status !== undefined) failStatus = control.status;
      return new Response(null, { status: 204 });
    }
    if (url.pathname === "/_received") return Response.json(received);
    const body = await request.text();
    let event: Received["event"] = null;
    let verified = false;
    try {
      event = new Webhook(secret).verify(body, Object.fromEntries(request.headers)) as Received["event"];
      verified = true;
    } catch {
      // recorded as not verified, answered 401 below
    }
    let status = verified ? 204 : 401;
    if (verified && failNext > 0) {
      failNext--;
      status = failStatus;
    }
    received.push({ webhookId: request.headers.get("webhook-id"), verified, status, event });
    return new Response(null, { status });
  },
});
console.log(`listening ${server.port}`);
