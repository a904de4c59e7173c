/**
 * What the soak sends: which users exist (and what each is expected to provoke) and the
 * request shapes, each steered through the mock upstream by a `[[mock …]]` directive
 * (packages/mock-upstream/src/scenario.ts). Draws use a seeded generator so two runs with the same
 * flags send the same sequence.
 */

export type UserKind =
  /** A cap big enough for the whole run: every request goes through (unless rate limited). */
  | "normal"
  /** A cap of a few requests: after the first seconds every request is a 402 budget_exceeded. */
  | "tiny"
  /** Gets several times a normal user's share of traffic: beyond RL_CHAT_LIMIT, so 429s. */
  | "hot";

export interface SoakUser {
  id: string;
  kind: UserKind;
  monthlyUsd: number;
}

export const NORMAL_CAP_USD = 50;
/**
 * A few dozen requests of the mix below (≈ $0.00001 each on average; a gpt-4o-mini request
 * reserves ≈ $0.00009), then the remaining budget is below a minimal reservation (prompt
 * bound + 16 completion tokens) and the proxy answers 402.
 */
export const TINY_CAP_USD = 0.0003;

/** Share of all requests that go to the hot users (the rest is spread evenly over everyone else). */
export const HOT_TRAFFIC_SHARE = 0.15;

export function soakUsers(count: number): SoakUser[] {
  const hot = Math.max(1, Math.round(count * 0.05));
  const tiny = Math.max(1, Math.round(count * 0.15));
  return Array.from({ length: count }, (_, i) => {
    const kind: UserKind = i < hot ? "hot" : i < hot + tiny ? "tiny" : "normal";
    return { id: `soak-${kind}-${i}`, kind, monthlyUsd: kind === "tiny" ? TINY_CAP_USD : NORMAL_CAP_USD };
  });
}

/**
 * RL_CHAT_LIMIT for a given rate: a non-hot user sends rate × (1 − hot share) / non-hot
 * users per second; the limit is twice that per window, so they stay under it, while the
 * hot users send ≈ 3× a normal share and are refused part of the time.
 */
export function chatLimitFor(users: SoakUser[], rate: number, windowSeconds: number): number {
  const others = users.filter((u) => u.kind !== "hot").length;
  const perUserPerWindow = ((rate * (1 - HOT_TRAFFIC_SHARE)) / others) * windowSeconds;
  return Math.max(5, Math.ceil(perUserPerWindow * 2));
}

export type ShapeName = "json" | "sse" | "long" | "quiet" | "disconnect";

export interface Shape {
  name: ShapeName;
  /** Fraction of requests. */
  weight: number;
  stream: boolean;
  /** The directive, given a random draw for its length. */
  directive(rand: () => number): string;
}

const between = (rand: () => number, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));

export const SHAPES: readonly Shape[] = [
  { name: "json", weight: 0.45, stream: false, directive: (r) => `tokens=${between(r, 4, 40)}` },
  { name: "sse", weight: 0.35, stream: true, directive: (r) => `tokens=${between(r, 8, 40)}` },
  // ≈ 5 s: 20 content chunks 250 ms apart.
  { name: "long", weight: 0.12, stream: true, directive: (r) => `tokens=${between(r, 20, 40)} chunks=20 pause_ms=250` },
  // ≈ 33 s with 11 s of silence before each event: longer than Bun's 10 s idle timeout.
  { name: "quiet", weight: 0.01, stream: true, directive: () => "tokens=2 chunks=2 pause_ms=11000" },
  // ≈ 4.5 s planned; the client goes away after a few events (see the driver).
  { name: "disconnect", weight: 0.07, stream: true, directive: () => "tokens=30 chunks=30 pause_ms=150" },
];

const MODELS = ["openai/gpt-4o-mini", "openai/gpt-4o-mini", "openai/gpt-4o-mini", "meta-llama/llama-3.1-8b-instruct"];

export function requestBody(shape: Shape, rand: () => number): string {
  return JSON.stringify({
    model: MODELS[Math.floor(rand() * MODELS.length)],
    messages: [
      { role: "system", content: "You are a concise assistant." },
      { role: "user", content: `Soak request. [[mock ${shape.directive(rand)}]]` },
    ],
    max_tokens: 64,
    ...(shape.stream ? { stream: true } : {}),
  });
}

export function pickShape(rand: () => number): Shape {
  let x = rand();
  for (const shape of SHAPES) {
    if (x < shape.weight) return shape;
    x -= shape.weight;
  }
  return SHAPES[0]!;
}

/** Draws the user of the next request: a hot user with HOT_TRAFFIC_SHARE, else anyone else. */
export function userPicker(users: SoakUser[], rand: () => number): () => SoakUser {
  const hot = users.filter((u) => u.kind === "hot");
  const others = users.filter((u) => u.kind !== "hot");
  return () => {
    const pool = rand() < HOT_TRAFFIC_SHARE ? hot : others;
    return pool[Math.floor(rand() * pool.length)]!;
  };
}
