/**
 * A TCP port on 127.0.0.1 that nobody listens on now, for a child process to take. Shared
 * by the test harness and the benchmark harness.
 *
 * The OS picks it (a listener on port 0, closed again), and picks the same ports again and
 * again: on our machine 3,000 picks in a row held only 2,462 different ports. Servers
 * started side by side each take a port before any of them listens, so two of them could be
 * handed the same one; the second then fails to bind and exits, but only after the first
 * has answered its health check, and a test talks to a dead process's address without
 * knowing it (a cluster test whose "victim" was another instance failed that way). So a
 * port is handed out once per process, never twice.
 */
const handedOut = new Set<number>();
/** Picks before giving up: the OS's range holds thousands of ports, so this is never near. */
const MAX_PICKS = 1000;

export function freePort(): number {
  for (let pick = 0; pick < MAX_PICKS; pick++) {
    const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = probe.port;
    probe.stop(true);
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no port on 127.0.0.1 that this process has not handed out already, after ${MAX_PICKS} picks`);
}
