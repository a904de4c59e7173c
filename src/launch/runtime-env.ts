/**
 * Bun's runtime settings the service is run with, and the re-exec that gives them to a
 * process started without them. Bun reads them from the environment once, when the process
 * starts (setting one later changes nothing: measured, tests/e2e/binary.test.ts), so they
 * cannot live in src/config.ts: `npm start` (package.json) and the Dockerfile's ENV set them,
 * and the bench and the soak start the service with them (scripts/runtime-env.ts re-exports
 * this list; tests/ship/runtime-env.test.ts keeps those in step).
 *
 * A process that serves without them replaces itself, before anything else runs, by the same
 * program with the same arguments and the settings added: execve(2), called through libc, so it
 * keeps its pid, its open stdio and its signals (an orchestrator's SIGTERM still reaches the
 * service), and no parent process is left to forward anything. Where libc cannot be called (no
 * glibc, or Windows) nothing happens and the start warns (src/index.ts).
 *
 * Not here, measured and left to the operator (README, Configuration):
 * `BUN_JSC_useGenerationalGC=0` lowers the peak of 2,000 open streams by about 10 MB and
 * costs 10-17 % of the calls per second at 64 connections (ARCHITECTURE.md §7 "Generational
 * GC kept").
 */
import { dlopen, FFIType, ptr } from "bun:ffi";

export const RUNTIME_ENV = {
  /**
   * Bun's fetch allows about 256 upstream requests at a time and queues the rest; 4,096 is
   * enough for 2,000 open streams with room to spare.
   */
  BUN_CONFIG_MAX_HTTP_REQUESTS: "4096",
} as const;

/** The settings `env` lacks (unset or empty), with their values. */
export function missingRuntimeEnv(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(RUNTIME_ENV).filter(([name]) => !env[name]));
}

const LIBC: Partial<Record<NodeJS.Platform, string>> = { linux: "libc.so.6", darwin: "libSystem.B.dylib" };

/**
 * Replaces this process by itself with the missing settings added. Returns only when it could
 * not (or nothing was missing). The new process gets the program as it was typed (argv[0], so
 * what it prints names it the same way), then, from source or the bundle, Bun's own flags and
 * the script, then the arguments.
 */
export function execWithRuntimeEnv(): void {
  const missing = missingRuntimeEnv(process.env);
  const library = LIBC[process.platform];
  if (Object.keys(missing).length === 0 || library === undefined) return;
  const libc = openLibc(library);
  if (libc === null) return;
  // The C strings and the NULL-terminated arrays of pointers to them, kept reachable until the call.
  const kept: Array<Buffer | BigUint64Array> = [];
  const cString = (text: string) => {
    const bytes = Buffer.from(`${text}\0`);
    kept.push(bytes);
    return ptr(bytes);
  };
  const cArray = (items: string[]) => {
    const pointers = new BigUint64Array(items.length + 1);
    items.forEach((item, i) => (pointers[i] = BigInt(cString(item))));
    kept.push(pointers);
    return ptr(pointers);
  };
  const args = Bun.isStandaloneExecutable ? process.argv.slice(2) : [...process.execArgv, ...process.argv.slice(1)];
  const env = Object.entries({ ...process.env, ...missing }).map(([name, value]) => `${name}=${value ?? ""}`);
  // On success it does not return; -1 (errno set) leaves this process as it was.
  libc.symbols.execve(cString(process.execPath), cArray([process.argv0, ...args]), cArray(env));
}

function openLibc(library: string) {
  try {
    return dlopen(library, { execve: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 } });
  } catch {
    return null;
  }
}
