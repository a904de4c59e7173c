/** A tiny argv parser: two positional words form the command, then `--flag value` pairs. */
export class UsageError extends Error {}

export interface ParsedArgs {
  command: string;
  flags: { single(name: string): string; optional(name: string): string | undefined; all(name: string): string[] };
}

export function parseArgs(argv: string[]): ParsedArgs {
  const words: string[] = [];
  const values = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--")) {
      words.push(arg);
      continue;
    }
    const [name, inline] = arg.slice(2).split("=", 2) as [string, string | undefined];
    const value = inline ?? argv[++i];
    if (value === undefined || value.startsWith("--")) throw new UsageError(`--${name} needs a value`);
    values.set(name, [...(values.get(name) ?? []), value]);
  }
  return {
    command: words.slice(0, 2).join(" "),
    flags: {
      single(name) {
        const found = values.get(name);
        if (!found || found.length !== 1 || found[0] === "") throw new UsageError(`--${name} is required once`);
        return found[0]!;
      },
      optional(name) {
        const found = values.get(name);
        if (found && found.length > 1) throw new UsageError(`--${name} may be given once`);
        return found?.[0];
      },
      all: (name) => values.get(name) ?? [],
    },
  };
}
