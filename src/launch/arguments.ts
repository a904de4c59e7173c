/**
 * What the command line asks of the program (`metered-proxy [command]`, or the bundle that
 * `npm start` runs). Decided before anything else runs, so a mistyped or unknown argument
 * exits with the usage and touches no file: no data folder, no database, no default app.
 */
export type Launch =
  | { command: "serve" }
  | { command: "migrate" }
  | { command: "healthcheck" }
  | { command: "cli"; args: string[] }
  | { command: "help" }
  | { command: "version" }
  | { command: "unknown"; argument: string };

const HELP = new Set(["--help", "-h", "help"]);
const VERSION = new Set(["--version", "-v", "version"]);
/** Commands that take no argument of their own (besides --help). */
const BARE_COMMANDS = ["serve", "migrate", "healthcheck"] as const;

export function parseLaunch(argv: readonly string[]): Launch {
  const [first, ...rest] = argv;
  // No argument: the service, as `npm start` and the container's ENTRYPOINT run it.
  if (first === undefined) return { command: "serve" };
  if (first === "cli") return { command: "cli", args: rest };
  if (HELP.has(first)) return { command: "help" };
  if (VERSION.has(first)) return { command: "version" };
  const bare = BARE_COMMANDS.find((c) => c === first);
  if (!bare) return { command: "unknown", argument: first };
  // `serve --port 9000` would otherwise start on the default port: settings are environment variables.
  const extra = rest.find((a) => !HELP.has(a));
  if (extra !== undefined) return { command: "unknown", argument: extra };
  return rest.length === 0 ? { command: bare } : { command: "help" };
}

/** Exit status of a usage mistake, the same as the operator CLI's (src/cli.ts). */
export const EXIT_USAGE = 2;
