/**
 * Starts slow-readers.mjs under Node: `count` HTTP clients that each read a few bytes per
 * tick and otherwise leave the bytes in the kernel, so TCP flow control pushes back on the
 * server. Used by tests/reliability/slow-clients.test.ts and scripts/bench/slow-clients.ts.
 */
import { resolve } from "node:path";
import { readLines } from "../../lib/read-lines";

export interface SlowReaderConfig {
  port: number;
  path: string;
  headers: Record<string, string>;
  body: string;
  count: number;
  bytesPerTick: number;
  tickMs: number;
}

export interface SlowClientStats {
  bytes: number;
  /** The first bytes read (latin1), e.g. "HTTP/1.1 200 OK". */
  head: string;
  error: string | null;
  ended: boolean;
}

export interface SlowReaders {
  pid: number;
  /** Resolves once every request has been written. */
  ready: Promise<void>;
  /** Destroys every socket; resolves with what each client read. */
  close(): Promise<SlowClientStats[]>;
  /** Kills the Node process if it is still running (cleanup after a failure). */
  kill(): void;
}

const SCRIPT = resolve(import.meta.dir, "slow-readers.mjs");

export function startSlowReaders(config: SlowReaderConfig): SlowReaders {
  const proc = Bun.spawn(["node", SCRIPT, JSON.stringify(config)], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  void readLines(proc.stdout, (batch) => {
    lines.push(...batch);
    for (const wake of waiters.splice(0)) wake();
  });
  const stderr = new Response(proc.stderr).text();

  const waitForLine = async <T>(key: string): Promise<T> => {
    for (;;) {
      const line = lines.find((l) => l.startsWith(`{"${key}"`));
      if (line) return JSON.parse(line)[key] as T;
      if (proc.exitCode !== null) throw new Error(`slow readers exited (${proc.exitCode}): ${await stderr}`);
      await Promise.race([new Promise<void>((r) => waiters.push(r)), proc.exited]);
    }
  };

  return {
    pid: proc.pid,
    ready: waitForLine<number>("ready").then(() => {}),
    async close() {
      proc.stdin.write("close\n");
      await proc.stdin.flush();
      const stats = await waitForLine<SlowClientStats[]>("clients");
      await proc.exited;
      return stats;
    },
    kill() {
      if (proc.exitCode === null) proc.kill();
    },
  };
}
