// The abuse matrix, requests (issue 15): what a peer can send besides a
// bad token, against airlock-runner --listen and airlockd, each row
// followed by the target's health check (tests/interop/abuse.mjs:
// /healthz, a well-formed request, RSS bounded). The targets:
// - "runner": a runner of its own, for the rows that need a controller's
//   link (a new one replaces the current one, which must not be airlockd's);
// - "runner stat1": the runner of airlockd's static sandbox stat1, whose
//   link carries an attached client's stream during the connection burst;
// - "airlockd".
//
// | row | targets | how | expected |
// |---|---|---|---|
// | oversize header (16 KiB) | runner, airlockd | one 16 KiB header on a valid upgrade | refused (4xx or closed), never 101 |
// | oversize headers (12 × 1 KiB) | runner, airlockd | headers past the 8 KiB budget | refused, never 101/200 |
// | oversize URL (16 KiB, 64 KiB) | runner, airlockd | GET /healthz?pad=… | refused, never 200 |
// | headers under the limit (control) | runner, airlockd | a 2 KiB header on GET /healthz | 200 |
// | slow-loris upgrade | runner, airlockd (--request-timeout 3) | an upgrade trickled a byte every 300 ms, never finished | closed at the request deadline (measured) |
// | 1,000 connections at once | runner stat1 (64 at once), airlockd (--max-conns 400) | from 40 addresses 127.0.0.x | those past the limit 503 (or 429 per address), the rest serve /healthz, the attached stream never pauses over 5 s |
// | foreign Origin | airlockd | every POST/DELETE route of routes[] and the attach, through a session with its CSRF token | 403 (also no Origin, "null", look-alikes); our Origin not 403 |
// | another origin reads | airlockd | every GET route of routes[] with the cookie (another port is the same site), a CORS preflight | 401; no Access-Control-Allow-* anywhere |
// | framing the page | airlockd | GET /, /app/app.js | X-Frame-Options DENY, CSP frame-ancestors 'none' |
// | cookie writes without the anti-CSRF check | airlockd | every POST/DELETE route and the attach, our Origin, cookie without / with a wrong / with another session's CSRF token | 401 |
// | garbage after a valid handshake | runner, airlockd | 101, then bytes that are no WebSocket frame | closed |
// | random airlock frames | runner, airlockd | 101, then random binary messages | ERROR, close 4000/4004 |
// | frames at the size limit in a loop | runner, airlockd | 16 MiB of stdin in 65,528-byte DATA frames to `wc -c` | every byte counted |
// | 257 channels | airlockd | 257 terminals on one sandbox | the 257th is 429, the 256 work (the runner's own: runner_limits.mjs) |
// | a client that never reads | runner | huge credit granted, then the socket never read, while the terminal floods | memory bounded; dropped at the idle timeout (airlockd's: airlockd_slow.mjs, airlockd_lag.mjs) |
// | a client that never acknowledges | airlockd | a viewer that never grants credit, while the terminal floods | memory bounded, the writer's stream never pauses (the runner's: runner_flow.mjs) |
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import crypto from 'node:crypto';
import { run, check, tmpdir, keygen, mint, startRunner, rawHttp, sleep, waitFor, pollUntil, scaled, rssKb, SRC } from '../interop/harness.mjs';
import { Controller, enc, STDIN, STDOUT } from '../interop/airlock.mjs';
import { addUser, startAirlockd, api, attach } from '../interop/airlockd.mjs';
import { Target, runMatrix, upgradeRequest, FLOOD_RSS_MAX_KB, RSS_GROWTH_MAX_KB, SANITIZED } from '../interop/abuse.mjs';

const MAX_DATA = 65528;             // bytes of data in one DATA frame at the size limit (protocol.md)
const LOOP_BYTES = 256 * MAX_DATA;  // stdin sent in frames at the limit
const BURST = 1000, BURST_ADDRS = 40;
const D_MAX_CONNS = 400;            // airlockd's --max-conns here (the runner's is 64)
const D_REQUEST_S = 3;              // airlockd's --request-timeout here (the runner's is 10 s)
const RUNNER_REQUEST_S = 10;
// the longest pause of a stream while the server is abused (a burst, a
// viewer that takes nothing); seen: 50-300 ms. Scaled for slow machines.
const STREAM_GAP_MAX_MS = scaled(5000);
const FLOOD_MS = 8000;
const LOG_FLOOD = 300;              // oversize requests sent to see the log stay bounded

// A raw TCP connection: { sock, data (Buffer so far), closed, closedAt }
function rawConn(port, host = '127.0.0.1', localAddress) {
  return new Promise((resolve) => {
    const c = { data: Buffer.alloc(0), closed: false, closedAt: 0, error: null };
    c.sock = net.connect({ port, host, localAddress });
    c.sock.on('data', (d) => { c.data = Buffer.concat([c.data, d]); });
    c.sock.on('error', (e) => { c.error = e.code; });
    c.sock.on('close', () => { c.closed = true; c.closedAt = Date.now(); });
    c.sock.on('connect', () => resolve(c));
    c.sock.on('error', () => resolve(c));
  });
}

// The request's answer status, or 'closed' when the server hung up unanswered.
const statusOf = (req, port) => rawHttp(port, req, scaled(8000))
  .then((r) => r.status).catch((e) => (/closed|ECONNRESET|EPIPE/.test(e.message) ? 'closed' : `error ${e.message}`));

await run('abuse_requests', async () => {
  const base = tmpdir('abuse-req');
  const dir = path.join(base, 'data');
  keygen(dir);
  const A = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const viewer = addUser(dir, 'vic', 'viewer');
  const solo = await startRunner({ id: 'solo', dir });
  const stat = await startRunner({ id: 'stat1', dir });
  const d = await startAirlockd({ dir, args: ['--max-conns', String(D_MAX_CONNS), '--request-timeout', String(D_REQUEST_S)] });
  const ru = (r) => `/?identifier=${r.id}&api-version=2024-02-02-preview`;
  let a = await api(d.port, 'POST', '/v1/sandboxes', A, { id: 'stat1', kind: 'static', url: `ws://127.0.0.1:${stat.port}${ru(stat)}` });
  check(a.status === 201, 'a static sandbox stat1 on its runner');
  const newTerm = async (body) => {
    for (let i = 0; i < 100; i++) {
      const t = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'stat1', ...body });
      if (t.status === 201) return t.json.id;
      await sleep(100);
    }
    throw new Error('no terminal on stat1');
  };
  const soloTok = mint(dir, 'solo', 'runner:connect', 3600);
  const probeTok = mint(dir, 'stat1', 'runner:probe', 3600);
  const up = (port, target, headers) => statusOf(upgradeRequest(target, headers), port);
  const targets = {
    runner: new Target({ name: 'runner', pid: solo.proc.pid, port: solo.port, log: solo.log,
      probe: async () => (await up(solo.port, ru(solo), { Authorization: `Bearer ${soloTok}` })) === 101 }),
    // a probe session (runner:probe) leaves airlockd's link alone
    'runner stat1': new Target({ name: 'runner stat1', pid: stat.proc.pid, port: stat.port, log: stat.log,
      probe: async () => (await up(stat.port, ru(stat), { Authorization: `Bearer ${probeTok}` })) === 101 }),
    airlockd: new Target({ name: 'airlockd', pid: d.p.pid, port: d.port, log: d.log,
      probe: async () => (await api(d.port, 'GET', '/v1/sandboxes', A)).status === 200 }),
  };
  for (const t of Object.values(targets)) await t.baseline();
  const upgradeOf = { runner: ru(solo), airlockd: null };
  const T0 = await newTerm({ argv: ['sh', '-c', 'echo ready; exec sleep 600'] });
  upgradeOf.airlockd = `/v1/terminals/${T0}/attach`;
  const authOf = { runner: { Authorization: `Bearer ${soloTok}` }, airlockd: { Authorization: `Bearer ${op}` } };
  const portOf = { runner: solo.port, airlockd: d.port, 'runner stat1': stat.port };
  const BOTH = ['runner', 'airlockd'];
  const refused = (s) => s === 'closed' || (typeof s === 'number' && s >= 400 && s < 500);

  // ---- oversize headers and URLs
  await runMatrix('requests', [
    { name: 'oversize header (16 KiB) on a valid upgrade', targets: BOTH,
      send: (t) => up(portOf[t.name], upgradeOf[t.name], { ...authOf[t.name], 'X-Pad': 'p'.repeat(16384) }),
      expect: refused, show: (s) => `${s}` },
    { name: 'oversize headers (12 x 1 KiB) on a valid upgrade', targets: BOTH,
      send: (t) => up(portOf[t.name], upgradeOf[t.name], { ...authOf[t.name],
        ...Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`X-Pad-${i}`, 'p'.repeat(1024)])) }),
      expect: refused, show: (s) => `${s}` },
    { name: 'oversize URL (16 KiB)', targets: BOTH,
      send: (t) => statusOf(`GET /healthz?pad=${'u'.repeat(16384)} HTTP/1.1\r\nHost: x\r\n\r\n`, portOf[t.name]),
      expect: (s) => s !== 200 && (s === 'closed' || s >= 400), show: (s) => `${s}` },
    { name: 'oversize URL (64 KiB) on an upgrade', targets: BOTH,
      send: (t) => up(portOf[t.name], `${upgradeOf[t.name]}${upgradeOf[t.name].includes('?') ? '&' : '?'}pad=${'u'.repeat(65536)}`, authOf[t.name]),
      expect: refused, show: (s) => `${s}` },
    { name: `oversize header, ${LOG_FLOOD} times: the log grows by a bounded number of lines`, targets: BOTH,
      send: async (t) => {
        const from = t.logSize();
        const req = upgradeRequest(upgradeOf[t.name], { ...authOf[t.name], 'X-Pad': 'p'.repeat(16384) });
        const st = [];
        for (let i = 0; i < LOG_FLOOD; i += 20) st.push(...await Promise.all(Array.from({ length: 20 }, () => statusOf(req, portOf[t.name]))));
        const text = t.logSince(from);
        return { refused: st.filter(refused).length, lines: text.split('\n').filter((l) => /header data space/.test(l)).length,
          foreign: text.split('\n').filter((l) => l && !/^\d+\.\d{3} /.test(l)).length };
      },
      // lws's own line for it, at most once per 10 s (src/ws/wslog.c), in
      // our format; before: one line per request, in lws's
      expect: (g) => g.refused === LOG_FLOOD && g.lines <= 2 && g.foreign === 0,
      show: (g) => `${g.refused} refused; ${g.lines} log lines about it, ${g.foreign} lines not in our format` },
    { name: 'a 2 KiB header on GET /healthz (control: under the limit)', targets: BOTH,
      send: (t) => statusOf(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ${'p'.repeat(2048)}\r\n\r\n`, portOf[t.name]),
      expect: (s) => s === 200, show: (s) => `${s}` },
    { name: 'the same upgrade without the padding (control)', targets: BOTH,
      send: (t) => up(portOf[t.name], upgradeOf[t.name], authOf[t.name]),
      expect: (s) => s === 101, show: (s) => `${s}` },
  ], targets);

  // ---- slow-loris: an upgrade trickled a byte at a time, never finished,
  // against both at once; each must close it at its request deadline
  const loris = async (t) => {
    const req = upgradeRequest(upgradeOf[t.name], authOf[t.name]).replace(/\r\n\r\n$/, '\r\nX-Slow: ');
    const c = await rawConn(portOf[t.name]);
    const t0 = Date.now();
    let i = 0;
    const limit = Date.now() + scaled(30000);
    while (!c.closed && Date.now() < limit) {
      if (i < req.length) c.sock.write(req[i++]); else c.sock.write('x');
      await sleep(300);
    }
    const ms = c.closed ? c.closedAt - t0 : -1;
    c.sock.destroy();
    return { ms, answered: c.data.toString('latin1').split('\r\n')[0] };
  };
  const deadline = { runner: RUNNER_REQUEST_S * 1000, airlockd: D_REQUEST_S * 1000 };
  const lorisRes = {};
  await Promise.all(BOTH.map(async (n) => { lorisRes[n] = await loris(targets[n]); }));
  await runMatrix('requests', [{ name: 'slow-loris upgrade (a byte every 300 ms)', targets: BOTH,
    send: async (t) => lorisRes[t.name],
    expect: (g, t) => g.ms >= deadline[t.name] - 500 && g.ms <= deadline[t.name] + scaled(3000) && !/ 101 /.test(g.answered),
    show: (g) => `closed after ${g.ms} ms (${g.answered || 'unanswered'})` }], targets);

  // ---- 1,000 connections at once from 40 addresses, while a client
  // attached through airlockd to a terminal of stat1 keeps streaming
  const streamT = await newTerm({ argv: ['sh', '-c', 'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.02; done'] });
  const watcher = await attach(d.port, streamT, viewer, { read: true });
  let lastAt = Date.now(), maxGap = 0, watching = false;
  watcher.ch.onData = () => { const now = Date.now(); if (watching) maxGap = Math.max(maxGap, now - lastAt); lastAt = now; };
  await watcher.ch.waitOutput(/tick \d+/, 10000);
  const burst = async (t) => {
    lastAt = Date.now(); maxGap = 0; watching = true;
    const conns = await Promise.all(Array.from({ length: BURST }, (_, i) => rawConn(portOf[t.name], '127.0.0.1', `127.0.0.${2 + (i % BURST_ADDRS)}`)));
    await sleep(1000);
    const isRefusal = (c) => /^HTTP\/1\.[01] (503|429)/.test(c.data.toString('latin1'));
    const refusedN = conns.filter(isRefusal).length;
    const silentClosed = conns.filter((c) => !isRefusal(c) && (c.closed || c.error)).length;
    const open = conns.filter((c) => !c.closed && !c.error && c.data.length === 0);
    // the accepted ones are served: each asks /healthz now
    const served = await Promise.all(open.map((c) => new Promise((resolve) => {
      c.data = Buffer.alloc(0);
      c.sock.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      const tm = setTimeout(() => resolve(false), scaled(5000));
      const poll = setInterval(() => {
        if (/^HTTP\/1\.[01] 200/.test(c.data.toString('latin1'))) { clearTimeout(tm); clearInterval(poll); resolve(true); }
        if (c.closed) { clearTimeout(tm); clearInterval(poll); resolve(false); }
      }, 20);
      tm.unref?.();
    })));
    for (const c of conns) c.sock.destroy();
    watching = false;
    const maxOpen = t.name === 'airlockd' ? D_MAX_CONNS : 64;
    return { refusedN, silentClosed, open: open.length, served: served.filter(Boolean).length, maxGap, maxOpen };
  };
  await runMatrix('requests', [{ name: `${BURST} connections at once (${BURST_ADDRS} addresses), a stream attached`, targets: ['runner stat1', 'airlockd'],
    send: burst,
    expect: (g) => g.refusedN >= BURST - g.maxOpen && g.open <= g.maxOpen && g.open > 0 && g.served === g.open && g.silentClosed === 0 &&
      g.maxGap <= STREAM_GAP_MAX_MS,
    show: (g) => `${g.refusedN} refused 503/429, ${g.open} accepted (limit ${g.maxOpen}), ${g.served} of them served, ` +
      `${g.silentClosed} closed unanswered; the stream's longest pause ${g.maxGap} ms` }], targets);
  await watcher.ch.waitOutput(/tick \d+\r?\n[\s\S]*tick \d+/, 5000);
  check(watcher.ctl.ready && !watcher.ctl.closeInfo, 'the attached client is still linked after both bursts');
  watcher.ctl.ws.terminate();

  // ---- browser endpoints: a session's writes need our Origin and the CSRF token
  const routes = [];
  const src = fs.readFileSync(path.join(SRC, 'src/control/api_route.c'), 'utf8');
  const table = /static const struct route routes\[\] = \{([\s\S]*?)\n\};/.exec(src)[1];
  for (const m of table.matchAll(/\{\s*M_(\w+),\s*"([^"]+)"/g)) routes.push({ method: m[1], path: m[2] });
  // (the sign-in, POST /v1/session, needs no session: its own rows below)
  const writes = routes.filter((r) => ['POST', 'DELETE', 'ANY', 'UPGRADE'].includes(r.method) && r.path.startsWith('/v1/') &&
    r.path !== '/v1/runners/connect' && !(r.method === 'POST' && r.path === '/v1/session'));
  const victim = await newTerm({ argv: ['sh', '-c', 'exec sleep 600'] });
  check((await api(d.port, 'POST', '/v1/sandboxes', A, { id: 'victim-sbx', kind: 'reverse' })).status === 201, 'a sandbox for the session rows to aim at');
  const concrete = (p) => {
    const id = p.startsWith('/v1/sandboxes/') ? 'victim-sbx' : victim;
    return p.replace('{id}*', `${id}/anything`).replace('{id}', id);
  };
  const signIn = async (key) => {
    const r = await api(d.port, 'POST', '/v1/session', undefined, { key });
    return { cookie: /set-cookie:\s*([^;\r\n]*)/i.exec(r.head)[1], csrf: r.json.csrf };
  };
  const s1 = await signIn(A), s2 = await signIn(op);
  const own = `http://127.0.0.1:${d.port}`;
  const sessReq = (r, { origin, csrf, cookie = s1.cookie }) => {
    const target = concrete(r.path);
    if (r.method === 'UPGRADE') {
      return upgradeRequest(target, { Host: `127.0.0.1:${d.port}`, Cookie: cookie, Origin: origin,
        'Sec-WebSocket-Protocol': csrf ? `airlock.v1, airlock-csrf.${csrf}` : 'airlock.v1' });
    }
    const method = r.method === 'ANY' ? 'POST' : r.method;
    const body = '{}';
    return `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nCookie: ${cookie}\r\n` +
      (origin ? `Origin: ${origin}\r\n` : '') + (csrf ? `X-Airlock-CSRF: ${csrf}\r\n` : '') +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  };
  const name = (r) => `${r.method === 'ANY' ? 'POST' : r.method} ${r.path}`;
  const foreign = ['http://evil.example', 'null', `http://127.0.0.1:${d.port}.evil.example`, `http://127.0.0.1:${d.port + 1}`,
    `https://127.0.0.1:${d.port}`, `${own}/`, null];
  const originRows = [], csrfRows = [], controlRows = [];
  for (const r of writes) {
    for (const o of foreign) {
      originRows.push({ name: `${name(r)} through a session, Origin ${o === null ? 'absent' : JSON.stringify(o)}`, targets: ['airlockd'],
        send: () => statusOf(sessReq(r, { origin: o, csrf: s1.csrf }), d.port),
        // an upgrade without an Origin is no browser's: a program's, which
        // the credential alone decides (api.md); the rest must be 403
        expect: (s) => (o === null && r.method === 'UPGRADE' ? s === 101 : s === 403), show: (s) => `${s}` });
    }
    // (after the refusals: these change things, each with a session of its own)
    controlRows.push({ name: `${name(r)} through a session, our Origin and its CSRF token (control)`, targets: ['airlockd'],
      send: async () => { const s = await signIn(A); return statusOf(sessReq(r, { origin: own, csrf: s.csrf, cookie: s.cookie }), d.port); },
      expect: (s) => ![401, 403, 404, 'closed'].includes(s), show: (s) => `${s}` });
    for (const [what, csrf, cookie] of [['no CSRF token', null], ['a wrong CSRF token', `alc_${'Z'.repeat(43)}`],
      ["another session's CSRF token", s2.csrf], ['its CSRF token with another session cookie', s1.csrf, s2.cookie]]) {
      csrfRows.push({ name: `${name(r)} with the cookie, our Origin, ${what}`, targets: ['airlockd'],
        send: () => statusOf(sessReq(r, { origin: own, csrf, cookie }), d.port),
        expect: (s) => s === 401, show: (s) => `${s}` });
    }
  }
  check(writes.length >= 10, `${writes.length} browser write endpoints from routes[] (POST, DELETE, any-method and upgrade routes)`);
  // the sign-in itself with a valid key, from a foreign page (login CSRF):
  // 403; without an Origin (a program) or from ours: 200
  const signInReq = (o) => `POST /v1/session HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\n${o === null ? '' : `Origin: ${o}\r\n`}` +
    `Content-Type: application/json\r\nContent-Length: ${JSON.stringify({ key: op }).length}\r\n\r\n${JSON.stringify({ key: op })}`;
  for (const o of [...foreign, own]) {
    originRows.push({ name: `POST /v1/session (sign-in with a valid key), Origin ${o === null ? 'absent' : JSON.stringify(o)}`, targets: ['airlockd'],
      send: () => statusOf(signInReq(o), d.port),
      expect: (s) => (o === null || o === own ? s === 200 : s === 403), show: (s) => `${s}` });
  }
  // the reads: a page of another origin (another port of this host is
  // the same site: the cookie goes along) cannot hold the CSRF token, so a
  // read through the cookie alone is 401; and no answer, nor a CORS
  // preflight's, lets another origin read it (no Access-Control-Allow-*)
  const reads = routes.filter((r) => r.method === 'GET' && (r.path.startsWith('/v1/') || r.path === '/metrics'));
  const noCors = (res) => !/^access-control-allow-/im.test(res.head || '');
  const rawRes = (req) => rawHttp(d.port, req, scaled(8000)).catch((e) => ({ status: `no answer (${e.message})`, head: '' }));
  for (const r of reads) {
    const target = concrete(r.path);
    originRows.push({ name: `GET ${r.path} from another origin of this site, with the cookie`, targets: ['airlockd'],
      send: () => rawRes(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nCookie: ${s1.cookie}\r\nOrigin: http://127.0.0.1:${d.port + 1}\r\n\r\n`),
      expect: (g) => g.status === 401 && noCors(g), show: (g) => `${g.status}, CORS headers: ${!noCors(g)}` });
    originRows.push({ name: `OPTIONS ${r.path} (a CORS preflight from a foreign Origin)`, targets: ['airlockd'],
      send: () => rawRes(`OPTIONS ${target} HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nOrigin: http://evil.example\r\n` +
        'Access-Control-Request-Method: GET\r\nAccess-Control-Request-Headers: x-airlock-csrf\r\n\r\n'),
      expect: (g) => typeof g.status === 'number' && g.status >= 400 && noCors(g), show: (g) => `${g.status}, CORS headers: ${!noCors(g)}` });
  }
  // the page itself is public, but no other site may frame it
  // (clickjacking: a page of another port is the same site)
  for (const f of ['/', '/app/app.js']) {
    originRows.push({ name: `GET ${f}: no other site may frame it`, targets: ['airlockd'],
      send: () => rawRes(`GET ${f} HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nOrigin: http://127.0.0.1:${d.port + 1}\r\n\r\n`),
      expect: (g) => g.status === 200 && /^x-frame-options: DENY$/im.test(g.head) &&
        /^content-security-policy: frame-ancestors 'none'$/im.test(g.head) && noCors(g),
      show: (g) => `${g.status}, ${(g.head || '').split('\r\n').filter((l) => /^(x-frame|content-security)/i.test(l)).join('; ') || 'no framing headers'}` });
  }
  await runMatrix('foreign origin', originRows, targets);
  await runMatrix('csrf', csrfRows, targets);
  a = await api(d.port, 'GET', `/v1/terminals/${victim}`, A);
  check(a.json.state === 'running', 'the terminal those requests aimed at still runs');
  check((await api(d.port, 'GET', '/v1/sandboxes', A)).json.some((x) => x.id === 'victim-sbx'), 'the sandbox they aimed at is still there');
  // the changes that remove what the others aim at go last
  const last = (row) => /^(DELETE \/v1\/(sandboxes|terminals)|POST .*\/kill )/.test(row.name);
  await runMatrix('session controls', [...controlRows.filter((x) => !last(x)), ...controlRows.filter(last)], targets);

  // ---- garbage after a valid handshake, raw bytes and random frames
  const afterHandshake = async (t, bytes) => {
    const c = await rawConn(portOf[t.name]);
    c.sock.write(upgradeRequest(upgradeOf[t.name], authOf[t.name]));
    await waitFor(() => c.data.includes('\r\n\r\n') || c.closed, 5000, 'the 101').catch(() => {});
    const head = c.data.toString('latin1').split('\r\n')[0];
    c.sock.write(bytes);
    await waitFor(() => c.closed, 10000, 'the close').catch(() => {});
    const closed = c.closed;
    c.sock.destroy();
    return { head, closed };
  };
  const garbage = crypto.randomBytes(4096);
  garbage[0] = 0x47; // 'G': never a valid first byte of a client's frame (no mask bit ... and reserved bits)
  const rand = crypto.createHash('sha256').update('abuse_requests').digest();
  const randomMsgs = Array.from({ length: 20 }, (_, i) => {
    const h = crypto.createHash('sha256').update(rand).update(String(i)).digest();
    const len = 1 + (h.readUInt16BE(0) % 300);
    const b = Buffer.alloc(len);
    for (let k = 0; k < len; k++) b[k] = crypto.createHash('md5').update(h).update(String(k)).digest()[0];
    return b;
  });
  // random frames whose length field is right: they reach the frame parser
  const randomFramed = randomMsgs.map((m) => {
    const h = Buffer.alloc(10);
    h[0] = m[0]; h[1] = m.length > 1 ? m[1] : 0; h.writeUInt32BE(m.length > 5 ? m.readUInt32BE(2) : 1, 2);
    h.writeUInt32BE(m.length, 6);
    return Buffer.concat([h, m]);
  });
  const randomFrames = async (t, msgs) => {
    const codes = [];
    for (const m of msgs) {
      const c = new Controller();
      await c.connect(`ws://127.0.0.1:${portOf[t.name]}${upgradeOf[t.name]}`, authOf[t.name]);
      c.ws.send(m);
      await c.wait(() => c.closeInfo, 'the close', 5000).catch(() => {});
      codes.push(c.closeInfo ? c.closeInfo.code : 'open');
      if (!c.closeInfo) c.ws.terminate();
    }
    return codes;
  };
  await runMatrix('requests', [
    { name: 'garbage bytes after the 101', targets: BOTH, send: (t) => afterHandshake(t, garbage),
      expect: (g) => / 101 /.test(g.head) && g.closed, show: (g) => `${g.head}, then closed: ${g.closed}` },
    { name: 'an unmasked frame after the 101', targets: BOTH, send: (t) => afterHandshake(t, Buffer.from([0x82, 0x05, 1, 2, 3, 4, 5])),
      expect: (g) => / 101 /.test(g.head) && g.closed, show: (g) => `${g.head}, then closed: ${g.closed}` },
    { name: '20 random binary messages (one per connection)', targets: BOTH, send: (t) => randomFrames(t, randomMsgs),
      // each is refused: ERROR then 4000, or 4004 when its length field
      // says more than the limit
      expect: (codes) => codes.every((c) => [4000, 4004].includes(c)),
      show: (codes) => codes.join(' ') },
    { name: '20 random frames with a right length field (one per connection)', targets: BOTH, send: (t) => randomFrames(t, randomFramed),
      // they reach the frame parser: ERROR then 4000 (an unknown type, a
      // malformed payload, a frame a controller may not send), or, for one
      // that happens to be harmless, the link stays
      expect: (codes) => codes.every((c) => [4000, 'open'].includes(c)) && codes.filter((c) => c === 4000).length >= 15,
      show: (codes) => codes.join(' ') },
  ], targets);

  // ---- frames at the size limit, in a loop: 16 MiB of stdin to `wc -c`
  const maxFrames = async (ctl, ch) => {
    let off = 0;
    const chunk = Buffer.alloc(MAX_DATA, 0x61);
    const limit = Date.now() + scaled(60000);
    while (off < LOOP_BYTES && Date.now() < limit) {
      await ch.wait(() => ch.inLimit > off || ctl.closeInfo, 'stdin credit', 30000);
      if (ctl.closeInfo) break;
      while (off < LOOP_BYTES && ch.inLimit - off >= 1) {
        const n = Math.min(MAX_DATA, ch.inLimit - off, LOOP_BYTES - off);
        ctl.send(enc.data(ch.id, STDIN, off, chunk.subarray(0, n)));
        off += n;
        ch.inSent = off; ch.inBase = off; ch.inAcked = off;
      }
    }
    ctl.send(enc.eof(ch.id, STDIN, off));
    await ch.waitOutput(/^\s*\d+\s*$/m, 30000).catch(() => {});
    return { sent: off, counted: Number((/(\d+)/.exec(ch.output().toString()) || [])[1]), frames: Math.ceil(off / MAX_DATA) };
  };
  await runMatrix('requests', [{ name: `${LOOP_BYTES} bytes of stdin in DATA frames at the size limit`, targets: BOTH, send: async (t) => {
    if (t.name === 'runner') {
      const c = await new Controller().connect(solo.url, authOf.runner);
      c.nextId = 1000; // channels of its own on the runner, which keeps the others'
      const ch = c.open(['wc', '-c'], { mode: 1 });
      await ch.wait(() => ch.opened, 'opened');
      const g = await maxFrames(c, ch);
      c.ws.terminate();
      return g;
    }
    const id = await newTerm({ argv: ['sh', '-c', 'stty raw -echo 2>/dev/null; wc -c'], mode: 'pipes' });
    const w = await attach(d.port, id, op, { mode: 1 });
    await w.ch.wait(() => w.ch.role !== undefined, 'ROLE');
    const g = await maxFrames(w.ctl, w.ch);
    w.ctl.ws.terminate();
    return g;
  }, expect: (g) => g.sent === LOOP_BYTES && g.counted === LOOP_BYTES,
  show: (g) => `${g.frames} frames, ${g.sent} bytes sent, wc -c counted ${g.counted}` }], targets);

  // ---- 257 channels through airlockd: 256 terminals on stat1's link,
  // the 257th refused; all 256 work and close
  const many = [];
  let refusedAt = null;
  // (the health check follows the close: 256 live terminals hold memory
  // by design, shown in the row, ~190 KiB each in airlockd)
  await runMatrix('requests', [{ name: '257 terminals on one sandbox, then all closed', targets: ['airlockd'], send: async (t) => {
    const open = (await api(d.port, 'GET', '/v1/terminals', A)).json.filter((x) => ['opening', 'running', 'exited'].includes(x.state)).length;
    for (let i = open; i < 257 && refusedAt === null; i++) {
      const r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'stat1', argv: ['sleep', '600'] });
      if (r.status === 201) many.push(r.json.id); else refusedAt = { i, status: r.status, body: r.body.trim() };
    }
    const countIn = async (states) => (await api(d.port, 'GET', '/v1/terminals', A)).json
      .filter((x) => many.includes(x.id) && states.includes(x.state)).length;
    const runningN = await waitFor(async () => { const n = await countIn(['running']); return n === many.length && n; },
      30000, 'the terminals running').catch(() => 0);
    const rssOpen = rssKb(t.pid) - t.base;
    for (const id of many) await api(d.port, 'DELETE', `/v1/terminals/${id}`, op);
    const closedN = await waitFor(async () => { const n = await countIn(['closed', 'lost']); return n === many.length && n; },
      30000, 'the terminals closed').catch(() => 0);
    const again = (await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'stat1', argv: ['sh', '-c', 'echo again'] })).status;
    // their memory is given back once the runner has confirmed each close
    const rssClosed = await pollUntil(() => rssKb(t.pid) - t.base, (kb) => kb <= RSS_GROWTH_MAX_KB / 2, 10000, 200);
    return { open, made: many.length, refusedAt, runningN, closedN, again, rssOpen, rssClosed };
  }, expect: (g) => g.refusedAt && g.refusedAt.i === 256 && g.refusedAt.status === 429 && g.runningN === g.made &&
    g.closedN === g.made && g.again === 201,
  show: (g) => `${g.open} already open, ${g.made} made, then ${JSON.stringify(g.refusedAt)}; ${g.runningN} ran ` +
    `(airlockd's RSS +${g.rssOpen} KiB), ${g.closedN} closed (+${g.rssClosed} KiB), a new one: ${g.again}`,
  // under ASan each terminal costs ~1.5 MiB, kept in its quarantine once freed
  rebase: SANITIZED && 'the sanitizers keep the 256 terminals\' memory in quarantine' }], targets);

  // ---- a client that never reads (the runner): credit for 1 GiB, then
  // its socket is never read while the terminal floods
  // unpaced: tens of MB/s, so that a server buffering what it cannot send
  // would pass the RSS bound within the FLOOD_MS it runs
  const floodArgv = ['sh', '-c', "sleep 0.5; exec yes 'flood abcdefghijklmnopqrstuvwxyz 0123456789'"];
  await runMatrix('requests', [{ name: 'a controller that never reads, with 1 GiB of credit', targets: ['runner'], send: async (t) => {
    const c = await new Controller().connect(solo.url, authOf.runner);
    c.nextId = 2000;
    const ch = c.open(floodArgv);
    await ch.wait(() => ch.opened, 'opened');
    ch.paused = true;
    c.send(enc.ack(ch.id, STDOUT, 0, 1 << 30));
    const before = rssKb(t.pid);
    c.ws._socket.pause();
    const t0 = Date.now();
    let peak = before;
    while (Date.now() - t0 < FLOOD_MS) { peak = Math.max(peak, rssKb(t.pid)); await sleep(250); }
    c.ws.terminate();
    return { peak: peak - before };
  }, expect: (g) => g.peak <= FLOOD_RSS_MAX_KB,
  show: (g) => `the runner's RSS peaked ${g.peak} KiB above its level before, while the flood ran ${FLOOD_MS} ms` }], targets);

  // ---- a client that never acknowledges (airlockd): a viewer that grants
  // no credit while the terminal floods; the writer's stream never pauses
  await runMatrix('requests', [{ name: 'a viewer that never acknowledges', targets: ['airlockd'], send: async (t) => {
    const id = await newTerm({ argv: floodArgv });
    const w = await attach(d.port, id, op);
    let wLast = Date.now(), wGap = 0, wBytes = 0;
    w.ch.onData = (s, b) => { const now = Date.now(); wGap = Math.max(wGap, now - wLast); wLast = now; wBytes += b.length; };
    await w.ch.waitOutput(/flood/, 10000);
    const v = new Controller();
    const vch = v.adoptChannel(1);
    vch.paused = true; // its ATTACH grants one byte; no ACK follows
    await v.connect(`ws://127.0.0.1:${d.port}/v1/terminals/${id}/attach?mode=read`, { Authorization: `Bearer ${viewer}` });
    wLast = Date.now(); wGap = 0; wBytes = 0;
    const t0 = Date.now();
    const before = rssKb(t.pid);
    let peak = before;
    while (Date.now() - t0 < FLOOD_MS) { peak = Math.max(peak, rssKb(t.pid)); await sleep(250); }
    const got = vch.output().length;
    const res = { wGap, wBytes, vGot: got, peak: peak - before, linked: v.ready };
    w.ctl.ws.terminate(); v.ws.terminate();
    await api(d.port, 'DELETE', `/v1/terminals/${id}`, op);
    return res;
  }, expect: (g) => g.wGap <= STREAM_GAP_MAX_MS && g.wBytes > 1 << 20 && g.vGot <= 1 && g.peak <= FLOOD_RSS_MAX_KB,
  show: (g) => `writer: ${g.wBytes} bytes, longest pause ${g.wGap} ms; the viewer got ${g.vGot} stdout bytes; ` +
    `airlockd's RSS peaked ${g.peak} KiB above its level before` }], targets);
}, 300000);
