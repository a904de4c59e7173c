/**
 * Keeps the mock upstream (packages/mock-upstream) out of the artifacts that run in
 * production. Bun inlines a dynamic import into its bundle (and only splits it off with
 * `splitting`, which would split every other dynamic import of the service too, and which
 * `--compile` does not support), so the builds mark the mock's import external and write the
 * mock beside the artifact as a file of its own, loaded only in demo mode
 * (src/upstream/demo-upstream.ts). Used by scripts/bundle.ts and scripts/build.ts.
 */
import type { BunPlugin } from "bun";
import { basename, dirname, join, resolve } from "node:path";

const MOCK_UPSTREAM_SRC = join(import.meta.dir, "../../packages/mock-upstream/src");
const MOCK_UPSTREAM_ENTRY = join(MOCK_UPSTREAM_SRC, "index.ts");

/** The importing file's specifier names the mock's entry (its folder or its index, with or without the extension). */
function namesMockEntry(specifier: string, importer: string): boolean {
  if (!specifier.startsWith(".")) return false;
  const target = resolve(dirname(importer), specifier);
  return target === MOCK_UPSTREAM_SRC || target === MOCK_UPSTREAM_ENTRY || target === MOCK_UPSTREAM_ENTRY.slice(0, -".ts".length);
}

/** A build plugin that leaves the mock out: its import becomes `import("./<file>")`, the file written beside the output. */
export function mockUpstreamBeside(file: string): BunPlugin {
  return {
    name: "mock-upstream-beside",
    setup(build) {
      build.onResolve({ filter: /mock-upstream/ }, (args) => (namesMockEntry(args.path, args.importer) ? { path: `./${file}`, external: true } : undefined));
    },
  };
}

/**
 * Writes the mock as one file into `outdir`, named by `naming` (Bun's pattern, e.g.
 * `mock-upstream-[hash].js`), minified as the service is; returns the file's name.
 */
export async function buildMockUpstreamFile(outdir: string, naming: string): Promise<string> {
  const result = await Bun.build({ entrypoints: [MOCK_UPSTREAM_ENTRY], outdir, naming, target: "bun", minify: { syntax: true } });
  if (!result.success) throw new AggregateError(result.logs, "bundling the mock upstream failed");
  return basename(result.outputs[0]!.path);
}
