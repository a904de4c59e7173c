/**
 * Bun's runtime settings the service is run with. Bun reads them from the environment once,
 * at process start, so they cannot live in src/config.ts: `npm start` (package.json), the
 * Dockerfile's ENV and the README's single-binary command set them, and the bench and the
 * soak start the service with them from here. tests/ship/runtime-env.test.ts checks that
 * all of those agree with this list.
 *
 * Not here, measured and left to the operator (README, Configuration):
 * `BUN_JSC_useGenerationalGC=0` lowers the peak of 2,000 open streams by about 10 MB and
 * costs 10-17 % of the calls per second at 64 connections (ARCHITECTURE.md §7 "Generational
 * GC kept").
 */
export const RUNTIME_ENV = {
  /**
   * Bun's fetch allows about 256 upstream requests at a time and queues the rest; 4,096 is
   * enough for 2,000 open streams with room to spare.
   */
  BUN_CONFIG_MAX_HTTP_REQUESTS: "4096",
} as const;
