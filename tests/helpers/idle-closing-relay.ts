/**
 * A TCP relay in front of a server, standing for an upstream that closes keep-alive
 * connections left idle past `keepAliveMs` (Node's servers do after 5 s), met the way a
 * client meets that close at its worst: while its request is on the way. A connection idle
 * past the keep-alive is the upstream's no more, but the client is not told: when it next
 * writes on it, the request is not delivered and the connection is reset, as a request
 * crossing the upstream's close is. So the outcome does not hang on a race of a few
 * milliseconds: a client that reuses a connection idle past the keep-alive loses its
 * request every time, and the server never sees it (`lost` counts them).
 */
import type { Socket } from "bun";

export interface IdleClosingRelay {
  /** `http://127.0.0.1:<port>`: put it where the client expects the server. */
  url: string;
  /** Connections the client opened. */
  readonly connections: number;
  /** Requests written onto a connection idle past the keep-alive: reset, never delivered. */
  readonly lost: number;
  stop(): void;
}

interface Pipe {
  server: Socket<Pipe> | null;
  /** Client bytes that came before the server connection was open. */
  early: Uint8Array[];
  /** When a byte last went either way (ms). */
  lastActivity: number;
  closed: boolean;
}

/** Bytes a socket has not taken yet (a short write is legal; `drain` sends them). */
const backlogs = new WeakMap<Socket<Pipe>, Uint8Array[]>();

function send(socket: Socket<Pipe>, chunk: Uint8Array): void {
  const backlog = backlogs.get(socket);
  if (backlog && backlog.length > 0) {
    backlog.push(chunk.slice());
    return;
  }
  const written = socket.write(chunk);
  if (written < chunk.byteLength) backlogs.set(socket, [chunk.slice(Math.max(written, 0))]);
}

function drain(socket: Socket<Pipe>): void {
  const backlog = backlogs.get(socket);
  while (backlog && backlog.length > 0) {
    const head = backlog[0]!;
    const written = socket.write(head);
    if (written < head.byteLength) {
      backlog[0] = head.slice(Math.max(written, 0));
      return;
    }
    backlog.shift();
  }
}

export function startIdleClosingRelay(targetPort: number, keepAliveMs: number): IdleClosingRelay {
  let connections = 0;
  let lost = 0;

  const close = (client: Socket<Pipe>) => {
    const pipe = client.data;
    if (pipe.closed) return;
    pipe.closed = true;
    client.terminate();
    pipe.server?.terminate();
  };

  const listener = Bun.listen<Pipe>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        connections++;
        client.data = { server: null, early: [], lastActivity: Date.now(), closed: false };
        void Bun.connect<Pipe>({
          hostname: "127.0.0.1",
          port: targetPort,
          data: client.data,
          socket: {
            open(server) {
              client.data.server = server;
              for (const chunk of client.data.early) send(server, chunk);
              client.data.early = [];
            },
            data(_server, chunk) {
              if (client.data.closed) return;
              client.data.lastActivity = Date.now();
              send(client, chunk);
            },
            drain: (server) => drain(server),
            close: () => close(client),
            error: () => close(client),
          },
        }).catch(() => close(client));
      },
      data(client, chunk) {
        const pipe = client.data;
        if (pipe.closed) return;
        if (Date.now() - pipe.lastActivity > keepAliveMs) {
          // The upstream closed this connection while it was idle: the request crosses that close.
          lost++;
          close(client);
          return;
        }
        pipe.lastActivity = Date.now();
        if (pipe.server) send(pipe.server, chunk);
        else pipe.early.push(chunk.slice());
      },
      drain: (client) => drain(client),
      close: (client) => close(client),
      error: (client) => close(client),
    },
  });

  return {
    url: `http://127.0.0.1:${listener.port}`,
    get connections() {
      return connections;
    },
    get lost() {
      return lost;
    },
    stop: () => listener.stop(true),
  };
}
