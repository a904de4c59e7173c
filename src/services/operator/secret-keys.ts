/**
 * Where apps' secret keys are minted: here, and nowhere else. The secret is shown once, to
 * whoever asked for the key (the operator, or the first start's default app); the store gets
 * only its id and the SHA-256 of its secret part (ARCHITECTURE.md §3 "Secrets at rest").
 */
import { formatSecretKey, generateSecret, hashSecret } from "../../auth/secret-key";
import { LOWER_ALNUM, randomString } from "../../random";
import type { App, AppRepository, AppSettings, NewAppKey } from "../../store/apps";

/** A key as shown to the operator, once, at creation. */
export interface IssuedKey {
  keyId: string;
  secretKey: string;
}

const newKeyId = () => `key${randomString(13, LOWER_ALNUM)}`;

/** A new key's parts: what the store keeps, and the secret that only the caller sees. */
function mintKey(): { stored: NewAppKey; secret: string } {
  const secret = generateSecret();
  return { stored: { id: newKeyId(), secretHash: hashSecret(secret) }, secret };
}

/** A new app and its first key; the key's secret is in the answer only. */
export async function createAppWithKey(
  apps: AppRepository,
  name: string,
  origins: string[],
  now: number,
  settings?: AppSettings,
): Promise<{ app: App; key: IssuedKey }> {
  const { stored, secret } = mintKey();
  const app = await apps.create(name, origins, now, stored, settings);
  return { app, key: { keyId: stored.id, secretKey: formatSecretKey(app.id, secret) } };
}

/** One more key for an app (rotation); earlier keys stay valid until revoked. */
export async function issueKey(apps: AppRepository, appId: string, now: number): Promise<IssuedKey> {
  const { stored, secret } = mintKey();
  await apps.addKey(appId, stored, now);
  return { keyId: stored.id, secretKey: formatSecretKey(appId, secret) };
}
