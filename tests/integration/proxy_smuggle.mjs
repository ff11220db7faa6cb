// The credential proxy attacked with raw HTTP, end to end, on both paths
// (airlockd's direct one and the runner's listener, where each connection
// is a proxy channel of the link): the agent holds a credential and writes
// whatever bytes it likes (docs/proxy.md, "What a request gets").
// The upstream is an HTTP server of the test's that logs the raw bytes of
// every connection, so each check sees what would have reached it.
//
// - A HEAD with a chunked body is 400 and nothing reaches the upstream.
//   Then a victim (a terminal of ANOTHER sandbox, through its own runner)
//   calls the same upstream, on the connections airlockd keeps open to it:
//   its call is answered (a HEAD framed as chunked upstream, whose body
//   libcurl never sends, made the next request on that connection be read
//   as the body).
// - Header names with a space before the colon (`x-api-key :`, `Host :`)
//   are 400, and the attacker's key and host never reach the upstream.
// - Paths that a lax decoder reads as `..`: `%c0%ae%c0%ae`, `..;x`: 400,
//   nothing forwarded.
// - max-bytes is counted as the bytes move: an answer of 8 times the
//   terminal's budget stops near the budget (not after it is whole), and
//   the next call of that terminal gets 429 with Retry-After, while
//   another terminal's budget is untouched.
// - An upstream's answer with Content-Length beside chunked reaches the
//   agent framed once (chunked alone): a keep-alive agent reads the whole
//   body and its next answer on the same connection is its own.
// - An upstream's answer with a folded header line is 502.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import http from 'node:http';
import crypto from 'node:crypto';
import { run, check, tmpdir, onCleanup, waitFor, reportedPort, scaled, sleep } from '../interop/harness.mjs';
import { startAirlockd, addUser, addLocalSandbox, api, attach } from '../interop/airlockd.mjs';

const REAL_KEY = `sk-airlocktest-${crypto.randomBytes(16).toString('hex')}`;
const BUDGET = 1000000; // upstream b's max-bytes per terminal
const flat = (s) => String(s).replace(/\r\n/g, '⏎').slice(0, 300);

// The upstream: answers by path; logs each connection's raw bytes.
function startUpstream() {
  const raw = new Map(); // connection number -> bytes received (latin1)
  let nconn = 0;
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    req.resume();
    req.on('end', () => {
      if (u.pathname.endsWith('/big')) {
        const n = Number(u.searchParams.get('n'));
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': n });
        const chunk = Buffer.alloc(65536, 0x61);
        let sent = 0;
        const pump = () => {
          while (sent < n) {
            const k = Math.min(chunk.length, n - sent);
            sent += k;
            if (!res.write(chunk.subarray(0, k))) { res.once('drain', pump); return; }
          }
          res.end();
        };
        res.on('close', () => { sent = n; });
        pump();
        return;
      }
      if (u.pathname.endsWith('/rawresp')) {
        req.socket.end(Buffer.from(u.searchParams.get('b64'), 'base64'));
        return; // the raw answer frames itself; its connection ends
      }
      const body = JSON.stringify({ method: req.method, url: req.url, key: req.headers['x-api-key'] || req.headers.authorization || '' });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(req.method === 'HEAD' ? undefined : body);
    });
  });
  server.on('connection', (s) => {
    const id = ++nconn;
    raw.set(id, '');
    s.on('data', (d) => raw.set(id, raw.get(id) + d.toString('latin1')));
  });
  server.on('clientError', (err, s) => { try { s.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n'); } catch { /* gone */ } });
  onCleanup(() => new Promise((r) => { server.closeAllConnections(); server.close(r); }));
  const all = () => [...raw.values()].join('');
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r({ port: server.address().port, all })));
}

// Raw bytes to a port; resolves with what came back once the peer closes
// or `ms` passed (then the socket is closed by us).
function rawCall(port, bytes, ms = 5000) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let done = false;
    const fin = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(t);
      s.destroy();
      resolve({ data: data.toString('latin1'), closed });
    };
    const t = setTimeout(() => fin(false), scaled(ms));
    s.on('data', (d) => { data = Buffer.concat([data, d]); });
    s.on('error', () => fin(true));
    s.on('close', () => fin(true));
    s.on('connect', () => s.write(bytes));
  });
}

const statusOf = (text) => Number((/^HTTP\/1\.1 (\d{3})/.exec(text) || [])[1] || 0);

// A terminal that prints its proxy credential and URL, then waits.
async function agent(port, key, sandbox, proxy) {
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox, mode: 'pipes', proxy,
    argv: ['sh', '-c', 'echo "TOKEN=$AIRLOCK_PROXY_TOKEN"; echo "URL=$AIRLOCK_PROXY_URL"; exec sleep 600'] });
  if (r.status !== 201) throw new Error(`POST /v1/terminals: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, key, { read: true });
  await a.ch.waitOutput(/URL=\S+\n/, scaled(20000));
  const out = a.ch.output().toString();
  a.ctl.ws.terminate();
  const url = /URL=(\S+)/.exec(out)[1];
  return { id: r.json.id, token: /TOKEN=(\S+)/.exec(out)[1], url,
    rport: Number((/^http:\/\/127\.0\.0\.1:(\d+)\//.exec(url) || [])[1] || 0) };
}

await run('proxy_smuggle', async () => {
  const base = tmpdir('proxys');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'oli', 'operator');
  const up = await startUpstream();
  const secret = path.join(base, 'a.key');
  fs.writeFileSync(secret, `${REAL_KEY}\n`, { mode: 0o600 });
  const conf = path.join(base, 'airlockd.conf');
  fs.writeFileSync(conf, [
    `upstream.a.url = http://127.0.0.1:${up.port}`, 'upstream.a.kind = http', 'upstream.a.header = x-api-key',
    `upstream.a.secret-file = ${secret}`, 'upstream.a.paths = /v1/', 'upstream.a.response-timeout = 20',
    `upstream.b.url = http://127.0.0.1:${up.port}/b`, 'upstream.b.kind = http',
    `upstream.b.secret-file = ${secret}`, 'upstream.b.paths = /ok/', `upstream.b.max-bytes = ${BUDGET}`,
  ].join('\n') + '\n');
  const d = await startAirlockd({ dir, args: ['--config', conf, '--proxy-listen', '127.0.0.1:0'] });
  const dport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { what: 'the direct path' });
  await addLocalSandbox(d.port, admin, 'box');
  await addLocalSandbox(d.port, admin, 'box2');
  await waitFor(() => /sandbox box2: its runner serves the credential proxy at/.test(fs.readFileSync(d.log, 'utf8')),
    scaled(10000), 'PROXY_AT of box2');
  const A = await agent(d.port, op, 'box', ['a', 'b']);
  const B = await agent(d.port, op, 'box', ['b']);
  const C = await agent(d.port, op, 'box2', ['a']);
  check(A.rport > 0 && C.rport > 0 && A.rport !== C.rport && A.rport !== dport,
    `each sandbox's terminals get their runner's listener (${A.url}, ${C.url})`);
  const paths = [['direct', dport], ['runner', A.rport]];
  const get = (target, token, extra = '') =>
    `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n${extra}Connection: close\r\n\r\n`;

  // ---- a HEAD with a body, then a victim on the upstream's connections
  for (const [name, port] of paths) {
    const before = up.all().length;
    const r = await rawCall(port, `HEAD /v1/proxy/a/v1/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A.token}\r\n` +
      'Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n');
    check(statusOf(r.data) === 400 && /HEAD/.test(r.data) && up.all().length === before,
      `${name}: a HEAD with a chunked body is 400 and nothing reaches the upstream (${flat(r.data)})`);
    const v = await rawCall(C.rport, `POST /v1/proxy/a/v1/victim HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${C.token}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{"hello":1}', 8000);
    const vb = (() => { try { return JSON.parse(v.data.slice(v.data.indexOf('\r\n\r\n') + 4)); } catch { return {}; } })();
    check(statusOf(v.data) === 200 && vb.url === '/v1/victim' && vb.key === REAL_KEY,
      `${name}: then another sandbox's terminal's call is answered, with the real key (${flat(v.data)})`);
  }

  // ---- header names that are not tokens
  for (const [name, port] of paths) {
    const before = up.all().length;
    const r = await rawCall(port, get('/v1/proxy/a/v1/x', A.token, 'Host : evil.example\r\nx-api-key : attacker-key\r\n'));
    check(statusOf(r.data) === 400 && up.all().length === before && !up.all().includes('attacker-key') && !up.all().includes('evil.example'),
      `${name}: header names with a space before the colon are 400, nothing forwarded (${flat(r.data)})`);
  }

  // ---- paths a lax decoder reads as ..
  for (const [name, port] of paths) {
    for (const target of ['/v1/proxy/a/v1/%c0%ae%c0%ae/admin', '/v1/proxy/a/v1/..;x/admin', '/v1/proxy/a/v1/%e0%80%ae/x']) {
      const before = up.all().length;
      const r = await rawCall(port, get(target, A.token));
      check(statusOf(r.data) === 400 && up.all().length === before, `${name}: ${target} is 400, nothing forwarded (${flat(r.data)})`);
    }
  }

  // ---- max-bytes counted as the bytes move
  const bigCall = (port, token, n) => new Promise((resolve) => {
    let got = 0;
    const req = http.get({ host: '127.0.0.1', port, path: `/v1/proxy/b/ok/big?n=${n}`, agent: false,
      headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.on('data', (c) => { got += c.length; });
      const fin = (error) => resolve({ status: res.statusCode, headers: res.headers, got, error });
      res.on('end', () => fin(res.complete ? null : 'incomplete'));
      res.on('aborted', () => fin('aborted'));
      res.on('error', (e) => fin(e.message));
    });
    req.setTimeout(scaled(20000), () => req.destroy(new Error('timed out')));
    req.on('error', (e) => resolve({ status: 0, got, error: e.message }));
  });
  const big = await bigCall(A.rport, A.token, 8 * BUDGET);
  check(big.status === 200 && big.error && big.got < 2 * BUDGET,
    `an answer of 8× the terminal's budget is cut near the budget: ${big.got} bytes of ${8 * BUDGET} (${big.error})`);
  for (const [name, port] of paths) {
    const r = await rawCall(port, get('/v1/proxy/b/ok/small', A.token));
    check(statusOf(r.data) === 429 && /\r\nretry-after: \d+\r\n/i.test(r.data) && /bytes through upstream b are spent \(max-bytes/.test(r.data),
      `${name}: the spent terminal's next call is 429 with Retry-After (${flat(r.data)})`);
  }
  const other = await bigCall(dport, B.token, BUDGET / 2);
  check(other.status === 200 && !other.error && other.got === BUDGET / 2,
    `another terminal's budget is its own: ${other.got} bytes, whole`);

  // ---- the upstream's framing, as the agent sees it
  const answer = (resp) => `/v1/proxy/a/v1/rawresp?b64=${encodeURIComponent(Buffer.from(resp).toString('base64'))}`;
  const clte = answer('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n');
  for (const [name, port] of paths) {
    // one keep-alive connection: the odd answer, then an ordinary one
    const r = await rawCall(port, `GET ${clte} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A.token}\r\n\r\n` +
      get('/v1/proxy/a/v1/next', A.token), 8000);
    const heads = r.data.split('\r\n\r\n')[0];
    check(statusOf(r.data) === 200 && !/content-length/i.test(heads) && /transfer-encoding: chunked/i.test(heads) &&
      /\r\n5\r\nhello\r\n0\r\n\r\nHTTP\/1\.1 200/.test(r.data) && r.data.includes('"url":"/v1/next"'),
    `${name}: Content-Length beside chunked is dropped; the agent reads "hello" whole and then its next answer (${flat(r.data)})`);
  }
  for (const [name, port] of paths) {
    const r = await rawCall(port, get(answer('HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok'), A.token), 8000);
    check(statusOf(r.data) === 502 && !/\r\n\r\nok$/.test(r.data), `${name}: an answer with a folded header line is 502 (${flat(r.data)})`);
  }

  const audit = await api(d.port, 'GET', '/v1/audit', admin);
  check(!audit.body.includes(REAL_KEY) && !audit.body.includes(A.token) && !audit.body.includes(C.token),
    'the audit holds neither the key nor a credential');
  // the refused calls (400 before their credential was read) are counted, each path its own source
  const refused = (audit.json || []).filter((x) => x.action === 'proxy_refused').map((x) => JSON.parse(x.detail));
  check(refused.some((x) => x.peer === '127.0.0.1' && x.why === 'HTTP 400') &&
    refused.some((x) => x.peer === 'sandbox box' && x.why === 'HTTP 400'),
  `the refusals are counted per source: ${JSON.stringify(refused.map((x) => [x.peer, x.why, x.count]))}`);
  await sleep(10);
}, 180000);
