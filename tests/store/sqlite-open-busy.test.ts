/**
 * Processes that share one SQLite file (two servers beside one Redis, the CLI beside a
 * server) open it while another may hold its lock: the first start creating and migrating
 * it, say. Opening waits for that lock like any statement (busy_timeout) instead of failing
 * with "database is locked": two servers started together once lost that race in CI, on
 * the very first statement (the switch to WAL), which ran before the wait was set.
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { REPO_ROOT, tempDatabase } from "../helpers/server";

setDefaultTimeout(60_000);
const db = tempDatabase();
afterAll(() => db.cleanup());
mkdirSync(dirname(db.path), { recursive: true, mode: 0o700 });

/** Holds an exclusive lock on a database in rollback mode (as a new file is) until told to let go. */
const HOLD_LOCK = `
import { Database } from "bun:sqlite";
const db = new Database(process.argv[1], { create: true });
db.exec("BEGIN EXCLUSIVE");
db.exec("CREATE TABLE held (x)");
console.log("locked");
for await (const _ of console) break;
db.exec("COMMIT");
db.close();
`;

/** Opens the database as the service does (src/store/sqlite/database.ts), once told to. */
const OPEN_ON_GO = `
import { openDatabase } from "${REPO_ROOT}/src/store/sqlite/database";
console.log("ready");
for await (const _ of console) break;
const db = openDatabase(process.argv[1]);
console.log(db.query("SELECT count(*) AS n FROM schema_migrations").get().n);
db.close();
`;

/** Opens the database as the service does (src/store/sqlite/database.ts). */
const OPEN = `
import { openDatabase } from "${REPO_ROOT}/src/store/sqlite/database";
console.log("opening");
openDatabase(process.argv[1]).close();
console.log("opened");
`;

/** A child's stdout, read as it comes: its next line, or the rest. */
function output(stream: ReadableStream<Uint8Array>): { nextLine(): Promise<string>; rest(): Promise<string> } {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  const more = async (): Promise<boolean> => {
    const { value, done } = await reader.read();
    if (value) buffered += decoder.decode(value, { stream: true });
    return !done;
  };
  return {
    async nextLine() {
      while (!buffered.includes("\n") && (await more()));
      const [line = "", ...after] = buffered.split("\n");
      buffered = after.join("\n");
      return line;
    },
    async rest() {
      while (await more());
      return buffered;
    },
  };
}

test("opening a database another process has locked waits for the lock instead of failing", async () => {
  const holder = Bun.spawn([process.execPath, "-e", HOLD_LOCK, db.path], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  expect(await output(holder.stdout).nextLine()).toBe("locked");

  const opener = Bun.spawn([process.execPath, "-e", OPEN, db.path], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
  const opened = output(opener.stdout);
  expect(await opened.nextLine()).toBe("opening");
  // Let go once the opener has met the lock (or has already failed on it): a short pause
  // only makes it likelier that the opener is waiting when the lock goes, never a pass.
  await Promise.race([opener.exited, Bun.sleep(300)]);
  holder.stdin.write("go\n");
  await holder.stdin.flush();

  expect(await holder.exited).toBe(0);
  const [exitCode, rest, stderr] = await Promise.all([opener.exited, opened.rest(), new Response(opener.stderr).text()]);
  expect(stderr).toBe("");
  expect(rest).toBe("opened\n");
  expect(exitCode).toBe(0);
});

test("processes creating one new database at once each open it, and its migrations are applied once", async () => {
  const fresh = tempDatabase();
  mkdirSync(dirname(fresh.path), { recursive: true, mode: 0o700 });
  try {
    const openers = Array.from({ length: 6 }, () =>
      Bun.spawn([process.execPath, "-e", OPEN_ON_GO, fresh.path], { cwd: REPO_ROOT, stdin: "pipe", stdout: "pipe", stderr: "pipe" }),
    );
    const outputs = openers.map((opener) => output(opener.stdout));
    // All loaded before any opens, so that they meet at the new file.
    for (const out of outputs) expect(await out.nextLine()).toBe("ready");
    for (const opener of openers) opener.stdin.write("go\n");
    await Promise.all(openers.map((opener) => opener.stdin.flush()));

    const stderrs = await Promise.all(openers.map((opener) => new Response(opener.stderr).text()));
    expect(stderrs).toEqual(openers.map(() => ""));
    expect(await Promise.all(openers.map((opener) => opener.exited))).toEqual(openers.map(() => 0));
    const counts = new Set(await Promise.all(outputs.map((out) => out.rest())));
    expect(counts.size).toBe(1);
    const check = new Database(fresh.path);
    const rows = check.query<{ version: number }, []>("SELECT version FROM schema_migrations").all();
    check.close();
    expect(`${rows.length}\n`).toBe([...counts][0] ?? "");
  } finally {
    fresh.cleanup();
  }
});
