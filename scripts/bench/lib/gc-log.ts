/**
 * JavaScriptCore's own log of its collections (`BUN_JSC_logGC=1`, written to stderr), read
 * over a window of a process's output: how many eden and full collections ran, their pauses
 * and cycles, and how much the heap grew between one collection's end and the next one's
 * start, which is what the process allocated meanwhile (extra memory that JavaScriptCore is
 * told of, such as buffers' contents, included).
 *
 * The lines this reads, as this Bun prints them (one collection may span several lines):
 *   [GC<0x…>: START M 46291kb => EdenCollection, … ]
 *   [GC<0x…>: M a=362kb … => 25346kb, p=2.101230ms (max 7.706677), cycle 4.384860ms END]
 * `p` is that collection's pause; `max` is the longest the process has had so far, in any
 * heap and before the window too, so the window's longest is taken from the `p`s.
 */
export const GC_LOG_ENV = { BUN_JSC_logGC: "1" };

export interface GcWindow {
  eden: number;
  full: number;
  /** The world stopped, summed (ms). */
  pauseMs: number;
  /** Start to end of each collection, summed (ms): marking goes on beside the program meanwhile. */
  cycleMs: number;
  /** Heap growth between collections in the window, summed (kB). */
  allocatedKb: number;
  /** The longest one collection stopped the world (ms): what a call caught in it waited, at most. */
  longestPauseMs: number;
  /** The longest one collection's start to end (ms). */
  longestCycleMs: number;
  /** The heap after the window's last full collection (kB; null: none ran): about what was live. */
  heapAfterFullKb: number | null;
}

const NONE: GcWindow = { eden: 0, full: 0, pauseMs: 0, cycleMs: 0, allocatedKb: 0, longestPauseMs: 0, longestCycleMs: 0, heapAfterFullKb: null };

/**
 * The window's collections of the process's busiest heap: the main thread's, where the
 * maintenance thread (a worker) has a small heap of its own in the same log.
 */
export function readGcWindow(lines: string[]): GcWindow {
  const heaps = new Map<string, GcWindow & { heapAfterLast: number | null; inFull: boolean }>();
  for (const line of lines) {
    const id = /^\[GC<(0x[0-9a-f]+)>/.exec(line)?.[1];
    if (id === undefined) continue;
    let heap = heaps.get(id);
    if (!heap) heaps.set(id, (heap = { ...NONE, heapAfterLast: null, inFull: false }));
    const start = /START M (\d+)kb => (Eden|Full)Collection/.exec(line);
    if (start) {
      heap.inFull = start[2] === "Full";
      if (start[2] === "Eden") heap.eden++;
      else heap.full++;
      if (heap.heapAfterLast !== null) heap.allocatedKb += Math.max(0, Number(start[1]) - heap.heapAfterLast);
    }
    const end = /=> (\d+)kb, p=([\d.]+)ms .*cycle ([\d.]+)ms END\]/.exec(line);
    if (end) {
      heap.heapAfterLast = Number(end[1]);
      if (heap.inFull) heap.heapAfterFullKb = heap.heapAfterLast;
      heap.pauseMs += Number(end[2]);
      heap.cycleMs += Number(end[3]);
      heap.longestPauseMs = Math.max(heap.longestPauseMs, Number(end[2]));
      heap.longestCycleMs = Math.max(heap.longestCycleMs, Number(end[3]));
    }
  }
  const busiest = [...heaps.values()].sort((a, b) => b.eden + b.full - (a.eden + a.full))[0];
  if (!busiest) return { ...NONE };
  const { heapAfterLast: _last, inFull: _inFull, ...window } = busiest;
  return window;
}
