/**
 * How this process was started, so that what it prints (the first start's banner, the
 * help) names commands the reader can run as they are: a user of the single binary has no
 * checkout and no npm, and a user of the checkout has no `metered-proxy` on their PATH.
 */
export interface Invocation {
  /** Runs this program with a command after it: `./dist/metered-proxy`, or `npm start --` in a checkout. */
  program: string;
  /** Runs an operator command after it: `./dist/metered-proxy cli`, `npm run cli --` or `bun run cli`. */
  cli: string;
}

export interface StartedHow {
  /** Bun.isStandaloneExecutable: this process is the binary `bun build --compile` made. */
  standalone: boolean;
  /** process.argv0: the program as it was typed (`./metered-proxy`, `dist/metered-proxy`, or a name found on PATH). */
  argv0: string;
  /** npm_config_user_agent: set by the package manager that ran a package.json script (`npm/11…`, `bun/1.4…`). */
  userAgent: string | undefined;
}

/** A word the shell would split or expand is quoted, so the printed command can be pasted back. */
const shellWord = (word: string) => (/^[\w./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`);

export function invocationOf(how: StartedHow): Invocation {
  if (how.standalone) {
    const program = shellWord(how.argv0);
    return { program, cli: `${program} cli` };
  }
  // From a checkout. Bun sets its own user agent when it runs a script (`bun start`); npm's,
  // or none (`bun src/index.ts`), gets the commands the README gives, which need only npm.
  if (how.userAgent?.startsWith("bun/")) return { program: "bun start", cli: "bun run cli" };
  return { program: "npm start --", cli: "npm run cli --" };
}

/** This process's invocation; `env` is the process's environment (only the entry points read it). */
export function currentInvocation(env: Record<string, string | undefined>): Invocation {
  return invocationOf({ standalone: Bun.isStandaloneExecutable, argv0: process.argv0, userAgent: env.npm_config_user_agent });
}
