/** The program's own help (`--help`), naming its commands as this process was started (invocation.ts). */
import type { Invocation } from "./invocation";
import { version } from "../../package.json";

/** package.json's version, inlined by the bundler: the binary and the bundle carry it without the file. */
export const VERSION: string = version;

export function programHelp(how: Invocation): string {
  const p = how.program;
  const rows: [string, string][] = [
    [`${serveCommand(how)} [serve]`, "run the service (the default): port, store and upstream from the environment"],
    [`${how.cli} <command> …`, `an operator command (apps, keys, users, usage): \`${how.cli} --help\` lists them`],
    [`${p} migrate`, "apply the store's pending migrations (SQLite or PostgreSQL, per DATABASE_URL) and exit"],
    [`${p} healthcheck`, "exit 0 when the service on this machine's PORT answers GET /healthz with 200, else 1"],
    [`${p} --version`, "print the version"],
    [`${p} --help`, "print this help"],
  ];
  return [
    `metered-proxy ${VERSION}: a chat-completion proxy that meters every call against budgets its users approve`,
    "",
    "usage:",
    ...commandTable(rows),
    "",
    "Settings are environment variables: PORT (8787), HOST (0.0.0.0), DATABASE_URL (sqlite:data/proxy.sqlite,",
    "under the working folder), UPSTREAM_API_KEY (unset: demo mode, with a built-in mock upstream), and the",
    'rest in the README\'s "Configuration".',
    "",
    "Exit status: 0 done; 1 the service could not start (e.g. its port is in use); 2 a usage or configuration",
    "error; 3 another process serves this SQLite store.",
  ].join("\n");
}

/**
 * Commands in one column and meanings in the next. The column is as wide as the longest command, since a
 * binary started by its full path (/opt/app/metered-proxy) names itself at that length.
 */
function commandTable(rows: [string, string][]): string[] {
  const width = Math.max(...rows.map(([command]) => command.length)) + 4;
  return rows.map(([command, meaning]) => `  ${command}`.padEnd(width) + meaning);
}

/** For an unknown argument: the forms the program takes, and where to read more. */
export function programUsage(how: Invocation): string {
  return [
    `usage: ${how.program} [serve | migrate | healthcheck | --help | --version], or ${how.cli} <command> …`,
    `Settings are environment variables (PORT=9000 ${serveCommand(how)}); \`${how.program} --help\` says more.`,
  ].join("\n");
}

/** The service's command: in a checkout `npm start`, which takes a command only after `--`. */
const serveCommand = (how: Invocation) => (how.program.endsWith(" --") ? how.program.slice(0, -3) : how.program);
