/**
 * Operator commands, against the same DATABASE_URL as the server (SQLite or PostgreSQL);
 * running servers see the changes at once. `cli --help` lists them, `cli app --help` one
 * group's, `cli <command> --help` one command with its defaults (src/cli/help.ts). Every
 * command prints JSON lines. Run as `npm run cli -- …` from a checkout, or as
 * `metered-proxy cli …` from the single binary (src/index.ts).
 * Exit codes: 0 done, 1 refused (e.g. unknown app), 2 usage or configuration error (an SQLite
 * store that does not exist included: only `app create` creates one), 3 `usage reconcile` found differences.
 */
import { parseArgs } from "node:util";
import { loadConfig } from "./config";
import { openStore } from "./store";
import { systemClock } from "./clock";
import { ApiError } from "./errors";
import { OperatorService } from "./services/operator";
import { UsageError } from "./cli/commands";
import { CLI_INPUT_NAMES } from "./cli/shared";
import { commandHelp } from "./cli/help";
import { routeCli } from "./cli/route";
import { resolveSecretBox } from "./secrets/secrets-key";
import { currentInvocation } from "./launch/invocation";
import { plainFailure } from "./launch/startup-failure";
import { VERSION } from "./launch/help";
import { absentStoreFile, createdStoreLine, noStoreLine } from "./cli/store-presence";

/** Runs one operator command; also reachable as `metered-proxy cli ...` in the single binary. */
export async function runCli(argv: string[]): Promise<number> {
  const cli = currentInvocation(process.env).cli;
  const route = routeCli(argv, cli);
  if (route.kind === "version") {
    console.log(VERSION);
    return 0;
  }
  if (route.kind === "help") {
    (route.exitCode === 0 ? console.log : console.error)(route.text);
    return route.exitCode;
  }
  const { command } = route;
  try {
    // Strict: an unknown or misspelt flag is an error, never silently ignored.
    const { values, positionals } = parseArgs({ args: argv, options: command.options, allowPositionals: true, strict: true });
    if (positionals.length > 2) throw new UsageError(`unexpected argument: ${positionals[2]}`);
    const config = loadConfig(process.env);
    // Before anything is written (the secrets key file included): a store that is not there is
    // most often a command run from another folder than the service's.
    const absent = absentStoreFile(config.database);
    if (absent !== null && !command.createsStore) {
      console.error(noStoreLine(absent));
      return 2;
    }
    // The server's own key for this DATABASE_URL: what the CLI seals, the server opens.
    const secrets = resolveSecretBox(config, (message) => console.error(`warning: ${message}`));
    const checkSecrets = command.skipsSecretsCheck ? false : undefined;
    const store = await openStore(config.database, { poolSize: 1, secrets, checkSecrets });
    try {
      const policy = { allowPrivateWebhookAddresses: config.webhooks.allowPrivateAddresses };
      return (await command.run(new OperatorService(store, systemClock, CLI_INPUT_NAMES, policy), values, store, config)) ?? 0;
    } finally {
      await store.close();
      if (absent !== null) console.error(createdStoreLine(absent));
    }
  } catch (err) {
    // Refused: an unknown app, key, user or grant.
    if (err instanceof ApiError && err.code === "not_found") {
      console.error(err.message);
      return 1;
    }
    const invalidInput = err instanceof ApiError && err.code === "invalid_request";
    if (invalidInput || err instanceof UsageError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      console.error(`${(err as Error).message}\n\n${commandHelp(cli, command)}`);
      return 2;
    }
    // A bad setting, a secrets key that does not open the store, a folder it may not write: one plain line.
    const plain = plainFailure(err);
    if (plain) {
      console.error(plain.line);
      return plain.exitCode;
    }
    throw err;
  }
}

if (import.meta.main) process.exit(await runCli(process.argv.slice(2)));
