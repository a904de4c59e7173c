import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./proc";

/**
 * The peer gateway of arm (e) lives in its own folder with its own lockfile
 * (scripts/bench/peer-gateway/), installed the first time a bench needs it, so that
 * `npm install` of the service does not download a gateway only the benchmark runs.
 */
const FOLDER = join(REPO_ROOT, "scripts/bench/peer-gateway");
const PACKAGE = join(FOLDER, "node_modules/@portkey-ai/gateway");

/** The gateway's start script, installing it first (`npm ci` from its lockfile) when missing. */
export function peerGatewayScript(): string {
  if (!existsSync(join(PACKAGE, "package.json"))) {
    console.error("[bench] installing the peer gateway (scripts/bench/peer-gateway) with npm ci…");
    const installed = Bun.spawnSync(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: FOLDER, stdout: "inherit", stderr: "inherit" });
    if (installed.exitCode !== 0) throw new Error(`npm ci in ${FOLDER} failed with ${installed.exitCode}`);
  }
  return join(PACKAGE, "build/start-server.js");
}

/** Its version: installed, or else the one pinned (the run installs it when arm e starts). */
export function peerGatewayVersion(): string {
  const read = (file: string, pick: (json: Record<string, any>) => string) => pick(JSON.parse(readFileSync(file, "utf8")) as Record<string, any>);
  try {
    return read(join(PACKAGE, "package.json"), (j) => j.version);
  } catch {
    return read(join(FOLDER, "package.json"), (j) => j.dependencies["@portkey-ai/gateway"]);
  }
}
