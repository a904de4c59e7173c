/**
 * The example's settings (README "Quick start with the example app"), read and checked first:
 * `npm run example` runs this file alone before it builds the client library, so a missing
 * APP_ID or SECRET_KEY is said at once, not after the build; server.ts imports it first too.
 */

// What `app create` printed; said plainly when missing, since it is the first step a newcomer can skip.
const missing = ["APP_ID", "SECRET_KEY"].filter((name) => !process.env[name]);
if (missing.length > 0) {
  console.error(
    `${missing.join(" and ")} must be set: the appId and secretKey that \`npm run cli -- app create\` printed (README "Quick start with the example app")`,
  );
  process.exit(2);
}

export const PROXY_URL = process.env.PROXY_URL || "http://localhost:8787";
export const APP_ID = process.env.APP_ID!;
export const SECRET_KEY = process.env.SECRET_KEY!;
export const HOST = process.env.HOST ?? "127.0.0.1";
export const PORT = Number(process.env.PORT ?? 3000);
