import type { Logger } from "./logger";

/**
 * Keeps the service serving through an error that nothing awaited: a promise rejected with
 * no handler, or an exception thrown from a timer or an event callback. Bun, like Node,
 * ends the process on either by default, and with it every tenant's open streams and the
 * ledger rows still queued; one such path (an unawaited handler's rejection) once let a
 * mistyped admin request kill the service.
 *
 * A failure inside a request's handling never comes here: Elysia hands it to the error
 * handler (src/http/error-handler.ts), which logs it once with the request id and answers
 * 500 in the envelope. What arrives here ran outside any request, so it is logged with its
 * stack (never a secret: error texts here come from our code and the libraries we call),
 * and the process goes on.
 */
export function keepServingOnStrayErrors(logger: Logger, target: NodeJS.Process = process): void {
  const report = (what: string, error: unknown) =>
    logger.error(`${what}; the service keeps running`, { error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  target.on("unhandledRejection", (reason) => report("a promise was rejected and nothing handled it", reason));
  target.on("uncaughtException", (err) => report("an exception was thrown outside any request and nothing caught it", err));
}
