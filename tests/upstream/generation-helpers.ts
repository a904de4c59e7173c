/**
 * Shared by the generation-record tests: requests to the in-process mock, GET /generation
 * checked against the spec, exact money in pico-dollars, and reading a stream event by event.
 */
import { expect } from "bun:test";
import type { MockUpstream } from "../../packages/mock-upstream/src";
import { validateError, validateGeneration, validateGenerationError } from "../helpers/openrouter-spec";

export const KEY = { authorization: "Bearer sk-or-test" };
const AUTH = { ...KEY, "content-type": "application/json" };

export function chatRequest(body: Record<string, unknown>, signal?: AbortSignal): Request {
  return new Request("http://mock.local/api/v1/chat/completions", { method: "POST", headers: AUTH, body: JSON.stringify(body), signal });
}

/** A one-message request to openai/gpt-4o-mini (the default models' implicit provider, "Mock"). */
export function ask(text: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: text }], ...extra };
}

/** GET /generation?id= on an in-process mock; every body checked against the spec's schema for its status. */
export async function lookup(mock: MockUpstream, id: string, headers: Record<string, string> = KEY): Promise<{ status: number; body: any }> {
  const response = await mock.fetch(new Request(`http://mock.local/api/v1/generation?id=${encodeURIComponent(id)}`, { headers }));
  return checked(response);
}

export async function checked(response: Response): Promise<{ status: number; body: any }> {
  expect(response.headers.get("content-type")).toBe("application/json");
  const body = await response.json();
  if (response.status === 200) expect(validateGeneration(body)).toEqual([]);
  // The spec lists no 400 for GET /generation; a missing id gets the 400 body other endpoints document.
  else if (response.status === 400) expect(validateError(body, 400)).toEqual([]);
  else expect(validateGenerationError(body, response.status)).toEqual([]);
  return { status: response.status, body };
}

/** The record's `data`, which must be there. */
export async function record(mock: MockUpstream, id: string): Promise<any> {
  const { status, body } = await lookup(mock, id);
  expect({ id, status }).toEqual({ id, status: 200 });
  return body.data;
}

/** openai/gpt-4o-mini's prices in pico-dollars per token. */
const MINI = { prompt: 150_000, completion: 600_000 };

/** What openai/gpt-4o-mini bills, in USD, exactly as the mock rounds it. */
export function miniUsd(promptTokens: number, completionTokens: number): number {
  return (promptTokens * MINI.prompt + completionTokens * MINI.completion) / 1e12;
}

/** Reads a stream until `events` SSE data events have arrived; returns the text read. */
export async function readEvents(reader: { read(): Promise<{ done: boolean; value?: Uint8Array }> }, events: number): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  while ((text.match(/^data: /gm) ?? []).length < events) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`the stream ended after ${text.length} characters, before ${events} events`);
    text += decoder.decode(value, { stream: true });
  }
  return text;
}

/** Waits (bounded by the test's timeout) until the mock has a record for `id`. */
export async function untilRecorded(mock: MockUpstream, id: string): Promise<void> {
  while (mock.generation(id) === undefined) await Bun.sleep(2);
}

/** Streams `body`, reads the role chunk and `chunks` content chunks, then cancels the body; returns the record. */
export async function streamThenLeave(mock: MockUpstream, body: Record<string, unknown>, chunks: number) {
  const response = await mock.fetch(chatRequest({ ...body, stream: true }));
  const reader = response.body!.getReader();
  await readEvents(reader, 1 + chunks);
  await reader.cancel();
  const id = response.headers.get("x-generation-id")!;
  return { id, served: mock.served.find((s) => s.id === id)!, data: await record(mock, id) };
}
