/**
 * How one core's time was shared over a stretch: the share the hypervisor took (steal) and
 * the share nothing ran (idle), from that core's line of `/proc/stat`.
 *
 * Why: on this VM the hypervisor takes a core away in bursts (seen on 2026-11-27: 8 % of
 * core 1 over 25 minutes, up to 58 % of it over 5 s), and a round of load that falls in a
 * burst serves fewer calls for a reason that is not the code's. Knowing each round's steal
 * tells such a round from a real difference.
 */
import { readFileSync } from "node:fs";

export interface CoreShares {
  /** Share of the core's time the hypervisor gave to another guest (0–1). */
  stolen: number;
  /** Share in which the core ran nothing (idle and iowait, 0–1). */
  idle: number;
}

interface CoreTicks {
  total: number;
  stolen: number;
  idle: number;
}

/**
 * The core's tick counters so far. The fields of a `cpuN` line, in order: user, nice, system,
 * idle, iowait, irq, softirq, steal, guest, guest_nice (proc(5)); guest time is already
 * counted in user, so the first eight add up to the core's whole time.
 */
export function readCoreTicks(core: number, procStat = readFileSync("/proc/stat", "utf8")): CoreTicks | null {
  const line = procStat.split("\n").find((l) => l.startsWith(`cpu${core} `));
  if (!line) return null;
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (f.length < 8 || f.some((n) => !Number.isFinite(n))) return null;
  return { total: f.reduce((a, b) => a + b, 0), stolen: f[7]!, idle: f[3]! + f[4]! };
}

/** The shares between two readings; null when either is missing or no tick passed. */
export function sharesBetween(before: CoreTicks | null, after: CoreTicks | null): CoreShares | null {
  if (!before || !after) return null;
  const total = after.total - before.total;
  if (total <= 0) return null;
  return { stolen: (after.stolen - before.stolen) / total, idle: (after.idle - before.idle) / total };
}

/** Reads the core when made; `read()` gives the shares since. */
export class CoreTimeMeter {
  private readonly start: CoreTicks | null;

  constructor(private readonly core: number) {
    this.start = readCoreTicks(core);
  }

  read(): CoreShares | null {
    return sharesBetween(this.start, readCoreTicks(this.core));
  }
}

/**
 * The stolen share as a percentage for a table or a log line, to a tenth (a whole number
 * would print 2.4 %, past the many-users rounds' 2 % bound, as "2 %"); "–" when not known.
 */
export function stolenPercent(shares: CoreShares | null | undefined): string {
  return shares ? `${(shares.stolen * 100).toFixed(1)} %` : "–";
}

/** Each round pair's steal, "first / second", marked when the pair was set aside; for the log lines and results.md. */
export function stolenPairs<R>(rounds: R[], sides: (round: R) => Array<CoreShares | null | undefined>, setAside: (round: R) => boolean = () => false): string {
  return rounds.map((round) => `${sides(round).map(stolenPercent).join(" / ")}${setAside(round) ? " (set aside)" : ""}`).join(", ");
}
