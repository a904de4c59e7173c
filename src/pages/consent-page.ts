import { formatUsd } from "../money";
import type { ConsentOffer } from "../services/grant-consent";
import { escapeHtml, POPUP_CLOSING_SCRIPT, popupErrorPage, scriptJson } from "./html";

/**
 * The consent popup: plain HTML, no framework, no external assets. Its one script and one
 * style block carry a per-response nonce so the Content-Security-Policy can forbid
 * everything else, and frame-ancestors 'none' keeps other sites from framing it
 * (clickjacking). The grant token travels only by postMessage to the registered origin.
 */
export function consentHeaders(nonce: string): Record<string, string> {
  return {
    "content-type": "text/html; charset=utf-8",
    "content-security-policy": [
      "default-src 'none'",
      `script-src 'nonce-${nonce}'`,
      `style-src 'nonce-${nonce}'`,
      "connect-src 'self'",
      "img-src 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join("; "),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
  };
}

const STYLE = `
  body { font: 16px/1.5 system-ui, sans-serif; margin: 0; padding: 24px; color: #1a1a1a; background: #fff; }
  main { max-width: 420px; margin: 0 auto; }
  h1 { font-size: 1.35rem; margin: 0 0 12px; }
  /* The heading takes focus on load only to set where reading (and Tab) starts; it is not a control. */
  h1:focus { outline: none; }
  #who-pays { padding: 12px; border-left: 4px solid #0b57d0; background: #eef3fd; }
  dl { display: grid; grid-template-columns: max-content 1fr; gap: 6px 16px; margin: 16px 0 24px; }
  dt { font-weight: 600; }
  dd { margin: 0; overflow-wrap: anywhere; }
  .actions { display: flex; gap: 12px; }
  button { font: inherit; padding: 10px 20px; border-radius: 6px; border: 2px solid #1a1a1a; cursor: pointer; }
  button:focus-visible { outline: 3px solid #0b57d0; outline-offset: 2px; }
  #approve { background: #0b57d0; border-color: #0b57d0; color: #fff; }
  #deny { background: #fff; color: #1a1a1a; }
  [role="alert"] { color: #a50e0e; min-height: 1.5em; }
`;

export function renderConsentPage(offer: ConsentOffer, nonce: string): string {
  const app = escapeHtml(offer.app.name);
  const usd = formatUsd(offer.usd);
  const uses = offer.maxUses === null ? "Unlimited, within the amount" : `${offer.maxUses} ${offer.maxUses === 1 ? "request" : "requests"}`;
  const usesClause = offer.maxUses === null ? "" : ` over at most ${uses}`;
  const expiresIso = new Date(offer.expiresAt).toISOString();
  const expires = escapeHtml(new Date(offer.expiresAt).toUTCString());
  const config = { consentToken: offer.consentToken, origin: offer.origin, state: offer.state };
  // Who pays, said plainly (ARCHITECTURE.md §1): the calls go upstream on the service's key,
  // billed to whoever runs it for the app; the user approves an allowance, not a payment.
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Allow ${app} to spend up to ${escapeHtml(usd)}</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<main>
  <h1 id="title" tabindex="-1">Allow <span id="app-name">${app}</span> to use AI models on your behalf?</h1>
  <p id="who-pays"><strong>${app} pays</strong> for the AI model requests this grant allows: up to ${escapeHtml(usd)}${escapeHtml(usesClause)},
    until <time datetime="${expiresIso}">${expires}</time>. <strong>You are not charged.</strong>
    Approving only lets ${app} spend up to this amount on AI requests made for you.</p>
  <dl aria-labelledby="title">
    <dt>App</dt><dd>${app}</dd>
    <dt>Requested by</dt><dd id="origin">${escapeHtml(offer.origin)}</dd>
    <dt>Paid by</dt><dd id="payer">${app}, not you</dd>
    <dt>Amount</dt><dd id="amount">Up to ${escapeHtml(usd)}</dd>
    <dt>Uses</dt><dd id="uses">${escapeHtml(uses)}</dd>
    <dt>Expires</dt><dd id="expires"><time datetime="${expiresIso}">${expires}</time></dd>
  </dl>
  <p>You can close this window to decline.</p>
  <!-- Deny comes first and nothing is focused but the heading: Enter on load approves nothing. -->
  <div class="actions">
    <button type="button" id="deny">Deny</button>
    <button type="button" id="approve" aria-describedby="who-pays">Approve</button>
  </div>
  <p id="status" role="alert" aria-live="assertive"></p>
</main>
<script nonce="${nonce}">
(() => {
  const config = ${scriptJson(config)};
  const approve = document.getElementById("approve");
  const deny = document.getElementById("deny");
  const status = document.getElementById("status");
  // Focus starts on the heading, not on Approve: an Enter pressed out of habit (or meant
  // for the page that opened us) must not spend anyone's money.
  document.getElementById("title").focus();
  // The server wrote the expiry in UTC; show it in the user's own time zone.
  for (const time of document.querySelectorAll("time")) time.textContent = new Date(time.dateTime).toLocaleString();
  const send = (message) => {
    if (!window.opener) { status.textContent = "Open this page from the app that asked for it."; return false; }
    // Only the registered origin that opened us may receive the token.
    window.opener.postMessage(message, config.origin);
    return true;
  };
${POPUP_CLOSING_SCRIPT}
  approve.addEventListener("click", async () => {
    // Without an opener the token would have nowhere to go: create no grant at all.
    if (!window.opener) { status.textContent = "Open this page from the app that asked for it."; return; }
    approve.disabled = deny.disabled = true;
    status.textContent = "Creating the grant…";
    try {
      const response = await fetch("consent", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ consentToken: config.consentToken }),
        credentials: "omit",
      });
      const body = await response.json();
      if (!response.ok) throw new Error(body && body.error ? body.error.message : "The grant could not be created.");
      if (send({ type: "grant", grantToken: body.grantToken, usd: body.usd, maxUses: body.maxUses, expiresAt: body.expiresAt, state: body.state })) {
        status.textContent = "Approved. You can close this window.";
        closeSoon();
      }
    } catch (error) {
      status.textContent = error.message;
      deny.disabled = false;
      approve.disabled = false;
    }
  });
  deny.addEventListener("click", () => {
    if (!send({ type: "grant_denied", state: config.state })) return;
    // Answered: nothing more may be approved while the window waits to close.
    approve.disabled = deny.disabled = true;
    closeSoon();
  });
})();
</script>
</body>
</html>`;
}

export function renderConsentError(message: string, nonce: string): string {
  return popupErrorPage({
    title: "This grant request cannot be shown",
    message,
    outcome: "No budget was granted. Close this window and try again from the app.",
    style: STYLE,
    nonce,
  });
}
