/**
 * GET /api/v1/grants/popup.js: the browser helper an app page includes with a <script> tag.
 * `MeteredProxy.requestGrant({appId, usd, maxUses?, ttl?})` opens the consent popup and
 * resolves with its message. It trusts a message only from this service's origin, from
 * the popup it opened, with the random `state` it sent; it rejects on deny or when the
 * popup is closed without an answer.
 */
export const POPUP_SCRIPT = `(() => {
  "use strict";
  const script = document.currentScript;
  const serviceOrigin = new URL(script ? script.src : location.href).origin;
  const consentUrl = serviceOrigin + "/api/v1/grants/consent";

  function randomState() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function requestGrant(options) {
    const { appId, usd, maxUses, ttl } = options || {};
    if (!appId || !(usd > 0)) return Promise.reject(new Error("requestGrant needs appId and usd > 0"));
    const state = randomState();
    const params = new URLSearchParams({ appId, usd: String(usd), origin: location.origin, state });
    if (maxUses !== undefined) params.set("maxUses", String(maxUses));
    if (ttl !== undefined) params.set("ttl", String(ttl));
    const popup = window.open(consentUrl + "?" + params, "metered-proxy-consent", "popup,width=480,height=640");
    if (!popup) return Promise.reject(new Error("the consent popup was blocked"));
    return new Promise((resolve, reject) => {
      const done = (settle, value) => {
        window.removeEventListener("message", onMessage);
        clearInterval(closedPoll);
        settle(value);
      };
      function onMessage(event) {
        if (event.origin !== serviceOrigin || event.source !== popup) return;
        const data = event.data;
        if (!data || data.state !== state) return;
        if (data.type !== "grant" && data.type !== "grant_denied") return;
        // The consent page closes once told its answer arrived (POPUP_CLOSING_SCRIPT, src/pages/html.ts).
        popup.postMessage({ type: "received" }, serviceOrigin);
        if (data.type === "grant") done(resolve, data);
        else done(reject, Object.assign(new Error("the user denied the grant"), { code: "grant_denied" }));
      }
      window.addEventListener("message", onMessage);
      const closedPoll = setInterval(() => {
        if (popup.closed) done(reject, Object.assign(new Error("the consent popup was closed"), { code: "popup_closed" }));
      }, 250);
    });
  }

  window.MeteredProxy = Object.assign(window.MeteredProxy || {}, { requestGrant });
})();
`;
