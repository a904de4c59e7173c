/** `ai` with `@openrouter/ai-sdk-provider`, its baseURL moved from OpenRouter to the proxy. */
import { createOpenRouter } from "@openrouter/ai-sdk-provider";
import { aiSdkSuite } from "./ai-sdk-suite";

aiSdkSuite({
  name: "@openrouter/ai-sdk-provider",
  model: ({ baseURL, apiKey, user, fetch }, modelId) =>
    createOpenRouter({ baseURL, apiKey, headers: { "x-service-user": user }, fetch, compatibility: "strict" }).chat(modelId),
  // The provider surfaces OpenRouter's usage.cost in providerMetadata.openrouter.usage.
  reportedCost: (metadata) => (metadata as { openrouter?: { usage?: { cost?: number } } } | undefined)?.openrouter?.usage?.cost,
});
