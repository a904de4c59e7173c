/**
 * Shared by the reliability tests: one chat call through a real proxy, read to its end
 * (or to its failure), with what the client saw and the ledger row the call left.
 */
import { readFileSync } from "node:fs";
import { createMockUpstream, type ServedRequest } from "../../packages/mock-upstream/src";
import type { ApiUsageRow, ProxyStack } from "../helpers/proxy-stack";

export const MODEL = "openai/gpt-4o-mini";

export interface CallOutcome {
  status: number;
  requestId: string;
  contentType: string;
  /** The whole body as received (up to the cut, when there was one). */
  bytes: Uint8Array;
  /** Why reading the body failed; null when it ended cleanly. */
  cut: string | null;
}

export function chatBody(directive: string, stream: boolean, extra: Record<string, unknown> = {}) {
  return { model: MODEL, messages: [{ role: "user", content: `Say something. ${directive}` }], stream, ...extra };
}

/** Posts one chat completion and reads its body chunk by chunk, keeping what arrived before a failure. */
export async function call(stack: ProxyStack, user: string, directive: string, stream: boolean): Promise<CallOutcome> {
  const res = await stack.chat(user, chatBody(directive, stream));
  const parts: Uint8Array[] = [];
  let cut: string | null = null;
  try {
    for await (const part of res.body!) parts.push(part);
  } catch (err) {
    cut = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  }
  return {
    status: res.status,
    requestId: res.headers.get("x-request-id") ?? "",
    contentType: res.headers.get("content-type") ?? "",
    bytes: new Uint8Array(Buffer.concat(parts)),
    cut,
  };
}

/** The ledger row of one request, polled until the usage writer has flushed it. */
export async function rowOf(stack: ProxyStack, user: string, requestId: string): Promise<ApiUsageRow> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const rows = await stack.usage(user);
    const row = rows.find((r) => r.requestId === requestId);
    if (row) return row;
    if (Date.now() > deadline) throw new Error(`no ledger row for ${requestId}: ${JSON.stringify(rows)}`);
    await Bun.sleep(20);
  }
}

/**
 * The exact bytes the mock sent for a served request: the same body replayed to an in-process
 * mock on the same clock, with its generation id swapped for the served one. The mock is
 * deterministic apart from the id, so this is what the proxy had to pass through.
 */
export async function bytesTheMockSent(served: ServedRequest, now: () => number): Promise<Uint8Array> {
  const replay = createMockUpstream({ now });
  const res = await replay.fetch(
    new Request("http://mock.local/api/v1/chat/completions", {
      method: "POST",
      headers: { authorization: "Bearer replay", "content-type": "application/json" },
      body: JSON.stringify(served.body),
    }),
  );
  const text = await res.text();
  return new TextEncoder().encode(text.replaceAll(replay.served[0]!.id, served.id));
}

/** Resident memory of a process in MB (Linux /proc/<pid>/status, VmRSS). */
export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)![1]) / 1024;
}

/** The process's peak resident memory in MB since it started (VmHWM). */
export function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)![1]) / 1024;
}
