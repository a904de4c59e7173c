/**
 * `npm test`: runs the whole suite with `bun test` and ends with the one summary line CI
 * reads, `N passed, M failed, K skipped`, derived from bun's own closing counts.
 * Extra arguments go to `bun test` (e.g. `npm test -- tests/auth`).
 *
 * A whole run (no arguments) first typechecks the repository (`tsc --noEmit`, strict, the
 * tests and scripts included), lints (ESLint), checks the formatting (Prettier) and builds
 * the client library (packages/client); each counts as one test in the summary line.
 */
import { ensureTestPrerequisites } from "./test-prerequisites";

await ensureTestPrerequisites();

const wholeRun = process.argv.length <= 2;

/** The static checks of a whole run; each counts as one test in the summary line. */
const STATIC_CHECKS: Array<{ name: string; command: string[] }> = [
  // First: the client library's dist/ (JavaScript and declarations, as `npm pack` ships it),
  // which the example app imports, so the typecheck below needs it.
  { name: "build: tsc -p packages/client", command: ["x", "tsc", "-p", "packages/client"] },
  { name: "typecheck: tsc --noEmit", command: ["x", "tsc", "--noEmit", "-p", "."] },
  // Lint rules from eslint.config.js; a warning fails it too.
  { name: "lint: eslint", command: ["x", "eslint", "--max-warnings", "0", "."] },
  // Formatting from .prettierrc.json: the formatter's verdict, not a rewrite.
  { name: "format: prettier --check", command: ["x", "prettier", "--check", "."] },
];
let staticFailures = 0;
if (wholeRun) {
  for (const check of STATIC_CHECKS) {
    console.log(check.name);
    const run = Bun.spawnSync([process.execPath, ...check.command], { stdout: "inherit", stderr: "inherit" });
    if (run.exitCode !== 0) staticFailures++;
    console.log(run.exitCode === 0 ? `(pass) ${check.name}` : `(fail) ${check.name}`);
  }
}

// bun test ignores bunfig's [test] timeout here (seen with 1.4.5): real servers, Redis and
// Chromium start inside tests, so give each test room explicitly.
const proc = Bun.spawn([process.execPath, "test", "--timeout", "60000", ...process.argv.slice(2)], {
  stdout: "pipe",
  stderr: "pipe",
  env: { ...process.env, NODE_ENV: "test" },
});

// bun prints its counts (" 12 pass", " 0 fail", " 1 skip") to stderr at the end.
const counts = { pass: 0, fail: 0, skip: 0 };
async function relay(stream: ReadableStream<Uint8Array>, out: NodeJS.WriteStream): Promise<void> {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of stream) {
    out.write(chunk);
    pending += decoder.decode(chunk, { stream: true });
    const lines = pending.split("\n");
    pending = lines.pop()!;
    for (const line of lines) {
      const m = /^\s*(\d+) (pass|fail|skip)\s*$/.exec(line);
      if (m) counts[m[2] as keyof typeof counts] = Number(m[1]);
    }
  }
}

await Promise.all([relay(proc.stdout, process.stdout), relay(proc.stderr, process.stderr)]);
const code = await proc.exited;
if (wholeRun) {
  counts.fail += staticFailures;
  counts.pass += STATIC_CHECKS.length - staticFailures;
}
console.log(`${counts.pass} passed, ${counts.fail} failed, ${counts.skip} skipped`);
process.exit(code !== 0 ? code : counts.fail > 0 ? 1 : 0);
