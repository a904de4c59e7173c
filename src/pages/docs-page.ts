import swaggerUiScriptPath from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "file" };
import swaggerUiStylePath from "swagger-ui-dist/swagger-ui.css" with { type: "file" };
import { escapeHtml, scriptJson } from "./html";

/**
 * The API reference page (ARCHITECTURE.md §4): Swagger UI from the pinned swagger-ui-dist
 * package, served by this service (imported `with { type: "file" }`, so the single binary
 * embeds it), rendering the OpenAPI document embedded in the page. Nothing comes from
 * another origin, so it works offline.
 *
 * It lives at /docs, apart from the consent popup under /api/v1/grants, and its CSP runs it
 * in a sandbox: an opaque origin that can read no cookie or storage of the service's origin
 * and cannot script the consent page, whatever a bug in the renderer or the document lets
 * through. That is also why the document is embedded rather than fetched, and why the page
 * offers no "Try it out" (an opaque origin's requests to the API would be cross-origin), and so
 * no "Authorize" either: a credential entered there would have nothing to try.
 */
export const DOCS_PATH = "/docs";

export interface DocsAsset {
  contentType: string;
  body(): Blob | string;
}

/** The script that starts the renderer: a file of its own, as the CSP allows no inline script. */
const START_SCRIPT = `"use strict";
SwaggerUIBundle({
  spec: JSON.parse(document.getElementById("openapi-document").textContent),
  domNode: document.getElementById("reference"),
  // A reference only: the sandboxed page sends no request (see src/pages/docs-page.ts).
  supportedSubmitMethods: [],
  // Nor does it take credentials: the Authorize button and each operation's padlock are left out.
  plugins: [() => ({ components: { authorizeBtn: () => null, authorizeOperationBtn: () => null } })],
  // Left on, Swagger UI sends the document to an online validator for a badge.
  validatorUrl: null,
});
`;

/** The page's files, by name under DOCS_PATH. */
export const DOCS_ASSETS: Record<string, DocsAsset> = {
  "swagger-ui.js": { contentType: "text/javascript; charset=utf-8", body: () => Bun.file(swaggerUiScriptPath) },
  "swagger-ui.css": { contentType: "text/css; charset=utf-8", body: () => Bun.file(swaggerUiStylePath) },
  "start.js": { contentType: "text/javascript; charset=utf-8", body: () => START_SCRIPT },
};

/**
 * Scripts and styles from this service only, no inline script (the embedded document is a
 * JSON data block, which never runs), no connection anywhere, never framed. Swagger UI's
 * own styles are a stylesheet and its inline SVG icons data: URLs, so no nonce is needed.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src data:",
  "connect-src 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "sandbox allow-scripts",
].join("; ");

export const DOCS_PAGE_HEADERS: Record<string, string> = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
};

export function renderDocsPage(document: Record<string, unknown>, specPath: string): string {
  const title = `${(document.info as { title: string }).title}: API reference`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="${DOCS_PATH}/swagger-ui.css">
</head>
<body>
<main id="reference"><noscript>This reference needs JavaScript. The OpenAPI document itself is at <a href="${escapeHtml(specPath)}">${escapeHtml(specPath)}</a>.</noscript></main>
<script type="application/json" id="openapi-document">${scriptJson(document)}</script>
<script src="${DOCS_PATH}/swagger-ui.js"></script>
<script src="${DOCS_PATH}/start.js"></script>
</body>
</html>
`;
}
