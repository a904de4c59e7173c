/**
 * JSON-lines logger. One line per event on stdout so that log shippers need no parser.
 * Callers pass fields, never secrets: keys, tokens and upstream credentials are not
 * logged anywhere in this code base (a security test scans the output).
 */
import { writeSync } from "node:fs";

export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/**
 * Lines written to stdout in batches: every line of one event-loop turn in one write. At
 * one access-log line per request, a write per line was a system call per request
 * (ARCHITECTURE.md §7 "Per-call strings and writes"). A line is never held past the turn
 * that logged it, and what is pending when the process exits is written synchronously first.
 */
function batchedStdout(): (line: string) => void {
  let pending: string[] = [];
  const take = () => {
    const text = pending.join("\n") + "\n";
    pending = [];
    return text;
  };
  process.on("exit", () => {
    if (pending.length > 0) writeSync(1, take());
  });
  return (line) => {
    if (pending.push(line) === 1) setImmediate(() => pending.length > 0 && process.stdout.write(take()));
  };
}

let stdoutSink: ((line: string) => void) | undefined;
/** The one batched stdout sink of this process. */
const toStdout = (line: string) => (stdoutSink ??= batchedStdout())(line);

export function createLogger(level: LogLevel, sink: (line: string) => void = toStdout): Logger {
  const min = ORDER[level];
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < min) return;
    sink(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...fields }));
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

/** A logger that keeps lines in memory; tests read `lines`. */
export function memoryLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return Object.assign(
    createLogger("debug", (l) => lines.push(l)),
    { lines },
  );
}
