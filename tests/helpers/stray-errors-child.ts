/**
 * A process with the service's stray-error handlers installed (src/stray-errors.ts), which
 * then rejects a promise nothing awaits and throws from a timer. It should say "alive" and
 * exit 0 by itself; without the handlers Bun ends it at the first of the two.
 */
import { createLogger } from "../../src/logger";
import { keepServingOnStrayErrors } from "../../src/stray-errors";

keepServingOnStrayErrors(createLogger("info"));
void Promise.reject(new Error("a rejection nobody awaited"));
setTimeout(() => {
  throw new Error("an exception thrown from a timer");
}, 0);
// Timers run in order: by this one, both failures above have happened.
setTimeout(() => {
  console.log(JSON.stringify({ alive: true }));
  process.exit(0);
}, 20);
