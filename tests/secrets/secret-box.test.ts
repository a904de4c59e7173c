/**
 * The sealed form of src/secrets/secret-box.ts: AES-256-GCM with a random 96-bit IV per
 * value, the tag kept, the value's context as associated data, and the sealing key's id.
 */
import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { SealedSecretError, SecretBox, secretsKey } from "../../src/secrets/secret-box";

const key = () => secretsKey(randomBytes(32));
const JWT = "settings/jwt_secret";

/** What open() throws, for matching its reason. */
function openError(box: SecretBox, sealed: string, context: string): SealedSecretError {
  try {
    box.open(sealed, context);
  } catch (err) {
    if (err instanceof SealedSecretError) return err;
    throw err;
  }
  throw new Error("it opened");
}

describe("SecretBox", () => {
  test("seals to enc:v1:<keyId>:<iv>:<ciphertext+tag> and opens back; the plaintext is nowhere in it", () => {
    const box = new SecretBox(key());
    const sealed = box.seal("the secret", JWT);
    const [, version, keyId, iv, body] = sealed.split(":");
    expect(sealed.startsWith("enc:v1:")).toBe(true);
    expect(version).toBe("v1");
    expect(keyId).toBe(box.current.id);
    expect(Buffer.from(iv!, "base64url")).toHaveLength(12);
    expect(Buffer.from(body!, "base64url")).toHaveLength("the secret".length + 16);
    expect(sealed).not.toContain("the secret");
    expect(box.open(sealed, JWT)).toBe("the secret");
    expect(SecretBox.isSealed(sealed)).toBe(true);
    expect(SecretBox.isSealed("whsec_abc")).toBe(false);
  });

  test("every seal draws a new IV: the same plaintext never seals to the same text", () => {
    const box = new SecretBox(key());
    const ivs = new Set(Array.from({ length: 100 }, () => box.seal("same", JWT).split(":")[3]));
    expect(ivs.size).toBe(100);
  });

  test("a value opens only in its own context (the associated data): moved to another row, it does not", () => {
    const box = new SecretBox(key());
    const sealed = box.seal("whsec_one", "webhook_endpoint/wheA");
    expect(openError(box, sealed, "webhook_endpoint/wheB").reason).toBe("tampered");
    expect(openError(box, sealed, JWT).reason).toBe("tampered");
    expect(box.open(sealed, "webhook_endpoint/wheA")).toBe("whsec_one");
  });

  test("a changed byte of the ciphertext, the tag or the IV is refused, not decrypted to junk", () => {
    const box = new SecretBox(key());
    const sealed = box.seal("the secret", JWT);
    const parts = sealed.split(":");
    for (const index of [3, 4]) {
      const bytes = Buffer.from(parts[index]!, "base64url");
      for (const at of [0, bytes.length - 1]) {
        const changed = Buffer.from(bytes);
        changed[at]! ^= 1;
        const tampered = [...parts.slice(0, index), changed.toString("base64url"), ...parts.slice(index + 1)].join(":");
        expect(openError(box, tampered, JWT).reason).toBe("tampered");
      }
    }
    expect(openError(box, "enc:v1:nope", JWT).reason).toBe("malformed");
    expect(openError(box, "whsec_plain", JWT).reason).toBe("malformed");
  });

  test("another key does not open it, and says which key sealed it; a ring with the old key as previous still opens it", () => {
    const oldKey = key();
    const sealed = new SecretBox(oldKey).seal("the secret", JWT);
    const other = new SecretBox(key());
    const refused = openError(other, sealed, JWT);
    expect(refused).toMatchObject({ reason: "unknown_key", sealedKeyId: oldKey.id });
    expect(refused.message).not.toContain("the secret");
    // Rotation: a new current key, the old one kept to open what it sealed; new seals use the new one.
    const rotated = new SecretBox(key(), [oldKey]);
    expect(rotated.open(sealed, JWT)).toBe("the secret");
    expect(rotated.needsResealing(sealed)).toBe(true);
    expect(rotated.needsResealing(rotated.seal("x", JWT))).toBe(false);
  });

  test("a key id names the key: the same bytes, the same id; other bytes, another id", () => {
    const bytes = randomBytes(32);
    expect(secretsKey(bytes).id).toBe(secretsKey(Buffer.from(bytes)).id);
    expect(secretsKey(bytes).id).not.toBe(key().id);
    expect(() => secretsKey(randomBytes(16))).toThrow();
  });
});
