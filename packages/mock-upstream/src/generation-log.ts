/**
 * The mock's books: one record per generation, as OpenRouter keeps them for
 * `GET /generation` (components.schemas.GenerationResponse). A record is written when its
 * generation ends and shows only from `visibleAt` on the mock's clock, because OpenRouter's
 * record can take a while to appear after the answer.
 *
 * Kept for every request (demo mode, where nobody reads `served`, reconciles through it
 * too), so it is small and bounded: the records of the latest `limit` generation ids, an
 * older one dropped when a newer one takes its slot. A dropped record answers 404 like
 * one that never existed.
 */

export interface GenerationRecord {
  /** The generation id: the answer's `id` and its `X-Generation-Id` header. */
  id: string;
  /** The model that served (after fallbacks and routing). */
  model: string;
  /** The provider that served. */
  provider: string;
  /** The "-1" router the request named; null when it named a model. */
  router: string | null;
  streamed: boolean;
  /** A stream aborted on a cancellable provider: the generation stopped there. */
  cancelled: boolean;
  /** "stop", "length", "error", or null when the generation did not finish (cancelled). */
  finishReason: string | null;
  promptTokens: number;
  /** Content plus reasoning tokens generated. */
  completionTokens: number;
  reasoningTokens: number;
  images: number;
  webResults: number;
  /** USD billed in the end: `total_cost` (and `usage`). */
  costUsd: number;
  /** Mock clock, ms: when the request came, when the generation ended, when the record shows. */
  createdAt: number;
  endedAt: number;
  visibleAt: number;
  userAgent: string | null;
  httpReferer: string | null;
  /** The request's `user` field. */
  externalUser: string | null;
}

/** Records kept when the mock is not told otherwise (MockUpstreamOptions.generationRecordLimit). */
export const DEFAULT_GENERATION_RECORD_LIMIT = 10_000;

const ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

function randomPrefix(length: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(length));
  let out = "";
  for (const b of bytes) out += ID_ALPHABET[b % ID_ALPHABET.length];
  return out;
}

/**
 * The log also hands out the ids, so that it can file a record by the sequence number inside
 * its id: a ring of `limit` slots, the record of generation n in slot n % limit. A Map was
 * the obvious store, but finding its oldest key to evict walks past every deleted entry: once
 * full, each add cost more than the rest of a JSON answer (measured in process). The ring
 * costs an array write.
 */
export class GenerationLog {
  // Ids look like OpenRouter's `gen-<unix seconds>-<20 chars>`: a random per-instance
  // prefix and a counter keep them unique without a random draw per request.
  private readonly prefix = randomPrefix(14);
  private counter = 0;
  private readonly slots: Array<GenerationRecord | undefined> = [];

  constructor(private readonly limit: number = DEFAULT_GENERATION_RECORD_LIMIT) {}

  nextId(createdSeconds: number): string {
    return `gen-${createdSeconds}-${this.prefix}${(this.counter++).toString(36).padStart(6, "0")}`;
  }

  /** Files a record; it takes the slot of the generation `limit` ids before its own. */
  add(record: GenerationRecord): void {
    const slot = this.slotOf(record.id);
    if (slot !== null) this.slots[slot] = record;
  }

  /** The record whatever its visibility (for tests); undefined when unknown or dropped. */
  get(id: string): GenerationRecord | undefined {
    const slot = this.slotOf(id);
    const record = slot === null ? undefined : this.slots[slot];
    return record?.id === id ? record : undefined;
  }

  /** The record as `GET /generation` sees it at `now`: undefined until it has appeared. */
  visible(id: string, now: number): GenerationRecord | undefined {
    const record = this.get(id);
    return record !== undefined && now >= record.visibleAt ? record : undefined;
  }

  /** The slot of one of this log's ids; null for any other string (or when nothing is kept). */
  private slotOf(id: string): number | null {
    if (this.limit <= 0) return null;
    const dash = id.indexOf("-", 4);
    if (!id.startsWith("gen-") || dash === -1 || !id.startsWith(this.prefix, dash + 1)) return null;
    const sequence = parseInt(id.slice(dash + 1 + this.prefix.length), 36);
    return Number.isSafeInteger(sequence) ? sequence % this.limit : null;
  }
}
