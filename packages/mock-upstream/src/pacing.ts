/**
 * Pacing of the mock's streams: how long each streamed piece of a completion takes, so that
 * an answer arrives as a model writes it, token by token, instead of all at once. Demo mode
 * paces its streams (DEMO_STREAM_TOKENS_PER_SECOND, about 30 tokens a second by default) so
 * that a person trying the service sees the answer stream; tests and load runs leave it off
 * (0), and then a stream goes as fast as its reader takes it.
 *
 * Pacing changes when bytes leave, never what they say nor what the generation costs: the
 * same chunks, the same usage, the same bill (tests/upstream/mock-pacing.test.ts).
 */

/** The pacing's default: no wait at all. */
export const UNPACED = 0;

/**
 * While a paced wait is longer than this, OpenRouter's `: OPENROUTER PROCESSING` comment is
 * sent at this interval (as the real API does while a model works), so that a few large
 * pieces (`[[mock chunks=1]]`) never leave a reader's connection quiet for long: Bun closes
 * idle connections after 10 s, and the proxy gives a silent stream up after UPSTREAM_TIMEOUT_MS.
 */
export const PACED_KEEPALIVE_MS = 1000;

/** Milliseconds a piece of `tokens` tokens takes at `tokensPerSecond`; 0 when unpaced. */
export function pacedMs(tokens: number, tokensPerSecond: number): number {
  if (!(tokensPerSecond > 0) || tokens <= 0) return 0;
  return (tokens * 1000) / tokensPerSecond;
}
