/**
 * Shared by the mock-billing tests: an in-process mock with BILLING_MODELS, requests, and
 * exact money. Expected bills are summed in integer pico-dollars (1e-12 USD), so the hand
 * computation carries no float noise of its own.
 */
import { expect } from "bun:test";
import { BILLING_MODELS, createMockUpstream, type MockModel } from "../../packages/mock-upstream/src";
import { checkChatStream, validateChatCompletion, validateError } from "../helpers/openrouter-spec";

const AUTH = { authorization: "Bearer sk-or-test", "content-type": "application/json" };

export function billingMock(extra: MockModel[] = []) {
  return createMockUpstream({ models: [...BILLING_MODELS, ...extra] });
}

export type Mock = ReturnType<typeof billingMock>;

export function chatRequest(body: Record<string, unknown>): Request {
  return new Request("http://mock.local/api/v1/chat/completions", { method: "POST", headers: AUTH, body: JSON.stringify(body) });
}

/** A one-message request to `model`. */
export function ask(model: string, text: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: [{ role: "user", content: text }], ...extra };
}

/** A JSON completion, checked against the spec's ChatResult. */
export async function completion(mock: Mock, body: Record<string, unknown>): Promise<any> {
  const response = await mock.fetch(chatRequest(body));
  const text = await response.text();
  expect({ status: response.status, text }).toMatchObject({ status: 200 });
  const result = JSON.parse(text);
  expect(validateChatCompletion(result)).toEqual([]);
  return result;
}

/** A streamed completion, every chunk checked against the spec's ChatStreamChunk. */
export async function streamed(mock: Mock, body: Record<string, unknown>) {
  const response = await mock.fetch(chatRequest({ ...body, stream: true }));
  expect(response.status).toBe(200);
  const checked = checkChatStream(await response.text());
  expect(checked.problems).toEqual([]);
  expect(checked.done).toBe(true);
  const usage = (checked.chunks.at(-1) as any).usage;
  return { chunks: checked.chunks as any[], usage };
}

/** An error answer, checked against the spec's body for that status. */
export async function failure(mock: Mock, body: Record<string, unknown>, status: number): Promise<string> {
  const response = await mock.fetch(chatRequest(body));
  expect(response.status).toBe(status);
  const error: any = await response.json();
  expect(validateError(error, status)).toEqual([]);
  return error.error.message;
}

/** USD from pico-dollars. */
export const usd = (picos: number) => picos / 1e12;

/** Prices in pico-dollars (per token, per request, per image, per result). */
export const PICO = {
  fee: { prompt: 1_000_000, completion: 2_000_000, request: 2_000_000_000 },
  vision: { prompt: 2_500_000, completion: 10_000_000, image: 3_613_000_000 },
  search: { prompt: 1_000_000, completion: 2_000_000, result: 4_000_000_000 },
  cache: { prompt: 3_000_000, completion: 15_000_000, write: 3_750_000 },
  reasoner: { prompt: 1_100_000, completion: 4_400_000, reasoning: 9_000_000 },
  cheap: { prompt: 100_000, completion: 400_000 },
  pricey: { prompt: 15_000_000, completion: 60_000_000 },
  multi: { prompt: 1_000_000, completion: 4_000_000 },
  o1pro: { prompt: 150_000_000, completion: 600_000_000 },
  unpricedSearch: { prompt: 20_000, completion: 50_000 },
  opus: { prompt: 15_000_000, completion: 75_000_000 },
  /** A web result from OpenRouter's own engine: $0.004. */
  engineResult: 4_000_000_000,
} as const;

/** usage.cost is the expected bill, cost_details add up to it, and the mock's log agrees. */
export function expectBill(usage: any, served: { costUsd: number }, expectedUsd: number): void {
  expect(usage.cost).toBeCloseTo(expectedUsd, 12);
  expect(served.costUsd).toBe(usage.cost);
  const details = usage.cost_details;
  expect(details.upstream_inference_prompt_cost + details.upstream_inference_completions_cost).toBeCloseTo(usage.cost, 12);
}
