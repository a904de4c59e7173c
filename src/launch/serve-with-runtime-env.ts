/**
 * Imported first by src/index.ts, so that it runs before any other module: a process asked to
 * serve without Bun's runtime settings replaces itself by one that has them (runtime-env.ts).
 * Other commands (the CLI, migrate, help) make few upstream requests and start as they are.
 */
import { parseLaunch } from "./arguments";
import { execWithRuntimeEnv } from "./runtime-env";

if (parseLaunch(process.argv.slice(2)).command === "serve") execWithRuntimeEnv();
