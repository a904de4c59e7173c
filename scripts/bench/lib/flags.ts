/** `--name value` flags for the bench scripts; a flag without a fallback is required. */
export function flagReader(args: string[] = process.argv.slice(2)) {
  return (name: string, fallback?: string): string => {
    const i = args.indexOf(`--${name}`);
    const value = i === -1 ? fallback : args[i + 1];
    if (value === undefined) throw new Error(`--${name} is required`);
    return value;
  };
}

/** Every value given after a repeatable `--name`, in order. */
export function repeatedFlag(name: string, args: string[] = process.argv.slice(2)): string[] {
  return args.flatMap((arg, at) => (arg === `--${name}` && args[at + 1] !== undefined ? [args[at + 1]!] : []));
}

/** Every `--env NAME=VALUE` given (repeatable), as an environment for a child process. */
export function envFlags(args: string[] = process.argv.slice(2)): Record<string, string> {
  const settings = repeatedFlag("env", args);
  return Object.fromEntries(settings.map((setting) => [setting.slice(0, setting.indexOf("=")), setting.slice(setting.indexOf("=") + 1)]));
}
