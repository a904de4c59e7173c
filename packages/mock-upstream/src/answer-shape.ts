/**
 * What a completion's answer looks like besides its length: plain words (./completion.ts),
 * a JSON document that fits `response_format`, or a call of one of the request's `tools`;
 * and how many choices (`n`) carry it. Only the shape changes: a completion is as many tokens
 * as the scenario plans whatever its text (one token per word, or per equal slice of the
 * JSON), so it is billed the same way (./billing.ts), each of the `n` choices in full.
 *
 * spec/openrouter-openapi.yaml: ChatRequest.response_format (ChatFormatJsonObjectConfig,
 * ChatFormatJsonSchemaConfig), ChatRequest.tools (ChatFunctionTool) and tool_choice
 * (ChatToolChoice); the answer's ChatAssistantMessage.tool_calls (ChatToolCall) and, streamed,
 * ChatStreamDelta.tool_calls (ChatStreamToolCall).
 */
import { BadRequest } from "./chat-request";
import { completionText, textOfWords } from "./completion";
import { schemaInstance } from "./schema-instance";

export type AnswerShape =
  | { kind: "words" }
  /** `response_format` json_object or json_schema: `points` are the whole document's code points. */
  | { kind: "json"; points: string[] }
  /** A call of the function `name`; `points` spell its whole `arguments` (JSON of its parameters' schema). */
  | { kind: "tool_call"; id: string; name: string; points: string[] };

/** OpenAI's bound on `n` (the proxy refuses the same). */
const MAX_CHOICES = 128;

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => value !== null && typeof value === "object" && !Array.isArray(value);

/** `n`: how many choices the answer has (1 when absent). Throws BadRequest on a value out of range. */
export function readChoices(body: Json): number {
  const n = body.n;
  if (n === undefined || n === null) return 1;
  if (!Number.isSafeInteger(n) || (n as number) < 1 || (n as number) > MAX_CHOICES) throw new BadRequest(`n must be an integer from 1 to ${MAX_CHOICES}`);
  return n as number;
}

/**
 * A tool call when the request offers function tools and `tool_choice` is not "none": the
 * function `tool_choice` names, else the first. With `auto` (or no choice), a model that has
 * just been given a tool's result (the last message is a `tool` one) answers in words, so a
 * client's tool loop ends; a forced choice (`required`, a named function) calls again. Else a
 * JSON document for `response_format` json_object (`{"reply": …}`) or json_schema (a small value
 * that fits its schema), else words. `plannedTokens` is the whole completion's length.
 */
export function readAnswerShape(body: Json, messages: readonly unknown[], generationId: string, plannedTokens: number): AnswerShape {
  const tool = calledTool(body, messages);
  if (tool) {
    const id = `call_${generationId.replace(/^gen-/, "")}`;
    return { kind: "tool_call", id, name: tool.name, points: codePoints(schemaInstance(tool.parameters ?? {})) };
  }
  const format = body.response_format;
  if (format === undefined || format === null) return { kind: "words" };
  if (!isObject(format) || typeof format.type !== "string") throw new BadRequest("response_format must be an object with a type");
  if (format.type === "json_object") return { kind: "json", points: codePoints({ reply: completionText(plannedTokens) }) };
  if (format.type === "json_schema") {
    const config = format.json_schema;
    if (!isObject(config) || typeof config.name !== "string") throw new BadRequest("response_format.json_schema must be an object with a name");
    return { kind: "json", points: codePoints(schemaInstance(config.schema ?? { type: "object" })) };
  }
  // text, grammar, python: words are the closest the mock comes.
  return { kind: "words" };
}

function calledTool(body: Json, messages: readonly unknown[]): { name: string; parameters?: unknown } | null {
  const functions = (Array.isArray(body.tools) ? body.tools : [])
    .map((tool) => (isObject(tool) && tool.type === "function" && isObject(tool.function) ? tool.function : null))
    .filter((f): f is Json => f !== null && typeof f.name === "string");
  const choice = body.tool_choice;
  if (functions.length === 0 || choice === "none") return null;
  const named = isObject(choice) && choice.type === "function" && isObject(choice.function) ? choice.function.name : undefined;
  const forced = choice === "required" || named !== undefined;
  const last = messages[messages.length - 1];
  if (!forced && isObject(last) && last.role === "tool") return null;
  const tool = (named === undefined ? undefined : functions.find((f) => f.name === named)) ?? functions[0]!;
  return { name: tool.name as string, parameters: tool.parameters };
}

/**
 * The answer's text between tokens `from` and `to` of a completion planned at `plannedTokens`:
 * words as ever, or the equal share of the JSON text those tokens carry (cut between code
 * points, so each piece is whole text), so that a completion cut short by `max_tokens` is cut
 * JSON, as a real model's would be.
 */
export function shapedText(shape: AnswerShape, from: number, to: number, plannedTokens: number): string {
  if (shape.kind === "words") return textOfWords(from, to);
  const { points } = shape;
  const at = (token: number) => (plannedTokens === 0 ? 0 : Math.round((token * points.length) / plannedTokens));
  return points.slice(at(from), at(to)).join("");
}

/** A value's JSON, as code points (so that no slice splits a surrogate pair). */
function codePoints(value: unknown): string[] {
  return Array.from(JSON.stringify(value));
}
