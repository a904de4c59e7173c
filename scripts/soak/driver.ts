/**
 * The load: an open-loop driver (requests start on a fixed schedule, whether or not earlier
 * ones have finished) with a bound on requests in flight, and the client side of each
 * request, which reads and checks what comes back and remembers what the final check needs.
 */
import { pickShape, requestBody, userPicker, type Shape, type SoakUser } from "./workload";

/** Latencies in ms, by what they measure. */
export interface Latencies {
  /** JSON completions: request sent → whole body read. */
  json: number[];
  /** Short streams (no pauses): request sent → first body chunk. */
  sseFirstByte: number[];
  /** 402 and 429 answers: request sent → body read. */
  refused: number[];
}

const emptyLatencies = (): Latencies => ({ json: [], sseFirstByte: [], refused: [] });

export class Tally {
  /** Responses by HTTP status, or `fetch failed` when none came. */
  readonly byStatus = new Map<string, number>();
  /** Everything that is not an expected outcome, by reason. */
  readonly errors = new Map<string, number>();
  readonly errorExamples: string[] = [];
  /** x-request-id of every 200 → the generation id the client saw in the body. */
  readonly completed = new Map<string, string | null>();
  /** x-request-id of every 402/429. */
  readonly refused: string[] = [];
  clientDisconnects = 0;
  launched = 0;
  /** Scheduled starts not made because `maxInFlight` requests were open (the client was saturated). */
  skipped = 0;
  inFlight = 0;
  peakInFlight = 0;
  readonly all: Latencies = emptyLatencies();
  window: Latencies = emptyLatencies();

  count(status: string): void {
    this.byStatus.set(status, (this.byStatus.get(status) ?? 0) + 1);
  }

  error(reason: string, detail: string): void {
    this.errors.set(reason, (this.errors.get(reason) ?? 0) + 1);
    if (this.errorExamples.length < 20) this.errorExamples.push(`${reason}: ${detail.slice(0, 300)}`);
  }

  latency(kind: keyof Latencies, ms: number): void {
    this.all[kind].push(ms);
    this.window[kind].push(ms);
  }

  /** The latencies since the last call, and a fresh window. */
  takeWindow(): Latencies {
    const window = this.window;
    this.window = emptyLatencies();
    return window;
  }

  get errorCount(): number {
    let n = 0;
    for (const v of this.errors.values()) n += v;
    return n;
  }
}

export interface DriverOptions {
  url: string;
  auth: Record<string, string>;
  users: SoakUser[];
  rate: number;
  seconds: number;
  maxInFlight: number;
  requestTimeoutMs: number;
  rand: () => number;
}

/** Runs the schedule for `seconds`; resolves once every request it started has ended. */
export async function drive(o: DriverOptions, tally: Tally): Promise<void> {
  const pickUser = userPicker(o.users, o.rand);
  const running = new Set<Promise<void>>();
  const t0 = performance.now();
  const end = t0 + o.seconds * 1000;
  let scheduled = 0;
  for (;;) {
    const now = performance.now();
    if (now >= end) break;
    const due = Math.floor(((now - t0) / 1000) * o.rate);
    while (scheduled < due) {
      scheduled++;
      if (tally.inFlight >= o.maxInFlight) {
        tally.skipped++;
        continue;
      }
      const p = oneRequest(o, pickShape(o.rand), pickUser(), tally).finally(() => running.delete(p));
      running.add(p);
    }
    await Bun.sleep(5);
  }
  await Promise.all(running);
}

async function oneRequest(o: DriverOptions, shape: Shape, user: SoakUser, tally: Tally): Promise<void> {
  tally.launched++;
  tally.inFlight++;
  if (tally.inFlight > tally.peakInFlight) tally.peakInFlight = tally.inFlight;
  const body = requestBody(shape, o.rand);
  // Disconnecting clients leave after 2 to 6 reads (role chunk, then some content).
  const leaveAfterReads = shape.name === "disconnect" ? 2 + Math.floor(o.rand() * 5) : Infinity;
  const t0 = performance.now();
  try {
    const response = await fetch(o.url, {
      method: "POST",
      headers: { ...o.auth, "content-type": "application/json", "x-service-user": user.id },
      body,
      signal: AbortSignal.timeout(o.requestTimeoutMs),
    });
    tally.count(String(response.status));
    const requestId = response.headers.get("x-request-id") ?? "";
    if (response.status === 200) {
      if (!shape.stream) await readJson(response, requestId, t0, tally);
      else await readStream(response, requestId, shape, leaveAfterReads, t0, tally);
    } else if (response.status === 402 || response.status === 429) {
      const text = await response.text();
      tally.latency("refused", performance.now() - t0);
      tally.refused.push(requestId);
      const expected = response.status === 402 ? "budget_exceeded" : "rate_limited";
      const code = (safeJson(text) as { error?: { code?: string } } | null)?.error?.code;
      if (code !== expected) tally.error(`${response.status} with code ${code}`, text);
      if (response.status === 402 && user.kind !== "tiny") tally.error(`402 for a ${user.kind} user`, text);
    } else {
      tally.error(`status ${response.status}`, `${user.id} ${shape.name}: ${await response.text()}`);
    }
  } catch (err) {
    const name = err instanceof Error ? err.name : "Error";
    tally.error(`fetch failed (${name})`, `${user.id} ${shape.name}: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    tally.inFlight--;
  }
}

async function readJson(response: Response, requestId: string, t0: number, tally: Tally): Promise<void> {
  const text = await response.text();
  tally.latency("json", performance.now() - t0);
  const parsed = safeJson(text) as { id?: unknown; object?: unknown; usage?: unknown } | null;
  if (!parsed || typeof parsed.id !== "string" || parsed.object !== "chat.completion" || !parsed.usage) {
    tally.error("malformed JSON completion", text);
    tally.completed.set(requestId, null);
    return;
  }
  tally.completed.set(requestId, parsed.id);
}

const decoder = new TextDecoder();

async function readStream(response: Response, requestId: string, shape: Shape, leaveAfterReads: number, t0: number, tally: Tally): Promise<void> {
  const reader = response.body!.getReader();
  let text = "";
  let reads = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (reads === 0 && shape.name === "sse") tally.latency("sseFirstByte", performance.now() - t0);
    reads++;
    text += decoder.decode(value, { stream: true });
    if (reads >= leaveAfterReads && /"content":"[^"]/.test(text)) {
      await reader.cancel();
      tally.clientDisconnects++;
      tally.completed.set(requestId, generationIdIn(text));
      return;
    }
  }
  const id = generationIdIn(text);
  tally.completed.set(requestId, id);
  if (!id || !text.endsWith("data: [DONE]\n\n") || !text.includes('"usage":{')) tally.error(`malformed ${shape.name} stream`, text.slice(-300));
}

/** The `id` of the first chunk (`gen-…`), as the client saw it. */
function generationIdIn(text: string): string | null {
  return /"id":"(gen-[^"]+)"/.exec(text)?.[1] ?? null;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
