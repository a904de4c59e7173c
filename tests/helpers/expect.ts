import { expect } from "bun:test";

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Asserts the one error envelope of ARCHITECTURE.md §3: the status, JSON content type, an
 * x-request-id, a body that is exactly `{error: {code, message, ...details}}`, and
 * optionally what the message says. Returns the `error` object.
 */
export async function expectError(
  res: Response,
  status: number,
  code: string,
  message?: string | RegExp,
): Promise<{ code: string; message: string } & Record<string, unknown>> {
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status });
  expect(res.headers.get("content-type") ?? "").toContain("application/json");
  expect(res.headers.get("x-request-id") ?? "").toMatch(UUID);
  const body = JSON.parse(text) as { error: { code: string; message: string } & Record<string, unknown> };
  expect(Object.keys(body)).toEqual(["error"]);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe("string");
  expect(body.error.message.length).toBeGreaterThan(0);
  if (message !== undefined) expect(body.error.message).toMatch(message);
  return body.error;
}

/** Asserts a 200 JSON response with a request id and returns the body. */
export async function expectOk<T = any>(res: Response, status = 200): Promise<T> {
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status });
  expect(res.headers.get("x-request-id") ?? "").toMatch(UUID);
  expect(res.headers.get("content-type") ?? "").toContain("application/json");
  return JSON.parse(text) as T;
}
