/**
 * Session JWT expiry against the injected clock. The matrix of tampered and foreign tokens
 * (other algorithms, alg none, edited claims, missing claims, wrong iss/aud/typ, nbf, iat in
 * the future, disabled apps) on every /connections method is tests/security/auth-matrix.test.ts.
 */
import { describe, test } from "bun:test";
import { makeTestApp, mintSession } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";

const CONNECTIONS = "/api/v1/connections";

describe("session token verification", () => {
  test("expiry is enforced by the injected clock: valid until exp, refused from exp on", async () => {
    const t = makeTestApp({ env: { SESSION_TTL_SECONDS: "60" } });
    const a = await t.createClientApp();
    const token = await mintSession(t, a.secretKey, "u", 5);
    t.clock.advance(59_999);
    await expectOk(await t.call(CONNECTIONS, { bearer: token }));
    t.clock.advance(1);
    await expectError(await t.call(CONNECTIONS, { bearer: token }), 401, "auth", /expired/);
    await expectError(await t.call(CONNECTIONS, { bearer: token, json: { monthlyUsd: 1 } }), 401, "auth", /expired/);
  });
});
