/**
 * Operator commands, against the same DATABASE_URL as the server (SQLite or PostgreSQL);
 * running servers see the changes at once. `cli --help` lists them, `cli <command> --help`
 * shows one. Every command prints JSON lines.
 * Exit codes: 0 done, 1 refused (e.g. unknown app), 2 usage or configuration error, 3 `usage reconcile` found differences.
 */
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "./config";
import { openStore } from "./store";
import { systemClock } from "./clock";
import { ApiError } from "./errors";
import { OperatorService } from "./services/operator";
import { COMMANDS, UsageError, type Command } from "./cli/commands";
import { CLI_INPUT_NAMES } from "./cli/shared";
import { resolveSecretBox } from "./secrets/secrets-key";

const usageOf = (c: Command) => `  cli ${c.name}${c.usage ? ` ${c.usage}` : ""}\n      ${c.summary}`;
const HELP = `usage: cli <command> [options]   (npm run cli -- …, or bun run cli …)\n\ncommands:\n${COMMANDS.map(usageOf).join("\n")}\n\nEvery command takes --help.`;

/** Runs one operator command; also reachable as `metered-proxy cli ...` in the single binary. */
export async function runCli(argv: string[]): Promise<number> {
  const words = argv
    .filter((a) => !a.startsWith("-"))
    .slice(0, 2)
    .join(" ");
  const command = COMMANDS.find((c) => c.name === words);
  const wantsHelp = argv.includes("--help") || argv.includes("-h") || argv[0] === "help";
  if (wantsHelp) {
    console.log(command ? `usage:\n${usageOf(command)}` : HELP);
    return 0;
  }
  if (!command) {
    console.error(`unknown command: ${words || "(none)"}\n\n${HELP}`);
    return 2;
  }
  try {
    // Strict: an unknown or misspelt flag is an error, never silently ignored.
    const { values, positionals } = parseArgs({ args: argv, options: command.options, allowPositionals: true, strict: true });
    if (positionals.length > 2) throw new UsageError(`unexpected argument: ${positionals[2]}`);
    const config = loadConfig(process.env);
    // The server's own key for this DATABASE_URL: what the CLI seals, the server opens.
    const secrets = resolveSecretBox(config, (message) => console.error(`warning: ${message}`));
    const checkSecrets = command.skipsSecretsCheck ? false : undefined;
    const store = await openStore(config.database, { poolSize: 1, secrets, checkSecrets });
    try {
      const policy = { allowPrivateWebhookAddresses: config.webhooks.allowPrivateAddresses };
      return (await command.run(new OperatorService(store, systemClock, CLI_INPUT_NAMES, policy), values, store, config)) ?? 0;
    } finally {
      await store.close();
    }
  } catch (err) {
    // Refused: an unknown app, key, user or grant.
    if (err instanceof ApiError && err.code === "not_found") {
      console.error(err.message);
      return 1;
    }
    const invalidInput = err instanceof ApiError && err.code === "invalid_request";
    if (invalidInput || err instanceof UsageError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      console.error(`${(err as Error).message}\n\nusage:\n${usageOf(command)}`);
      return 2;
    }
    if (err instanceof ConfigError) {
      console.error(err.message);
      return 2;
    }
    throw err;
  }
}

if (import.meta.main) process.exit(await runCli(process.argv.slice(2)));
