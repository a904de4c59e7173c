/**
 * How a generation ends and what it is billed in the end, as OpenRouter documents it:
 * - its streaming page, "Stream Cancellation": aborting a stream stops the model and its
 *   billing on providers that support cancellation; on the others, and for every
 *   non-streamed request, the model runs on and the complete response is billed;
 * - its "Zero Completion Insurance" page: a response with an error finish reason, or with no
 *   completion tokens and no finish reason, is not billed for its prompt, completion or
 *   reasoning tokens (a request fee, images and web results are still billed here: the page
 *   waives the model's tokens only).
 * The final bill goes to the served log (`costUsd`), to the books of the key that called
 * (GET /key) and into the generation log, whose record `GET /generation` serves.
 */
import type { Bill, BilledWork } from "./billing";
import type { GenerationLog, GenerationRecord } from "./generation-log";
import type { ServedRequest } from "./types";

/** Tokens a generation produced. */
export interface Output {
  contentTokens: number;
  reasoningTokens: number;
}

export const NO_OUTPUT: Readonly<Output> = Object.freeze({ contentTokens: 0, reasoningTokens: 0 });

/** Where the generation's plan ends: its whole completion, or the mid-stream error it was to meet. */
export interface PlannedEnd extends Output {
  finishReason: "stop" | "length" | "tool_calls" | "error";
}

export type GenerationEnd =
  /** Ran to its planned end. */
  | { kind: "completed" }
  /** The provider failed after producing `produced` (a mid-stream error, or an error in a 200 body). */
  | { kind: "failed"; produced: Output }
  /** The connection went away (the client aborted, or it was cut) after `produced`. */
  | { kind: "disconnected"; produced: Output };

export interface GenerationSetup {
  entry: ServedRequest;
  /** The work of the planned end and its bill; `bill` prices any other work the same way. */
  work: BilledWork;
  plannedBill: Bill;
  bill(work: BilledWork): Bill;
  planned: PlannedEnd;
  /** The serving provider stops (and stops billing) when a stream is aborted. */
  cancellable: boolean;
  router: string | null;
  /** How long after its end the record appears, on the mock's clock. */
  recordDelayMs: number;
  log: GenerationLog;
  now(): number;
  /** Adds the final cost to the books of the key that called (./keys.ts). */
  charge(usd: number): void;
}

export class Generation {
  private ended = false;

  constructor(private readonly setup: GenerationSetup) {}

  /** Settles the generation once; later calls are ignored. */
  end(how: GenerationEnd): void {
    if (this.ended) return;
    this.ended = true;
    const { entry, planned } = this.setup;
    const cancelled = how.kind === "disconnected" && entry.stream && this.setup.cancellable;
    let output: Output = planned;
    let finishReason: string | null = planned.finishReason;
    if (how.kind === "failed") {
      output = how.produced;
      finishReason = "error";
    } else if (cancelled) {
      output = how.produced;
      finishReason = null;
    }
    const completionTokens = output.contentTokens + output.reasoningTokens;
    const insured = finishReason === "error" || (completionTokens === 0 && finishReason === null);

    entry.completionTokens = completionTokens;
    entry.reasoningTokens = output.reasoningTokens;
    entry.costUsd = this.costOf(output, insured);
    entry.cancelled = cancelled;
    this.setup.charge(entry.costUsd);
    this.setup.log.add(this.record(finishReason));
  }

  private costOf(output: Output, insured: boolean): number {
    const { work, plannedBill, bill } = this.setup;
    if (insured) return bill({ ...work, promptTokens: 0, cacheWrite: false, contentTokens: 0, reasoningTokens: 0 }).costUsd;
    if (output === this.setup.planned) return plannedBill.costUsd;
    return bill({ ...work, ...output }).costUsd;
  }

  private record(finishReason: string | null): GenerationRecord {
    const { entry } = this.setup;
    const endedAt = this.setup.now();
    const user = (entry.body as { user?: unknown } | undefined)?.user;
    return {
      id: entry.id,
      model: entry.servedModel,
      provider: entry.provider,
      router: this.setup.router,
      streamed: entry.stream,
      cancelled: entry.cancelled,
      finishReason,
      promptTokens: entry.promptTokens,
      completionTokens: entry.completionTokens,
      reasoningTokens: entry.reasoningTokens,
      images: entry.images,
      webResults: entry.webResults,
      costUsd: entry.costUsd,
      createdAt: entry.receivedAt,
      endedAt,
      visibleAt: endedAt + this.setup.recordDelayMs,
      userAgent: entry.headers["user-agent"] ?? null,
      httpReferer: entry.headers["http-referer"] ?? null,
      externalUser: typeof user === "string" ? user : null,
    };
  }
}
