/**
 * Verifies a webhook delivery as the Standard Webhooks scheme the service signs with
 * (README "Webhooks", ARCHITECTURE.md §6 "Delivery"): `webhook-signature` lists
 * `v1,<base64 HMAC-SHA256>` entries, each over `<webhook-id>.<webhook-timestamp>.<body>`,
 * keyed with the base64 key after the endpoint secret's `whsec_` prefix. Web Crypto only,
 * so it runs wherever `crypto.subtle` does (Node ≥ 20, Bun, Deno, edge runtimes).
 */
import { WEBHOOK_EVENT_TYPES, type WebhookEvent } from "./webhook-events.js";

/** How far a delivery's timestamp may be from our clock: older ones may be replays. */
const TOLERANCE_SECONDS = 5 * 60;
const SECRET_PREFIX = "whsec_";

/** Node's `req.headers` (lower-case names) or a fetch `Headers`. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/** The delivery is not a genuine, fresh event from the service: answer it 4xx and ignore it. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}

/**
 * Checks a delivery's signature and timestamp and returns its event. `body` must be the
 * request's raw body, exactly as received (not re-serialised JSON): the signature covers
 * its bytes. Throws WebhookVerificationError when anything does not hold.
 */
export async function verifyWebhook(secret: string, body: string | Uint8Array, headers: WebhookHeaders): Promise<WebhookEvent> {
  const id = headerValue(headers, "webhook-id");
  const timestamp = headerValue(headers, "webhook-timestamp");
  const signatures = headerValue(headers, "webhook-signature");
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature header");
  checkFreshness(timestamp);

  const bodyBytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const expected = await hmacSha256(secretKeyBytes(secret), concatBytes(new TextEncoder().encode(`${id}.${timestamp}.`), bodyBytes));
  // Several entries while the sender rotates keys; ours sends one. Any v1 match is enough.
  const matches = signatures.split(" ").some((entry) => {
    const [version, signature] = entry.split(",", 2);
    const candidate = version === "v1" && signature ? decodeBase64(signature) : null;
    return candidate !== null && sameBytes(candidate, expected);
  });
  if (!matches) throw new WebhookVerificationError("no webhook-signature matches this body and secret");
  return parseEvent(new TextDecoder().decode(bodyBytes));
}

function checkFreshness(timestamp: string): void {
  const seconds = /^\d+$/.test(timestamp) ? Number(timestamp) : Number.NaN;
  if (!Number.isSafeInteger(seconds)) throw new WebhookVerificationError("webhook-timestamp is not Unix seconds");
  const skew = Math.abs(Date.now() / 1000 - seconds);
  if (skew > TOLERANCE_SECONDS) throw new WebhookVerificationError(`webhook-timestamp is ${Math.round(skew)} s away from now (at most ${TOLERANCE_SECONDS} s)`);
}

function secretKeyBytes(secret: string): Uint8Array<ArrayBuffer> {
  const key = decodeBase64(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret);
  if (!key || key.length === 0) throw new WebhookVerificationError("the secret is not a whsec_ secret (base64 after the prefix)");
  return key;
}

async function hmacSha256(key: Uint8Array<ArrayBuffer>, data: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  const cryptoKey = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", cryptoKey, data));
}

/** Compares every byte whatever the first difference, so the time taken says nothing about where it is. */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  return difference === 0;
}

function decodeBase64(text: string): Uint8Array<ArrayBuffer> | null {
  try {
    return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
  } catch {
    return null;
  }
}

function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array<ArrayBuffer> {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return joined;
}

function headerValue(headers: WebhookHeaders, name: string): string | null {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name);
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return (Array.isArray(value) ? value[0] : value) ?? null;
}

function parseEvent(text: string): WebhookEvent {
  let event: unknown;
  try {
    event = JSON.parse(text);
  } catch {
    throw new WebhookVerificationError("the body is not JSON");
  }
  const { type, timestamp, data } = (event ?? {}) as Record<string, unknown>;
  if (!(WEBHOOK_EVENT_TYPES as readonly unknown[]).includes(type) || typeof timestamp !== "string" || typeof data !== "object" || data === null) {
    // A type this version does not know (a newer service) is refused too: its data would be mistyped.
    throw new WebhookVerificationError(`not an event this client knows: type ${JSON.stringify(type)}`);
  }
  return event as WebhookEvent;
}
