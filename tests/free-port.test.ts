/**
 * The harness's free ports (scripts/lib/free-port.ts). Servers started side by side each take
 * a port before any of them listens; when the OS handed two of them the same one, the second
 * exited on EADDRINUSE after the first had answered its health check, and a three-instance
 * test "killed" the dead one while its streams ran on, unharmed, in the live one.
 */
import { expect, test } from "bun:test";
import { freePort } from "../scripts/lib/free-port";

test("a port is handed out once per process: 3,000 picks, all different, each one free to listen on", () => {
  // The OS's own picks, taken the same way without the record of ports handed out, held
  // only 2,462 different ports in 3,000 here.
  const ports = Array.from({ length: 3000 }, () => freePort());
  expect(new Set(ports).size).toBe(ports.length);
  for (const port of ports.slice(-20)) {
    const listener = Bun.listen({ hostname: "127.0.0.1", port, socket: { data() {} } });
    expect(listener.port).toBe(port);
    listener.stop(true);
  }
});
