/**
 * The only entry point: loadConfig(env) → openDeps(config) → createApp(deps).listen().
 * Also the only module (with src/cli.ts) that reads the environment.
 */
import { ConfigError, loadConfig, type Config } from "./config";
import { connectDependencies, openDeps } from "./deps";
import { createApp } from "./app";
import { ensureDefaultApp } from "./bootstrap";
import { createLogger } from "./logger";
import { acquireStoreLock, StoreLockedError, type StoreLock } from "./store/process-lock";
import { ConsentRequestSweeper } from "./grants/consent-sweeper";
import { keepServingOnStrayErrors } from "./stray-errors";

function readConfig(): Config {
  try {
    return loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}

/** Exit code when another process already serves this embedded store (2 is a configuration error). */
const EXIT_STORE_LOCKED = 3;

/**
 * Embedded mode (no REDIS_URL, a database file) keeps budgets in this process's memory, so
 * it must be the only process serving the file: a second one would double every cap.
 * Taken before the store is opened, so a refused process runs no migration and creates no
 * default app. With REDIS_URL the counters are shared and any number of processes may run.
 */
function lockEmbeddedStore(config: Config): StoreLock | null {
  const { database } = config;
  if (config.redisUrl || database.engine !== "sqlite" || database.path === ":memory:") return null;
  try {
    return acquireStoreLock(database.path);
  } catch (err) {
    if (err instanceof StoreLockedError) {
      console.error(err.message);
      createLogger(config.logLevel).error("store is locked by another process; exiting", {
        lockFile: err.lockPath,
        database: err.databasePath,
        exitCode: EXIT_STORE_LOCKED,
      });
      process.exit(EXIT_STORE_LOCKED);
    }
    throw err;
  }
}

/**
 * After the grace, how long cut streams may take to settle: local work (the scanner's tally,
 * one budget-ledger call), not upstream time, so a short bound.
 */
const SETTLE_AFTER_CUT_MS = 2000;

async function main(): Promise<void> {
  const config = readConfig();
  const storeLock = lockEmbeddedStore(config);
  const deps = await openDeps(config).catch((err: unknown) => {
    // A secrets key that is malformed, missing, or does not open the store (src/secrets/).
    if (!(err instanceof ConfigError)) throw err;
    console.error(err.message);
    process.exit(2);
  });
  await ensureDefaultApp(deps, (line) => console.log(line));
  if (config.demoMode) {
    deps.logger.warn("DEMO MODE: no UPSTREAM_API_KEY is set; chat completions are served by the built-in mock upstream");
  }
  if (!process.env.BUN_CONFIG_MAX_HTTP_REQUESTS && !config.demoMode) {
    // Bun reads it once at process start (setting it later has no effect, measured), and
    // without it queues upstream requests beyond 256 at a time. `npm start` sets it.
    deps.logger.warn("BUN_CONFIG_MAX_HTTP_REQUESTS is not set: upstream requests beyond 256 at a time will queue");
  }
  await connectDependencies(deps);
  await deps.catalogue.refresh();
  deps.catalogue.start(config.pricingRefreshSeconds);
  // Webhooks: deliveries left due by an earlier process (even one killed mid-send) go out
  // on the first poll; thresholds are checked on the same beat.
  deps.webhooks.start();
  deps.budgetWatcher.start(config.webhooks.pollMs);
  const consentSweeper = new ConsentRequestSweeper(deps.store.grants, deps.clock, deps.logger);
  consentSweeper.start();

  const proxy = createApp(deps);
  // With the embedded lock this process owns the store: calls an earlier process left open
  // are held again before anything is admitted, and settled from the upstream's records
  // (src/metering/reconciler.ts). Shared stores keep them held where they are.
  if (storeLock !== null) await proxy.decorator.reconciler.adoptLeftovers((owner) => deps.store.instances.drop(owner));
  proxy.decorator.reconciler.start();

  const app = proxy.listen({
    port: config.port,
    hostname: config.host,
    // Bodies over MAX_BODY_BYTES get our 413 envelope (src/http/request-context.ts and
    // body-limit.ts, declared or chunked). Bun's own limit is only the outer bound: it
    // answers a bare 413 without our envelope, so it must sit above ours.
    maxRequestBodySize: config.maxBodyBytes * 4,
    // Elysia's listen() turns SO_REUSEPORT on by default: a second process on the same
    // port would then bind beside this one and take half the connections, with its own
    // in-memory budgets. Off, it fails with EADDRINUSE and exits non-zero instead.
    reusePort: false,
  });
  deps.logger.info("listening", { url: `http://${config.host}:${app.server?.port}`, mode: config.demoMode ? "demo" : "upstream" });
  // Only once serving: a failure while starting (a port in use, a store that will not
  // open) must still end the process with its error.
  keepServingOnStrayErrors(deps.logger);

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    deps.logger.info("shutting down: no new connections; finishing in-flight streams", { signal, activeStreams: app.decorator.chat.activeStreams });
    // One deadline for the whole shutdown: an orchestrator sends SIGKILL once its own grace
    // is over, and that would lose every ledger row still queued in the writer.
    const deadline = Date.now() + config.shutdownGraceMs;
    const graceful = app.server?.stop(false);
    const grace = new Promise((resolve) => setTimeout(resolve, config.shutdownGraceMs));
    await Promise.race([graceful, grace]);
    await app.server?.stop(true);
    // Streams that ended are settling; streams cut by the forced stop drain for their usage.
    await app.decorator.chat.idle(Math.max(0, deadline - Date.now()));
    if (app.decorator.chat.activeStreams > 0) {
      // Past the deadline a stream still reading its upstream is stopped: waiting for it
      // would lose the others' rows. One whose usage had not come stays in the call journal,
      // its reservation held, for the next process (or another instance) to reconcile.
      deps.logger.warn("shutdown grace is over: cutting the streams still open", { activeStreams: app.decorator.chat.activeStreams });
      app.decorator.chat.abortStreams("shutdown grace is over");
      await app.decorator.chat.idle(SETTLE_AFTER_CUT_MS);
    }
    deps.catalogue.stop();
    await app.decorator.reconciler.stop();
    await deps.budgetWatcher.check();
    await Promise.all([deps.budgetWatcher.stop(), deps.webhooks.stop(), consentSweeper.stop()]);
    await deps.usageWriter.close();
    await deps.budget.close?.();
    // Its lease dropped, whatever it left in the journal is the others' (or the next start's) at once.
    await deps.instanceLease?.stop();
    await deps.store.close();
    storeLock?.release();
    deps.redis?.disconnect();
    deps.logger.info("stopped", { usageRowsWritten: deps.usageWriter.stats.written });
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

/** GET /healthz on this machine: the container's HEALTHCHECK, without curl in the image. */
async function healthcheck(): Promise<number> {
  const port = process.env.PORT ?? "8787";
  try {
    const response = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) });
    return response.ok ? 0 : 1;
  } catch {
    return 1;
  }
}

// One executable for everything (also the single binary): `cli ...` runs an operator
// command, `healthcheck` probes a running server, anything else starts the service.
const command = process.argv[2];
if (command === "cli") {
  const { runCli } = await import("./cli");
  process.exit(await runCli(process.argv.slice(3)));
} else if (command === "healthcheck") {
  process.exit(await healthcheck());
} else {
  await main();
}
