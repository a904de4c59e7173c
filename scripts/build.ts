/**
 * `npm run build`: the single binary, dist/metered-proxy, with Bun's runtime, the service,
 * the operator CLI (`dist/metered-proxy cli ...`), the migrations (TypeScript constants,
 * also run alone by `dist/metered-proxy migrate`) and package.json's version (`--version`;
 * the bundler inlines the one field src/launch/help.ts imports) inside. Its command line is
 * src/index.ts's, the same as the bundle `npm start` runs (src/launch/arguments.ts).
 * Bun's fetch concurrency cap (BUN_CONFIG_MAX_HTTP_REQUESTS) is read from the
 * environment at start, so the binary is run with it set (see the Dockerfile).
 *
 * tests/e2e/binary.test.ts builds its binary with buildBinary, so it tests what this ships.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";

const REPO_ROOT = join(import.meta.dir, "..");
/** Where `npm run build` puts the binary, from the repository (the Dockerfile copies it from there). */
const outfile = "dist/metered-proxy";

/** Compiles src/index.ts into one executable at `outfile`; throws with Bun's output when it fails. */
export function buildBinary(outfile: string): void {
  rmSync(outfile, { force: true });
  const result = Bun.spawnSync([process.execPath, "build", "--compile", "--minify-syntax", "src/index.ts", "--outfile", outfile], {
    cwd: REPO_ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  if (result.exitCode !== 0) throw new Error(`bun build --compile failed:\n${result.stdout.toString()}${result.stderr.toString()}`);
}

if (import.meta.main) {
  try {
    buildBinary(join(REPO_ROOT, outfile));
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
  console.log(`built ${outfile}`);
}
