/**
 * The store a command would open, when it is an SQLite file that does not exist yet. The
 * default DATABASE_URL, `sqlite:data/proxy.sqlite`, is relative to the working folder, so a
 * command run from another folder than the service's would otherwise open (and create) a new
 * empty store there, and `app list` would print nothing and exit 0 as if there were no apps.
 * Only `app create` may create a store (it says where); every other command refuses.
 */
import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import type { DatabaseTarget } from "../config";

/** An SQLite file a command would open, which does not exist: DATABASE_URL's path as given, and resolved. */
export interface AbsentStore {
  given: string;
  path: string;
}

/** The SQLite file `database` names, when it is absent; null when it exists, or is no file. */
export function absentStoreFile(database: DatabaseTarget): AbsentStore | null {
  if (database.engine !== "sqlite" || database.path === ":memory:") return null;
  const path = resolve(database.path);
  return existsSync(path) ? null : { given: database.path, path };
}

/** Where the file is, and why there: DATABASE_URL's path, relative to the working folder unless absolute. */
function where({ given, path }: AbsentStore): string {
  const setting = `DATABASE_URL sqlite:${given}`;
  return isAbsolute(given) ? `${path} (${setting})` : `${path} (${setting}, relative to the working folder ${process.cwd()})`;
}

/** The refusal of a command that needs an existing store (exit 2, a configuration error). */
export function noStoreLine(store: AbsentStore): string {
  return (
    `no store at ${where(store)}: nothing was created. ` +
    "Run the command from the folder the service runs in, or set DATABASE_URL to the service's database (an absolute path works from any folder)."
  );
}

/** What `app create` says on stderr when it created the store. */
export function createdStoreLine(store: AbsentStore): string {
  return `created a new store at ${where(store)}; the service must use the same DATABASE_URL to see this app.`;
}
