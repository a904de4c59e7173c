/**
 * The CORS grant of a session-token call, narrowed once the token is verified. The grant is
 * made before auth, for any origin an active app registered (src/routes/connections-cors.ts);
 * a session token belongs to one app, so only that app's origins may read the answer.
 */
export function restrictCorsToApp(request: Request, headers: Record<string, unknown>, appOrigins: string[]): void {
  const origin = request.headers.get("origin");
  if (origin && !appOrigins.includes(origin)) delete headers["access-control-allow-origin"];
}
