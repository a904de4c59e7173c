/**
 * `profile.ts --gc-log` reads JavaScriptCore's own log of its collections: the counts, the
 * pauses and what was allocated between collections, for the main thread's heap only; and
 * this Bun still prints that log in the form the reader knows.
 */
import { describe, expect, test } from "bun:test";
import { GC_LOG_ENV, readGcWindow } from "../../scripts/bench/lib/gc-log";

// Lines as this Bun printed them under load (shortened inside the brackets), with a second,
// smaller heap (a worker's) first.
const MAIN = "0x48509a18118";
const WORKER = "0x4850d600118";
const WINDOW = [
  `[GC<${WORKER}>: START M 882kb => FullCollection, a=0kb => 173kb, p=0.444447ms (max 7.706677), cycle 0.405900ms END]`,
  `[GC<${MAIN}>: START M 46291kb => EdenCollection, a=0kb hf=0.000 mu=0.600 v=0kb p=0.986029ms (max 7.706677)...]`,
  `[GC<${MAIN}>: M a=362kb hf=0.029 mu=0.582 v=744kb => 25346kb, p=2.101230ms (max 7.706677), cycle 4.384860ms END]`,
  "GC END!",
  `[GC<${MAIN}>: START M 51913kb => EdenCollection, a=0kb hf=0.000 mu=0.600 v=0kb p=0.982594ms (max 7.706677)...]`,
  `[GC<${MAIN}>: M a=208kb hf=0.014 mu=0.592 v=692kb => 27137kb, p=2.545207ms (max 7.706677), cycle 4.869116ms END]`,
  `[GC<${MAIN}>: START M 60000kb => FullCollection, a=0kb => 20000kb, p=5.000000ms (max 7.706677), cycle 9.000000ms END]`,
  '{"level":"info","msg":"a line of the service\'s own"}',
];

describe("readGcWindow", () => {
  test("counts the main heap's collections, their pauses and cycles, and the heap's growth between them", () => {
    const gc = readGcWindow(WINDOW);
    expect(gc.eden).toBe(2);
    expect(gc.full).toBe(1);
    expect(gc.pauseMs).toBeCloseTo(2.10123 + 2.545207 + 5, 5);
    expect(gc.cycleMs).toBeCloseTo(4.38486 + 4.869116 + 9, 5);
    // From the first collection's end (25,346 kB) to the second's start (51,913 kB), then
    // from its end (27,137 kB) to the full collection's start (60,000 kB).
    expect(gc.allocatedKb).toBe(51913 - 25346 + (60000 - 27137));
    // The longest of the main heap's own collections, not the worker's or the log's running
    // "max", which covers every heap and the time before the window.
    expect(gc.longestPauseMs).toBeCloseTo(5, 6);
    expect(gc.longestCycleMs).toBeCloseTo(9, 6);
    // After the full collection, not after the last eden one before it (27,137 kB).
    expect(gc.heapAfterFullKb).toBe(20000);
  });

  test("a window without collections reads as none", () => {
    expect(readGcWindow(["GC END!", "plain output"])).toEqual({
      eden: 0,
      full: 0,
      pauseMs: 0,
      cycleMs: 0,
      allocatedKb: 0,
      longestPauseMs: 0,
      longestCycleMs: 0,
      heapAfterFullKb: null,
    });
  });

  test("this Bun prints the log the reader knows, under the environment profile.ts sets", () => {
    const script =
      "const keep = []; for (let r = 0; r < 3; r++) { for (let i = 0; i < 200000; i++) keep.push({ i }); keep.length = 0; Bun.gc(false); } Bun.gc(true);";
    const run = Bun.spawnSync([process.execPath, "-e", script], { env: { ...process.env, ...GC_LOG_ENV } });
    expect(run.exitCode).toBe(0);
    const gc = readGcWindow(run.stderr.toString().split("\n"));
    expect(gc.eden + gc.full).toBeGreaterThanOrEqual(2);
    expect(gc.cycleMs).toBeGreaterThan(0);
    expect(gc.allocatedKb).toBeGreaterThan(0);
  });
});
