/**
 * A real redis-server for tests, on a free port, with no persistence: a restart loses
 * every key, which is exactly the "Redis restarted and lost data" case to test. With
 * `snapshots`, it keeps its RDB file in a folder of its own, so a test can take a snapshot,
 * and later start the server again from it: a restore from an old backup, or a failover to a
 * replica that lagged.
 */
import type { Subprocess } from "bun";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Redis from "ioredis";
import { freePort } from "./server";

export interface TestRedis {
  url: string;
  port: number;
  /** Stops the server (SIGKILL-free: SHUTDOWN NOSAVE semantics via SIGTERM with no persistence). */
  stop(): Promise<void>;
  /** Kills it (SIGKILL): whatever it held in memory is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port: empty, or (with `snapshots`) from its RDB file. */
  start(): Promise<void>;
  /** A fresh client, for assertions: disconnect it, or it reconnects to this port for the rest of the run. */
  client(): Redis;
  /** With `snapshots`: writes an RDB snapshot now (SAVE) and returns a copy of it. */
  snapshot(): Promise<string>;
  /** With `snapshots`: kills the server and starts it again from `snapshot`'s file. */
  restore(snapshot: string): Promise<void>;
}

export async function startRedis(options: { snapshots?: boolean; args?: string[] } = {}): Promise<TestRedis> {
  const port = freePort();
  const dir = options.snapshots ? mkdtempSync(join(tmpdir(), "proxy-redis-")) : null;
  if (dir) process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  let proc: Subprocess | null = null;
  let snapshots = 0;
  const files = [...(dir ? ["--dir", dir, "--dbfilename", "dump.rdb"] : []), ...(options.args ?? [])];
  const start = async () => {
    proc = Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...files], {
      stdout: "ignore",
      stderr: "ignore",
    });
    await waitForPing(port);
  };
  const halt = async (signal: "SIGTERM" | "SIGKILL") => {
    if (!proc) return;
    proc.kill(signal);
    await proc.exited;
    proc = null;
  };
  const client = () => new Redis(port, "127.0.0.1");
  const snapshot = async () => {
    if (!dir) throw new Error("startRedis({ snapshots: true }) keeps snapshots");
    const admin = client();
    try {
      await admin.save();
    } finally {
      admin.disconnect();
    }
    const copy = join(dir, `snapshot-${snapshots++}.rdb`);
    copyFileSync(join(dir, "dump.rdb"), copy);
    return copy;
  };
  const restore = async (file: string) => {
    if (!dir) throw new Error("startRedis({ snapshots: true }) keeps snapshots");
    await halt("SIGKILL");
    copyFileSync(file, join(dir, "dump.rdb"));
    await start();
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    start,
    stop: () => halt("SIGTERM"),
    kill: () => halt("SIGKILL"),
    client,
    snapshot,
    restore,
  };
}

async function waitForPing(port: number): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      const conn = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
      conn.end();
      const client = new Redis(port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      await client.connect();
      const pong = await client.ping();
      client.disconnect();
      if (pong === "PONG") return;
    } catch {
      // not up yet
    }
    await Bun.sleep(25);
  }
  throw new Error(`redis-server did not answer on port ${port}`);
}
