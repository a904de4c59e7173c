/**
 * `metered-proxy healthcheck`: GET /healthz on this machine's PORT, exit 0 on 200 and 1
 * otherwise. The container's HEALTHCHECK, without curl in the image (the Dockerfile).
 */
export async function healthcheck(port: string): Promise<number> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) });
    return response.ok ? 0 : 1;
  } catch {
    return 1;
  }
}
