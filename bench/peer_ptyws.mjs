// A web terminal made the common way, for bench_peers.mjs: Node's `ws` and
// node-pty (npm), one PTY per WebSocket, output sent as it comes (no flow
// control, as most such servers do: a client that does not read has its
// output queued in this process), input written as it comes. Prints
// `peer listening PORT`. The command: ?argv=<JSON array>. Shared
// terminals, as such servers add them: ?share=NAME, the first client with
// that name starts the command and later ones join it, every client gets
// the output from then on and may type; the PTY ends with its last client.
import { WebSocketServer } from 'ws';
import pty from '@lydell/node-pty';

const shared = new Map(); // name -> { p, clients: Set<WebSocket> }
const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
wss.on('listening', () => console.log(`peer listening ${wss.address().port}`));
wss.on('connection', (ws, req) => {
  const q = new URL(req.url, 'http://x').searchParams;
  const name = q.get('share');
  let t = name ? shared.get(name) : null;
  if (!t) {
    const argv = JSON.parse(q.get('argv'));
    const p = pty.spawn(argv[0], argv.slice(1), { name: 'xterm-256color', cols: 80, rows: 24, env: process.env });
    t = { p, clients: new Set() };
    const term = t;
    p.onData((d) => { for (const c of term.clients) if (c.readyState === 1) c.send(d); });
    p.onExit(() => { for (const c of term.clients) c.close(); if (name) shared.delete(name); });
    if (name) shared.set(name, t);
  }
  const term = t;
  term.clients.add(ws);
  ws.on('message', (m) => term.p.write(m.toString()));
  ws.on('close', () => {
    term.clients.delete(ws);
    if (term.clients.size) return;
    if (name) shared.delete(name);
    try { term.p.kill(); } catch { /* gone */ }
  });
});
process.on('SIGTERM', () => process.exit(0));
