/**
 * The /auth page's own CSRF token (./auth-page.ts): without it, any site could post the
 * page's form from a victim's browser (Approve included) and have it sent on to the callback,
 * with no page ever shown. The token is a double-submit one (OWASP's CSRF cheat sheet): the
 * GET that shows the form sets it in a cookie and puts the same value in a hidden field, and
 * the POST is served only when the two are equal. Another site can make the browser send the
 * cookie (not with SameSite=Strict, and never read it), but it cannot know the value to put
 * in the form. The cookie is HttpOnly, SameSite=Strict, lives as long as a code, and has no
 * Path: it defaults to the page's own folder, wherever the page is served (demo mode serves
 * it under the service's origin).
 */
import { timingSafeEqual } from "node:crypto";

export const CSRF_COOKIE = "mock_auth_csrf";
export const CSRF_FIELD = "csrf_token";
const LIFETIME_SECONDS = 600;

/** A fresh token (32 random bytes, base64url) and the Set-Cookie header that carries it. */
export function issueCsrfToken(): { token: string; setCookie: string } {
  const token = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url");
  return { token, setCookie: `${CSRF_COOKIE}=${token}; Max-Age=${LIFETIME_SECONDS}; HttpOnly; SameSite=Strict` };
}

/** The Set-Cookie that ends the token once its form was answered: a token serves one form. */
export const CLEAR_CSRF_COOKIE = `${CSRF_COOKIE}=; Max-Age=0; HttpOnly; SameSite=Strict`;

/** Whether the form's token is the one this browser's cookie holds (compared in constant time). */
export function csrfTokenMatches(request: Request, formToken: string | undefined): boolean {
  const cookie = cookieValue(request.headers.get("cookie"), CSRF_COOKIE);
  if (!cookie || !formToken) return false;
  const a = Buffer.from(cookie);
  const b = Buffer.from(formToken);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** One cookie's value from a Cookie header (RFC 6265 §5.4); null when absent or empty. */
function cookieValue(header: string | null, name: string): string | null {
  for (const pair of (header ?? "").split(";")) {
    const eq = pair.indexOf("=");
    if (eq !== -1 && pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim() || null;
  }
  return null;
}
