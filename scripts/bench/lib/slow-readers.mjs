/* global process, Buffer, console, setInterval, clearInterval -- a plain Node script (run by node, not bun) */
// Slow HTTP clients that really stop reading, run with Node (`node slow-readers.mjs CONFIG_JSON`).
//
// Why Node: a paused net.Socket stops reading from the kernel once its internal buffer is
// past its highWaterMark (Node docs, "net.Socket" and "Readable streams: two reading
// modes"), so the kernel's receive window fills and TCP flow control pushes back on the
// server. Bun.connect's data handler is handed everything the socket receives instead.
//
// CONFIG_JSON: { port, path, headers, body, count, bytesPerTick, tickMs }.
// Opens `count` connections, writes one raw HTTP/1.1 POST on each, then reads `bytesPerTick`
// bytes per connection every `tickMs`. Prints `{"ready":N}` once every request is written,
// and on a line "close" on stdin destroys every socket and prints one JSON line of stats.
import net from "node:net";
import readline from "node:readline";

const config = JSON.parse(process.argv[2]);
const request =
  `POST ${config.path} HTTP/1.1\r\nHost: 127.0.0.1:${config.port}\r\n` +
  Object.entries(config.headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") +
  `content-length: ${Buffer.byteLength(config.body)}\r\nconnection: close\r\n\r\n` +
  config.body;

const clients = [];
let written = 0;
for (let i = 0; i < config.count; i++) {
  // Small buffer on our side too, so little sits in this process either.
  const socket = net.connect({ host: "127.0.0.1", port: config.port, readableHighWaterMark: 1024 });
  const client = { socket, received: [], bytes: 0, error: null, ended: false };
  socket.pause();
  socket.on("error", (err) => (client.error = err.code ?? String(err)));
  socket.on("end", () => (client.ended = true));
  socket.write(request, () => {
    if (++written === config.count) console.log(JSON.stringify({ ready: written }));
  });
  clients.push(client);
}

const timer = setInterval(() => {
  for (const client of clients) {
    const chunk = client.socket.read(config.bytesPerTick);
    if (chunk) {
      client.bytes += chunk.length;
      if (client.received.length < 64) client.received.push(chunk.toString("latin1"));
    }
  }
}, config.tickMs);

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line.trim() !== "close") return;
  clearInterval(timer);
  const stats = clients.map((c) => ({ bytes: c.bytes, head: c.received.join("").slice(0, 32), error: c.error, ended: c.ended }));
  for (const client of clients) client.socket.destroy();
  console.log(JSON.stringify({ clients: stats }));
  process.exit(0);
});
