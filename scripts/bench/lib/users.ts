/**
 * Many connected users for the service arms: each one a session minted with the app's
 * secret key and a budget approved with it, over the public HTTP API as an app would do it
 * (lib/arms.ts connectUser), `concurrency` at a time so that 10,000 take seconds, not
 * minutes (the service's session limit is lifted for the bench, see startService).
 */
import { connectUser } from "./arms";

export const MANY_USERS_PREFIX = "bench-user-";

export async function connectUsers(
  base: string,
  auth: Record<string, string>,
  count: number,
  prefix = MANY_USERS_PREFIX,
  concurrency = 32,
): Promise<{ users: number; seconds: number }> {
  const t0 = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      await connectUser(base, auth, `${prefix}${i}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return { users: count, seconds: (performance.now() - t0) / 1000 };
}
