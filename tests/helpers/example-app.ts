/**
 * The example app (examples/chat-app) as README "Quick start with the example app" runs it:
 * its own server process, for the browser tests that drive its page.
 */
import type { Subprocess } from "bun";
import { freePort, REPO_ROOT } from "./server";

export interface RunningExampleApp {
  /** e.g. http://127.0.0.1:41234: the origin to register for the app. */
  origin: string;
  stop(): Promise<void>;
}

/** The example's origin, chosen before the app is created (the app must register it). */
export function exampleOrigin(): { origin: string; port: number } {
  const port = freePort();
  return { origin: `http://127.0.0.1:${port}`, port };
}

/** Builds packages/client (the example imports its dist), as `npm run example` does. */
export function buildClientPackage(): void {
  const build = Bun.spawnSync([process.execPath, "x", "tsc", "-p", "packages/client"], { cwd: REPO_ROOT });
  if (build.exitCode !== 0) throw new Error(`building packages/client failed: ${build.stdout}${build.stderr}`);
}

/** Starts the example's server on `port`, talking to the proxy at `proxyUrl`; resolves once it listens. */
export async function startExampleApp(port: number, proxyUrl: string, app: { appId: string; secretKey: string }): Promise<RunningExampleApp> {
  const proc: Subprocess<"ignore", "pipe", "inherit"> = Bun.spawn([process.execPath, "examples/chat-app/server.ts"], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", PORT: String(port), PROXY_URL: proxyUrl, APP_ID: app.appId, SECRET_KEY: app.secretKey },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = proc.stdout.getReader();
  let said = "";
  while (!said.includes("example app on")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the example app exited: ${said}`);
    said += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return {
    origin: `http://127.0.0.1:${port}`,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}
