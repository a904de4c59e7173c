/**
 * Headless Chromium for browser tests: Debian's `chromium` (installed by
 * scripts/test-prerequisites.ts) driven by playwright-core, never a downloaded browser.
 * Plus the pieces a browser test of the grant popup needs: small HTML pages served on their
 * own origin, an app page that uses popup.js, and a watch on Content-Security-Policy
 * violations in every page of a browser context.
 */
import { chromium, type Browser, type BrowserContext } from "playwright-core";

export const CHROMIUM_PATH = Bun.which("chromium") ?? "/usr/bin/chromium";

/** The machine has no network: these flags keep Chromium from trying to reach one. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

export interface HtmlServer {
  /** e.g. http://127.0.0.1:41234 */
  origin: string;
  stop(): Promise<void>;
}

/** Serves fixed HTML pages by path on 127.0.0.1 (a free port), anything else 404. */
export function serveHtml(pages: Record<string, string>): HtmlServer {
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(request) {
      const html = pages[new URL(request.url).pathname];
      return html === undefined ? new Response("not found", { status: 404 }) : new Response(html, { headers: { "content-type": "text/html; charset=utf-8" } });
    },
  });
  return { origin: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

/**
 * An app's page that includes the proxy's popup.js. Its button calls
 * `MeteredProxy.requestGrant({appId, usd, maxUses, ttl})` with the values of its own query
 * string and writes the outcome into `#result` (`data-outcome` = resolved | rejected; the
 * text is the message, or `{code, message}` of the rejection). Every message event the page
 * receives, from anyone, is kept in `window.receivedMessages`.
 */
export function appPageHtml(proxyOrigin: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Demo app</title>
<script src="${proxyOrigin}/api/v1/grants/popup.js"></script>
</head>
<body>
<button type="button" id="ask">Get an AI budget</button>
<pre id="result"></pre>
<script>
  window.receivedMessages = [];
  window.addEventListener("message", (event) => window.receivedMessages.push({ origin: event.origin, data: event.data }));
  const params = new URLSearchParams(location.search);
  const number = (name) => (params.has(name) ? Number(params.get(name)) : undefined);
  const result = document.getElementById("result");
  document.getElementById("ask").addEventListener("click", () => {
    result.textContent = "pending";
    MeteredProxy.requestGrant({ appId: params.get("appId"), usd: number("usd"), maxUses: number("maxUses"), ttl: number("ttl") }).then(
      (message) => { result.textContent = JSON.stringify(message); result.dataset.outcome = "resolved"; },
      (error) => { result.textContent = JSON.stringify({ code: error.code, message: error.message }); result.dataset.outcome = "rejected"; },
    );
  });
</script>
</body>
</html>`;
}

export interface PageProblems {
  /** `securitypolicyviolation` events, as "directive blockedURI @ page url". */
  cspViolations: string[];
  /** Console messages of type error or warning, as "type: text @ page url". */
  console: string[];
  /** Resolves with the next CSP violation reported from now on. */
  nextCspViolation(): Promise<string>;
}

/**
 * Watches every page of the context (popups included, from their first script on) for CSP
 * violation events and for console errors and warnings. Call before opening any page.
 */
export async function watchPageProblems(context: BrowserContext): Promise<PageProblems> {
  let waiters: Array<(violation: string) => void> = [];
  const problems: PageProblems = {
    cspViolations: [],
    console: [],
    nextCspViolation: () => new Promise((resolve) => waiters.push(resolve)),
  };
  await context.exposeBinding("__reportCspViolation", ({ page }, text: string) => {
    const violation = `${text} @ ${page.url()}`;
    problems.cspViolations.push(violation);
    const waiting = waiters;
    waiters = [];
    for (const resolve of waiting) resolve(violation);
  });
  // Init scripts and bindings come through the DevTools protocol: the pages' own CSP does not block them.
  await context.addInitScript(() => {
    // Runs in the page; the project compiles without the DOM lib, hence the narrow casts.
    const page = globalThis as unknown as {
      document: { addEventListener(type: "securitypolicyviolation", listener: (event: { effectiveDirective: string; blockedURI: string }) => void): void };
      __reportCspViolation(text: string): void;
    };
    page.document.addEventListener("securitypolicyviolation", (event) => page.__reportCspViolation(`${event.effectiveDirective} ${event.blockedURI}`));
  });
  context.on("console", (message) => {
    if (message.type() === "error" || message.type() === "warning")
      problems.console.push(`${message.type()}: ${message.text()} @ ${message.page()?.url() ?? "?"}`);
  });
  return problems;
}
