// A web terminal made the common way, for bench_peers.mjs: Node's `ws` and
// node-pty (npm), one PTY per WebSocket, output sent as it comes (no flow
// control, as most such servers do), input written as it comes. Prints
// `peer listening PORT`. The command: ?argv=<JSON array>.
import { WebSocketServer } from 'ws';
import pty from '@lydell/node-pty';

const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
wss.on('listening', () => console.log(`peer listening ${wss.address().port}`));
wss.on('connection', (ws, req) => {
  const argv = JSON.parse(new URL(req.url, 'http://x').searchParams.get('argv'));
  const p = pty.spawn(argv[0], argv.slice(1), { name: 'xterm-256color', cols: 80, rows: 24, env: process.env });
  p.onData((d) => { if (ws.readyState === 1) ws.send(d); });
  p.onExit(() => ws.close());
  ws.on('message', (m) => p.write(m.toString()));
  ws.on('close', () => { try { p.kill(); } catch { /* gone */ } });
});
process.on('SIGTERM', () => process.exit(0));
