/**
 * Start-up failures an operator can fix (a port in use, a store another process serves, a
 * bad setting, a secrets key that does not open the store, a folder it may not write, a
 * default app's key file an earlier store left), told
 * in one plain line: what is wrong and what to do, with the exit status scripts rely on.
 * Not a stack trace: from the bundle or the binary that is minified source, and it hides
 * the one line that matters. Anything else is a bug, so its stack is kept.
 */
import { ConfigError } from "../config";
import { SecretsKeyMismatchError } from "../store/stored-secrets";
import { StoreLockedError } from "../store/process-lock";
import { DefaultKeyFileExistsError } from "../bootstrap";

/** A configuration error: a bad setting, a secrets key that is malformed or does not open the store. */
export const EXIT_CONFIG = 2;
/** Another process already serves this embedded store (tests/e2e/process-lock.test.ts relies on it). */
export const EXIT_STORE_LOCKED = 3;
/** Anything else that keeps the service from starting: a port in use, a folder it may not write. */
export const EXIT_CANNOT_START = 1;

export interface PlainFailure {
  line: string;
  exitCode: number;
}

/** Where the service was to listen: the line for a listen error names it. */
export interface ListenAddress {
  host: string;
  port: number;
}

/** ConfigError's problems (one per setting) on one line, and what to do about them. */
export function describeConfigError(err: ConfigError): string {
  const problems = `invalid configuration: ${err.problems.join("; ")}`;
  // Its one problem already says which key to start with, and what to do if it is lost.
  if (err instanceof SecretsKeyMismatchError) return problems;
  const them = err.problems.length === 1 ? "the environment variable named" : "the environment variables named";
  return `${problems}. Fix ${them} and start again (the README's "Configuration" lists every setting).`;
}

const FILE_REFUSALS = new Set(["EACCES", "EPERM", "EROFS"]);

/** The plain line for a failure an operator can fix, or null for one that is a bug. */
export function plainFailure(err: unknown, address?: ListenAddress): PlainFailure | null {
  if (err instanceof ConfigError) return { line: describeConfigError(err), exitCode: EXIT_CONFIG };
  // Its message names the lock file, the database and the three ways out.
  if (err instanceof StoreLockedError) return { line: err.message, exitCode: EXIT_STORE_LOCKED };
  if (err instanceof DefaultKeyFileExistsError) return { line: err.message, exitCode: EXIT_CANNOT_START };
  const { code, path, syscall } = (err ?? {}) as { code?: unknown; path?: unknown; syscall?: unknown };
  if (typeof code !== "string") return null;
  if (syscall === "listen" && address) {
    const listen = listenFailure(code, address);
    if (listen) return { line: listen, exitCode: EXIT_CANNOT_START };
  }
  if (FILE_REFUSALS.has(code) && typeof path === "string") {
    return {
      line:
        `cannot write ${path} (${code}): the store's files go there (DATABASE_URL; unset, data/proxy.sqlite under the working folder). ` +
        "Start from a folder this user may write, or set DATABASE_URL to a file in one.",
      exitCode: EXIT_CANNOT_START,
    };
  }
  return null;
}

function listenFailure(code: string, { host, port }: ListenAddress): string | null {
  switch (code) {
    case "EADDRINUSE":
      return `port ${port} is in use on ${host} (EADDRINUSE): another process listens there. Stop it, or set PORT to a free port.`;
    case "EACCES":
      return `this user may not listen on port ${port} (EACCES): ports below 1024 need privileges. Set PORT to 1024 or above.`;
    case "EADDRNOTAVAIL":
      return `HOST ${host} is not an address of this machine (EADDRNOTAVAIL). Set HOST to one of its addresses, or 0.0.0.0 for all of them.`;
    default:
      return null;
  }
}

/**
 * Ends the process for a failure while starting: `what` ("cannot start") and the plain line,
 * or, for a bug, its message and stack. Never returns.
 */
export function exitOnFailure(what: string, err: unknown, address?: ListenAddress): never {
  const plain = plainFailure(err, address);
  if (plain) {
    console.error(`${what}: ${plain.line}`);
    process.exit(plain.exitCode);
  }
  const message = err instanceof Error ? err.message : String(err);
  console.error(`${what}: ${message}`);
  if (err instanceof Error && err.stack) console.error(err.stack);
  process.exit(EXIT_CANNOT_START);
}
