/**
 * The only entry point: loadConfig(env) → createDeps(config) → createApp(deps).listen().
 * Also the only module (with src/cli.ts) that reads the environment.
 */
import { ConfigError, loadConfig, type Config } from "./config";
import { connectDependencies, createDeps } from "./deps";
import { createApp } from "./app";
import { ensureDefaultApp } from "./bootstrap";

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

async function main(): Promise<void> {
  const config = readConfig();
  const deps = createDeps(config);
  ensureDefaultApp(deps, (line) => console.log(line));
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

  const app = createApp(deps).listen({
    port: config.port,
    hostname: config.host,
    // Declared lengths over MAX_BODY_BYTES get our 413 envelope before the body is read
    // (src/http/request-context.ts); Bun's own limit only backs that up for bodies sent
    // without a length (chunked), which it cuts with a bare 413 at four times the limit.
    maxRequestBodySize: config.maxBodyBytes * 4,
  });
  deps.logger.info("listening", { url: `http://${config.host}:${app.server?.port}`, mode: config.demoMode ? "demo" : "upstream" });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    deps.logger.info("shutting down: no new connections; finishing in-flight streams", { signal, activeStreams: app.decorator.chat.activeStreams });
    const graceful = app.server?.stop(false);
    const grace = new Promise((resolve) => setTimeout(resolve, config.shutdownGraceMs));
    await Promise.race([graceful, grace]);
    await app.server?.stop(true);
    // Streams cut by the forced stop still drain for their usage, within the same bound.
    await app.decorator.chat.idle(config.shutdownGraceMs);
    deps.catalogue.stop();
    deps.usageWriter.close();
    deps.store.close();
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
  process.exit(runCli(process.argv.slice(3)));
} else if (command === "healthcheck") {
  process.exit(await healthcheck());
} else {
  await main();
}
