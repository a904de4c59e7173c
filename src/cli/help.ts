/**
 * The operator CLI's help: all commands (`cli --help`), one group's (`cli app --help`), one
 * command's with what its flags mean when left out (`cli usage export --help`). `cli` is how
 * this process runs a command (`npm run cli --`, `./metered-proxy cli`), so every usage line
 * can be pasted as it is.
 */
import { COMMANDS } from "./commands";
import type { Command } from "./shared";

/** A command's group: the first of the two words that name it (`app` of `app create`). */
export const groupOf = (command: Command): string => command.name.split(" ")[0]!;

/** The groups, in the order their commands are listed. */
export const GROUPS: readonly string[] = [...new Set(COMMANDS.map(groupOf))];

const EXIT_STATUS = "Exit status: 0 done, 1 refused (e.g. an unknown app), 2 a usage or configuration error, 3 `usage reconcile` found differences.";

const usageLine = (cli: string, command: Command) => `${cli} ${command.name}${command.usage ? ` ${command.usage}` : ""}`;

/** The command's words and flags, and under them what it does. */
const entry = (command: Command) => `  ${command.name}${command.usage ? ` ${command.usage}` : ""}\n      ${command.summary}`;

export function fullHelp(cli: string): string {
  const groups = GROUPS.map((group) =>
    COMMANDS.filter((c) => groupOf(c) === group)
      .map(entry)
      .join("\n"),
  );
  return [
    `usage: ${cli} <command> [options]`,
    "",
    "Operator commands, against the store the service uses (DATABASE_URL and the other settings, from the environment).",
    "Each prints JSON lines; a running server sees every change at once.",
    "",
    groups.join("\n\n"),
    "",
    `\`${cli} <group> --help\` lists one group's commands (${GROUPS.join(", ")}); \`${cli} <command> --help\` shows one, with its defaults.`,
    EXIT_STATUS,
  ].join("\n");
}

export function groupHelp(cli: string, group: string): string {
  const commands = COMMANDS.filter((c) => groupOf(c) === group);
  return [
    `usage: ${cli} ${group} <command> [options]`,
    "",
    commands.map(entry).join("\n"),
    "",
    `\`${cli} ${group} <command> --help\` shows one, with its defaults.`,
  ].join("\n");
}

export function commandHelp(cli: string, command: Command): string {
  const lines = [`usage: ${usageLine(cli, command)}`, "", `  ${command.summary}`];
  const defaults = Object.entries(command.defaults ?? {});
  const width = Math.max(0, ...defaults.map(([flag]) => flag.length)) + 2;
  if (defaults.length > 0) lines.push("", "defaults:", ...defaults.map(([flag, meaning]) => `  ${flag.padEnd(width)}${meaning}`));
  return lines.join("\n");
}
