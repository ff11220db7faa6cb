// A dialing runner's peer is whatever answers at its --connect address
// (src/ws/wsc_upgrade.c, runner_conn.c): answers that must fail the
// upgrade each fail it with a clear line and a redial, a front that never
// answers is given up after the handshake's 10 s, headers without end cost
// no more than the bound; then a real controller is reached and works,
// and a masked frame from it (RFC 6455 §5.1) closes the link with 1002.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { WebSocketServer } from 'ws';
import { run, check, tmpdir, keygen, mint, BIN, addLog, rssKb, scaled } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';

await run('runner_dial_hostile', async () => {
  const dir = tmpdir('dialhostile');
  keygen(dir);
  const tokfile = path.join(dir, 'token');
  fs.writeFileSync(tokfile, mint(dir, 'sbx-h', 'runner:connect', 600) + '\n');

  // each upgrade attempt gets the next answer; the last ones a real controller
  const answers = [
    (s) => s.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n'),
    (s) => s.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
      + 'Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: airlock.v1\r\n\r\n'),
    (s, key) => s.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
      + `Sec-WebSocket-Accept: ${acceptOf(key)}\r\n\r\n`),
    (s) => { // headers without end: 1 MB of them, the socket kept open
      s.write('HTTP/1.1 101 Switching Protocols\r\n');
      for (let i = 0; i < 1024; i++) s.write(`X-Pad-${i}: ${'a'.repeat(1000)}\r\n`);
    },
    () => {}, // silence: the runner's deadline must end it
  ];
  const heads = [];
  const sockets = [];
  let attempt = 0;
  const wss = new WebSocketServer({ noServer: true });
  const ctl = new Controller();
  let realWs = null;
  const server = http.createServer((req, res) => { res.writeHead(404); res.end(); });
  server.on('upgrade', (req, socket, head) => {
    heads.push({ at: Date.now(), headers: req.headers, url: req.url });
    sockets.push(socket);
    socket.on('error', () => {});
    const n = attempt++;
    if (n < answers.length) return answers[n](socket, req.headers['sec-websocket-key']);
    wss.handleUpgrade(req, socket, head, (ws) => { realWs = ws; ctl.adopt(ws); });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  const url = `ws://127.0.0.1:${port}/v1/runners/connect`;

  const log = path.join(dir, 'runner.log');
  addLog(log);
  const out = fs.openSync(log, 'a');
  const p = spawn(path.join(BIN, 'airlock-runner'), ['--connect', url, '--identifier', 'sbx-h',
    '--jwks', path.join(dir, 'jwks.json'), '--token-file', tokfile, '--verbose'],
  { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const text = () => fs.readFileSync(log, 'utf8');
  try {
    let rssPeak = 0;
    const sample = setInterval(() => { try { rssPeak = Math.max(rssPeak, rssKb(p.pid)); } catch { /* gone */ } }, 100);
    await ctl.wait(() => ctl.ready, 'the runner to reach the real controller after the hostile answers', scaled(40000));
    clearInterval(sample);
    const h = heads[0].headers;
    check(h.upgrade === 'websocket' && /upgrade/i.test(h.connection) && h['sec-websocket-version'] === '13'
      && h['sec-websocket-protocol'] === 'airlock.v1' && /^[A-Za-z0-9+/]{22}==$/.test(h['sec-websocket-key']),
    'the request is a WebSocket upgrade for airlock.v1 with a 16-byte key');
    check(h.authorization === `Bearer ${fs.readFileSync(tokfile, 'utf8').trim()}`
      && /^[A-Za-z0-9_-]{43}$/.test(h['x-airlock-runner-key']) && h.host === `127.0.0.1:${port}`,
    'it carries the token, the link key and the host');
    check(new Set(heads.map((x) => x.headers['sec-websocket-key'])).size === heads.length, 'a fresh key on every attempt');
    const t = text();
    check(t.includes(`connection to ${url} failed: the answer is not 101 Switching Protocols (HTTP status 403)`),
      'a 403 is logged with its status');
    check(/failed: the answer's Sec-WebSocket-Accept is missing or wrong \(HTTP status 101\)/.test(t), 'a wrong Accept fails the upgrade');
    check(/failed: the answer's Sec-WebSocket-Protocol is missing/.test(t), 'a missing subprotocol fails the upgrade');
    check(/failed: the answer's headers exceed the limit/.test(t), 'headers beyond the bound fail the upgrade');
    check(/failed: no upgrade answer within 10 s/.test(t), 'a silent front is given up after the handshake time');
    const silent = heads[4].at, next = heads[5].at;
    check(next - silent >= 9500 && next - silent < scaled(20000), `the silent attempt lasted its 10 s (${next - silent} ms to the next)`);
    check(rssPeak < 64 * 1024, `the runner stayed small through the hostile answers (peak RSS ${rssPeak} kB)`);

    // the link works: a terminal's output arrives
    const term = ctl.open(['sh', '-c', 'echo hello-over-wslay; exit 3']);
    await term.waitExit(10000);
    check(/hello-over-wslay/.test(term.output().toString()) && term.exit.code === 3, 'a terminal runs over the link');

    // a masked frame from the server: the runner closes with 1002 and redials
    const closed = new Promise((r) => realWs.on('close', (code) => r(code)));
    const payload = Buffer.from('masked');
    const mask = Buffer.from([1, 2, 3, 4]);
    const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]));
    realWs._socket.write(Buffer.concat([Buffer.from([0x82, 0x80 | payload.length]), mask, masked]));
    const code = await Promise.race([closed, new Promise((r) => setTimeout(() => r('timeout'), 5000))]);
    check(code === 1002, `a masked server frame closes the link with 1002 (${code})`);
    await ctl.wait(() => ctl.ready && ctl.ws !== null && heads.length >= 7, 'the runner to redial', scaled(15000));
    check(true, 'the runner redialed after the protocol error');
    const exited = new Promise((r) => p.on('exit', (code, sig) => r({ code, sig })));
    p.kill('SIGTERM');
    const st = await exited;
    check(st.code === 0 && !/Sanitizer/.test(text()), `the runner stopped cleanly (${JSON.stringify(st)})`);
  } finally {
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGTERM');
      await new Promise((r) => p.on('exit', r));
    }
    for (const s of sockets) s.destroy();
    wss.close();
    server.close();
  }
}, 90000);

function acceptOf(key) {
  return crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
}
