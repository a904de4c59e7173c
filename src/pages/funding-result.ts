import { escapeHtml, scriptJson } from "./html";
import { FUNDING_RESULT_SCRIPT } from "./funding-channel";
import { formatUsd } from "../money";
import type { FundingLinkResult } from "../services/funding-link";

/**
 * What the result page tells its script (and the app, through it), as the JSON of
 * `<script type="application/json" id="funding-result">`: never the key, only its
 * fingerprint. `connected` carries what the connect page's approve answer carries
 * (`monthlyUsd`, `resetsAt`) and the source; `denied`: the user pressed Deny on the
 * upstream's page, and the connection is as it was; `failed`: nothing changed, `message` says why.
 */
export type FundingResultData =
  | { outcome: "connected"; appId: string; monthlyUsd: number; resetsAt: string; fundingSource: "user"; keyFingerprint: string }
  | { outcome: "denied"; appId: string }
  | { outcome: "failed"; message: string };

export function fundingResultData(result: FundingLinkResult): FundingResultData {
  if (result.outcome === "connected") {
    const { appId, status, keyFingerprint } = result;
    return { outcome: "connected", appId, monthlyUsd: status.limits.monthlyUsd, resetsAt: status.resetsAt, fundingSource: "user", keyFingerprint };
  }
  if (result.outcome === "denied") return { outcome: "denied", appId: result.appId };
  return { outcome: "failed", message: result.message };
}

const STYLE = `
  body { font: 16px/1.5 system-ui, sans-serif; margin: 0; padding: 24px; color: #1a1a1a; background: #fff; }
  main { max-width: 440px; margin: 0 auto; }
  h1 { font-size: 1.35rem; margin: 0 0 12px; }
  code { overflow-wrap: anywhere; }
`;

function wording(data: FundingResultData): { title: string; text: string } {
  if (data.outcome === "connected") {
    return {
      title: "Your account is linked",
      text: `Requests made for you are now paid by your own upstream account, up to ${formatUsd(data.monthlyUsd)} a month (key ${data.keyFingerprint}). You can close this window.`,
    };
  }
  if (data.outcome === "denied")
    return { title: "Nothing was linked", text: "You declined on the upstream's page; your connection is as it was. You can close this window." };
  return { title: "Your account could not be linked", text: data.message };
}

/**
 * The page the upstream's PKCE redirect lands on (GET /connect/funding/callback), in the
 * window the connect page opened for the upstream's page. It shows the outcome; its script
 * (FUNDING_RESULT_SCRIPT, under this page's CSP nonce) reads the JSON block and tells the
 * connect page, which tells the app. Served with consentHeaders, like the connect page.
 */
export function renderFundingResult(data: FundingResultData, nonce: string): string {
  const { title, text } = wording(data);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<main>
  <h1 id="title" tabindex="-1">${escapeHtml(title)}</h1>
  <p id="status" role="${data.outcome === "failed" ? "alert" : "status"}">${escapeHtml(text)}</p>
</main>
<script type="application/json" id="funding-result">${scriptJson(data)}</script>
<script nonce="${nonce}">
${FUNDING_RESULT_SCRIPT}
</script>
</body>
</html>`;
}
