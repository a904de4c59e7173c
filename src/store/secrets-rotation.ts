/**
 * Key rotation of the secrets the store keeps sealed (`keys rotate-kek`, README "Secrets at
 * rest"): every value sealed under a key other than the current one is opened with the ring
 * (SECRETS_KEY_PREVIOUS holds the old keys) and sealed again under the current key, so the
 * old key can then be dropped. Each replacement is compare-and-set, so a server changing a
 * value meanwhile wins (its value is sealed under the current key already); running it again
 * re-seals nothing. SQLite overwrites the replaced bytes in its file (scrubbingWrite).
 */
import { ConfigError } from "../config";
import { SealedSecretError, SecretBox, sealedContext } from "../secrets/secret-box";
import type { Store } from ".";
import { JWT_SECRET_SETTING, KEY_CHECK_SETTING } from "./stored-secrets";

/** How many values were re-sealed, by kind, and the id of the key they are sealed under now. */
export interface ResealedSecrets {
  keyId: string;
  /** The key check and the generated JWT secret. */
  settings: number;
  webhookSecrets: number;
  userKeys: number;
  fundingFlows: number;
}

/** Values no key of the ring opens: named by what they are and the key id that sealed them, never by content. */
export class UnopenedSecretsError extends ConfigError {
  constructor(failures: SealedSecretError[]) {
    super([
      `SECRETS_KEY_PREVIOUS: ${failures.length} sealed value(s) did not open, and stay sealed as they were: ` +
        failures.map((f) => f.message).join("; ") +
        ". Add the key that sealed them to SECRETS_KEY_PREVIOUS and run `keys rotate-kek` again; the others are re-sealed.",
    ]);
    this.name = "UnopenedSecretsError";
  }
}

export async function resealStoredSecrets(store: Store): Promise<ResealedSecrets> {
  const box = store.secrets;
  const failures: SealedSecretError[] = [];
  /** Re-seals `stored` if an old key sealed it; `replace` is the compare-and-set write. True when it replaced it. */
  const reseal = async (stored: string, context: string, replace: (resealed: string) => Promise<boolean>): Promise<boolean> => {
    // A value still in clear is sealed at every open (secureStoredSecrets), not here.
    if (!SecretBox.isSealed(stored) || !box.needsResealing(stored)) return false;
    let plaintext: string;
    try {
      plaintext = box.open(stored, context);
    } catch (err) {
      if (!(err instanceof SealedSecretError)) throw err;
      failures.push(err);
      return false;
    }
    return replace(box.seal(plaintext, context));
  };
  const counts: ResealedSecrets = { keyId: box.current.id, settings: 0, webhookSecrets: 0, userKeys: 0, fundingFlows: 0 };

  for (const key of [KEY_CHECK_SETTING, JWT_SECRET_SETTING]) {
    const stored = await store.settings.get(key);
    if (stored !== null && (await reseal(stored, sealedContext.setting(key), (value) => store.settings.replace(key, stored, value)))) counts.settings++;
  }
  for (const { endpointId, stored } of await store.webhooks.storedSecrets()) {
    const context = sealedContext.webhookEndpoint(endpointId);
    if (await reseal(stored, context, (value) => store.webhooks.replaceStoredSecret(endpointId, stored, value))) counts.webhookSecrets++;
  }
  for (const { appId, appUserId, stored } of await store.connections.storedUserKeys()) {
    const context = sealedContext.connectionUserKey(appId, appUserId);
    if (await reseal(stored, context, (value) => store.connections.replaceStoredUserKey(appId, appUserId, stored, value))) counts.userKeys++;
  }
  for (const { stateHash, stored } of await store.fundingFlows.storedVerifiers()) {
    const context = sealedContext.fundingFlowVerifier(stateHash);
    if (await reseal(stored, context, (value) => store.fundingFlows.replaceStoredVerifier(stateHash, stored, value))) counts.fundingFlows++;
  }
  if (failures.length > 0) throw new UnopenedSecretsError(failures);
  return counts;
}
