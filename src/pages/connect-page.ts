import { escapeHtml, POPUP_CLOSING_SCRIPT, popupErrorPage, scriptJson } from "./html";
import { CONNECT_FUNDING_SCRIPT, fundingChoice } from "./funding-channel";
import { formatUsd, ONE_NANO_USD } from "../money";
import type { App } from "../store/apps";
import type { FundingSource } from "../store/connections";

/** What the connect page is opened with, checked by the route before it is shown. */
export interface ConnectOffer {
  app: App;
  /** The opener's origin, one the app registered: the only one the page talks to. */
  origin: string;
  /** The monthly cap the app asks for; null: the user picks (the session token may still name one). */
  requestedUsd: number | null;
  /** The service's largest monthly cap (MAX_MONTHLY_USD). */
  maxUsd: number;
  /** The source the app preselects (`connect({ funding })`), one the app allows; null: the first it allows. */
  funding: FundingSource | null;
}

const STYLE = `
  body { font: 16px/1.5 system-ui, sans-serif; margin: 0; padding: 24px; color: #1a1a1a; background: #fff; }
  main { max-width: 440px; margin: 0 auto; }
  h1 { font-size: 1.35rem; margin: 0 0 12px; }
  /* The heading takes focus on load only to set where reading (and Tab) starts; it is not a control. */
  h1:focus { outline: none; }
  dl { display: grid; grid-template-columns: max-content 1fr; gap: 6px 16px; margin: 16px 0; }
  dt { font-weight: 600; }
  dd { margin: 0; overflow-wrap: anywhere; }
  label { display: block; font-weight: 600; margin: 16px 0 6px; }
  input { font: inherit; padding: 8px; width: 8em; }
  input:focus-visible { outline: 3px solid #0b57d0; outline-offset: 2px; }
  .actions { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 16px; }
  button { font: inherit; padding: 10px 20px; border-radius: 6px; border: 2px solid #1a1a1a; background: #fff; cursor: pointer; }
  button:focus-visible { outline: 3px solid #0b57d0; outline-offset: 2px; }
  button:disabled { opacity: 0.5; cursor: default; }
  #approve { background: #0b57d0; border-color: #0b57d0; color: #fff; }
  #revoke { border-color: #a50e0e; color: #a50e0e; }
  fieldset { border: 0; padding: 0; margin: 16px 0 0; }
  legend { font-weight: 600; padding: 0; }
  fieldset label { font-weight: 400; margin: 6px 0; }
  fieldset input { width: auto; margin-right: 8px; }
  [role="alert"] { min-height: 1.5em; }
  /* Red only for what went wrong: "Waiting for…" and "Approved" are not errors. */
  #status { color: #444; }
  #status.error, [role="alert"]:not(#status) { color: #a50e0e; }
`;

/**
 * The hosted connect page (README "Client library"): the user sees which app asks, for how
 * much a month, and what they used this month, then approves, lowers or revokes.
 *
 * It holds no credential of its own. The page that opened it (a registered origin of the
 * app) hands it the user's 10-minute session token by postMessage, after the page says it
 * is ready; messages from any other window or origin are ignored. Every action is a call to
 * /connections with that token as a bearer credential (no cookies, so no cross-site request
 * can forge one), and the outcome goes back to the opener only, at its origin. Like the
 * consent page it is served under a nonce CSP with frame-ancestors 'none' (consentHeaders),
 * and nothing is focused but the heading, so an Enter meant for the app approves nothing.
 */
export function renderConnectPage(offer: ConnectOffer, nonce: string): string {
  const app = escapeHtml(offer.app.name);
  const requested = offer.requestedUsd === null ? "the amount you choose" : `up to ${formatUsd(offer.requestedUsd)} a month`;
  const sources = offer.app.fundingSources;
  const funding = offer.funding ?? sources[0] ?? "app";
  const config = {
    appId: offer.app.id,
    origin: offer.origin,
    requestedUsd: offer.requestedUsd,
    maxUsd: offer.maxUsd,
    minUsd: ONE_NANO_USD,
    funding,
    fundingAsked: offer.funding !== null,
  };
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Connect ${app} to AI models</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<main>
  <h1 id="title" tabindex="-1">Let <span id="app-name">${app}</span> use AI models for you?</h1>
  <p id="who-pays">${app} asks to spend ${escapeHtml(requested)} on AI model requests made for you. The monthly
    cap is yours to set: no request goes past it, and you can lower it or revoke it here at any time.</p>
  ${fundingChoice(app, sources, funding)}
  <dl aria-labelledby="title">
    <dt>App</dt><dd>${app}</dd>
    <dt>Requested by</dt><dd id="origin">${escapeHtml(offer.origin)}</dd>
    <dt>You</dt><dd id="user">…</dd>
    <dt>Now</dt><dd id="current">…</dd>
    <dt>Used this month</dt><dd id="used">…</dd>
  </dl>
  <label for="cap">Monthly cap (USD)</label>
  <input id="cap" type="number" inputmode="decimal" min="${ONE_NANO_USD}" step="any" max="${offer.maxUsd}" disabled>
  <div class="actions">
    <button type="button" id="cancel">Cancel</button>
    <button type="button" id="revoke" disabled>Revoke</button>
    <button type="button" id="approve" disabled aria-describedby="who-pays">Approve</button>
  </div>
  <p id="status" role="alert" aria-live="assertive">Waiting for ${app}…</p>
</main>
<script nonce="${nonce}">
${pageScript(config)}
</script>
</body>
</html>`;
}

/** The page's one script: the handshake with the opener, then the three actions. */
function pageScript(config: Record<string, unknown>): string {
  return `(() => {
  const config = ${scriptJson(config)};${POPUP_CLOSING_SCRIPT}
  const $ = (id) => document.getElementById(id);
  const status = $("status"), cap = $("cap"), approve = $("approve"), revoke = $("revoke");
  // Cents at least, and every nano-dollar there is: a short call costs $0.00001065, not "$0.00".
  const usd = (n) => "$" + Number(n).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 9 });
  const say = (text, error = false) => {
    status.textContent = text;
    status.classList.toggle("error", error);
  };
  let token = null;
  // The token's requested limit: the cap may not exceed it (nor the service's maximum).
  let requestLimit = null;
  document.getElementById("title").focus();
  const tell = (message) => window.opener && window.opener.postMessage(message, config.origin);
  // No cookies but for the start of a funding flow (funding-channel.ts), whose cookie binds it to this browser.
  const call = async (method, body, path = "connections", credentials = "omit") => {
    const response = await fetch(path, {
      method, credentials,
      headers: { authorization: "Bearer " + token, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (response.status === 204) return null;
    const json = await response.json().catch(() => null);
    if (!response.ok) throw new Error(json && json.error ? json.error.message : "The request failed (" + response.status + ").");
    return json;
  };
  const picked = () => (document.querySelector('input[name="funding"]:checked') || { value: config.funding }).value;
${CONNECT_FUNDING_SCRIPT}
  const show = (view) => {
    $("user").textContent = view.appUserId;
    const paidBy = view.fundingSource === "user" ? ", paid by your own upstream account" : "";
    const refused = view.fundingStatus === "invalid" ? " (refused upstream: approve again to reconnect)" : "";
    $("current").textContent = view.connected ? "Connected, " + usd(view.limits.monthlyUsd) + " a month" + paidBy + refused : "Not connected";
    $("used").textContent = usd(view.usage.monthlyUsd) + " (resets " + new Date(view.resetsAt).toLocaleDateString() + ")";
    revoke.disabled = !view.connected;
  };
  const act = async (work) => {
    approve.disabled = revoke.disabled = true;
    say("Working…");
    try { await work(); } catch (error) { say(error.message, true); approve.disabled = false; }
  };
  window.addEventListener("message", async (event) => {
    // Only the window that opened us, at the origin the app registered, may hand us a token.
    if (event.source !== window.opener || event.origin !== config.origin) return;
    const data = event.data;
    if (!data || data.type !== "session" || typeof data.token !== "string" || token !== null) return;
    token = data.token;
    try {
      const claims = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
      if (claims.app_id !== config.appId) throw new Error("This session belongs to another app.");
      requestLimit = claims.request_limit ? claims.request_limit.monthlyUsd : null;
      if (requestLimit !== null && requestLimit < config.maxUsd) cap.max = String(requestLimit);
      const view = await call("GET");
      show(view);
      const asked = config.requestedUsd ?? requestLimit ?? (view.connected ? view.limits.monthlyUsd : null);
      // Unless the app asked for one, who pays now is the choice shown.
      const current = !config.fundingAsked && view.connected && document.querySelector('input[name="funding"][value="' + view.fundingSource + '"]');
      if (current) current.checked = true;
      if (asked !== null) cap.value = String(asked);
      cap.disabled = approve.disabled = false;
      say("");
    } catch (error) {
      token = null;
      say(error.message || "This session cannot be used.", true);
    }
  });
  approve.addEventListener("click", () => act(async () => {
    // The bounds the service takes (a whole nano-dollar, up to the limits above), said before asking it.
    const monthlyUsd = cap.valueAsNumber;
    if (!(monthlyUsd > 0) || cap.validity.rangeUnderflow) throw new Error("Enter a monthly cap above $0 (at least $" + config.minUsd + ").");
    if (cap.validity.rangeOverflow) {
      const byApp = requestLimit !== null && requestLimit < config.maxUsd;
      throw new Error(byApp ? "The monthly cap may not exceed the limit the app requested ($" + requestLimit + ")." : "The monthly cap may be at most $" + config.maxUsd + ".");
    }
    if (picked() === "user") return linkOwnAccount(monthlyUsd);
    const view = await call("POST", { monthlyUsd }).catch((error) => {
      throw new Error("Not approved: " + error.message);
    });
    show(view);
    say("Approved: " + usd(view.limits.monthlyUsd) + " a month. You can close this window.");
    approve.disabled = false;
    tell({ type: "connected", monthlyUsd: view.limits.monthlyUsd, resetsAt: view.resetsAt, fundingSource: view.fundingSource });
  }));
  revoke.addEventListener("click", () => act(async () => {
    await call("DELETE");
    show(await call("GET"));
    say("Revoked. " + $("app-name").textContent + " can no longer spend for you.");
    approve.disabled = false;
    tell({ type: "revoked" });
  }));
  $("cancel").addEventListener("click", () => {
    if (!window.opener) { window.close(); return; }
    // Answered: nothing more may change while the window waits to close.
    cap.disabled = approve.disabled = revoke.disabled = $("cancel").disabled = true;
    tell({ type: "connect_cancelled" });
    closeSoon();
  });
  if (window.opener) tell({ type: "connect_ready" });
  else say("Open this page from the app that asked for it.", true);
})();`;
}

export function renderConnectError(message: string, nonce: string): string {
  return popupErrorPage({
    title: "This connection request cannot be shown",
    message,
    outcome: "Nothing was changed. Close this window and try again from the app.",
    style: STYLE,
    nonce,
  });
}
