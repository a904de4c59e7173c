/** `ai` with `@ai-sdk/openai-compatible`, pointed at the proxy like any OpenAI-compatible API. */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { aiSdkSuite } from "./ai-sdk-suite";

aiSdkSuite({
  name: "@ai-sdk/openai-compatible",
  // Default settings (no includeUsage): the proxy asks the upstream for usage on every
  // stream, so the SDK still gets a usage chunk.
  model: ({ baseURL, apiKey, user, fetch }, modelId) =>
    createOpenAICompatible({ name: "metered-proxy", baseURL, apiKey, headers: { "x-service-user": user }, fetch }).chatModel(modelId),
});
