import type { Database } from "bun:sqlite";
import type { Logger } from "../../logger";
// The thread's source, bundled as text: a Worker started from a blob runs the same in
// `bun src/index.ts`, in the bundle and in the single binary, where a file path would not.
import * as workerModule from "./maintenance-worker.ts" with { type: "text" };
import type { MaintenanceReport, MaintenanceSettings } from "./maintenance-worker";

const workerSource = (workerModule as unknown as { default: string }).default;

/** SQLite's own default, which the serving connection goes back to whenever the thread is not running. */
const AUTOCHECKPOINT_PAGES = 1000;
/** After the thread fails, how long before it is started again. */
const RESTART_AFTER_MS = 5000;
/** How long `stop` waits for the thread's last checkpoint. */
const STOP_TIMEOUT_MS = 2000;

export const DEFAULT_MAINTENANCE: Omit<MaintenanceSettings, "path" | "indexPath" | "busyTimeoutMs"> = {
  intervalMs: 100,
  // About three seconds of a busy server's rows: long enough that a user's page takes many
  // entries per write (the whole gain), short enough that reading the tail stays cheap
  // (listing a user's rows scans it on the event loop: about 3.7 ms at 16,384 rows).
  indexAtRows: 16_384,
  indexAtMostRows: 262_144,
  // A copy writes about one index page per user in it. Copied every second, a server at a
  // few thousand calls/s over 10,000 users wrote over half a page per entry; so a shorter tail
  // waits this long, and a busy one is copied when it reaches `indexAtRows`
  // (ARCHITECTURE.md §7 "Index copies by length").
  indexEveryMs: 10_000,
  checkpointEveryMs: 1000,
  // 1,000 pages is where SQLite's own automatic checkpoint runs; twice that leaves the
  // PASSIVE ones room to finish on their own before a RESTART holds writers up.
  restartAtPages: 2000,
};

export interface MaintenanceStats {
  running: boolean;
  /** Rounds that indexed entries or checkpointed a WAL (idle ones are not reported). */
  rounds: number;
  indexedEntries: number;
  checkpointedPages: number;
  failures: number;
  lastError: string | null;
}

/**
 * Runs ./maintenance-worker.ts beside the serving connection `db`: checkpoints and the
 * per-user index of the usage ledger, off the event loop. While the thread runs, `db` does
 * not checkpoint; when it fails, `db` checkpoints again as SQLite does by default (so the WAL
 * stays bounded) and the thread is started again after a pause. Readers never depend on it:
 * they scan the tail it has not indexed yet (src/store/sqlite/usage-ledger.ts). Measured:
 * ARCHITECTURE.md §7 "Checkpoints in a thread".
 */
export class SqliteMaintenance {
  private worker: Worker | null = null;
  private restartTimer: ReturnType<typeof setTimeout> | null = null;
  private logger: Logger | null = null;
  private stopping = false;
  private stoppedWaiter: (() => void) | null = null;
  private readonly state: MaintenanceStats = { running: false, rounds: 0, indexedEntries: 0, checkpointedPages: 0, failures: 0, lastError: null };

  constructor(
    private readonly db: Database,
    private readonly settings: Omit<
      MaintenanceSettings,
      "intervalMs" | "indexAtRows" | "indexAtMostRows" | "indexEveryMs" | "checkpointEveryMs" | "restartAtPages"
    > &
      Partial<MaintenanceSettings>,
  ) {}

  /** Starts the thread (once; again after `stop` is not supported: the store is closing). */
  start(logger: Logger): void {
    if (this.worker || this.stopping) return;
    this.logger = logger;
    const worker = new Worker(URL.createObjectURL(new Blob([workerSource], { type: "application/typescript" })));
    this.worker = worker;
    worker.onmessage = (event: MessageEvent<MaintenanceReport>) => this.onReport(event.data);
    worker.onerror = (event) => this.onFailure(event.message || "the maintenance thread failed");
    // The thread must not keep a process alive that has nothing else to do.
    worker.unref();
    worker.postMessage({ start: { ...DEFAULT_MAINTENANCE, ...this.settings } satisfies MaintenanceSettings });
    // Checkpoints are the thread's from now on.
    this.db.exec("PRAGMA wal_autocheckpoint = 0");
    this.state.running = true;
  }

  /** Stops the thread after its current round and a last checkpoint; the serving connection checkpoints again. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.restartTimer !== null) clearTimeout(this.restartTimer);
    const worker = this.worker;
    if (!worker) return;
    const stopped = new Promise<void>((resolve) => (this.stoppedWaiter = resolve));
    worker.postMessage({ stop: true });
    await Promise.race([stopped, Bun.sleep(STOP_TIMEOUT_MS)]);
    this.halt();
  }

  get stats(): MaintenanceStats {
    return { ...this.state };
  }

  private onReport(report: MaintenanceReport): void {
    if (report.kind === "round") {
      this.state.rounds++;
      this.state.indexedEntries += report.indexed;
      this.state.checkpointedPages += report.checkpointedPages;
    } else if (report.kind === "error") {
      // A round that failed (a lock held too long, a full disk): the next round tries again.
      this.state.failures++;
      this.state.lastError = report.message;
      this.logger?.warn("SQLite maintenance round failed; the next one retries", { error: report.message });
    } else {
      this.stoppedWaiter?.();
    }
  }

  private onFailure(message: string): void {
    this.state.failures++;
    this.state.lastError = message;
    this.logger?.error("SQLite maintenance thread failed; the serving connection checkpoints until it is restarted", { error: message });
    this.halt();
    if (this.stopping) return;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (this.logger) this.start(this.logger);
    }, RESTART_AFTER_MS);
    this.restartTimer.unref?.();
  }

  private halt(): void {
    this.worker?.terminate();
    this.worker = null;
    this.state.running = false;
    try {
      this.db.exec(`PRAGMA wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
    } catch {
      // The connection is already closed.
    }
  }
}
