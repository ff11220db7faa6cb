// airlockd dialing a static sandbox's runner at ws:// (src/control/api_wsc.c,
// src/ws/wsc_upgrade.c) reaches whatever answers there: a front that never
// answers is given up after the upgrade's 10 s, a wrong Accept and headers
// without end fail the upgrade; each is the sandbox's link_error, airlockd
// redials, and stays small.
import http from 'node:http';
import path from 'node:path';
import { run, check, tmpdir, waitFor, rssKb, scaled } from '../interop/harness.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';

await run('airlockd_dial_hostile', async () => {
  const base = tmpdir('dialhostile-d');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  // one server, one behaviour per path: airlockd dials ws://127.0.0.1:PORT/<mode>
  const seen = { silent: [], accept: [], flood: [] };
  const sockets = [];
  const server = http.createServer((req, res) => { res.writeHead(404); res.end(); });
  server.on('upgrade', (req, socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
    const mode = req.url.split('?')[0].slice(1);
    if (seen[mode]) seen[mode].push({ at: Date.now(), headers: req.headers });
    if (mode === 'accept') {
      socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
        + 'Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: airlock.v1\r\n\r\n');
    } else if (mode === 'flood') {
      socket.write('HTTP/1.1 101 Switching Protocols\r\n');
      for (let i = 0; i < 1024; i++) socket.write(`X-Pad-${i}: ${'a'.repeat(1000)}\r\n`);
    } // silent: nothing
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  const d = await startAirlockd({ dir });
  try {
    for (const mode of Object.keys(seen)) {
      const r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: mode, kind: 'static', url: `ws://127.0.0.1:${port}/${mode}` });
      check(r.status === 201, `sandbox ${mode}: ${r.status} ${r.body}`);
    }
    const row = async (id) => (await api(d.port, 'GET', '/v1/sandboxes', admin)).json.find((x) => x.id === id);
    const err = async (id, re) => waitFor(async () => { const e = (await row(id))?.link_error; return e && re.test(e) ? e : null; },
      scaled(30000), `${id}'s link_error`, 200);
    const e1 = await err('accept', /Sec-WebSocket-Accept/);
    check(true, `a wrong Accept fails the dial: ${e1}`);
    const e2 = await err('flood', /exceed the limit/);
    check(true, `headers without end fail the dial at the bound: ${e2}`);
    const e3 = await err('silent', /no upgrade answer within 10 s/);
    check(true, `a silent front is given up after 10 s: ${e3}`);
    const h = seen.silent[0].headers;
    check(h.upgrade === 'websocket' && h['sec-websocket-protocol'] === 'airlock.v1' && /^Bearer \S+$/.test(h.authorization)
      && h['sec-websocket-version'] === '13', 'the request is a WebSocket upgrade with airlockd\'s token as Bearer');
    await waitFor(() => seen.accept.length >= 2 && seen.flood.length >= 2, scaled(20000), 'the redials', 200);
    check(true, `airlockd redials (${seen.accept.length}, ${seen.flood.length}, ${seen.silent.length} attempts)`);
    check(new Set(seen.accept.map((x) => x.headers['sec-websocket-key'])).size === seen.accept.length, 'a fresh key on every attempt');
    const rss = rssKb(d.p.pid);
    check(rss < 256 * 1024, `airlockd stayed small (${rss} kB)`);
    for (const id of Object.keys(seen)) check(!(await row(id)).link_up, `${id} never linked`);
  } finally {
    for (const s of sockets) s.destroy();
    server.close();
    const st = await d.stop();
    check(st.code === 0, `airlockd stopped cleanly (${JSON.stringify(st)})`);
  }
}, 120000);
