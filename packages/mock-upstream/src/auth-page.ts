/**
 * GET /auth, the page OpenRouter sends a user to in its PKCE flow
 * (`/auth?callback_url=…&code_challenge=…&code_challenge_method=S256`, plus the mock's
 * `limit`, `usage_limit_type` and `key_label`, as POST /auth/keys/code takes them), and the
 * POST its form makes. The mock has no login: the user names the account the key goes to
 * and may change the credit limit (a small one lets a demo run out of credit), then:
 *
 * - Approve: a code bound to the challenge and the key's settings (./auth-codes.ts), and a
 *   303 to `callback_url` with `code=…` added to its query;
 * - Deny: a 303 to `callback_url` with `error=access_denied` (OAuth's word for a refusal).
 *
 * Whatever query `callback_url` has (the caller's state) is kept as it is. A request that
 * fails the checks (./auth-request.ts, and `callbackOrigins` when the mock was given them:
 * the page then sends browsers back only there, so it is no open redirect for the origin
 * that serves it) gets a 400 page and no redirect: a callback that cannot be trusted is not
 * followed. The form carries a CSRF token of the page's own (./auth-csrf.ts); a POST without
 * the one its browser was given is a 403 page. Plain HTML with no script, its one style
 * block under a per-response nonce.
 */
import type { AuthCodes } from "./auth-codes";
import { CLEAR_CSRF_COOKIE, CSRF_FIELD, csrfTokenMatches, issueCsrfToken } from "./auth-csrf";
import { readAuthRequest, readLimit, type AuthRequest, type Checked } from "./auth-request";
import { DEFAULT_ACCOUNT, userIdFor } from "./keys";

/** The fields a flow starts with, carried through the form as they came. */
const FLOW_FIELDS = ["callback_url", "code_challenge", "code_challenge_method", "usage_limit_type", "key_label", "expires_at"] as const;

const STYLE = `body { font: 16px/1.5 system-ui, sans-serif; max-width: 30rem; margin: 2rem auto; padding: 0 1rem; }
label { display: block; margin: 0.75rem 0; } input[type=text] { display: block; width: 100%; }
button { margin-right: 0.5rem; padding: 0.4rem 1rem; } code { overflow-wrap: anywhere; }`;

/** `callbackOrigins`: the only origins `callback_url` may name; null: any the spec allows. */
export async function handleAuthPage(request: Request, codes: AuthCodes, callbackOrigins: readonly string[] | null = null): Promise<Response> {
  const readFlow = (fields: Record<string, unknown>): Checked<AuthRequest> => {
    const checked = readAuthRequest(fields);
    if ("error" in checked || callbackOrigins === null || callbackOrigins.includes(new URL(checked.ok.callbackUrl).origin)) return checked;
    return { error: `callback_url must be on ${callbackOrigins.join(" or ")}` };
  };
  if (request.method === "GET" || request.method === "HEAD") {
    const query = Object.fromEntries(new URL(request.url).searchParams);
    const checked = readFlow(query);
    if ("error" in checked) return errorPage(checked.error);
    const csrf = issueCsrfToken();
    const response = page(approvalForm(query, checked.ok, csrf.token), checked.ok.callbackUrl);
    response.headers.set("set-cookie", csrf.setCookie);
    return response;
  }
  if (request.method !== "POST") return new Response("Method Not Allowed", { status: 405, headers: { allow: "GET, POST" } });
  if (!(request.headers.get("content-type") ?? "").startsWith("application/x-www-form-urlencoded"))
    return errorPage("the form must be sent as application/x-www-form-urlencoded");
  const form = Object.fromEntries(new URLSearchParams(await request.text()));
  // The limit is the user's to change on the page; the rest comes back as the page was asked.
  const checked = readFlow(form);
  if ("error" in checked) return errorPage(checked.error);
  // Only the browser the page was shown to can answer it, whatever it answers.
  if (!csrfTokenMatches(request, form[CSRF_FIELD])) return errorPage("this form was not the one this page showed you: open the page again", 403);
  const { callbackUrl, pkce, settings } = checked.ok;
  if (form.decision === "deny") return redirect(withQuery(callbackUrl, "error", "access_denied"));
  if (form.decision !== "approve") return errorPage("decision must be approve or deny");
  const account = (form.account ?? "").trim() || DEFAULT_ACCOUNT;
  const { code } = codes.issue({ pkce, settings, userId: userIdFor(account) });
  return redirect(withQuery(callbackUrl, "code", code));
}

/** `url` with `name=value` added to its query, the query it had kept byte for byte. */
export function withQuery(url: string, name: string, value: string): string {
  return `${url}${url.includes("?") ? "&" : "?"}${encodeURIComponent(name)}=${encodeURIComponent(value)}`;
}

function redirect(location: string): Response {
  return new Response(null, {
    status: 303,
    headers: { location, "cache-control": "no-store", "referrer-policy": "no-referrer", "set-cookie": CLEAR_CSRF_COOKIE },
  });
}

function approvalForm(query: Record<string, string>, flow: AuthRequest, csrfToken: string): string {
  const hidden = FLOW_FIELDS.filter((name) => query[name] !== undefined && query[name] !== "")
    .map((name) => `<input type="hidden" name="${name}" value="${escapeHtml(query[name]!)}">`)
    .concat(`<input type="hidden" name="${CSRF_FIELD}" value="${csrfToken}">`)
    .join("\n");
  const limit = readLimit(query.limit);
  const resets = flow.settings.usageLimitType ? `, reset ${flow.settings.usageLimitType}` : "";
  // No action: the form posts back to this page's own URL, wherever the mock is served.
  return `<h1>Authorize an app</h1>
<p>An app asks for an API key on your account. Calls it makes with the key are billed to that account.</p>
<p>You will return to <code>${escapeHtml(new URL(flow.callbackUrl).origin)}</code>.</p>
<form method="post">
${hidden}
<label>Account <input type="text" name="account" value="${DEFAULT_ACCOUNT}" autocomplete="off"></label>
<label>Credit limit of the key, in USD${escapeHtml(resets)} (empty for none)
<input type="text" name="limit" inputmode="decimal" autocomplete="off" value="${typeof limit === "number" ? String(limit) : ""}"></label>
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>`;
}

function errorPage(message: string, status = 400): Response {
  return page(`<h1>This authorization request cannot be served</h1>\n<p>${escapeHtml(message)}.</p>`, null, status);
}

function page(body: string, callbackUrl: string | null, status = 200): Response {
  const nonce = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64");
  // A form's redirect must also be allowed by form-action, so the callback's origin is listed.
  const formAction = callbackUrl === null ? "'self'" : `'self' ${new URL(callbackUrl).origin}`;
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Authorize — mock OpenRouter</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
${body}
</body>
</html>
`;
  return new Response(html, {
    status,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": `default-src 'none'; style-src 'nonce-${nonce}'; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`,
      "x-frame-options": "DENY",
      "cache-control": "no-store",
      "referrer-policy": "no-referrer",
    },
  });
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}
