/**
 * The server entry holds the app's secret key, which may never reach a browser (ARCHITECTURE.md
 * §1 "Who holds what": browser code holds only a 10-minute session token). A bundler that pulls
 * this module into a page is a mistake we can catch at run time: there, `window` exists.
 */
export function assertNotInBrowser(entry: string): void {
  if (typeof (globalThis as { window?: unknown }).window !== "undefined") {
    throw new Error(
      `${entry} holds your app's secret key and must not run in a browser. ` +
        "Keep it in your backend; browser code gets a session token from your backend (createSession) instead.",
    );
  }
}
