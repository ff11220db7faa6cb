// What a peer without a key can make airlockd do, bounded, and what a
// peer with one runner token can make it hold:
// - a flood of refused requests writes a bounded number of audit rows
//   (one per source and reason per interval, with the count) and log lines
//   (before: one synchronous row per refusal, ~1,700/s, ~2.4 GiB/hour);
// - 300 runner upgrades with one token leave exactly one link open, every
//   replaced one closed with 4005 (before: 298 held forever);
// - a runner's ERROR message with a newline cannot forge a log line;
// - an unauthenticated POST body is not read before it is refused (401 at
//   once for a body that never comes).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import WebSocket from 'ws';
import { run, check, tmpdir, sleep, pollUntil, rawHttp } from '../interop/harness.mjs';
import { T, frame } from '../interop/airlock.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';

const RUNNER_KEY = 'k'.repeat(43); // a runner's own key (protocol.md §1)
const FLOOD_N = 3000, FLOOD_MS = 8000, WORKERS = 20, UPGRADES = 300;

function u16(v) { const b = Buffer.alloc(2); b.writeUInt16BE(v); return b; }
function str(s) { const b = Buffer.from(s, 'utf8'); return Buffer.concat([u16(b.length), b]); }
function hostHello() {
  const p = Buffer.alloc(9);
  p.writeUInt16BE(1, 0); p.writeUInt16BE(1, 2); p.writeUInt8(1, 4); p.writeUInt32BE(65546, 5);
  return frame(T.HELLO, 0, 0, Buffer.concat([p, str('fake-runner')]));
}
const errorFrame = (code, msg) => frame(T.ERROR, 0, 0, Buffer.concat([u16(code), str(msg)]));

await run('hygiene_airlockd', async () => {
  const base = tmpdir('hyg');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const d = await startAirlockd({ dir });

  // ---- an unauthenticated body is refused before it is read
  let res = await new Promise((resolve) => {
    const s = net.connect(d.port, '127.0.0.1');
    let data = '';
    const t = setTimeout(() => { s.destroy(); resolve({ status: 0, data }); }, 3000);
    s.on('connect', () => s.write('POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n{'));
    s.on('data', (b) => { data += b; if (/\r\n\r\n/.test(data)) { clearTimeout(t); s.destroy(); resolve({ status: Number(data.split(' ')[1]), data }); } });
    s.on('error', () => {});
  });
  check(res.status === 0, 'an unauthenticated body is not answered before it ends (it is dropped, not routed)');

  // ---- a flood of refused requests
  const lines0 = fs.readFileSync(d.log, 'utf8').split('\n').length;
  let sent = 0, refused = 0;
  const until = Date.now() + FLOOD_MS;
  await Promise.all(Array.from({ length: WORKERS }, async () => {
    while (sent < FLOOD_N && Date.now() < until) {
      sent++;
      const r = await rawHttp(d.port, 'GET /v1/terminals HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alk_nope\r\n\r\n').catch(() => ({}));
      if (r.status === 401) refused++;
    }
  }));
  check(refused > 1000, `${refused} of ${sent} unauthenticated requests refused (401)`);
  let r = await api(d.port, 'GET', '/v1/audit', admin);
  const rows = r.json.filter((e) => e.action === 'auth_failed' && e.target === '/v1/terminals');
  const counted = rows.reduce((n, e) => n + JSON.parse(e.detail).count, 0);
  check(rows.length <= 2 + Math.ceil(FLOOD_MS / 5000) * 2, `${refused} refusals made ${rows.length} audit rows (one per source and reason per interval)`);
  check(counted === refused, `the rows count every refusal (${counted})`);
  check(rows.every((e) => JSON.parse(e.detail).peer === '127.0.0.1'), 'each row names its source address');
  const floodLines = fs.readFileSync(d.log, 'utf8').split('\n').length - lines0;
  check(floodLines < 20, `${floodLines} log lines for ${refused} refusals`);

  // ---- 300 upgrades with one runner token
  r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'rev1', kind: 'reverse' });
  check(r.status === 201, 'a reverse sandbox');
  r = await api(d.port, 'POST', '/v1/sandboxes/rev1/enroll', admin);
  const tok = r.json.token;
  const url = `ws://127.0.0.1:${d.port}/v1/runners/connect?identifier=rev1`;
  const links = [];
  for (let i = 0; i < UPGRADES; i++) {
    const l = { closed: false, code: 0 };
    // the same runner redialing: its token and its own key (pinned at the first)
    l.ws = new WebSocket(url, 'airlock.v1', { headers: { Authorization: `Bearer ${tok}`, 'X-Airlock-Runner-Key': RUNNER_KEY } });
    l.ws.on('error', () => {});
    l.ws.on('close', (code) => { l.closed = true; l.code = code; });
    await new Promise((res) => { l.ws.on('open', res); l.ws.on('close', res); setTimeout(res, 3000); });
    links.push(l);
    // bounded: the replaced links must go, or the per-address limit would
    for (let w = 0; w < 40 && links.filter((x) => !x.closed).length > 16; w++) await sleep(50);
  }
  for (let w = 0; w < 100 && links.filter((x) => !x.closed).length > 1; w++) await sleep(50);
  const open = links.filter((x) => !x.closed);
  check(open.length === 1 && open[0] === links[UPGRADES - 1], `${UPGRADES} upgrades with one token leave one link open (${open.length})`);
  check(links.slice(0, -1).every((x) => x.code === 4005), 'every replaced link was closed with 4005 (replaced)');

  // ---- a runner's ERROR text cannot forge a log line
  const last = links[UPGRADES - 1].ws;
  last.send(hostHello());
  last.send(errorFrame(1, 'boom\n1700000000.000 airlockd[forged] error FORGED LINE\r\x1b[2J'));
  // the ERROR's line is in the log once airlockd has read the frame
  const log = await pollUntil(() => fs.readFileSync(d.log, 'utf8'), (l) => l.includes('FORGED LINE\\r'), 5000);
  check(!log.split('\n').some((l) => l.startsWith('1700000000.000 airlockd[forged]')), 'no forged line in the log');
  check(log.includes('boom\\n1700000000.000 airlockd[forged] error FORGED LINE\\r\\x1b[2J'), 'the ERROR text is logged escaped, on its own line');
  last.terminate();
  await d.stop();

  // ---- the limits are airlockd's configuration: a --config file sets them
  const conf = path.join(base, 'airlockd.conf');
  fs.writeFileSync(conf, 'max-conns-per-ip = 2\nrequest-timeout = 2\n');
  const d2 = await startAirlockd({ dir, args: ['--config', conf] });
  // Two idle connections, each timed from its connect to its close. The
  // connection of startAirlockd's last /healthz may still count for our
  // address for a moment (on a slow machine airlockd sees its end late): a
  // connection answered 429 at once was refused, not held, so it is made
  // again (bounded).
  const hold = async () => {
    for (let attempt = 0; attempt < 10; attempt++) {
      const s = net.connect(d2.port, '127.0.0.1');
      s.on('error', () => {});
      let got = '';
      s.on('data', (b) => { got += b.toString('latin1'); });
      const t0 = Date.now();
      s.closedIn = new Promise((r2) => { s.on('close', () => r2(Date.now() - t0)); setTimeout(() => r2(-1), 8000); });
      await new Promise((res) => s.on('connect', res));
      await sleep(300);
      if (!got.startsWith('HTTP/1.1 429')) return s;
      s.destroy();
      await sleep(200);
    }
    throw new Error('an idle connection was refused ten times');
  };
  const held = [await hold(), await hold()];
  res = await rawHttp(d2.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n').catch((e) => ({ status: String(e) }));
  check(res.status === 429 && /too many connections from your address/.test(res.body), `a third connection from one address with max-conns-per-ip = 2: ${res.status}`);
  const closedAt = await Promise.all(held.map((s) => s.closedIn));
  check(closedAt.every((ms) => ms >= 1500 && ms < 5000),
    `with request-timeout = 2 the idle connections were closed 2 s after they opened (${closedAt.join(', ')} ms)`);
  res = await rawHttp(d2.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  check(res.status === 200, 'their slots are free again');
  await d2.stop();
}, 120000);
