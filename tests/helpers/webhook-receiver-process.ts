import type { Subprocess } from "bun";
import { REPO_ROOT } from "./server";

export interface ReceivedWebhook {
  webhookId: string | null;
  verified: boolean;
  status: number;
  event: { type: string; timestamp: string; data: Record<string, any> } | null;
}

export interface ReceiverProcess {
  url: string;
  port: number;
  proc: Subprocess;
  control(settings: { secret?: string; fail?: number; status?: number }): Promise<void>;
  received(): Promise<ReceivedWebhook[]>;
  stop(): Promise<void>;
}

/** Starts tests/helpers/webhook-receiver.ts in its own process (on `port`, or a free one). */
export async function startReceiver(port = 0): Promise<ReceiverProcess> {
  const proc = Bun.spawn([process.execPath, "tests/helpers/webhook-receiver.ts"], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", PORT: String(port) },
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = proc.stdout.getReader();
  let text = "";
  while (!/listening (\d+)/.test(text)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the webhook receiver exited before listening: ${text}`);
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const bound = Number(/listening (\d+)/.exec(text)![1]);
  const base = `http://127.0.0.1:${bound}`;
  return {
    url: `${base}/hooks`,
    port: bound,
    proc,
    async control(settings) {
      const res = await fetch(`${base}/_control`, { method: "POST", body: JSON.stringify(settings) });
      if (res.status !== 204) throw new Error(`receiver control failed: ${res.status}`);
    },
    received: async () => (await (await fetch(`${base}/_received`)).json()) as ReceivedWebhook[],
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}
