/**
 * An app outside the repository that gets the client library as a user does: the tarball
 * `npm pack` makes in packages/client (its prepack builds dist/), installed with npm beside
 * an `openai` of the major under test; then compiled with tsc and run with Bun there.
 * Shared by tests/client/pack.test.ts (openai 6, the repository's own) and
 * tests/client/pack-openai7.test.ts (openai 7, from the npm registry).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/server";

const PACKAGE_DIR = join(REPO_ROOT, "packages", "client");
const TSC = join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc");

export interface Output {
  stdout: string;
  stderr: string;
}

/** Runs a command to its end; throws with its output unless it exits 0. */
export async function run(command: string[], cwd: string, env: Record<string, string> = {}): Promise<Output> {
  const proc = Bun.spawn(command, { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${command.join(" ")} exited with ${code}:\n${stdout}\n${stderr}`);
  return { stdout, stderr };
}

export interface ScratchApp {
  /** The app's folder: package.json, node_modules, the files a test writes. */
  dir: string;
  /** What `npm pack --json` said it packed. */
  packedFiles: string[];
  /** The tarball's file name, as `npm pack` made it (`metered-proxy-client-0.3.0.tgz`). */
  tarball: string;
  /** What `npm install` printed, both streams. */
  installOutput: string;
  /** The version of `openai` that npm installed. */
  openaiVersion: string;
  /** Writes the files, then `tsc -p .` with strict settings under NodeNext resolution (which honours the package's `exports`). */
  compile(files: Record<string, string>): Promise<void>;
  /** Writes the file and runs it with Bun, with these variables added to the environment; its stdout. */
  runWithBun(name: string, source: string, env?: Record<string, string>): Promise<string>;
  remove(): void;
}

/** Packs the client, makes an app in a temp folder, and installs the tarball and `openaiSpec` there with npm. */
export async function scratchApp(openaiSpec: string, installFlags: string[]): Promise<ScratchApp> {
  const work = mkdtempSync(join(tmpdir(), "client-pack-"));
  const dir = join(work, "app");
  try {
    const packed = JSON.parse((await run(["npm", "pack", "--json", "--pack-destination", work], PACKAGE_DIR)).stdout) as Array<{
      filename: string;
      files: Array<{ path: string }>;
    }>;
    mkdirSync(dir);
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    const install = await run(["npm", "install", "--no-save", "--no-audit", "--no-fund", ...installFlags, join(work, packed[0]!.filename), openaiSpec], dir);
    const openaiManifest = JSON.parse(readFileSync(join(dir, "node_modules", "openai", "package.json"), "utf8")) as { version: string };
    return {
      dir,
      packedFiles: packed[0]!.files.map((f) => f.path),
      tarball: packed[0]!.filename,
      installOutput: install.stdout + install.stderr,
      openaiVersion: openaiManifest.version,
      async compile(files) {
        for (const [name, source] of Object.entries(files)) writeFileSync(join(dir, name), source);
        const compilerOptions = {
          strict: true,
          noEmit: true,
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          lib: ["ES2022", "DOM"],
          types: [],
        };
        writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, files: Object.keys(files) }));
        await run([process.execPath, TSC, "-p", "."], dir);
      },
      async runWithBun(name, source, env = {}) {
        writeFileSync(join(dir, name), source);
        return (await run([process.execPath, name], dir, env)).stdout;
      },
      remove: () => rmSync(work, { recursive: true, force: true }),
    };
  } catch (err) {
    rmSync(work, { recursive: true, force: true });
    throw err;
  }
}

/** The first ```ts block after `heading` in a Markdown file of the repository. */
export function markdownExample(file: string, heading: string): string {
  const text = readFileSync(join(REPO_ROOT, file), "utf8");
  const at = text.indexOf(`${heading}\n`);
  const block = at < 0 ? undefined : /```ts\n([\s\S]*?)```/.exec(text.slice(at))?.[1];
  if (!block) throw new Error(`${file}: no TypeScript example under "${heading}"`);
  return block;
}

/** The example with the README's placeholders replaced by a real server's address and an app's key. */
export function pointedAt(example: string, baseUrl: string, secretKey: string): string {
  const placeholder = 'baseUrl: "http://localhost:8787", secretKey: "sk_live_..."';
  if (!example.includes(placeholder)) throw new Error(`the example has no ${placeholder}`);
  return example.replace(placeholder, `baseUrl: "${baseUrl}", secretKey: "${secretKey}"`);
}
