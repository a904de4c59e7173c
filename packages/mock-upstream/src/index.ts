/**
 * A mock of OpenRouter's API (spec/openrouter-openapi.yaml) for demo mode, tests and
 * load runs: GET /models, POST /chat/completions (JSON and SSE) and GET /generation, steered
 * per request by `[[mock …]]` directives (see ./scenario.ts); upstream keys with credit
 * limits (./keys.ts, GET /key) and the PKCE flow that creates them (GET /auth, POST
 * /auth/keys). A plain fetch handler, no framework.
 *
 * It bills as OpenRouter documents, so its books are what a proxy must agree with: every
 * generation's final cost is in `served[].costUsd` and in its record at GET /generation
 * (./generation.ts: a stream aborted on a cancellable provider stops billing; anything else
 * is billed to its end; an error finish waives the tokens, per Zero Completion Insurance).
 * A request that fails before a generation starts (an HTTP error, a stall before headers)
 * has no record, ever.
 */
import { AuthCodes } from "./auth-codes";
import { handleCodeCreation, handleKeyExchange } from "./auth-keys";
import { handleAuthPage } from "./auth-page";
import { handleChat, type ChatContext } from "./chat";
import { errorBody } from "./errors";
import { handleGenerationLookup } from "./generation-endpoint";
import { GenerationLog, DEFAULT_GENERATION_RECORD_LIMIT } from "./generation-log";
import { handleKeyLookup } from "./key-endpoint";
import { KeyBook } from "./keys";
import { DEFAULT_MODELS, modelsListBody } from "./models";
import { UNPACED } from "./pacing";
import { parseScenarioDefaults } from "./scenario";
import type { MockUpstream, MockUpstreamOptions } from "./types";

export type { MockModel, MockPricing, MockProvider } from "./models";
export type { Scenario, ScenarioInput, UsageShape } from "./scenario";
export type { MockKeys, MockUpstream, MockUpstreamOptions, ServedRequest } from "./types";
export type { GenerationRecord } from "./generation-log";
export type { KeySettings, MockKeyAccount } from "./keys";
export type { UsageLimitType } from "./key-usage";
export { CODE_LIFETIME_MS } from "./auth-codes";
export { DEFAULT_MODELS, DEFAULT_SUPPORTED_PARAMETERS } from "./models";
export { BILLING_MODELS } from "./billing-models";
export { DEFAULT_SCENARIO, parseDirectives } from "./scenario";
export { completionText, estimatePromptTokens } from "./completion";

const BASE_PATH = "/api/v1";

export function createMockUpstream(options: MockUpstreamOptions = {}): MockUpstream {
  return buildMock(options, false);
}

function buildMock(options: MockUpstreamOptions, overSocket: boolean): MockUpstream {
  const models = options.models ?? DEFAULT_MODELS.map((m) => ({ ...m, pricing: { ...m.pricing } }));
  const defaults = parseScenarioDefaults(options.defaults);
  const now = options.now ?? Date.now;
  const record = options.recordServed ?? true;
  const limit = options.rateLimitPerMinute ?? 1000;
  const served: MockUpstream["served"] = [];
  const generations = new GenerationLog(options.generationRecordLimit ?? DEFAULT_GENERATION_RECORD_LIMIT);
  const keys = new KeyBook({ operatorKeys: options.operatorKeys ?? null, operatorLimitUsd: options.operatorLimitUsd ?? null });
  const codes = new AuthCodes(now);

  let window = -1;
  let used = 0;

  const ctx: ChatContext = {
    models,
    defaults,
    now,
    nextId: (created) => generations.nextId(created),
    baseHeaders() {
      // A fixed one-minute window: enough for clients that read these headers.
      const minute = Math.floor(now() / 60_000);
      if (minute !== window) {
        window = minute;
        used = 0;
      }
      used++;
      return new Headers({
        "x-ratelimit-limit": String(limit),
        "x-ratelimit-remaining": String(Math.max(0, limit - used)),
        "x-ratelimit-reset": String((minute + 1) * 60_000),
      });
    },
    record: (entry) => {
      if (record) served.push(entry);
    },
    overSocket,
    generations,
    recordDelayMs: options.generationRecordDelayMs ?? 0,
    streamTokensPerSecond: options.streamTokensPerSecond ?? UNPACED,
    keys,
  };

  async function fetch(request: Request): Promise<Response> {
    // Only the path matters; skip URL parsing (this is also a load-test upstream).
    const url = request.url;
    const pathStart = url.indexOf("/", url.indexOf("//") + 2);
    const queryStart = url.indexOf("?", pathStart);
    let path = pathStart === -1 ? "/" : url.slice(pathStart, queryStart === -1 ? undefined : queryStart);
    if (path.startsWith(BASE_PATH + "/")) path = path.slice(BASE_PATH.length);
    if (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);

    if (path === "/chat/completions") {
      if (request.method === "POST") return handleChat(request, ctx);
      return methodNotAllowed("POST");
    }
    if (path === "/models") {
      if (request.method !== "GET" && request.method !== "HEAD") return methodNotAllowed("GET");
      return new Response(modelsListBody(models), { headers: { "content-type": "application/json" } });
    }
    if (path === "/generation") {
      if (request.method !== "GET" && request.method !== "HEAD") return methodNotAllowed("GET");
      return handleGenerationLookup(request, generations, keys, now());
    }
    if (path === "/key") {
      if (request.method !== "GET" && request.method !== "HEAD") return methodNotAllowed("GET");
      return handleKeyLookup(request, keys, now());
    }
    // The PKCE flow: the page a user approves on, then the exchange of its code for a key.
    if (path === "/auth") return handleAuthPage(request, codes, options.authCallbackOrigins ?? null);
    if (path === "/auth/keys") {
      if (request.method !== "POST") return methodNotAllowed("POST");
      return handleKeyExchange(request, codes, keys);
    }
    if (path === "/auth/keys/code") {
      if (request.method !== "POST") return methodNotAllowed("POST");
      return handleCodeCreation(request, codes, keys, now());
    }
    return new Response(errorBody(404, `No route for ${request.method} ${path}`), {
      status: 404,
      headers: { "content-type": "application/json" },
    });
  }

  return { fetch, served, models, generation: (id) => generations.get(id), keys };
}

function methodNotAllowed(allow: string): Response {
  return new Response(errorBody(405, "Method Not Allowed"), {
    status: 405,
    headers: { "content-type": "application/json", allow },
  });
}

export interface RunningMockUpstream {
  /** Base URL, ending in /api/v1 (like https://openrouter.ai/api/v1). */
  url: string;
  mock: MockUpstream;
  stop(): Promise<void>;
}

/** Serves a mock upstream on 127.0.0.1 (port 0 picks a free one). */
export async function startMockUpstream(options: MockUpstreamOptions & { port?: number } = {}): Promise<RunningMockUpstream> {
  const mock = buildMock(options, true);
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: options.port ?? 0,
    // 0 = no idle timeout: stall and keep-alive scenarios must be cut by the client, not us.
    idleTimeout: 0,
    fetch: (request) => mock.fetch(request),
    // Reached when a stalled request's client aborts (no one is left to read this), or on a bug.
    error: (err) => new Response(errorBody(500, `mock upstream: ${String(err)}`), { status: 500 }),
  });
  return {
    url: `http://127.0.0.1:${server.port}${BASE_PATH}`,
    mock,
    stop: async () => {
      await server.stop(true);
    },
  };
}
