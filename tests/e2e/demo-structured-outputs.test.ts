/**
 * What a newcomer tries first in demo mode besides plain chat, with the official `openai` SDK
 * against a real server process (no UPSTREAM_API_KEY: the built-in mock): structured outputs
 * through `chat.completions.parse()` with a zod schema, JSON and streamed, and a tool-calling
 * round trip (the call, the tool's result sent back, the answer in words), and
 * `models.retrieve`. Each call is metered like any other: a ledger row with a cost.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import OpenAI from "openai";
import { zodFunction, zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import { cliCreateApp, connectOverHttp, startServer, tempDatabase, type RunningServer } from "../helpers/server";

setDefaultTimeout(60_000);

const MODEL = "openai/gpt-4o-mini";
const db = tempDatabase();
let server: RunningServer;
let secretKey: string;

const Recipe = z.object({
  title: z.string().min(3),
  servings: z.number().int().positive(),
  ingredients: z.array(z.object({ name: z.string(), grams: z.number().nonnegative() })).min(1),
  vegan: z.boolean(),
  course: z.enum(["starter", "main", "dessert"]),
  note: z.string().nullable(),
});

const GetWeather = z.object({ city: z.string(), unit: z.enum(["celsius", "fahrenheit"]) });

beforeAll(async () => {
  ({ secretKey } = await cliCreateApp(db.databaseUrl, "Structured"));
  server = await startServer({ databaseUrl: db.databaseUrl });
  expect(await (await server.fetch("/healthz")).json()).toMatchObject({ mode: "demo" });
  await connectOverHttp(server, secretKey, "alice", 5);
});

afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

const client = () => new OpenAI({ baseURL: `${server.baseUrl}/api/v1`, apiKey: secretKey, defaultHeaders: { "x-service-user": "alice" } });

/** The user's ledger rows, once `count` of them are written (usage settles just after the answer). */
async function rows(count: number): Promise<Array<{ costUsd: number; status: string }>> {
  for (let i = 0; i < 200; i++) {
    const res = await server.fetch("/api/v1/usage?appUserId=alice&limit=100", { headers: { authorization: `Bearer ${secretKey}` } });
    const { data } = (await res.json()) as { data: Array<{ costUsd: number; status: string }> };
    if (data.length >= count) return data;
    await Bun.sleep(25);
  }
  throw new Error(`fewer than ${count} ledger rows`);
}

describe("demo mode with the openai SDK", () => {
  test("chat.completions.parse() with a zod schema: the parsed object fits it", async () => {
    const completion = await client().chat.completions.parse({
      model: MODEL,
      messages: [{ role: "user", content: "A recipe, please." }],
      response_format: zodResponseFormat(Recipe, "recipe"),
    });
    const parsed = completion.choices[0]!.message.parsed;
    expect(parsed).not.toBeNull();
    expect(Recipe.parse(parsed)).toEqual(parsed!);
    expect(parsed!.ingredients.length).toBeGreaterThanOrEqual(1);
  });

  test("the .stream() helper with the same response_format: the final completion parses too", async () => {
    const stream = client().chat.completions.stream({
      model: MODEL,
      messages: [{ role: "user", content: "A recipe, streamed." }],
      response_format: zodResponseFormat(Recipe, "recipe"),
    });
    const final = await stream.finalChatCompletion();
    expect(Recipe.safeParse(final.choices[0]!.message.parsed).success).toBe(true);
  });

  test("a tool-calling round trip: the call with parsed arguments, its result sent back, then an answer in words", async () => {
    const before = (await rows(0)).length;
    const tools = [zodFunction({ name: "get_weather", parameters: GetWeather, description: "The weather in a city" })];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Is it warm in Lisbon?" }];
    const first = await client().chat.completions.parse({ model: MODEL, messages, tools });
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    const call = choice.message.tool_calls![0]!;
    expect(call.type).toBe("function");
    if (call.type !== "function") throw new Error("not a function call");
    expect(call.function.name).toBe("get_weather");
    expect(GetWeather.parse(call.function.parsed_arguments)).toEqual(call.function.parsed_arguments as z.infer<typeof GetWeather>);

    messages.push(choice.message, { role: "tool", tool_call_id: call.id, content: JSON.stringify({ celsius: 24 }) });
    const second = await client().chat.completions.create({ model: MODEL, messages, tools });
    expect(second.choices[0]!.finish_reason).toBe("stop");
    expect(second.choices[0]!.message.content).toMatch(/^Mock café/);
    expect(second.choices[0]!.message.tool_calls).toBeUndefined();

    // Both calls were metered.
    const written = await rows(before + 2);
    expect(written.slice(0, 2).every((r) => r.status === "ok" && r.costUsd > 0)).toBe(true);
  });

  test("a streamed tool call, gathered by the SDK's helper, has the same arguments as the JSON one", async () => {
    const tools = [zodFunction({ name: "get_weather", parameters: GetWeather })];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Weather?" }];
    const json = await client().chat.completions.parse({ model: MODEL, messages, tools });
    const final = await client().chat.completions.stream({ model: MODEL, messages, tools }).finalChatCompletion();
    const streamedCall = final.choices[0]!.message.tool_calls![0]!;
    const jsonCall = json.choices[0]!.message.tool_calls![0]!;
    if (streamedCall.type !== "function" || jsonCall.type !== "function") throw new Error("not a function call");
    expect(streamedCall.function.arguments).toBe(jsonCall.function.arguments);
    expect(streamedCall.function.parsed_arguments).toEqual(jsonCall.function.parsed_arguments);
  });

  test("models.retrieve(id) answers the model models.list() shows, and the list's links.details answers too", async () => {
    const listed = [];
    for await (const model of client().models.list()) listed.push(model as OpenAI.Model & { links: { details: string } });
    const mini = listed.find((m) => m.id === MODEL)!;
    expect(await client().models.retrieve(MODEL)).toMatchObject({ id: MODEL });
    const details = await server.fetch(mini.links.details, { headers: { authorization: `Bearer ${secretKey}` } });
    expect(details.status).toBe(200);
    expect(await details.json()).toEqual(JSON.parse(JSON.stringify(mini)));
  });

  test("n: 2 gives two choices", async () => {
    const completion = await client().chat.completions.create({ model: MODEL, n: 2, messages: [{ role: "user", content: "Two answers" }] });
    expect(completion.choices.map((c) => c.index)).toEqual([0, 1]);
  });
});
