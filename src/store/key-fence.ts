/**
 * The fence on new sealed values (ARCHITECTURE.md §3 "Secrets at rest"). `keys rotate-kek`
 * re-seals the store's key check first, then everything else. A server still running with
 * only the old key would go on sealing new secrets (a webhook's, a user's upstream key, a
 * link's PKCE verifier) under it, and once the old key is dropped those could never be
 * opened again. So every write of a new sealed value reads the key check in its own
 * transaction (SQLite: IMMEDIATE; PostgreSQL: FOR SHARE, which the rotation's update of the
 * check waits for) and seals only while the check is sealed under a key of this process's
 * ring; otherwise it refuses with 503 `unavailable`, and the process says why in its log,
 * once. A value written before the check moved is one the rotation's pass then re-seals.
 *
 * Reloading the ring instead was not chosen: SECRETS_KEY comes from the environment, which a
 * running process cannot re-read, and a key file replaced before `keys rotate-kek` ran would
 * have the server seal under a key the other instances do not hold yet.
 */
import { ApiError } from "../errors";
import { SecretBox } from "../secrets/secret-box";

/** Seals `plaintext` for `context`, unless `storedCheck` (the key check as this transaction reads it) was sealed under a key outside `box`'s ring. */
export function sealFenced(box: SecretBox, storedCheck: string | null, plaintext: string, context: string): string {
  const storeKeyId = storedCheck === null ? null : SecretBox.keyIdOf(storedCheck);
  if (storeKeyId !== null && !box.holds(storeKeyId)) {
    box.warnOnce(
      `SECRETS_KEY: this store's secrets were re-sealed under secrets key id ${storeKeyId} (keys rotate-kek), which this process does not hold ` +
        `(its key id ${box.current.id}, from ${box.source}). It refuses to store new secrets (webhook endpoints, users' upstream keys, account links: 503) ` +
        "and cannot open the re-sealed ones: restart it with the new SECRETS_KEY (README, Rotating the secrets key).",
    );
    throw new ApiError("unavailable", "the service cannot store new secrets until it is restarted with its new secrets key; try again later");
  }
  return box.seal(plaintext, context);
}
