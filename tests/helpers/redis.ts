/**
 * A real redis-server for tests, on a free port, with no persistence: a restart loses
 * every key, which is exactly the "Redis restarted and lost data" case to test.
 */
import type { Subprocess } from "bun";
import Redis from "ioredis";
import { freePort } from "./server";

export interface TestRedis {
  url: string;
  port: number;
  /** Stops the server (SIGKILL-free: SHUTDOWN NOSAVE semantics via SIGTERM with no persistence). */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
  /** A fresh client, for assertions: disconnect it, or it reconnects to this port for the rest of the run. */
  client(): Redis;
}

export async function startRedis(): Promise<TestRedis> {
  const port = freePort();
  let proc: Subprocess | null = null;
  const start = async () => {
    proc = Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdout: "ignore",
      stderr: "ignore",
    });
    await waitForPing(port);
  };
  const stop = async () => {
    if (!proc) return;
    proc.kill("SIGTERM");
    await proc.exited;
    proc = null;
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, port, start, stop, client: () => new Redis(port, "127.0.0.1") };
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
