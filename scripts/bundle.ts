/**
 * The service as `npm start` runs it: src/index.ts and everything it imports bundled into
 * one file, dist/server/index.js (its served assets beside it), which `npm start` then
 * runs with `exec bun`. One module instead of hundreds (the bundle holds 650: TypeBox's
 * 246 files, the service's 174 and the rest of node_modules) starts about 5 MB smaller
 * and stays so under load (ARCHITECTURE.md §7 "A bundle for npm start"). Syntax is
 * minified as for the single binary (scripts/build.ts); names and line breaks are kept, so a stack trace
 * still reads, and no source map is emitted, because Bun loads a linked one at start
 * (+3.6 MB). The mock upstream is not in it: it is the file mock-upstream-<hash>.js beside
 * it, which only demo mode loads (scripts/lib/mock-upstream-build.ts).
 *
 *   bun scripts/bundle.ts [SOURCE_ENTRY] [OUTDIR]     (defaults: src/index.ts, dist/server)
 *
 * Several `npm start`s may share a checkout (one per port): each builds into a directory of
 * its own and then renames the files into OUTDIR, the entry file last, so a process that
 * is starting reads either the previous bundle or the new one, never half of one. The
 * assets' names carry a hash of their content, so replacing one replaces it with itself.
 */
import { mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { buildMockUpstreamFile, mockUpstreamBeside } from "./lib/mock-upstream-build";

export const SERVER_BUNDLE_DIR = "dist/server";

/** dist/server of the checkout that `<checkout>/src/index.ts` belongs to (a worktree's bundle stays in the worktree). */
export const bundleDirFor = (sourceEntry: string): string => join(dirname(dirname(resolve(sourceEntry))), SERVER_BUNDLE_DIR);

/** Bundles `sourceEntry` into `outdir` (atomically, see above); returns the bundle's path. */
export async function bundleService(sourceEntry = "src/index.ts", outdir = SERVER_BUNDLE_DIR): Promise<string> {
  const finalDir = resolve(outdir);
  const staging = join(finalDir, `.staging-${process.pid}-${Date.now()}`);
  mkdirSync(staging, { recursive: true });
  try {
    // Named by its content, like the assets, so a bundle that is starting loads its own mock.
    const mockFile = await buildMockUpstreamFile(staging, "mock-upstream-[hash].[ext]");
    const result = await Bun.build({
      entrypoints: [resolve(sourceEntry)],
      outdir: staging,
      target: "bun",
      minify: { syntax: true },
      // A served file (`with { type: "file" }`) is opened by the path the bundle holds, which
      // would otherwise be relative to the working directory, not to the bundle. Absolute,
      // so the bundle runs where it was built, which is how `npm start` uses it.
      publicPath: `${finalDir}/`,
      plugins: [mockUpstreamBeside(mockFile)],
    });
    if (!result.success) throw new AggregateError(result.logs, `bundling ${sourceEntry} failed`);
    const entryOutput = result.outputs.find((output) => output.kind === "entry-point");
    if (!entryOutput) throw new Error(`bundling ${sourceEntry} produced no entry file`);
    const entryName = entryOutput.path.slice(staging.length + 1);
    for (const name of readdirSync(staging)) if (name !== entryName) renameSync(join(staging, name), join(finalDir, name));
    renameSync(join(staging, entryName), join(finalDir, entryName));
    return join(finalDir, entryName);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const [sourceEntry, outdir] = process.argv.slice(2);
  try {
    await bundleService(sourceEntry, outdir);
  } catch (err) {
    console.error(err instanceof AggregateError ? [err.message, ...err.errors.map(String)].join("\n") : err);
    process.exit(1);
  }
}
