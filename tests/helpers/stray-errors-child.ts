/**
 * A process with the service's stray-error handlers installed (src/stray-errors.ts), which
 * then rejects a promise nothing awaits and throws from a timer. It should say "alive" and
 * exit 0 by itself; without the handlers Bun ends it at the first of the two.
 */
import { createLogger } from "../../src/logger";
import { keepServingOnStrayErrors } from "../../src/stray-errors";

// "alive" goes through the same logger as the errors: its lines leave in the order logged
// (batched per turn, the rest written at exit), so "alive" is last whatever the timing. A
// console.log of its own could overtake them when both timers fell due in one turn.
const logger = createLogger("info");
keepServingOnStrayErrors(logger);
void Promise.reject(new Error("a rejection nobody awaited"));
setTimeout(() => {
  throw new Error("an exception thrown from a timer");
}, 0);
// Timers run in order: by this one, both failures above have happened.
setTimeout(() => {
  logger.info("alive");
  process.exit(0);
}, 20);
// STRAY_ERRORS_HOLD_MS: hold the loop before any timer runs, so both fall due in one turn
// (as on a loaded machine, where a console.log of "alive" came out before the second error).
const holdMs = Number(process.env.STRAY_ERRORS_HOLD_MS ?? 0);
if (holdMs > 0) Bun.sleepSync(holdMs);
