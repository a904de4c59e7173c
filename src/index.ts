/**
 * The only entry point: the bundle `npm start` runs and the single binary are built from it.
 * What it does is the command line's choice (src/launch/arguments.ts): `serve` (also with no
 * argument), `cli …`, `migrate`, `healthcheck`, `--help`, `--version`. Serving is
 * loadConfig(env) → openDeps(config) → createApp(deps).listen(). Also the only module (with
 * src/cli.ts) that reads the environment.
 */
// First, before any other module runs: serving without Bun's runtime settings re-executes with them.
import "./launch/serve-with-runtime-env";
import { loadConfig, type Config } from "./config";
import { connectDependencies, openDeps, type Deps } from "./deps";
import { createApp } from "./app";
import { ensureDefaultApp } from "./bootstrap";
import type { StoreLock } from "./store/process-lock";
import { ConsentRequestSweeper } from "./services/consent-sweeper";
import { keepServingOnStrayErrors } from "./stray-errors";
import { EXIT_USAGE, parseLaunch } from "./launch/arguments";
import { currentInvocation, type Invocation } from "./launch/invocation";
import { programHelp, programUsage, VERSION } from "./launch/help";
import { exitOnFailure } from "./launch/startup-failure";
import { lockEmbeddedStore } from "./launch/embedded-lock";
import { checkPortFree } from "./launch/port-check";
import { migrateStore } from "./launch/migrate";
import { healthcheck } from "./launch/healthcheck";
import { startNotes } from "./launch/start-notes";

/** The settings, or the end of the process with the one line that names what is wrong (exit 2). */
function readConfig(what: string): Config {
  try {
    return loadConfig(process.env);
  } catch (err) {
    exitOnFailure(what, err);
  }
}

/**
 * After the grace, how long cut streams may take to settle: local work (the scanner's tally,
 * one budget-ledger call), not upstream time, so a short bound.
 */
const SETTLE_AFTER_CUT_MS = 2000;

type Listening = ReturnType<ReturnType<typeof createApp>["listen"]>;

/** What a serving process holds, and lets go of on SIGTERM. */
interface Serving {
  deps: Deps;
  app: Listening;
  storeLock: StoreLock | null;
  consentSweeper: ConsentRequestSweeper;
}

/** Everything up to listening; throws what stopped it (src/launch/startup-failure.ts tells it). */
async function start(config: Config, invocation: Invocation): Promise<Serving> {
  // The port first: a second `npm start` beside a running one is told its port is taken (not
  // that the store is locked, true but less to the point), and leaves no lock file behind.
  checkPortFree({ host: config.host, port: config.port });
  const storeLock = lockEmbeddedStore(config);
  const deps = await openDeps(config);
  await ensureDefaultApp(deps, (line) => console.log(line), invocation.cli);
  if (config.demoMode) {
    deps.logger.warn("DEMO MODE: no UPSTREAM_API_KEY is set; chat completions are served by the built-in mock upstream");
  }
  for (const note of startNotes(config, Boolean(process.env.PUBLIC_URL))) deps.logger[note.level](note.msg);
  if (!process.env.BUN_CONFIG_MAX_HTTP_REQUESTS && !config.demoMode) {
    // Bun reads it once at process start (setting it later has no effect, measured), and
    // without it queues upstream requests beyond 256 at a time. Only where the re-exec of
    // src/launch/runtime-env.ts could not call libc is it still missing here.
    deps.logger.warn("BUN_CONFIG_MAX_HTTP_REQUESTS is not set: upstream requests beyond 256 at a time will queue");
  }
  await connectDependencies(deps);
  await deps.catalogue.refresh();
  deps.catalogue.start(config.pricingRefreshSeconds);
  // Webhooks: deliveries left due by an earlier process (even one killed mid-send) go out
  // on the first poll; thresholds are checked on the same beat.
  deps.webhooks.start();
  deps.budgetWatcher.start(config.webhooks.pollMs);
  const consentSweeper = new ConsentRequestSweeper(deps.store, deps.clock, deps.logger);
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
    // in-memory budgets. Off, it fails with EADDRINUSE and exits non-zero instead
    // (checkPortFree has told most such starts already, before the store was opened).
    reusePort: false,
  });
  deps.logger.info("listening", { url: `http://${config.host}:${app.server?.port}`, mode: config.demoMode ? "demo" : "upstream" });
  return { deps, app, storeLock, consentSweeper };
}

async function serve(invocation: Invocation): Promise<void> {
  const config = readConfig("cannot start");
  const serving = await start(config, invocation).catch((err: unknown) => exitOnFailure("cannot start", err, { host: config.host, port: config.port }));
  // Only once serving: a failure while starting (a port in use, a store that will not
  // open) must still end the process with its error.
  keepServingOnStrayErrors(serving.deps.logger);
  let stopping = false;
  const onSignal = (signal: string) => {
    if (stopping) return;
    stopping = true;
    void shutdown(serving, config, signal);
  };
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
}

/** SIGTERM: stop accepting, finish in-flight streams (bounded), flush usage, exit 0. */
async function shutdown({ deps, app, storeLock, consentSweeper }: Serving, config: Config, signal: string): Promise<void> {
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
  // The ledger and its connection closed, and this process's lease dropped: whatever it left
  // in the journal is the others' (or the next start's) at once.
  await deps.budgetBackend.close();
  await deps.store.close();
  storeLock?.release();
  deps.logger.info("stopped", { usageRowsWritten: deps.usageWriter.stats.written });
  process.exit(0);
}

/** `migrate`: the store's pending migrations, applied as `serve` would, then one JSON line. */
async function migrate(): Promise<void> {
  const config = readConfig("cannot migrate");
  try {
    // Not under a process that serves the file: its schema would change beneath it.
    const storeLock = lockEmbeddedStore(config);
    const migrated = await migrateStore(config, (message) => console.error(`warning: ${message}`));
    storeLock?.release();
    console.log(JSON.stringify(migrated));
  } catch (err) {
    exitOnFailure("cannot migrate", err);
  }
}

const launch = parseLaunch(process.argv.slice(2));
const invocation = currentInvocation(process.env);
switch (launch.command) {
  case "serve":
    await serve(invocation);
    break;
  case "cli": {
    const { runCli } = await import("./cli");
    process.exit(await runCli(launch.args));
    break;
  }
  case "migrate":
    await migrate();
    break;
  case "healthcheck":
    process.exit(await healthcheck(process.env.PORT ?? "8787"));
    break;
  case "help":
    console.log(programHelp(invocation));
    break;
  case "version":
    console.log(VERSION);
    break;
  case "unknown":
    console.error(`unknown argument: ${launch.argument}\n${programUsage(invocation)}`);
    process.exit(EXIT_USAGE);
}
