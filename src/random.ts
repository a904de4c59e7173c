const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Uniform random string over `alphabet` from the CSPRNG (rejection sampling, no modulo bias). */
export function randomString(length: number, alphabet: string = BASE62): string {
  const limit = 256 - (256 % alphabet.length);
  let out = "";
  while (out.length < length) {
    const bytes = crypto.getRandomValues(new Uint8Array(length * 2));
    for (const b of bytes) {
      if (b < limit) out += alphabet[b % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** Lower-case letters and digits: ids that are safe in URLs, keys and file names. */
export const LOWER_ALNUM = "0123456789abcdefghijklmnopqrstuvwxyz";
