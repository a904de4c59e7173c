/**
 * Polls a server's /healthz from a process of its own, so that what a test does meanwhile
 * (building and sending 4 MiB bodies, collecting garbage) does not delay the poll and count
 * as the server's slowness.
 *
 *   bun tests/helpers/healthz-poller.ts <base url>
 *
 * One poll at a time, 5 ms apart. Each poll is one line on stdout, as JSON: when it started
 * (`at`, milliseconds since the epoch, with fractions), how long the answer took (`ms`), and
 * its status (0 when the request failed). Stops when its stdin closes.
 */
export {};

const base = process.argv[2];
if (!base) throw new Error("usage: healthz-poller.ts <base url>");

let running = true;
void (async () => {
  // stdin ends when the test stops the poller (or dies).
  for await (const _ of Bun.stdin.stream());
  running = false;
})();

const now = () => performance.timeOrigin + performance.now();
while (running) {
  const at = now();
  let status = 0;
  try {
    const res = await fetch(`${base}/healthz`);
    await res.arrayBuffer();
    status = res.status;
  } catch {
    // status 0: the test reports it
  }
  console.log(JSON.stringify({ at, ms: now() - at, status }));
  await Bun.sleep(5);
}
