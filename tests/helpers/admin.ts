/** Test apps with the admin API on (ADMIN_TOKEN set), and a caller that sends the token. */
import { makeTestApp, type CallInit, type TestApp } from "./test-app";

export const ADMIN_TOKEN = "admin-token-for-tests-0123456789abcdefgh";
export const ADMIN = "/api/v1/admin";

export interface AdminTestApp extends TestApp {
  /** Calls `/api/v1/admin{path}` with the admin token (unless `init.bearer` or an Authorization header says otherwise). */
  admin(path: string, init?: CallInit): Promise<Response>;
}

export function makeAdminTestApp(opts: { env?: Record<string, string>; now?: number } = {}): AdminTestApp {
  const t = makeTestApp({ ...opts, env: { ADMIN_TOKEN, ...opts.env } });
  return {
    ...t,
    admin: (path, init = {}) => t.call(`${ADMIN}${path}`, { bearer: init.headers?.authorization === undefined ? ADMIN_TOKEN : undefined, ...init }),
  };
}
