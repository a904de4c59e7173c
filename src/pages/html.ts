/** Escaping for the HTML pages the service renders itself (the consent popup, the docs page). */

export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** JSON safe to embed inside <script>: no "</script>", no HTML comment openers, no U+2028/9. */
export const scriptJson = (value: unknown) =>
  JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");

/**
 * Script for the service's popup pages (consent, connect), run inside their own script
 * where `config.origin` is the opener's registered origin. The window closes once its
 * opener says it has the page's answer (`{type: "received"}`, sent by popup.js and the
 * client library): a window closed right after postMessage can look closed to the opener
 * before the message lands (they travel between processes), and the opener would report
 * "closed without an answer". `closeSoon()`, once the page has answered, closes it anyway
 * after a few seconds, for an opener that never says (an older popup.js, a wrong origin).
 */
export const POPUP_CLOSING_SCRIPT = `
  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.source === window.opener && event.origin === config.origin && data && data.type === "received") window.close();
  });
  const closeSoon = () => setTimeout(() => window.close(), 3000);`;

/**
 * The error page of a popup the service renders (consent, connect): a title, the reason,
 * and what happened (nothing). Its one style block carries the page's CSP nonce.
 */
export function popupErrorPage(page: { title: string; message: string; outcome: string; style: string; nonce: string }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(page.title)}</title>
<style nonce="${page.nonce}">${page.style}</style>
</head>
<body>
<main>
  <h1>${escapeHtml(page.title)}</h1>
  <p role="alert">${escapeHtml(page.message)}</p>
  <p>${escapeHtml(page.outcome)}</p>
</main>
</body>
</html>`;
}
