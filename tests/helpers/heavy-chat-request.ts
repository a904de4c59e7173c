/**
 * A chat request as heavy in JSON values as real ones get: a long agent conversation of
 * 2,048 messages, half of them tool calls and half their results, with 128 tools whose
 * parameters are JSON schemas of 50 properties. The body bounds (src/http/json-bounds.ts)
 * must let it through.
 */
export function heavyChatRequest(model = "openai/gpt-4o-mini"): Record<string, unknown> {
  const messages: unknown[] = [{ role: "system", content: "You are an agent with tools." }];
  for (let call = 0; messages.length < 2048; call++) {
    messages.push({
      role: "assistant",
      content: null,
      tool_calls: [{ id: `call_${call}`, type: "function", function: { name: `tool_${call % 128}`, arguments: JSON.stringify({ p0: call }) } }],
    });
    messages.push({ role: "tool", tool_call_id: `call_${call}`, content: `result ${call}` });
  }
  const tools = Array.from({ length: 128 }, (_, i) => {
    const names = Array.from({ length: 50 }, (_, p) => `p${p}`);
    return {
      type: "function",
      function: {
        name: `tool_${i}`,
        description: `Tool number ${i}.`,
        parameters: {
          type: "object",
          properties: Object.fromEntries(names.map((name) => [name, { type: "string", description: `Parameter ${name}.` }])),
          required: names,
          additionalProperties: false,
        },
      },
    };
  });
  return { model, messages, tools, max_tokens: 5 };
}

/** How many JSON values `value` holds (itself included; keys are not values), counted on the parsed form. */
export function countJsonValues(value: unknown): number {
  let count = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    count++;
    if (Array.isArray(next)) pending.push(...next);
    else if (next !== null && typeof next === "object") pending.push(...Object.values(next));
  }
  return count;
}
