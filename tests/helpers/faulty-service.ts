/**
 * A service process whose store fails on purpose, bundled and run the way `npm start` runs
 * the service (tests/security/route-faults.test.ts). Everything is the real service but
 * the store: every repository method except the two app lookups that authentication needs
 * (`find`, `activeKeysOf`) fails, alternately by throwing at once and by returning a rejected promise, so each
 * route's own work fails after its credentials pass. It creates one app first and prints
 * one JSON line with its secret key and a session token, then "listening".
 */
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { connectDependencies, openDeps } from "../../src/deps";
import { openStore, type Store } from "../../src/store";
import { keepServingOnStrayErrors } from "../../src/stray-errors";
import { resolveSecretBox } from "../../src/secrets/secrets-key";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const config = loadConfig(process.env);
const real = await openStore(config.database, { secrets: resolveSecretBox(config, () => {}) });
// Its users may pay with their own account, so the funding routes reach the failing store.
const { app: created, key } = await createAppWithKey(real.apps, "faulty", ["http://localhost:3000"], Date.now(), { fundingSources: ["app", "user"] });

let faults = 0;
/** The repository with every method but `spared` failing, alternately thrown and rejected. */
function failing<T extends object>(repository: T, name: string, spared: string[] = []): T {
  return new Proxy(repository, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      if (spared.includes(String(property))) return value.bind(target);
      return () => {
        const error = new Error(`injected fault: ${name}.${String(property)}`);
        if (faults++ % 2 === 0) throw error;
        return Promise.reject(error);
      };
    },
  });
}

const store: Store = {
  engine: real.engine,
  apps: failing(real.apps, "apps", ["find", "activeKeysOf"]),
  connections: failing(real.connections, "connections"),
  settings: real.settings,
  secrets: real.secrets,
  usageTotals: failing(real.usageTotals, "usageTotals"),
  usageLedger: failing(real.usageLedger, "usageLedger"),
  grants: failing(real.grants, "grants"),
  idempotencyKeys: failing(real.idempotencyKeys, "idempotencyKeys"),
  webhooks: failing(real.webhooks, "webhooks"),
  callJournal: failing(real.callJournal, "callJournal"),
  instances: real.instances,
  fundingFlows: failing(real.fundingFlows, "fundingFlows"),
  ping: () => real.ping(),
  close: () => real.close(),
};

const deps = await openDeps(config, { store });
keepServingOnStrayErrors(deps.logger);
await connectDependencies(deps);
await deps.catalogue.refresh();
const { token } = await deps.sessionTokens.mint(created.id, key.keyId, "user-1", null);
console.log(JSON.stringify({ appId: created.id, secretKey: key.secretKey, sessionToken: token }));
createApp(deps).listen({ port: config.port, hostname: config.host });
console.log("listening");
