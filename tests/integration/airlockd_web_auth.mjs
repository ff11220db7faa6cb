// The browser side of airlockd's security and its operations knobs:
// sessions (API key -> HttpOnly SameSite=Strict cookie + a CSRF token in
// the body, sign-out), the cookie with its token accepted by the API and the
// attach WebSocket, cross-site requests refused (foreign Origin: 403 on
// upgrades, on changes through a session), the page's files served without
// escaping their directory; then a config file with TLS: https, wss attach,
// a local runner dialing back over wss, and the __Host- session cookie.
// (Cross-port replay, login CSRF and expiry: web_session_port.mjs,
// airlockd_session.mjs.)
import fs from 'node:fs';
import path from 'node:path';
import https from 'node:https';
import { execFileSync } from 'node:child_process';
import { WebSocket } from 'ws';
import { run, check, tmpdir, sleep, BIN } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';

function upgrade(url, headers) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, ['airlock.v1'], { headers, rejectUnauthorized: false });
    ws.on('unexpected-response', (q, r) => resolve(r.statusCode));
    ws.on('open', () => { ws.terminate(); resolve(101); });
    ws.on('error', () => resolve(-1));
  });
}

function httpsGet(port, target, headers = {}) {
  return new Promise((resolve, reject) => {
    const q = https.get({ host: '127.0.0.1', port, path: target, headers, rejectUnauthorized: false }, (r) => {
      let b = ''; r.on('data', (d) => { b += d; }); r.on('end', () => resolve({ status: r.statusCode, body: b }));
    });
    q.on('error', reject);
  });
}

await run('airlockd_web_auth', async () => {
  const base = tmpdir('webauth');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const web = path.join(base, 'web');
  fs.mkdirSync(path.join(web, 'vendor'), { recursive: true });
  fs.writeFileSync(path.join(web, 'index.html'), '<!doctype html><title>airlock</title>');
  fs.writeFileSync(path.join(web, 'app.js'), 'export {};');
  fs.writeFileSync(path.join(base, 'secret.txt'), 'do not serve');
  let d = await startAirlockd({ dir, args: ['--web', web] });
  const origin = `http://127.0.0.1:${d.port}`;

  let r = await api(d.port, 'GET', '/');
  check(r.status === 200 && /airlock/.test(r.body) && /text\/html/.test(r.head), 'GET / serves the page without a key');
  r = await api(d.port, 'GET', '/app/app.js');
  check(r.status === 200 && /javascript/.test(r.head), 'GET /app/app.js serves a script');
  for (const bad of ['/app/../secret.txt', '/app/%2e%2e/secret.txt', '/app/.hidden', '/vendor/nope.js', '/app/x/y.js']) {
    r = await api(d.port, 'GET', bad);
    check(r.status === 404 && !/do not serve/.test(r.body), `GET ${bad}: 404, nothing outside the page`);
  }

  r = await api(d.port, 'POST', '/v1/session', undefined, { key: 'alk_' + 'C'.repeat(43) });
  check(r.status === 401, 'sign-in with a wrong key: 401');
  r = await api(d.port, 'POST', '/v1/session', undefined, { key: op });
  const setCookie = /set-cookie:\s*([^\r\n]*)/i.exec(r.head)?.[1] || '';
  check(r.status === 200 && r.json.name === 'otto' && r.json.role === 'operator', 'sign-in with an API key: 200, who and role');
  check(/HttpOnly/.test(setCookie) && /SameSite=Strict/.test(setCookie) && !/Secure/.test(setCookie),
    'the session cookie is HttpOnly, SameSite=Strict (not Secure over plain http)');
  check(!setCookie.includes(op.slice(4)), 'the cookie does not carry the API key');
  const cookie = setCookie.split(';')[0];
  const csrf = r.json.csrf;
  check(typeof csrf === 'string' && !setCookie.includes(csrf), 'the answer holds a CSRF token, not in the cookie');
  const sess = `Cookie: ${cookie}\r\nX-Airlock-CSRF: ${csrf}\r\n`;
  const raw = async (method, target, headers, body = '') => {
    const { rawHttp } = await import('../interop/harness.mjs');
    const res = await rawHttp(d.port, `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\n${headers}` +
      (method !== 'GET' ? `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` : '') + `\r\n${body}`);
    return res;
  };
  r = await raw('GET', '/v1/session', sess);
  check(r.status === 200 && /otto/.test(r.body), 'GET /v1/session with the cookie and its token: who I am');
  r = await raw('GET', '/v1/terminals', sess);
  check(r.status === 200, 'the API accepts the session cookie with its token');
  r = await raw('GET', '/v1/terminals', `Cookie: ${cookie}\r\n`);
  check(r.status === 401, 'the cookie without its token: 401');
  r = await raw('GET', '/v1/terminals', `Cookie: ${cookie.replace(/.$/, 'x')}\r\nX-Airlock-CSRF: ${csrf}\r\n`);
  check(r.status === 401, 'a tampered cookie: 401');
  r = await raw('GET', '/v1/terminals', '');
  check(r.status === 401, 'no key and no session: 401');

  await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'box', kind: 'local' });
  for (let i = 0; i < 100; i++) {
    const s = await api(d.port, 'GET', '/v1/sandboxes', admin);
    if (s.json[0].link_up) break;
    await sleep(100);
  }
  const body = JSON.stringify({ sandbox: 'box', argv: ['sh', '-c', 'echo via-cookie; sleep 30'] });
  r = await raw('POST', '/v1/terminals', sess, body);
  check(r.status === 403, 'a change through a session without an Origin: 403');
  r = await raw('POST', '/v1/terminals', `${sess}Origin: http://evil.example\r\n`, body);
  check(r.status === 403, 'a change through a session from a foreign Origin: 403 (no CSRF)');
  r = await raw('POST', '/v1/terminals', `${sess}Origin: ${origin}\r\n`, body);
  check(r.status === 201, 'a change through a session from our own Origin: 201');
  const id = JSON.parse(r.body).id;

  const wsUrl = `ws://127.0.0.1:${d.port}/v1/terminals/${id}/attach`;
  check(await upgrade(wsUrl, { Cookie: cookie, Origin: 'http://evil.example' }) === 403, 'a WebSocket upgrade with a foreign Origin: 403');
  check(await upgrade(wsUrl, { Authorization: `Bearer ${op}`, Origin: 'http://evil.example' }) === 403, 'even with a valid key, a foreign Origin: 403');
  check(await upgrade(wsUrl, { Origin: origin }) === 401, 'an upgrade with neither key nor session: 401');
  const ctl = new Controller();
  const ch = ctl.adoptChannel(1);
  await ctl.connect(wsUrl, { Cookie: cookie, Origin: origin }, { protocols: ['airlock.v1', `airlock-csrf.${csrf}`] });
  const seen = () => Buffer.concat([ch.snapshot ? ch.snapshot.bytes : Buffer.alloc(0), ...ch.out]).toString('latin1');
  await ctl.wait(() => /via-cookie/.test(seen()), 'the terminal on screen', 10000);
  check(/via-cookie/.test(seen()), 'a browser-like attach with the cookie, its token and our Origin gets the terminal (snapshot)');
  ctl.ws.terminate();

  r = await raw('DELETE', '/v1/session', `${sess}Origin: ${origin}\r\n`);
  check(r.status === 200 && /Max-Age=0/.test(r.head), 'sign-out clears the cookie');
  r = await raw('GET', '/v1/session', sess);
  check(r.status === 401, 'the signed-out session replayed: 401');
  r = await api(d.port, 'GET', '/v1/audit', admin);
  check(r.json.some((e) => e.action === 'login' && e.actor === 'otto') && r.json.some((e) => e.action === 'origin_refused'),
    'sign-ins and refused origins are audited');
  await d.stop();

  // ---- a config file, TLS, log level
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', path.join(base, 'key.pem'),
    '-out', path.join(base, 'cert.pem'), '-days', '1', '-subj', '/CN=127.0.0.1'], { stdio: 'ignore' });
  // the port of the airlockd just stopped: its local sandbox dials there
  const port = d.port;
  const conf = path.join(base, 'airlockd.conf');
  fs.writeFileSync(conf, `# airlockd test config\nlisten = 127.0.0.1:${port}\ndata = ${dir}\n` +
    `tls-cert = ${path.join(base, 'cert.pem')}\ntls-key = ${path.join(base, 'key.pem')}\nlog-level = info\n`);
  const bad = path.join(base, 'bad.conf');
  fs.writeFileSync(bad, 'listen = 127.0.0.1:1\nbogus = 1\n');
  let err = '';
  try { execFileSync(path.join(BIN, 'airlockd'), ['serve', '--config', bad], { stdio: 'pipe' }); } catch (e) { err = e.stderr.toString(); }
  check(/bad\.conf:2: unknown key 'bogus'/.test(err), `a bad config file is refused with its line (${err.trim()})`);
  const { spawn } = await import('node:child_process');
  const log = path.join(base, 'tls.log');
  const out = fs.openSync(log, 'a');
  const p = spawn(path.join(BIN, 'airlockd'), ['serve', '--config', conf], { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const exited = new Promise((res) => p.on('exit', (code) => res(code)));
  let up = null;
  for (let i = 0; i < 100 && !up; i++) {
    try { up = await httpsGet(port, '/healthz'); } catch { await sleep(100); }
  }
  check(up && up.status === 200, 'with a config file naming a certificate: https serves');
  r = await httpsGet(port, '/v1/sandboxes', { Authorization: `Bearer ${admin}` });
  check(r.status === 200 && JSON.parse(r.body)[0].id === 'box', 'the API over https, with the key');
  let linked = false;
  for (let i = 0; i < 150 && !linked; i++) {
    r = await httpsGet(port, '/v1/sandboxes', { Authorization: `Bearer ${admin}` });
    linked = JSON.parse(r.body)[0].link_up;
    if (!linked) await sleep(100);
  }
  check(linked, 'the local runner was replaced by one dialing back over wss');
  const t = await new Promise((resolve, reject) => {
    const q = https.request({ host: '127.0.0.1', port, path: '/v1/terminals', method: 'POST', rejectUnauthorized: false,
      headers: { Authorization: `Bearer ${op}`, 'Content-Type': 'application/json' } }, (res) => {
      let b = ''; res.on('data', (x) => { b += x; }); res.on('end', () => resolve(JSON.parse(b)));
    });
    q.on('error', reject);
    q.end(JSON.stringify({ sandbox: 'box', argv: ['sh', '-c', 'sleep 1; echo over-tls; exit 4'] }));
  });
  const c2 = new Controller();
  const ch2 = c2.adoptChannel(1);
  await c2.connect(`wss://127.0.0.1:${port}/v1/terminals/${t.id}/attach`, { Authorization: `Bearer ${op}` }, { rejectUnauthorized: false });
  await ch2.waitExit(15000);
  check(ch2.exit.code === 4 && /over-tls/.test(Buffer.concat(ch2.out).toString()), 'a terminal over wss: output and exit code');
  c2.ws.terminate();
  const signin = await new Promise((resolve, reject) => {
    const q = https.request({ host: '127.0.0.1', port, path: '/v1/session', method: 'POST', rejectUnauthorized: false,
      headers: { 'Content-Type': 'application/json', Origin: `https://127.0.0.1:${port}` } }, (res) => {
      res.resume(); res.on('end', () => resolve({ status: res.statusCode, cookie: String(res.headers['set-cookie'] || '') }));
    });
    q.on('error', reject);
    q.end(JSON.stringify({ key: op }));
  });
  check(signin.status === 200 && /^__Host-airlock_session=/.test(signin.cookie) && /; Secure/.test(signin.cookie) &&
    /Path=\//.test(signin.cookie) && !/Domain/i.test(signin.cookie) && /HttpOnly/.test(signin.cookie),
    'over https the session cookie is __Host-airlock_session: Secure, Path=/, no Domain, HttpOnly');
  const hostCookie = signin.cookie.split(';')[0];
  r = await httpsGet(port, '/v1/session', { Cookie: hostCookie.replace('__Host-', '') });
  check(r.status === 401, 'over https a cookie without the __Host- prefix is not ours');
  const logText = fs.readFileSync(log, 'utf8');
  check(/serving https/.test(logText) && !/ debug /.test(logText), 'the log says https; log-level info leaves debug lines out');
  p.kill('SIGTERM');
  check(await exited === 0, 'airlockd over TLS stops cleanly');
}, 240000);
