/**
 * The only entry point: loadConfig(env) → createDeps(config) → createApp(deps).listen().
 * Also the only module (with src/cli.ts) that reads the environment.
 */
import { ConfigError, loadConfig } from "./config";
import { createDeps } from "./deps";
import { createApp } from "./app";
import { ensureDefaultApp } from "./bootstrap";

function main(): void {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  const deps = createDeps(config);
  ensureDefaultApp(deps, (line) => console.log(line));
  if (config.demoMode) {
    deps.logger.warn("DEMO MODE: no UPSTREAM_API_KEY is set; chat completions are served by the built-in mock upstream");
  }
  const app = createApp(deps).listen({
    port: config.port,
    hostname: config.host,
    maxRequestBodySize: config.maxBodyBytes,
  });
  deps.logger.info("listening", { url: `http://${config.host}:${app.server?.port}`, mode: config.demoMode ? "demo" : "upstream" });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    deps.logger.info("shutting down", { signal });
    await app.stop();
    deps.store.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

main();
