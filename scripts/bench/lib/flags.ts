/** `--name value` flags for the bench scripts; a flag without a fallback is required. */
export function flagReader(args: string[] = process.argv.slice(2)) {
  return (name: string, fallback?: string): string => {
    const i = args.indexOf(`--${name}`);
    const value = i === -1 ? fallback : args[i + 1];
    if (value === undefined) throw new Error(`--${name} is required`);
    return value;
  };
}
