/**
 * What the mock "generates": deterministic token counts, text and usage, so a test can
 * predict to the token and the nano-dollar what a request costs.
 * A token is one word of the completion; the prompt's tokens are an estimate from its length.
 */
import type { ReasoningRequest } from "./chat-request";
import type { MockModel } from "./models";
import type { Scenario } from "./scenario";

/**
 * The completion's vocabulary. Multi-byte words (2-, 3- and 4-byte UTF-8) come early so
 * that even short streams exercise decoding across chunk boundaries.
 */
const VOCABULARY = [
  "Mock",
  "café",
  "reply",
  "日本語",
  "from",
  "🙂",
  "the",
  "naïve",
  "upstream,",
  "one",
  "word",
  "per",
  "token",
  "über",
  "and",
  "façade",
  "nothing",
  "more.",
];

/** ceil(characters / 4) + 4 per message; characters of string content and text parts only. */
export function estimatePromptTokens(messages: readonly unknown[]): number {
  let chars = 0;
  for (const message of messages) chars += messageText(message).length;
  return Math.ceil(chars / 4) + 4 * messages.length;
}

/** The text of one chat message: its string content, or its text parts joined. */
export function messageText(message: unknown): string {
  const content = (message as { content?: unknown } | null)?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  let text = "";
  for (const part of content) {
    const p = part as { type?: unknown; text?: unknown } | null;
    if (p?.type === "text" && typeof p.text === "string") text += p.text;
  }
  return text;
}

/** The `n`th word of every completion (0-based). */
export function word(n: number): string {
  return VOCABULARY[n % VOCABULARY.length]!;
}

/** The full completion text of `tokens` words: the stream's pieces concatenated. */
export function completionText(tokens: number): string {
  return textOfWords(0, tokens);
}

/** Words [from, to) with the spaces that precede them, so pieces concatenate exactly. */
export function textOfWords(from: number, to: number): string {
  let text = "";
  for (let i = from; i < to; i++) text += i === 0 ? word(0) : " " + word(i);
  return text;
}

/** One content chunk of a stream: its text and how many tokens (words) it carries. */
export interface ContentPiece {
  text: string;
  tokens: number;
}

/** How many pieces contentPieces makes of `tokens` words. */
export function pieceCount(tokens: number, chunks: number | null): number {
  return tokens === 0 ? 0 : Math.min(Math.max(chunks ?? tokens, 1), tokens);
}

/** The tokens in the first `pieces` of contentPieces(tokens, chunks), without building their text. */
export function tokensInPieces(pieces: number, tokens: number, chunks: number | null): number {
  const count = pieceCount(tokens, chunks);
  return count === 0 ? 0 : Math.floor((Math.min(pieces, count) * tokens) / count);
}

/**
 * Splits `tokens` words into `chunks` nearly equal, non-empty content pieces; `textOf` gives
 * the text of tokens [from, to) (the words, unless the answer has another shape: ./answer-shape.ts).
 */
export function contentPieces(tokens: number, chunks: number | null, textOf: (from: number, to: number) => string = textOfWords): ContentPiece[] {
  if (tokens === 0) return [];
  const count = pieceCount(tokens, chunks);
  const pieces = new Array<ContentPiece>(count);
  for (let k = 0; k < count; k++) {
    const from = Math.floor((k * tokens) / count);
    const to = Math.floor(((k + 1) * tokens) / count);
    pieces[k] = { text: textOf(from, to), tokens: to - from };
  }
  return pieces;
}

/** A reasoning model thinks this long unless the scenario says otherwise. */
const DEFAULT_REASONING_TOKENS = 256;

/**
 * Reasoning tokens a generation spends. Only reasoning models reason; max_tokens does NOT
 * limit them (they run past it, as real reasoning models bill), only `reasoning.max_tokens` does.
 */
export function plannedReasoningTokens(model: MockModel, scenario: Scenario, request: ReasoningRequest): number {
  if (!model.reasons || request.off) return 0;
  const planned = scenario.reasoning ?? DEFAULT_REASONING_TOKENS;
  return request.cap === null ? planned : Math.min(planned, request.cap);
}
