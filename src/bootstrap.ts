import type { Deps } from "./deps";

/**
 * First start with an empty store: create a default app and print its key once, so a
 * newcomer can call the API straight away. The key is printed to the terminal, never logged
 * through the logger (log shippers must not receive it).
 */
export async function ensureDefaultApp(deps: Deps, print: (line: string) => void): Promise<void> {
  if ((await deps.store.apps.count()) > 0) return;
  // Instances starting together on one empty database: only the first creates the app.
  if (!(await deps.store.settings.claim("default_app_created_at", String(deps.clock.now())))) return;
  const { app, key } = await deps.store.apps.create("default", [], deps.clock.now());
  print("");
  print("  Created a default app on this empty store. Its secret key is shown only this once:");
  print("");
  print(`    appId:     ${app.id}`);
  print(`    secretKey: ${key.secretKey}`);
  print("");
  print("  Create more with: npm run cli -- app create --name NAME --origin https://your.site");
  print("");
}
