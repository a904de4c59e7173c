/**
 * The chat endpoint through the official `openai` SDK (a peer dependency): the proxy is
 * OpenAI-compatible, so the app keeps the SDK's whole surface (streaming, helpers, retries)
 * and this module only presets where it points and whose budget pays (README "Five-minute
 * walk-through", step 4).
 */
import OpenAI, { type ClientOptions } from "openai";
import type { FetchLike } from "./http.js";

/** Whose budget a chat call draws on: one of the app's users, or a one-time grant (README "Apps without a user system"). */
export type ChatPayer = { user: string; grant?: never } | { grant: string; user?: never };

/** The SDK's options an app may still choose; the rest are fixed by the preset. */
export type ChatClientOptions = Pick<ClientOptions, "maxRetries" | "timeout" | "fetchOptions">;

/** An `openai` client whose every call goes to the proxy with the secret key and the payer's header. */
export function presetChatClient(apiBase: string, secretKey: string, fetch: FetchLike, payer: ChatPayer, options: ChatClientOptions = {}): OpenAI {
  return new OpenAI({
    ...options,
    baseURL: apiBase,
    apiKey: secretKey,
    // Set, so that the SDK does not read OPENAI_ORG_ID / OPENAI_PROJECT_ID from the app's
    // environment and send headers meant for OpenAI.
    organization: null,
    project: null,
    fetch,
    defaultHeaders: payerHeader(payer),
  });
}

/** `x-service-user` or `x-service-grant`: the service refuses a call with both or neither. */
function payerHeader(payer: ChatPayer): Record<string, string> {
  const { user, grant } = payer;
  if (user !== undefined && grant !== undefined) throw new TypeError("chat(): pass either { user } or { grant }, not both");
  if (typeof user === "string" && user.length > 0) return { "x-service-user": user };
  if (typeof grant === "string" && grant.length > 0) return { "x-service-grant": grant };
  throw new TypeError("chat(): pass { user: appUserId } or { grant: grantToken }, a non-empty string");
}
