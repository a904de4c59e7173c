/**
 * Demo mode's upstream: the fake of packages/mock-upstream, answering in process. The product
 * loads it here only, by dynamic import, only in demo mode, so the artifacts that run in
 * production carry none of it (tests/ship/mock-outside-artifacts.test.ts):
 *
 * - from source (tests, `npm run cli`) the import is the package's source;
 * - the bundle `npm start` runs has that import pointed at the mock's own file beside the
 *   bundle (scripts/bundle.ts, with scripts/lib/mock-upstream-build.ts);
 * - the single binary cannot load a file from inside itself that it was built without, so
 *   it loads MOCK_UPSTREAM_FILE from beside the executable, which `npm run build` writes
 *   there (scripts/build.ts). Without that file the binary has no demo mode, and says so.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { ConfigError, type Config } from "../config";
import { UpstreamClient } from "./client";

type MockUpstreamModule = typeof import("../../packages/mock-upstream/src");

/** The base URL the in-process mock answers on in demo mode; never goes to the network. */
export const DEMO_BASE_URL = "http://demo-upstream.invalid/api/v1";

/** The mock built as one file, beside the single binary (scripts/build.ts writes it). */
export const MOCK_UPSTREAM_FILE = "mock-upstream.js";

type MockUpstream = ReturnType<MockUpstreamModule["createMockUpstream"]>;

/**
 * Demo mode's client: the mock answers in process, and its PKCE page (`/auth`) is served on
 * the service's own origin (src/routes/demo-upstream.ts), since a browser cannot reach an
 * upstream that has no address.
 */
export class DemoUpstreamClient extends UpstreamClient {
  constructor(
    /** The mock itself: its keys and their credit, for tests and the demo's own checks. */
    readonly mock: MockUpstream,
    config: Config,
  ) {
    super((url, init) => mock.fetch(new Request(url, init)), DEMO_BASE_URL, "demo", config.upstreamTimeoutMs);
  }

  /** The mock's PKCE page, asked with the browser's method, query and form (the mock routes on the path alone). */
  authPage(request: Request): Promise<Response> {
    const { search } = new URL(request.url);
    return this.mock.fetch(new Request(`${new URL(DEMO_BASE_URL).origin}/auth${search}`, request));
  }
}

/** Demo mode's client on `mockUpstream`: its handler called in process, no network. */
export function demoUpstreamClient(mockUpstream: Pick<MockUpstreamModule, "createMockUpstream">, config: Config): DemoUpstreamClient {
  // No served-request log: a demo server may run for days. Paced, so its answers visibly stream.
  // Its PKCE page is on the service's origin, so it sends browsers back only there (the funding
  // callback): served for any callback, it would be an open redirect on the service's origin.
  const mock = mockUpstream.createMockUpstream({
    recordServed: false,
    streamTokensPerSecond: config.demoStreamTokensPerSecond,
    authCallbackOrigins: [new URL(config.publicUrl).origin],
  });
  return new DemoUpstreamClient(mock, config);
}

/** Loads the mock and builds demo mode's client on it (openDeps, before it opens the store). */
export async function openDemoUpstream(config: Config): Promise<UpstreamClient> {
  return demoUpstreamClient(await importMockUpstream(), config);
}

async function importMockUpstream(): Promise<MockUpstreamModule> {
  if (!Bun.isStandaloneExecutable) return import("../../packages/mock-upstream/src");
  const beside = join(dirname(process.execPath), MOCK_UPSTREAM_FILE);
  if (!existsSync(beside)) {
    throw new ConfigError([
      `UPSTREAM_API_KEY: unset, so demo mode, whose mock upstream this binary does not carry (${beside} is missing: \`npm run build\` writes it beside the binary). ` +
        "Set UPSTREAM_API_KEY for a real upstream, or put that file beside the binary for demo mode",
    ]);
  }
  return (await import(beside)) as MockUpstreamModule;
}
