import { scriptJson } from "./html";
import type { FundingSource } from "../store/connections";

/**
 * The connect page's "pay with my own upstream account" (issue 34): the choice it shows, and
 * how it learns the end of the flow.
 *
 * The connect page does not navigate itself to the upstream's PKCE page: it opens that page in
 * a second window and stays where it is. Its own window.opener (the app's page, which holds the
 * promise of `connect()`) is then never at risk: a page that sends Cross-Origin-Opener-Policy
 * `same-origin`, as an upstream's login may, severs the opener of the window it loads in, and
 * the app would see its popup as closed. The service's callback page, back on the service's
 * origin in that second window, tells the connect page the outcome on a BroadcastChannel, which
 * only pages of the same origin (and the same storage partition: both are top-level windows of
 * the service) can hear. The connect page then answers the app with the same message an
 * approve sends, and the callback window closes once the connect page says it heard.
 *
 * Every message names the flow's state, which the connect page read from the authorize URL it
 * was given: it takes only the outcome of the flow it started, and of its own app. The state is
 * single use and already spent when the callback page is shown, so saying it again grants nothing.
 */
export const FUNDING_CHANNEL = "metered-proxy-funding";

/**
 * The callback page's script (renderFundingResult in ./funding-result.ts, run under that
 * page's nonce): it reads the outcome the page carries (its JSON block
 * `#funding-result`) and the flow's state from its own address, says them once on the
 * channel, and closes the window when the connect page acknowledges. Opened any other way
 * (no connect page listening), the window stays open on its result.
 */
export const FUNDING_RESULT_SCRIPT = `(() => {
  if (!("BroadcastChannel" in window)) return;
  const block = document.getElementById("funding-result");
  const state = new URLSearchParams(location.search).get("state");
  if (!block || !state) return;
  const result = JSON.parse(block.textContent);
  const channel = new BroadcastChannel(${scriptJson(FUNDING_CHANNEL)});
  channel.onmessage = (event) => {
    const data = event.data;
    if (data && data.type === "funding_received" && data.state === state) window.close();
  };
  channel.postMessage({ type: "funding_result", state, result });
})();`;

/**
 * The connect page's side, run inside its script (connect-page.ts), where `config`, `call`,
 * `show`, `say` (the status line: `say(text, true)` for an error), `approve` and `tell` are defined. `linkOwnAccount(monthlyUsd)` opens the
 * second window at once (a window opened after an await may be blocked as not from a click),
 * asks the service for the authorize URL, and sends the window there; the channel's answer
 * then ends the flow as an approve would, with `fundingSource: "user"`.
 */
export const CONNECT_FUNDING_SCRIPT = `
  let pendingState = null;
  const channel = "BroadcastChannel" in window ? new BroadcastChannel(${scriptJson(FUNDING_CHANNEL)}) : null;
  const linkOwnAccount = async (monthlyUsd) => {
    if (!channel) throw new Error("This browser cannot link an upstream account here (no BroadcastChannel).");
    const linkWindow = window.open("about:blank", "_blank", "popup,width=520,height=720");
    if (!linkWindow) throw new Error("Your browser blocked the window of your upstream account: allow pop-ups for this page and try again.");
    // The upstream's page gets no handle on this one.
    linkWindow.opener = null;
    let answer;
    try {
      // With the cookie the answer sets, which binds the flow to this browser for the callback.
      answer = await call("POST", { monthlyUsd }, "connections/funding", "same-origin");
    } catch (error) {
      linkWindow.close();
      throw new Error("Not approved: " + error.message);
    }
    const callbackUrl = new URL(answer.authorizeUrl).searchParams.get("callback_url");
    pendingState = callbackUrl ? new URL(callbackUrl).searchParams.get("state") : null;
    if (!pendingState) { linkWindow.close(); throw new Error("The service's answer has no flow to follow."); }
    linkWindow.location.replace(answer.authorizeUrl);
    say("Approve in the window of your upstream account; this page finishes when it is done.");
    approve.disabled = false;
  };
  if (channel) channel.onmessage = async (event) => {
    const data = event.data;
    if (!data || data.type !== "funding_result" || pendingState === null || data.state !== pendingState) return;
    pendingState = null;
    channel.postMessage({ type: "funding_received", state: data.state });
    const result = data.result || {};
    if (result.outcome !== "connected" || result.appId !== config.appId) {
      const why = result.outcome === "denied" ? "you declined on the upstream's page." : result.message || "the upstream's page did not link it.";
      say("Not linked: " + why, true);
      approve.disabled = false;
      return;
    }
    // The session token may have lapsed while the user was away: the view is a courtesy.
    await call("GET").then(show, () => undefined);
    say("Approved: " + usd(result.monthlyUsd) + " a month, paid by your own upstream account. You can close this window.");
    tell({ type: "connected", monthlyUsd: result.monthlyUsd, resetsAt: result.resetsAt, fundingSource: "user" });
  };`;

/**
 * The connect page's "who pays" (`app` is the escaped app name), when the app lets its users
 * pay with their own upstream account: a choice when it allows both, a plain sentence when
 * the user's account is the only way. The upstream's own page, in a second window, asks the
 * user to approve a key limited to the same monthly cap.
 */
export function fundingChoice(app: string, sources: FundingSource[], funding: FundingSource): string {
  const own = "Pay with my own upstream account";
  if (!sources.includes("user")) return "";
  if (!sources.includes("app")) {
    return `<p id="funding-user">You pay with your own upstream account: its page opens to link it, with the same monthly cap.</p>`;
  }
  const option = (value: FundingSource, text: string) =>
    `<label><input type="radio" name="funding" value="${value}"${value === funding ? " checked" : ""}>${text}</label>`;
  return `<fieldset id="funding">
    <legend>Who pays</legend>
    ${option("app", `${app} pays`)}
    ${option("user", `${own} (its page opens to link it, with the same monthly cap)`)}
  </fieldset>`;
}
