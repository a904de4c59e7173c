/**
 * The shapes of the mock's answers beside plain words: a tool call when the request offers
 * tools, a JSON document for `response_format`, `n` choices. JSON and SSE, each checked
 * against the spec's schemas (ChatResult, ChatStreamChunk), the values against the request's
 * own JSON Schemas with a real validator (ajv), and billed as a words answer of the same
 * length, each choice in full.
 */
import { describe, expect, test } from "bun:test";
import Ajv2020 from "ajv/dist/2020";
import { createMockUpstream } from "../../packages/mock-upstream/src";
import { schemaInstance } from "../../packages/mock-upstream/src/schema-instance";
import { checkChatStream, validateChatCompletion } from "../helpers/openrouter-spec";

const AUTH = { authorization: "Bearer sk-or-test", "content-type": "application/json" };
const ajv = new Ajv2020({ strict: false, validateFormats: false });

const WEATHER = {
  type: "object",
  properties: { city: { type: "string", minLength: 6 }, unit: { enum: ["celsius", "fahrenheit"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "unit", "days"],
  additionalProperties: false,
};
const tools = [
  { type: "function", function: { name: "get_weather", description: "The weather", parameters: WEATHER } },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] } } },
];

function call(body: Record<string, unknown>) {
  const mock = createMockUpstream();
  const request = new Request("http://mock.local/api/v1/chat/completions", {
    method: "POST",
    headers: AUTH,
    body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "What is the weather?" }], ...body }),
  });
  return { mock, response: mock.fetch(request) };
}

async function completion(body: Record<string, unknown>): Promise<any> {
  const response = await call(body).response;
  const json = await response.json();
  expect({ status: response.status, problems: validateChatCompletion(json) }).toEqual({ status: 200, problems: [] });
  return json;
}

async function streamed(body: Record<string, unknown>): Promise<any[]> {
  const response = await call({ ...body, stream: true }).response;
  expect(response.status).toBe(200);
  const checked = checkChatStream(await response.text());
  expect(checked.problems).toEqual([]);
  expect(checked.done).toBe(true);
  return checked.chunks;
}

const fits = (schema: object, value: unknown) => {
  const validate = ajv.compile(schema);
  return validate(value) ? [] : validate.errors;
};

describe("tools", () => {
  test("offered tools get a call of the first, its arguments fitting its parameters' schema; finish_reason tool_calls", async () => {
    const body = await completion({ tools });
    expect(body.choices).toHaveLength(1);
    const [choice] = body.choices;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toHaveLength(1);
    const [toolCall] = choice.message.tool_calls;
    expect(toolCall).toMatchObject({ type: "function", function: { name: "get_weather" } });
    expect(toolCall.id).toMatch(/^call_/);
    expect(fits(WEATHER, JSON.parse(toolCall.function.arguments))).toEqual([]);
  });

  test("a named tool_choice calls that one; `none` answers in words", async () => {
    const named = await completion({ tools, tool_choice: { type: "function", function: { name: "get_time" } } });
    expect(named.choices[0].message.tool_calls[0].function.name).toBe("get_time");
    expect(JSON.parse(named.choices[0].message.tool_calls[0].function.arguments)).toEqual({ zone: "mock" });
    const none = await completion({ tools, tool_choice: "none" });
    expect(none.choices[0]).toMatchObject({ finish_reason: "stop", message: { content: expect.stringMatching(/^Mock café/) } });
    expect(none.choices[0].message.tool_calls).toBeUndefined();
    // Server tools alone are no function to call.
    const server = await completion({ tools: [{ type: "openrouter:web_search" }] });
    expect(server.choices[0].finish_reason).toBe("stop");
  });

  test("after the tool's result the answer is words (auto), or another call when a tool is required", async () => {
    const first = await completion({ tools });
    const toolCall = first.choices[0].message.tool_calls[0];
    const messages = [
      { role: "user", content: "What is the weather?" },
      { role: "assistant", content: null, tool_calls: [toolCall] },
      { role: "tool", tool_call_id: toolCall.id, content: '{"temperature": 21}' },
    ];
    const answer = await completion({ tools, messages });
    expect(answer.choices[0].finish_reason).toBe("stop");
    expect(typeof answer.choices[0].message.content).toBe("string");
    const again = await completion({ tools, messages, tool_choice: "required" });
    expect(again.choices[0].finish_reason).toBe("tool_calls");
  });

  test("streamed: the first delta names the call, the others carry its arguments, which join to the JSON answer's", async () => {
    const json = await completion({ tools });
    const chunks = await streamed({ tools });
    const calls = chunks.flatMap((c) => c.choices.flatMap((choice: any) => choice.delta?.tool_calls ?? []));
    expect(calls.length).toBeGreaterThan(1);
    expect(calls[0]).toMatchObject({ index: 0, type: "function", function: { name: "get_weather" } });
    expect(calls[0].id).toMatch(/^call_/);
    expect(calls.slice(1).every((c: any) => c.id === undefined && c.function.name === undefined)).toBe(true);
    expect(calls.map((c: any) => c.function.arguments).join("")).toBe(json.choices[0].message.tool_calls[0].function.arguments);
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason).toBe("tool_calls");
  });

  test("billed as words of the same length: a tool call costs what the same request without tools does", async () => {
    const withTools = await completion({ tools });
    const words = await completion({});
    expect(withTools.usage).toEqual(words.usage);
  });
});

describe("response_format", () => {
  test("json_object: the content is a JSON object", async () => {
    const body = await completion({ response_format: { type: "json_object" } });
    const parsed = JSON.parse(body.choices[0].message.content);
    expect(parsed).toEqual({ reply: expect.stringMatching(/^Mock café/) });
  });

  test("json_schema: the content fits the schema, $defs, anyOf, arrays, enums and bounds included", async () => {
    const schema = {
      type: "object",
      $defs: {
        item: {
          type: "object",
          properties: { sku: { type: "string", format: "uuid" }, qty: { type: "number", exclusiveMinimum: 0 } },
          required: ["sku", "qty"],
        },
      },
      properties: {
        title: { type: "string", maxLength: 3 },
        items: { type: "array", items: { $ref: "#/$defs/item" }, minItems: 2 },
        status: { anyOf: [{ type: "null" }, { enum: ["open", "shut"] }] },
        when: { type: ["string", "null"], format: "date-time" },
        score: { type: "integer", minimum: 3, multipleOf: 2 },
        both: {
          allOf: [
            { properties: { a: { type: "boolean" } }, required: ["a"] },
            { properties: { b: { const: 7 } }, required: ["b"] },
          ],
        },
        optional: { type: "string" },
      },
      required: ["title", "items", "status", "when", "score", "both"],
      additionalProperties: false,
    };
    const body = await completion({ response_format: { type: "json_schema", json_schema: { name: "order", strict: true, schema } } });
    const parsed = JSON.parse(body.choices[0].message.content);
    expect(fits(schema, parsed)).toEqual([]);
    expect(parsed).toEqual({
      title: "moc",
      items: [
        { sku: "00000000-0000-4000-8000-000000000000", qty: 1 },
        { sku: "00000000-0000-4000-8000-000000000000", qty: 1 },
      ],
      status: "open",
      when: "2026-01-01T00:00:00Z",
      score: 4,
      both: { a: false, b: 7 },
    });
  });

  test("cut by max_tokens: finish_reason length and the content a prefix of the whole document", async () => {
    const whole = (await completion({ response_format: { type: "json_object" } })).choices[0].message.content as string;
    const cut = (await completion({ response_format: { type: "json_object" }, max_tokens: 8 })).choices[0];
    expect(cut.finish_reason).toBe("length");
    expect(whole.startsWith(cut.message.content)).toBe(true);
    expect(cut.message.content.length).toBeLessThan(whole.length);
    expect(() => JSON.parse(cut.message.content)).toThrow();
  });

  test("streamed: the content pieces join to the JSON answer's document", async () => {
    const format = { type: "json_schema", json_schema: { name: "w", schema: WEATHER } };
    const json = (await completion({ response_format: format })).choices[0].message.content;
    const chunks = await streamed({ response_format: format });
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(json);
  });

  test("a malformed response_format is refused with 400", async () => {
    for (const response_format of ["json", { type: "json_schema" }]) {
      expect((await call({ response_format }).response).status).toBe(400);
    }
  });
});

describe("n", () => {
  test("n choices, each the whole answer, billed n times over", async () => {
    const one = await completion({});
    const three = await completion({ n: 3 });
    expect(three.choices.map((c: any) => c.index)).toEqual([0, 1, 2]);
    for (const choice of three.choices) expect(choice.message.content).toBe(one.choices[0].message.content);
    expect(three.usage.prompt_tokens).toBe(one.usage.prompt_tokens);
    expect(three.usage.completion_tokens).toBe(3 * one.usage.completion_tokens);
    const promptCost = one.usage.cost_details.upstream_inference_prompt_cost;
    expect(three.usage.cost).toBeCloseTo(promptCost + 3 * one.usage.cost_details.upstream_inference_completions_cost, 12);
  });

  test("streamed: every event carries the n choices; each choice's content is the whole answer", async () => {
    const one = (await completion({})).choices[0].message.content;
    const chunks = await streamed({ n: 2 });
    const withChoices = chunks.filter((c) => c.choices.length > 0);
    expect(withChoices.every((c) => c.choices.map((choice: any) => choice.index).join() === "0,1")).toBe(true);
    for (const index of [0, 1]) expect(withChoices.map((c) => c.choices[index].delta.content ?? "").join("")).toBe(one);
    const usage = chunks.at(-1)!.usage;
    expect(usage.completion_tokens).toBe(2 * 16);
  });

  test("with tools, each choice calls the tool; n out of range is 400", async () => {
    const body = await completion({ tools, n: 2 });
    expect(body.choices.map((c: any) => c.finish_reason)).toEqual(["tool_calls", "tool_calls"]);
    for (const n of [0, 129, 1.5, "2"]) expect((await call({ n }).response).status).toBe(400);
  });

  test("the served log and the generation's record count every choice's tokens", async () => {
    const { mock, response } = call({ n: 4, max_tokens: 5 });
    const body = (await (await response).json()) as { usage: { cost: number } };
    const served = mock.served.at(-1)!;
    expect(served).toMatchObject({ completionTokens: 20, deliveredTokens: 20, costUsd: body.usage.cost });
    expect(mock.generation(served.id)).toMatchObject({ completionTokens: 20, finishReason: "length" });
  });
});

test("schemaInstance: a schema with no type, or a recursion it requires, still gives a value", () => {
  expect(schemaInstance({})).toBeNull();
  const tree = { $defs: { node: { type: "object", properties: { next: { $ref: "#/$defs/node" } }, required: ["next"] } }, $ref: "#/$defs/node" };
  let depth = 0;
  for (let at = schemaInstance(tree) as any; at !== null; at = at.next) depth++;
  expect(depth).toBeGreaterThan(1);
});
