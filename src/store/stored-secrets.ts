/**
 * The secrets the store keeps, sealed (src/secrets/secret-box.ts): the generated JWT
 * signing secret (setting `jwt_secret`), every webhook endpoint's signing secret, users'
 * own upstream keys and pending PKCE verifiers (never kept in clear by any version, so only
 * the first two are sealed here at open). Rotation: src/store/secrets-rotation.ts.
 *
 * At every open (the server's start, each CLI command) secureStoredSecrets checks that the
 * key opens the store's key check, and seals in place what an older version stored in
 * clear. Both steps are compare-and-set, so instances starting together (PostgreSQL), or a
 * server and the CLI, may run them at once: each value is sealed once and stays readable.
 *
 * A key that does not open what the store sealed stops the start with a SecretsKeyMismatchError
 * (a configuration error: exit 2), never a silent new secret: a regenerated JWT secret would
 * log every user out, and the webhook secrets cannot be regenerated behind the receivers' back.
 */
import { ConfigError } from "../config";
import type { SettingsRepository } from "./settings";
import type { Store } from ".";
import { SealedSecretError, SecretBox, sealedContext } from "../secrets/secret-box";

export const JWT_SECRET_SETTING = "jwt_secret";
/**
 * A value sealed under the store's key at its first open: a store that holds no other
 * secret yet (JWT_SECRET set, no webhook) still refuses a process with another key, which
 * would otherwise seal new secrets that the other instances cannot open.
 */
export const KEY_CHECK_SETTING = "secrets_key_check";
const KEY_CHECK_TEXT = "metered-proxy secrets key check";

/** The store was sealed under a key this process does not have. The message names the settings to fix, never a key. */
export class SecretsKeyMismatchError extends ConfigError {
  constructor(box: SecretBox, cause: SealedSecretError) {
    super([
      `SECRETS_KEY: the key in use (id ${box.current.id}, from ${box.source}) does not open the secrets kept in this store: ${cause.message}. ` +
        "Start with the key the store was sealed with (SECRETS_KEY, SECRETS_KEY_FILE, or the secrets.key file beside the SQLite database), " +
        "or, to move to a new key, keep that one in SECRETS_KEY_PREVIOUS and run `keys rotate-kek`. " +
        "If that key is lost: `cli secrets reset --confirm` drops what it sealed (README, Secrets at rest).",
    ]);
    this.name = "SecretsKeyMismatchError";
  }
}

/** Checks the key against the store, then seals what an older version kept in clear. */
export async function secureStoredSecrets(store: Store): Promise<void> {
  const box = store.secrets;
  await sealedSetting(store.settings, box, KEY_CHECK_SETTING, () => KEY_CHECK_TEXT);
  if ((await store.settings.get(JWT_SECRET_SETTING)) !== null) await sealedSetting(store.settings, box, JWT_SECRET_SETTING);
  for (const { endpointId, stored } of await store.webhooks.storedSecrets()) {
    if (SecretBox.isSealed(stored)) continue;
    await store.webhooks.replaceStoredSecret(endpointId, stored, box.seal(stored, sealedContext.webhookEndpoint(endpointId)));
  }
}

/** The generated JWT signing secret: created (sealed) on the first start, shared by every process on the store. */
export function storedJwtSecret(store: Store, generate: () => string): Promise<string> {
  return sealedSetting(store.settings, store.secrets, JWT_SECRET_SETTING, generate);
}

/**
 * The plaintext of the setting `key`, sealed in the store: created from `make` when absent
 * (without `make`, an absent key is an error), sealed in place when an older version left
 * it in clear.
 */
async function sealedSetting(settings: SettingsRepository, box: SecretBox, key: string, make?: () => string): Promise<string> {
  const context = sealedContext.setting(key);
  const stored = make ? await settings.getOrCreate(key, () => box.seal(make(), context)) : await settings.get(key);
  if (stored === null) throw new Error(`no setting ${key}`);
  if (!SecretBox.isSealed(stored)) {
    // Compare and set: a concurrent opener sealing the same plaintext first is as good.
    await settings.replace(key, stored, box.seal(stored, context));
    return stored;
  }
  try {
    return box.open(stored, context);
  } catch (err) {
    if (err instanceof SealedSecretError) throw new SecretsKeyMismatchError(box, err);
    throw err;
  }
}

/** What `secrets reset` dropped. */
export interface ForgottenSecrets {
  jwtSecret: boolean;
  /** Deleted endpoints, with what re-creating them needs. */
  webhookEndpoints: Array<{ endpointId: string; appId: string; url: string; events: string[] | "all" }>;
  /** Connections whose user's own upstream key was deleted: marked funding invalid until the user links a key again. */
  userKeys: Array<{ appId: string; appUserId: string }>;
  /** Pending funding flows deleted (their users start again). */
  fundingFlows: number;
}

/**
 * After the key was lost: drops what the key in hand cannot open, so the store is usable
 * again. The JWT secret is deleted (the next start generates a new one: session tokens in
 * flight are refused and apps mint new ones); webhook endpoints whose secret is unreadable
 * are deleted with their deliveries (the receivers need a new secret: re-create them);
 * users' own upstream keys are deleted, their connections marked funding invalid (each
 * user links a key again); pending funding flows are deleted; the key check is sealed
 * again under the key in hand. Values that open are kept.
 */
export async function forgetUnreadableSecrets(store: Store, now: number): Promise<ForgottenSecrets> {
  const box = store.secrets;
  const opens = (stored: string, context: string) => {
    if (!SecretBox.isSealed(stored)) return true;
    try {
      box.open(stored, context);
      return true;
    } catch {
      return false;
    }
  };
  const check = await store.settings.get(KEY_CHECK_SETTING);
  if (check !== null && !opens(check, sealedContext.setting(KEY_CHECK_SETTING))) await store.settings.delete(KEY_CHECK_SETTING, check);
  const jwt = await store.settings.get(JWT_SECRET_SETTING);
  const jwtSecret = jwt !== null && !opens(jwt, sealedContext.setting(JWT_SECRET_SETTING)) && (await store.settings.delete(JWT_SECRET_SETTING, jwt));
  const webhookEndpoints: ForgottenSecrets["webhookEndpoints"] = [];
  for (const { endpointId, appId, stored } of await store.webhooks.storedSecrets()) {
    if (opens(stored, sealedContext.webhookEndpoint(endpointId))) continue;
    const endpoint = (await store.webhooks.listEndpoints(appId)).find((e) => e.id === endpointId);
    if (!endpoint || !(await store.webhooks.deleteEndpoint(appId, endpointId))) continue;
    webhookEndpoints.push({ endpointId, appId, url: endpoint.url, events: endpoint.eventTypes ?? "all" });
  }
  const userKeys: ForgottenSecrets["userKeys"] = [];
  for (const { appId, appUserId, stored } of await store.connections.storedUserKeys()) {
    if (opens(stored, sealedContext.connectionUserKey(appId, appUserId))) continue;
    if (await store.connections.forgetUserKey(appId, appUserId, stored, now)) userKeys.push({ appId, appUserId });
  }
  let fundingFlows = 0;
  for (const { stateHash, stored } of await store.fundingFlows.storedVerifiers()) {
    if (!opens(stored, sealedContext.fundingFlowVerifier(stateHash)) && (await store.fundingFlows.forget(stateHash, stored))) fundingFlows++;
  }
  await secureStoredSecrets(store);
  return { jwtSecret, webhookEndpoints, userKeys, fundingFlows };
}
