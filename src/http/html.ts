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
