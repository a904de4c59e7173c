/**
 * A TCP relay in front of a server that can break chosen connections the way a network
 * does: the request reaches the server whole, then the connection dies after a given
 * number of response bytes reached the client. Clients see a genuine socket error; the
 * server sees its client vanish. For retry and idempotency tests.
 */
import type { Socket } from "bun";

export interface CuttingProxy {
  /** `http://127.0.0.1:<port>`: put it where the client expects the server. */
  url: string;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Connections that were cut. */
  readonly cuts: number;
  stop(): void;
}

interface Pipe {
  index: number;
  upstream: Socket<Pipe> | null;
  /** Client bytes that arrived before the server connection was open. */
  early: Uint8Array[];
  forwarded: number;
  cutAt: number | null;
  closed: boolean;
}

/** Bytes a socket did not take yet, per socket (a short write is legal; drain flushes them). */
const backlogs = new WeakMap<Socket<Pipe>, Uint8Array[]>();

function writeAll(socket: Socket<Pipe>, chunk: Uint8Array): void {
  const backlog = backlogs.get(socket);
  if (backlog && backlog.length > 0) {
    backlog.push(new Uint8Array(chunk));
    return;
  }
  const written = socket.write(chunk);
  if (written < chunk.byteLength) backlogs.set(socket, [chunk.slice(Math.max(written, 0))]);
}

function flushBacklog(socket: Socket<Pipe>): void {
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

/**
 * `cutAfter(i)` decides for connection i (0-based): null relays it untouched; n cuts it
 * once n response bytes were forwarded (0: before the first byte reaches the client).
 */
export function startCuttingProxy(targetPort: number, cutAfter: (connection: number) => number | null): CuttingProxy {
  let connections = 0;
  let cuts = 0;

  const close = (client: Socket<Pipe>) => {
    const pipe = client.data;
    if (pipe.closed) return;
    pipe.closed = true;
    client.terminate();
    pipe.upstream?.terminate();
  };

  const listener = Bun.listen<Pipe>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        const index = connections++;
        client.data = { index, upstream: null, early: [], forwarded: 0, cutAt: cutAfter(index), closed: false };
        void Bun.connect<Pipe>({
          hostname: "127.0.0.1",
          port: targetPort,
          data: client.data,
          socket: {
            open(upstream) {
              client.data.upstream = upstream;
              for (const chunk of client.data.early) writeAll(upstream, chunk);
              client.data.early = [];
            },
            data(_upstream, chunk) {
              const pipe = client.data;
              if (pipe.closed) return;
              if (pipe.cutAt !== null && pipe.forwarded + chunk.byteLength >= pipe.cutAt) {
                if (pipe.cutAt > pipe.forwarded) client.write(chunk.subarray(0, pipe.cutAt - pipe.forwarded));
                cuts++;
                close(client);
                return;
              }
              pipe.forwarded += chunk.byteLength;
              writeAll(client, chunk);
            },
            drain: (upstream) => flushBacklog(upstream),
            close: () => close(client),
            error: () => close(client),
          },
        }).catch(() => close(client));
      },
      data(client, chunk) {
        const pipe = client.data;
        if (pipe.upstream) writeAll(pipe.upstream, chunk);
        else pipe.early.push(new Uint8Array(chunk));
      },
      drain: (client) => flushBacklog(client),
      close: (client) => close(client),
      error: (client) => close(client),
    },
  });

  return {
    url: `http://127.0.0.1:${listener.port}`,
    get connections() {
      return connections;
    },
    get cuts() {
      return cuts;
    },
    stop: () => listener.stop(true),
  };
}
