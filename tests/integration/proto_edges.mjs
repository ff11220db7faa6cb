// Edges of airlock.v1 as docs/protocol.md states them, against the real
// runner and airlockd, from the independent JS client: an ACK on a PTY
// channel's stderr (credit on a stream that never carries a byte) is
// accepted (§5); a text message and an over-long message get an ERROR
// before the close (§1, §10); a subprotocol offer without airlock.v1 gets
// an HTTP status, not a dropped connection (§1); a token accepted within
// the leeway past its exp keeps the connection until exp + leeway, not
// a moment less, and so does one that came in a TOKEN frame (§8,
// tokens.md).
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, keygen, mint, startRunner, rawHttp, sleep } from '../interop/harness.mjs';
import { Controller, enc, STDERR } from '../interop/airlock.mjs';
import { addUser, startAirlockd, api, attach } from '../interop/airlockd.mjs';
import { WebSocketServer } from 'ws';

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
function upgrade(target, headers = {}) {
  const h = { Host: '127.0.0.1', Upgrade: 'websocket', Connection: 'Upgrade',
    'Sec-WebSocket-Key': KEY, 'Sec-WebSocket-Version': '13', ...headers };
  return `GET ${target} HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`;
}

// The link answers: a LIST goes out and its LIST_REPLY comes back.
async function alive(c) {
  c.list = null;
  c.send(enc.list());
  await c.wait(() => c.list || c.closeInfo, 'LIST_REPLY', 5000);
  return !!c.list && !c.closeInfo;
}

// Send a refused message; resolve the ERROR codes seen and the close.
async function refusedWith(c, send) {
  const before = c.errors.length;
  send();
  await c.wait(() => c.closeInfo, 'close', 5000);
  return { codes: c.errors.slice(before).map((e) => e.code), close: c.closeInfo };
}

await run('proto_edges', async () => {
  const dir = tmpdir('edges');
  keygen(dir);
  const r = await startRunner({ dir, args: ['--leeway', '4'] });
  const hdrs = () => ({ Authorization: `Bearer ${mint(dir, r.id)}` });

  // ---- §5: credit on a PTY's stderr is accepted and ignored
  const c1 = await new Controller().connect(r.url, hdrs());
  const t = c1.open(['sh', '-c', 'sleep 30']);
  await t.wait(() => t.opened, 'opened');
  c1.send(enc.ack(t.id, STDERR, 0, 1 << 20));
  check(await alive(c1) && c1.errors.length === 0, 'runner: ACK 0 with credit on a PTY channel\'s stderr keeps the link, no ERROR');
  c1.drop();
  // and after a resume: ATTACH with stderr credit, then the ACK again
  await c1.connect(r.url, hdrs());
  await t.wait(() => t.linked, 'attached');
  c1.send(enc.ack(t.id, STDERR, 0, 2 << 20));
  check(await alive(c1) && c1.errors.length === 0, 'runner: the same after a resume (ATTACH, then ACK on stderr)');
  // acknowledging a stderr byte that never existed is a protocol error
  let res = await refusedWith(c1, () => c1.send(enc.ack(t.id, STDERR, 1, 2 << 20)));
  check(res.codes.includes(1) && res.close.code === 4000, `runner: ACK of stderr byte 1 on a PTY: ERROR PROTOCOL, close ${res.close.code}`);

  // ---- §10: what the WebSocket layer refuses is said in an ERROR first
  const c2 = await new Controller().connect(r.url, hdrs());
  res = await refusedWith(c2, () => c2.ws.send('hello', { binary: false }));
  check(res.codes[0] === 1 && res.close.code === 4000,
    `runner: a text message: ERROR PROTOCOL (${res.codes}) then close ${res.close.code}`);
  const c3 = await new Controller().connect(r.url, hdrs());
  res = await refusedWith(c3, () => c3.ws.send(Buffer.alloc(70000, 0x12)));
  check(res.codes[0] === 4 && res.close.code === 4004,
    `runner: a message over 65546 bytes: ERROR TOO_BIG (${res.codes}) then close ${res.close.code}`);
  check(await alive(await new Controller().connect(r.url, hdrs())), 'runner: a new connection works after those');

  // ---- §1: a subprotocol offer without airlock.v1 gets 400, logged
  const q = `/?identifier=${r.id}&api-version=2024-02-02-preview`;
  let h = await rawHttp(r.port, upgrade(q, { Authorization: `Bearer ${mint(dir, r.id)}`, 'Sec-WebSocket-Protocol': 'chat' }));
  check(h.status === 400, `runner: offer "chat" with a valid token: ${h.status}`);
  h = await rawHttp(r.port, upgrade(q, { Authorization: `Bearer ${mint(dir, r.id)}`, 'Sec-WebSocket-Protocol': 'chat, airlock.v1' }));
  check(h.status === 101 && /sec-websocket-protocol: airlock.v1/i.test(h.head), 'runner: offer "chat, airlock.v1": 101 with airlock.v1');
  const log = fs.readFileSync(r.log, 'utf8');
  check(/refused 400: subprotocol offer without airlock\.v1/.test(log), 'runner: the log says why the offer was refused');

  // ---- §8: within the leeway at the upgrade, alive until exp + leeway
  const short = mint(dir, r.id, 'runner:connect', 1);
  const exp = JSON.parse(Buffer.from(short.split('.')[1], 'base64url')).exp;
  while (Date.now() < exp * 1000 + 1500) await sleep(100); // bounded: exp is 1 s away
  const c4 = await new Controller().connect(r.url, { Authorization: `Bearer ${short}` });
  check(await alive(c4), 'runner: a token 1.5 s past exp, within a leeway of 4 s, opens a live link');
  await c4.wait(() => c4.closeInfo, 'close', 8000);
  const late = Date.now() - (exp + 4) * 1000;
  check(c4.closeInfo.code === 4002 && c4.errors.some((e) => e.code === 10),
    `runner: then TOKEN_EXPIRED and close ${c4.closeInfo.code}`);
  check(late >= -50 && late < 1000, `runner: closed ${late} ms after exp + leeway (not before it)`);
  h = await rawHttp(r.port, upgrade(q, { Authorization: `Bearer ${short}` }));
  check(h.status === 403, `runner: past exp + leeway the same token is refused at the upgrade (${h.status})`);

  // ---- §8: a token from a TOKEN frame sets the deadline to its exp + leeway
  // (here earlier than the upgrade's token's): alive past its exp, closed
  // 4002 at exp + leeway
  const c5 = await new Controller().connect(r.url, hdrs());
  const inband = mint(dir, r.id, 'runner:connect', 1);
  const exp5 = JSON.parse(Buffer.from(inband.split('.')[1], 'base64url')).exp;
  c5.send(enc.token(inband));
  while (Date.now() < exp5 * 1000 + 1500) await sleep(100); // bounded: exp is 1 s away
  check(await alive(c5) && !c5.errors.length, 'runner: 1.5 s past the exp of a token sent in a TOKEN frame, within a leeway of 4 s, the link lives');
  await c5.wait(() => c5.closeInfo, 'close', 8000);
  const late5 = Date.now() - (exp5 + 4) * 1000;
  check(c5.closeInfo.code === 4002 && c5.errors.some((e) => e.code === 10),
    `runner: then TOKEN_EXPIRED and close ${c5.closeInfo.code} (the TOKEN frame's deadline, not the upgrade's)`);
  check(late5 >= -50 && late5 < 1000, `runner: closed ${late5} ms after the in-band token's exp + leeway (not before it)`);

  // ---- the same rules at airlockd's client endpoint (a relay host)
  const base = tmpdir('edges-d');
  const ddir = path.join(base, 'data');
  const admin = addUser(ddir, 'ada', 'admin');
  const op = addUser(ddir, 'otto', 'operator');
  const d = await startAirlockd({ dir: ddir });
  const stat = await startRunner({ id: 'stat1', dir: ddir });
  let a = await api(d.port, 'POST', '/v1/sandboxes', admin,
    { id: 'stat1', kind: 'static', url: `ws://127.0.0.1:${stat.port}/?identifier=stat1&api-version=2024-02-02-preview` });
  check(a.status === 201, 'airlockd: a static sandbox');
  let term = null;
  for (let i = 0; i < 100 && !term; i++) { // bounded: 10 s for the link
    a = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'stat1', argv: ['sh', '-c', 'sleep 60'] });
    if (a.status === 201) term = a.json.id; else await sleep(100);
  }
  check(term, 'airlockd: a PTY terminal on it');
  const at = await attach(d.port, term, op);
  await at.ch.wait(() => at.ch.linked, 'attached');
  at.ctl.send(enc.ack(1, STDERR, 0, 1 << 20));
  check(await alive(at.ctl) && at.ctl.errors.length === 0, 'airlockd: ACK 0 with credit on a PTY terminal\'s stderr keeps the link, no ERROR');
  res = await refusedWith(at.ctl, () => at.ctl.ws.send('hello', { binary: false }));
  check(res.codes[0] === 1 && res.close.code === 4000, `airlockd: a text message: ERROR PROTOCOL (${res.codes}) then close ${res.close.code}`);
  const at2 = await attach(d.port, term, op);
  res = await refusedWith(at2.ctl, () => at2.ctl.ws.send(Buffer.alloc(70000, 0x12)));
  check(res.codes[0] === 4 && res.close.code === 4004, `airlockd: an over-long message: ERROR TOO_BIG (${res.codes}) then close ${res.close.code}`);
  h = await rawHttp(d.port, upgrade(`/v1/terminals/${term}/attach`, { Authorization: `Bearer ${op}`, 'Sec-WebSocket-Protocol': 'chat' }));
  check(h.status === 400 && /airlock\.v1/.test(h.body), `airlockd: offer "chat" on an attach: ${h.status} ${h.body.trim()}`);
  h = await rawHttp(d.port, upgrade(`/v1/runners/connect?identifier=stat1`, { Authorization: `Bearer ${op}`, 'Sec-WebSocket-Protocol': 'chat' }));
  check(h.status === 400, `airlockd: offer "chat" on /v1/runners/connect: ${h.status}`);
  h = await rawHttp(d.port, upgrade(`/v1/terminals/${term}/attach`, { Authorization: `Bearer ${op}`, 'Sec-WebSocket-Protocol': 'airlock.v1' }));
  check(h.status === 101, 'airlockd: offer "airlock.v1": 101');
  check(/subprotocol_refused/.test(fs.readFileSync(d.log, 'utf8')), 'airlockd: the refusal is logged');

  // the test client itself: a peer that takes the upgrade and closes before
  // its HELLO makes connect fail at once (it used to wait forever)
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: () => 'airlock.v1' });
  await new Promise((res) => wss.on('listening', res));
  wss.on('connection', (ws) => ws.close(1011, 'going away before HELLO'));
  const t0 = Date.now();
  const err = await Promise.race([
    new Controller().connect(`ws://127.0.0.1:${wss.address().port}/`).then(() => null, (e) => e),
    sleep(5000).then(() => new Error('still waiting after 5 s')),
  ]);
  await new Promise((res) => wss.close(res));
  check(err && /closed before HELLO \(1011 going away before HELLO\)/.test(err.message),
    `the test client: a close before HELLO rejects its connect in ${Date.now() - t0} ms (${err && err.message})`);
});
