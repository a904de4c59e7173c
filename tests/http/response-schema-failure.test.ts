/**
 * An answer the proxy cannot validate against its own response schema is an upstream error
 * (src/http/error-handler.ts), never a 400 `invalid_request` (what /status and /usage
 * answered after an upstream's `cost: 1e300`, issue 56): the values in an answer come from
 * the upstream, and the client's request was fine. Here an upstream's model list carries an
 * entry whose id is not a string; `GET /models` relays the list as listed.
 */
import { expect, test } from "bun:test";
import { chatTestApp } from "../helpers/chat-app";
import { errorOf } from "../helpers/test-app";
import { DEFAULT_MODELS } from "../../packages/mock-upstream/src";

test("an answer that fails its response schema: 502 upstream naming the field, logged once without the value", async () => {
  const odd = { ...DEFAULT_MODELS[0]!, id: 5 as unknown as string, name: "a-value-that-is-not-logged" };
  const t = await chatTestApp({ mock: { models: [...DEFAULT_MODELS, odd] } });
  const error = await errorOf(await t.get("/api/v1/models"));
  expect({ status: error.status, code: error.code }).toEqual({ status: 502, code: "upstream" });
  expect(error.message).toContain(`response.data.${DEFAULT_MODELS.length}.id: Expected string`);
  const logged = t.logs.filter((l) => l.includes("failed its response schema"));
  expect(logged).toHaveLength(1);
  expect(logged[0]).toContain("/api/v1/models");
  expect(logged.join("\n")).not.toContain("a-value-that-is-not-logged");
});
