import type { ListenAddress } from "./startup-failure";

/**
 * Binds the service's address and lets it go at once: throws the error listening would
 * (EADDRINUSE, EACCES, EADDRNOTAVAIL, syscall "listen"). Run before the store is opened, so a
 * process that cannot serve stops before it migrates a database or creates (and prints the
 * key of) a default app it would never serve. The real bind still reports its own error:
 * another process may take the port in between.
 */
export function checkPortFree({ host, port }: ListenAddress): void {
  // Port 0 asks the OS for any free port: nothing to check.
  if (port === 0) return;
  const probe = Bun.listen({ hostname: host, port, socket: { data() {} } });
  // A listening socket that never accepted leaves no TIME_WAIT behind: the port is free again at once.
  probe.stop(true);
}
