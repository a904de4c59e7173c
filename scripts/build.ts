/**
 * `npm run build`: the single binary, dist/metered-proxy, with Bun's runtime, the service,
 * the operator CLI (`dist/metered-proxy cli ...`), the migrations (TypeScript constants,
 * also run alone by `dist/metered-proxy migrate`) and package.json's version (`--version`;
 * the bundler inlines the one field src/launch/help.ts imports) inside. Its command line is
 * src/index.ts's, the same as the bundle `npm start` runs (src/launch/arguments.ts).
 * Bun's fetch concurrency cap (BUN_CONFIG_MAX_HTTP_REQUESTS) is read from the
 * environment at start: a binary started without it re-executes itself with it
 * (src/launch/runtime-env.ts); the Dockerfile sets it all the same.
 *
 * The mock upstream is not inside: `npm run build` writes it beside the binary as
 * dist/mock-upstream.js, which the binary loads only in demo mode (src/upstream/demo-upstream.ts);
 * a binary alone has no demo mode. The Docker image copies the binary alone: production
 * has no demo mode either way (src/config.ts).
 *
 * tests/e2e/binary.test.ts builds its binary with buildBinary, so it tests what this ships.
 */
import { rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { MOCK_UPSTREAM_FILE } from "../src/upstream/demo-upstream";
import { buildMockUpstreamFile, mockUpstreamBeside } from "./lib/mock-upstream-build";

const REPO_ROOT = join(import.meta.dir, "..");
/** Where `npm run build` puts the binary, from the repository (the Dockerfile copies it from there). */
const outfile = "dist/metered-proxy";

/**
 * Compiles src/index.ts into one executable at `outfile`, and writes the mock upstream beside
 * it (MOCK_UPSTREAM_FILE); throws with Bun's output when either fails.
 */
export async function buildBinary(outfile: string): Promise<void> {
  const target = resolve(outfile);
  rmSync(target, { force: true });
  await buildMockUpstreamFile(dirname(target), MOCK_UPSTREAM_FILE);
  const result = await Bun.build({
    entrypoints: [join(REPO_ROOT, "src/index.ts")],
    compile: { outfile: target },
    minify: { syntax: true },
    // Its import stays in the binary unresolved and unused: the binary loads the file by its own path.
    plugins: [mockUpstreamBeside(MOCK_UPSTREAM_FILE)],
  });
  if (!result.success) throw new AggregateError(result.logs, "bun build --compile failed");
}

if (import.meta.main) {
  try {
    await buildBinary(join(REPO_ROOT, outfile));
  } catch (err) {
    console.error(err instanceof AggregateError ? [err.message, ...err.errors.map(String)].join("\n") : err);
    process.exit(1);
  }
  console.log(`built ${outfile}`);
}
