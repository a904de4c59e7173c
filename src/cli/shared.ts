import type { ParseArgsConfig } from "node:util";
import type { InputNames, OperatorService } from "../services/operator";
import type { Store } from "../store";
import type { Config } from "../config";

/** A usage mistake: the message and the command's usage go to stderr, exit 2. */
export class UsageError extends Error {}

export type Options = NonNullable<ParseArgsConfig["options"]>;
export type Values = Record<string, string | boolean | Array<string | boolean> | undefined>;

export interface Command {
  /** The two words that name it: `app create`. */
  name: string;
  /** The flags part of its usage line. */
  usage: string;
  summary: string;
  /**
   * What a flag left out means, by flag (`--format`: "jsonl: one JSON object per line"),
   * shown by the command's --help. Only flags that may be left out and then mean something.
   */
  defaults?: Record<string, string>;
  options: Options;
  /**
   * Runs the command; the operator service refuses with ApiError (invalid_request: exit 2
   * with the usage, not_found: exit 1), see src/cli.ts. A number is the exit status, when
   * the command's answer is one (0 when it returns nothing).
   */
  run(operator: OperatorService, values: Values, store: Store, config: Config): Promise<void | number>;
  /** Opens the store without checking its secrets key: only `secrets reset`, which repairs a store that check refuses. */
  skipsSecretsCheck?: boolean;
  /** May create an SQLite store that does not exist yet (only `app create`); every other command refuses one (src/cli/store-presence.ts). */
  createsStore?: boolean;
}

/** The service's refusals name the flags the operator typed. */
export const CLI_INPUT_NAMES: InputNames = {
  name: "--name",
  origins: "--origin",
  maxGrantUsd: "--max-grant-usd",
  grantDailyCeilingUsd: "--grant-daily-ceiling-usd",
  fundingSources: "--funding-sources",
  url: "--url",
  events: "--event",
  serviceDefault: "`default`",
  from: "--from",
  to: "--to",
  format: "--format",
  limit: "--limit",
  cursor: "--cursor",
};

export const text = (values: Values, name: string, required = true): string | undefined => {
  const value = values[name];
  if (typeof value === "string" && value !== "") return value;
  if (required) throw new UsageError(`--${name} is required`);
  return undefined;
};

export const print = (value: unknown) => console.log(JSON.stringify(value));
export const APP = { app: { type: "string" } } as const;
