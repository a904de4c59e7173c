import { bearerCredential } from "./credentials";
import { hashSecret, secretMatches } from "./secret-key";

/**
 * A test for "this request carries one of these operator tokens" (METRICS_TOKEN for
 * /healthz's counters), for endpoints that show more to the operator than to anyone. Compared as
 * SHA-256 digests in constant time, like every credential here; unset tokens match nothing.
 */
export function operatorTokenMatcher(tokens: Array<string | undefined>): (authorization: string | null) => boolean {
  const expected = tokens.filter((token): token is string => !!token).map(hashSecret);
  return (authorization) => {
    if (expected.length === 0 || !authorization) return false;
    let credential: string;
    try {
      credential = bearerCredential(authorization);
    } catch {
      return false;
    }
    // Every token is compared, whichever matches: the time does not say which one it was.
    let matched = false;
    for (const hash of expected) if (secretMatches(credential, hash)) matched = true;
    return matched;
  };
}
