// A TCP proxy that can cut every connection through it at once, to drop a
// WebSocket mid-stream the way a flaky network or an ingress does.
import net from 'node:net';

export async function startProxy(targetPort) {
  const conns = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const pair = { client, upstream };
    conns.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => { client.destroy(); upstream.destroy(); conns.delete(pair); };
    client.on('error', end); upstream.on('error', end);
    client.on('close', end); upstream.on('close', end);
  });
  await new Promise((res) => server.listen(0, '127.0.0.1', res));
  return {
    port: server.address().port,
    cut() { const n = conns.size; for (const p of conns) { p.client.destroy(); p.upstream.destroy(); } conns.clear(); return n; },
    close() { this.cut(); return new Promise((res) => server.close(res)); },
  };
}
