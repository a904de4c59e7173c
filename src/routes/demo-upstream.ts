import { Elysia } from "elysia";
import { DEMO_AUTH_PAGE_PATH } from "../config";
import type { DemoUpstreamClient } from "../upstream/demo-upstream";

/**
 * Demo mode only: the in-process mock's PKCE page (`/auth`) on the service's own origin, at
 * DEMO_AUTH_PAGE_PATH, so a browser can approve a key offline. GET shows the page; its form
 * posts back to the same URL, and the mock's 303 sends the browser to the funding callback.
 *
 * Answered as the request arrives, before any route's parsing: the form is
 * `application/x-www-form-urlencoded`, which the API's body hooks refuse (its bodies are
 * JSON), and the mock reads it itself. The request-context hook registered before this one
 * has given it its id and held it to MAX_BODY_BYTES. The mock's answer goes out as it is,
 * with its own CSP (a page with no script, whose form may go only here and to the callback's
 * origin) and its own CSRF cookie; the mock was made to send browsers back only to this
 * service's origin (demoUpstreamClient), so the page is no open redirect. Not in
 * openapi.json: not part of the API.
 */
export function demoUpstreamPage(upstream: DemoUpstreamClient) {
  return new Elysia().onRequest(({ request }): Promise<Response> | undefined => {
    if (pathOf(request.url) !== DEMO_AUTH_PAGE_PATH) return;
    return upstream.authPage(request);
  });
}

function pathOf(url: string): string {
  const pathStart = url.indexOf("/", url.indexOf("//") + 2);
  const end = url.indexOf("?", pathStart);
  return url.slice(pathStart, end === -1 ? undefined : end);
}
