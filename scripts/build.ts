/**
 * `npm run build`: the single binary, dist/metered-proxy, with Bun's runtime, the service,
 * the operator CLI (`dist/metered-proxy cli ...`) and the migrations (TypeScript constants)
 * inside. Bun's fetch concurrency cap (BUN_CONFIG_MAX_HTTP_REQUESTS) is read from the
 * environment at start, so the binary is run with it set (see the Dockerfile).
 */
import { rmSync } from "node:fs";

const outfile = "dist/metered-proxy";
rmSync(outfile, { force: true });
const result = Bun.spawnSync([process.execPath, "build", "--compile", "--minify-syntax", "src/index.ts", "--outfile", outfile], {
  stdout: "inherit",
  stderr: "inherit",
});
if (result.exitCode !== 0) process.exit(result.exitCode ?? 1);
console.log(`built ${outfile}`);
