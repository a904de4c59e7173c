/**
 * Secrets the store must keep readable (the generated JWT signing secret, webhook signing
 * secrets, users' own upstream keys, pending PKCE code verifiers) are sealed before they are written: AES-256-GCM (NIST SP 800-38D) under a key
 * kept outside the database (SECRETS_KEY, or a key file), so a copy of the database alone
 * reveals none of them (ARCHITECTURE.md §3 "Secrets at rest").
 *
 * Stored form: `enc:v1:<keyId>:<iv>:<ciphertext+tag>`, base64url parts.
 * - A random 96-bit IV per value: the size SP 800-38D §8.2 recommends; with random IVs a
 *   key stays well under its limit of 2^32 messages, far beyond what this store seals.
 * - The 128-bit tag is kept, so a changed byte fails to open instead of decrypting to junk.
 * - The associated data is the value's context (`settings/jwt_secret`,
 *   `webhook_endpoint/<id>`) with the format version: a ciphertext copied into another row
 *   does not open there.
 * - The key id names the key that sealed it, so a ring of {current, previous…} keys can open
 *   old values while new ones are sealed under the current key (key rotation re-seals).
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

const PREFIX = "enc:v1:";
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_BYTES = 32;

/** One 256-bit key and its id: derived from the key (a hash), so every process holding the key agrees on it. */
export interface SecretsKey {
  readonly id: string;
  readonly bytes: Buffer;
}

export function secretsKey(bytes: Uint8Array): SecretsKey {
  if (bytes.length !== KEY_BYTES) throw new Error(`a secrets key is ${KEY_BYTES} bytes, not ${bytes.length}`);
  const buffer = Buffer.from(bytes);
  // 64 bits of a domain-separated hash: names the key, reveals nothing usable about it.
  const id = createHash("sha256").update("metered-proxy secrets key id\0").update(buffer).digest().subarray(0, 8).toString("base64url");
  return { id, bytes: buffer };
}

/** A sealed value that does not open: another key sealed it, or it was changed or moved. No secret in the message. */
export class SealedSecretError extends Error {
  constructor(
    readonly context: string,
    readonly reason: "unknown_key" | "tampered" | "malformed",
    readonly sealedKeyId: string | null,
  ) {
    super(
      reason === "unknown_key"
        ? `${context} was sealed with secrets key id ${sealedKeyId}, which this process does not have`
        : reason === "tampered"
          ? `${context} does not open with secrets key id ${sealedKeyId}: it was changed, or belongs to another row`
          : `${context} is not a sealed value`,
    );
    this.name = "SealedSecretError";
  }
}

/**
 * Seals and opens secrets under a key ring: the current key seals, every key in the ring
 * opens what it sealed. `source` says where the current key came from, for messages.
 */
export class SecretBox {
  private readonly keys: ReadonlyMap<string, SecretsKey>;
  private warned = false;

  constructor(
    readonly current: SecretsKey,
    previous: readonly SecretsKey[] = [],
    readonly source = "SECRETS_KEY",
    /** Where warnOnce goes: the server's log, the CLI's stderr. */
    private readonly warn: (message: string) => void = () => {},
  ) {
    this.keys = new Map([...previous, current].map((k) => [k.id, k]));
  }

  /** True when `keyId` names a key of this ring (the current one or a previous one). */
  holds(keyId: string): boolean {
    return this.keys.has(keyId);
  }

  /** Warns once for this box, however often it is called: a refusal that repeats at every write is logged once. */
  warnOnce(message: string): void {
    if (this.warned) return;
    this.warned = true;
    this.warn(message);
  }

  /** A box with a fresh random key: what only this process will ever read (`sqlite::memory:`, tests). */
  static random(source = "a random key for this process"): SecretBox {
    return new SecretBox(secretsKey(randomBytes(KEY_BYTES)), [], source);
  }

  /** True for a value in the sealed form (of any key); false for a value an older version stored in clear. */
  static isSealed(value: string): boolean {
    return value.startsWith(PREFIX);
  }

  /** The id of the key that sealed `value`, or null when it is not sealed. */
  static keyIdOf(value: string): string | null {
    return SecretBox.isSealed(value) ? (value.slice(PREFIX.length).split(":")[0] ?? null) : null;
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.current.bytes, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(associatedData(context));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
    return `${PREFIX}${this.current.id}:${iv.toString("base64url")}:${body.toString("base64url")}`;
  }

  /** The plaintext of `sealed`, stored for `context`; throws SealedSecretError when it does not open. */
  open(sealed: string, context: string): string {
    const parts = SecretBox.isSealed(sealed) ? sealed.slice(PREFIX.length).split(":") : [];
    const [keyId, ivText, bodyText] = parts;
    if (parts.length !== 3 || !keyId || !ivText || !bodyText) throw new SealedSecretError(context, "malformed", null);
    const key = this.keys.get(keyId);
    if (!key) throw new SealedSecretError(context, "unknown_key", keyId);
    const iv = Buffer.from(ivText, "base64url");
    const body = Buffer.from(bodyText, "base64url");
    if (iv.length !== IV_BYTES || body.length < TAG_BYTES) throw new SealedSecretError(context, "malformed", keyId);
    try {
      const decipher = createDecipheriv("aes-256-gcm", key.bytes, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(associatedData(context));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString("utf8");
    } catch {
      throw new SealedSecretError(context, "tampered", keyId);
    }
  }

  /** True when `sealed` was sealed under a key other than the current one: a rotation re-seals it. */
  needsResealing(sealed: string): boolean {
    return SecretBox.keyIdOf(sealed) !== this.current.id;
  }
}

let processBox: SecretBox | undefined;

/**
 * One random key for this whole process: the box of a store opened without one (tests and
 * benchmarks that open stores directly; the service and the CLI always pass theirs), shared
 * so that several stores this process opens on one database read each other's values.
 */
export function processSecretBox(): SecretBox {
  return (processBox ??= SecretBox.random());
}

/** Binds a ciphertext to the format and to what it is: opening it under another context fails. */
const associatedData = (context: string) => Buffer.from(`metered-proxy ${PREFIX}${context}`, "utf8");

/** The contexts of the values sealed in the store, one place so every engine names them alike. */
export const sealedContext = {
  setting: (key: string) => `settings/${key}`,
  webhookEndpoint: (endpointId: string) => `webhook_endpoint/${endpointId}`,
  /** App ids contain no `/`, so the user id after it cannot shift the boundary. */
  connectionUserKey: (appId: string, appUserId: string) => `connection_user_key/${appId}/${appUserId}`,
  /** A pending funding flow's PKCE code verifier, by the hash of its state (base64url). */
  fundingFlowVerifier: (stateHash: string) => `funding_flow/${stateHash}`,
};
