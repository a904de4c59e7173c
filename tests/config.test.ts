/**
 * loadConfig's dollar amounts: each one the service counts in nano-dollars must be one it
 * can count, or start-up stops naming the key (src/index.ts and src/cli.ts exit 2 on a
 * ConfigError; tests/e2e/core.test.ts runs that exit).
 */
import { describe, expect, test } from "bun:test";
import { ConfigError, loadConfig } from "../src/config";

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe("dollar amounts in the environment", () => {
  test("a cap below one nano-dollar (it would be stored as 0) is refused, each key named", () => {
    const problems = problemsOf({ MAX_MONTHLY_USD: "0.0000000001", DEFAULT_MAX_GRANT_USD: "1e-10", GRANT_DAILY_CEILING_USD: "0.0000000009" });
    expect(problems).toEqual([
      expect.stringMatching(/^MAX_MONTHLY_USD: must be at least 0\.000000001 \(one nano-dollar.*\(got "0\.0000000001"\)$/),
      expect.stringMatching(/^DEFAULT_MAX_GRANT_USD: must be at least 0\.000000001/),
      expect.stringMatching(/^GRANT_DAILY_CEILING_USD: must be at least 0\.000000001/),
    ]);
  });

  test("one nano-dollar is the smallest cap taken; the daily ceiling is kept in nano-dollars", () => {
    const config = loadConfig({ MAX_MONTHLY_USD: "0.000000001", DEFAULT_MAX_GRANT_USD: "0.000000001", GRANT_DAILY_CEILING_USD: "0.0000000015" });
    expect({ max: config.maxMonthlyUsd, grant: config.defaultMaxGrantUsd, ceiling: config.grantDailyCeilingNano }).toEqual({
      max: 1e-9,
      grant: 1e-9,
      ceiling: 1,
    });
  });

  test("0, infinite and beyond what counters hold exactly are refused; a key the schema refused is told once", () => {
    const problems = problemsOf({ MAX_MONTHLY_USD: "0", DEFAULT_MAX_GRANT_USD: "Infinity", GRANT_DAILY_CEILING_USD: "1e10" });
    expect(problems).toEqual([
      expect.stringMatching(/^MAX_MONTHLY_USD: /),
      expect.stringMatching(/^DEFAULT_MAX_GRANT_USD: /),
      expect.stringMatching(/^GRANT_DAILY_CEILING_USD: must be at most 9007199/),
    ]);
  });

  test("PLUGIN_RESERVATIONS_USD: 0 allows a plugin without reserving; a positive one below one nano-dollar is refused, naming it", () => {
    expect(problemsOf({ PLUGIN_RESERVATIONS_USD: "fusion=0.05,free-one=0,tiny=0.0000000001" })).toEqual([
      expect.stringMatching(/^PLUGIN_RESERVATIONS_USD: tiny's reservation must be at least 0\.000000001/),
    ]);
    const config = loadConfig({ PLUGIN_RESERVATIONS_USD: "fusion=0.05,free-one=0,tiny=0.0000000015" });
    expect([...config.pluginReservationsNano]).toEqual([
      ["fusion", 50_000_000],
      ["free-one", 0],
      ["tiny", 2], // rounded up: a reservation is never under-counted
    ]);
  });

  test("fallback prices are rates in fractions of a nano-dollar per token: 0 and sub-nano rates are taken, negative ones not", () => {
    const config = loadConfig({ FALLBACK_PROMPT_USD_PER_TOKEN: "0", FALLBACK_COMPLETION_USD_PER_TOKEN: "0.0000000005" });
    expect([config.fallbackPromptUsdPerToken, config.fallbackCompletionUsdPerToken]).toEqual([0, 5e-10]);
    expect(problemsOf({ FALLBACK_PROMPT_USD_PER_TOKEN: "-0.000001", FALLBACK_COMPLETION_USD_PER_TOKEN: "Infinity" })).toEqual([
      expect.stringMatching(/^FALLBACK_PROMPT_USD_PER_TOKEN: /),
      expect.stringMatching(/^FALLBACK_COMPLETION_USD_PER_TOKEN: /),
    ]);
  });

  test("WEB_SEARCH_RESULT_USD: $0.004 unless set, kept in nano-dollars rounded up; 0 is refused (a search is never free)", () => {
    expect(loadConfig({}).webSearchResultNano).toBe(4_000_000);
    expect(loadConfig({ WEB_SEARCH_RESULT_USD: "0.0050000001" }).webSearchResultNano).toBe(5_000_001);
    expect(problemsOf({ WEB_SEARCH_RESULT_USD: "0" })).toEqual([expect.stringMatching(/^WEB_SEARCH_RESULT_USD: /)]);
    expect(problemsOf({ WEB_SEARCH_RESULT_USD: "0.0000000001" })).toEqual([expect.stringMatching(/^WEB_SEARCH_RESULT_USD: must be at least 0\.000000001/)]);
  });

  test("SERVICE_TIER_PRICE_MULTIPLIERS: unset prices no tier; known keys only, each from 1 to 1000", () => {
    expect([...loadConfig({}).serviceTierMultipliers]).toEqual([]);
    expect([...loadConfig({ SERVICE_TIER_PRICE_MULTIPLIERS: "priority=2,fast=6,flex=1" }).serviceTierMultipliers]).toEqual([
      ["priority", 2],
      ["fast", 6],
      ["flex", 1],
    ]);
    expect(problemsOf({ SERVICE_TIER_PRICE_MULTIPLIERS: "prority=2" })).toEqual([expect.stringMatching(/^SERVICE_TIER_PRICE_MULTIPLIERS: /)]);
    expect(problemsOf({ SERVICE_TIER_PRICE_MULTIPLIERS: "priority=2,flex=0.5" })).toEqual([
      "SERVICE_TIER_PRICE_MULTIPLIERS: flex's multiplier must be from 1 to 1000 (got 0.5)",
    ]);
  });

  test("the problems join those of other keys, so one start names every bad key", () => {
    const problems = problemsOf({ PORT: "abc", MAX_MONTHLY_USD: "1e-10" });
    expect(problems.map((p) => p.slice(0, p.indexOf(":")))).toEqual(["PORT", "MAX_MONTHLY_USD"]);
  });
});

describe("where users link their own upstream account", () => {
  test("PUBLIC_URL defaults to localhost on PORT; the PKCE page to the upstream's origin + /auth, or in demo mode the mock's page on PUBLIC_URL", () => {
    const upstream = { UPSTREAM_API_KEY: "sk-or-operator" };
    expect(loadConfig({ ...upstream, PORT: "9000" })).toMatchObject({ publicUrl: "http://localhost:9000", upstreamAuthUrl: "https://openrouter.ai/auth" });
    expect(loadConfig({ ...upstream, UPSTREAM_BASE_URL: "https://llm.example/v2/api/" })).toMatchObject({ upstreamAuthUrl: "https://llm.example/auth" });
    expect(loadConfig({ ...upstream, PUBLIC_URL: "https://proxy.example/ai/", UPSTREAM_AUTH_URL: "https://id.example/authorize" })).toMatchObject({
      publicUrl: "https://proxy.example/ai",
      upstreamAuthUrl: "https://id.example/authorize",
    });
    expect(loadConfig({ PUBLIC_URL: "http://127.0.0.1:8787" }).upstreamAuthUrl).toBe("http://127.0.0.1:8787/demo-upstream/auth");
  });

  test("a PUBLIC_URL or UPSTREAM_AUTH_URL that is not an http(s) URL is refused by name", () => {
    for (const [key, value] of [
      ["PUBLIC_URL", "proxy.example"],
      ["PUBLIC_URL", "https://proxy.example/?x=1"],
      ["UPSTREAM_AUTH_URL", "ftp://id.example/auth"],
    ]) {
      expect(() => loadConfig({ [key!]: value })).toThrow(new RegExp(`^invalid configuration:\\n  ${key}: `));
    }
  });
});
