import type { ParseArgsConfig } from "node:util";
import type { Store } from "../store";

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
  options: Options;
  run(store: Store, values: Values, now: number): Promise<number>;
}

export const text = (values: Values, name: string, required = true): string | undefined => {
  const value = values[name];
  if (typeof value === "string" && value !== "") return value;
  if (required) throw new UsageError(`--${name} is required`);
  return undefined;
};

export const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
export const print = (value: unknown) => console.log(JSON.stringify(value));
export const refuse = (message: string) => (console.error(message), 1);
export const APP = { app: { type: "string" } } as const;
