/**
 * The chat endpoint through the official `openai` SDK (a peer dependency, majors 6 and 7):
 * the proxy is OpenAI-compatible, so the app keeps the SDK's whole surface (streaming,
 * helpers, retries) and this module only presets where it points and whose budget pays
 * (README "Five-minute walk-through", step 4), and makes the service's error answers the
 * library's own error classes.
 */
import OpenAI, { type APIError, type ClientOptions } from "openai";
import { errorFromAnswer } from "./envelope.js";
import { UnexpectedResponseError } from "./errors.js";
import type { FetchLike } from "./http.js";

/** Whose budget a chat call draws on: one of the app's users, or a one-time grant (README "Apps without a user system"). */
export type ChatPayer = { user: string; grant?: never } | { grant: string; user?: never };

/** The SDK's options an app may still choose; the rest are fixed by the preset. */
export type ChatClientOptions = Pick<ClientOptions, "maxRetries" | "timeout" | "fetchOptions">;

/**
 * The SDK's client, whose error answers are ours: `makeStatusError` is the SDK's own
 * (protected) hook that turns an error answer into the error a call throws, called once
 * the SDK has decided not to retry. Converting there rather than in a fetch wrapper keeps
 * the SDK's retries (429 with Retry-After, 5xx) exactly as they are, and covers JSON and
 * streamed calls alike: a stream's error answer arrives before its first chunk. It has the
 * same signature in every release of majors 6 and 7.
 */
class MeteredOpenAI extends OpenAI {
  protected override makeStatusError(status: number, body: object, message: string | undefined, headers: Headers): APIError {
    const ours = errorFromAnswer(status, body, headers, message ?? "");
    // Not our envelope (a load balancer answered): the SDK's error, with all it carries.
    if (ours instanceof UnexpectedResponseError) return super.makeStatusError(status, body, message, headers);
    // The SDK throws what this returns and reads nothing off it; its declared type is
    // the SDK's APIError, which our classes (shared with the browser entry) cannot extend.
    return ours as unknown as APIError;
  }
}

/** An `openai` client whose every call goes to the proxy with the secret key and the payer's header. */
export function presetChatClient(apiBase: string, secretKey: string, fetch: FetchLike, payer: ChatPayer, options: ChatClientOptions = {}): OpenAI {
  return new MeteredOpenAI({
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

/**
 * `x-service-user` or `x-service-grant`: the service refuses a call with both or neither. The
 * user id goes percent-encoded (its UTF-8 bytes, as `encodeURIComponent` writes them), the one
 * form the service reads it in: header values are bytes, and an id of plain ASCII is unchanged.
 */
function payerHeader(payer: ChatPayer): Record<string, string> {
  const { user, grant } = payer;
  if (user !== undefined && grant !== undefined) throw new TypeError("chat(): pass either { user } or { grant }, not both");
  if (typeof user === "string" && user.length > 0) return { "x-service-user": encodeUserId(user) };
  if (typeof grant === "string" && grant.length > 0) return { "x-service-grant": grant };
  throw new TypeError("chat(): pass { user: appUserId } or { grant: grantToken }, a non-empty string");
}

function encodeUserId(user: string): string {
  try {
    return encodeURIComponent(user);
  } catch {
    // encodeURIComponent's URIError: a lone surrogate, which has no UTF-8 form.
    throw new TypeError("chat(): the user id is not valid Unicode (it has a lone surrogate)");
  }
}
