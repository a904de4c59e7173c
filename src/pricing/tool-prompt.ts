/**
 * Prompt tokens a provider adds when a request carries `tools`: a tool-use system prompt
 * that is not in the request body, so the body's size does not bound it, yet it is billed
 * as prompt tokens. Rows are model-id prefixes (a provider family, or one model of it where
 * it differs); the longest matching prefix wins. To add a family, add a row and cite where
 * its figure comes from.
 */

interface ToolPromptRow {
  /** A model-id prefix: `anthropic/`, or `anthropic/claude-3-opus` for one model of the family. */
  prefix: string;
  /** Tokens added when the model chooses (`tool_choice` auto, none or absent). */
  choosing: number;
  /** Tokens added when `tool_choice` forces a tool (Anthropic's `any` or `tool`). */
  forced: number;
}

/**
 * Anthropic's tool use pricing page ("tool use system prompt token count"): 346 tokens
 * (313 with a forced tool) on its current models; Claude 3 Opus, retired but the largest,
 * 530 (281 forced). Its other Claude 3 models add less (Haiku 264/340, Sonnet 159/235).
 */
const TOOL_PROMPT_TABLE: readonly ToolPromptRow[] = [
  { prefix: "anthropic/", choosing: 346, forced: 313 },
  { prefix: "anthropic/claude-3-opus", choosing: 530, forced: 281 },
];

/** The bound of a row: either `tool_choice` may be sent, so the larger of its two figures. */
const rowBound = (row: ToolPromptRow) => Math.max(row.choosing, row.forced);

/**
 * A family this table does not know may add a tool prompt too: bound it by the largest any
 * provider is known to add (a few hundred tokens, a small part of any tool call's bound).
 */
export const UNKNOWN_FAMILY_TOOL_PROMPT_TOKENS = Math.max(...TOOL_PROMPT_TABLE.map(rowBound));

/** Tokens the provider of `modelId` may add to the prompt of a request with tools. */
export function toolPromptTokens(modelId: string): number {
  let match: ToolPromptRow | null = null;
  for (const row of TOOL_PROMPT_TABLE) {
    if (modelId.startsWith(row.prefix) && (match === null || row.prefix.length > match.prefix.length)) match = row;
  }
  return match === null ? UNKNOWN_FAMILY_TOOL_PROMPT_TOKENS : rowBound(match);
}
