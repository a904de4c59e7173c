/**
 * Which command the words of a CLI line name, or which help to print instead. Help that was
 * asked for goes to stdout with exit 0; help that stands in for a missing or unknown command
 * goes to stderr with exit 2, so a script never takes a mistyped command for success; a typo
 * gets the nearest command ("did you mean `key rotate`?"). `--version` prints the version.
 */
import { COMMANDS } from "./commands";
import { commandHelp, fullHelp, GROUPS, groupHelp } from "./help";
import { nearest } from "./nearest";
import type { Command } from "./shared";

export type CliRoute = { kind: "run"; command: Command } | { kind: "help"; text: string; exitCode: 0 | 2 } | { kind: "version" };

const HELP_FLAGS = new Set(["--help", "-h"]);

/** `argv` after `cli`; `cli` is how this process runs a command (src/launch/invocation.ts). */
export function routeCli(argv: readonly string[], cli: string): CliRoute {
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-v")) return { kind: "version" };
  let wantsHelp = argv.some((a) => HELP_FLAGS.has(a));
  // The command's words come first: `app create --name x`; the flags' values are not words.
  const firstFlag = argv.findIndex((a) => a.startsWith("-"));
  let words = firstFlag === -1 ? [...argv] : argv.slice(0, firstFlag);
  if (words[0] === "help") {
    wantsHelp = true;
    words = words.slice(1);
  }
  const asked = (text: string): CliRoute => ({ kind: "help", text, exitCode: wantsHelp ? 0 : 2 });
  const mistaken = (text: string): CliRoute => ({ kind: "help", text, exitCode: 2 });

  const [group, name] = words;
  if (group === undefined) return asked(fullHelp(cli));
  if (!GROUPS.includes(group)) {
    const groups = `The commands are in groups: ${GROUPS.join(", ")}. \`${cli} --help\` lists them all.`;
    return mistaken(`unknown command: ${words.join(" ")}${didYouMean(cli, group, name)}\n\n${groups}`);
  }
  if (name === undefined) return asked(wantsHelp ? groupHelp(cli, group) : `${group}: which command?\n\n${groupHelp(cli, group)}`);
  const command = COMMANDS.find((c) => c.name === `${group} ${name}`);
  if (!command) return mistaken(`unknown command: ${group} ${name}${didYouMean(cli, group, name)}\n\n${groupHelp(cli, group)}`);
  if (wantsHelp) return { kind: "help", text: commandHelp(cli, command), exitCode: 0 };
  return { kind: "run", command };
}

/** "\nDid you mean `npm run cli -- key rotate`?": the command (or, for one word, the group) nearest what was typed; "" when none is near. */
function didYouMean(cli: string, group: string, name: string | undefined): string {
  const suggestion =
    name === undefined
      ? nearest(group, GROUPS)
      : nearest(
          `${group} ${name}`,
          COMMANDS.map((c) => c.name),
        );
  return suggestion === null ? "" : `\nDid you mean \`${cli} ${suggestion}\`?`;
}
