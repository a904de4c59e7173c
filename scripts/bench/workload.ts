/**
 * The three request shapes every arm is loaded with. The `[[mock …]]` directive in the
 * prompt steers packages/mock-upstream/src; the bench upstream (./upstream.ts) replays what the mock
 * answers to exactly these bodies, so both upstreams give the proxies the same bytes.
 */

export const MODEL = "openai/gpt-4o-mini";
/** Small enough that a reservation is tiny; large enough that nothing is clamped. */
const MAX_TOKENS = 64;

function body(stream: boolean, directive: string): string {
  return JSON.stringify({
    model: MODEL,
    messages: [
      { role: "system", content: "You are a concise assistant." },
      { role: "user", content: `Say hello to the benchmark. [[mock ${directive}]]` },
    ],
    max_tokens: MAX_TOKENS,
    ...(stream ? { stream: true } : {}),
  });
}

export type Shape = "json" | "sse" | "long";

/** JSON: one ~0.7 KB chat.completion with usage and cost. */
export const JSON_BODY = body(false, "tokens=8");
/** SSE: role chunk, 20 content chunks, finish chunk, usage chunk, [DONE]; no pauses. */
export const SSE_BODY = body(true, "tokens=20");
/** Long SSE: 50 content chunks, 100 ms apart (about 5 s per stream). */
export const LONG_BODY = body(true, "tokens=50 chunks=50 pause_ms=100");

export const BODIES: Record<Shape, string> = { json: JSON_BODY, sse: SSE_BODY, long: LONG_BODY };

/** What the bench upstream needs to tell the shapes apart without parsing JSON. */
export function shapeOf(bodyText: string): Shape {
  if (!bodyText.includes('"stream":true')) return "json";
  return bodyText.includes("pause_ms=") ? "long" : "sse";
}

export const LONG_STREAM_CHUNKS = 50;
export const LONG_STREAM_PAUSE_MS = 100;
