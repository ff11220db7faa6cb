// Web sessions from airlockd's side (issue 10, item 7), without a browser:
// - sign-in (POST /v1/session) only as application/json, never when Origin
//   or Sec-Fetch-Site says another origin (login CSRF); a non-browser client
//   (no Origin) may sign in;
// - the answer's body holds the CSRF token; the cookie is HttpOnly,
//   SameSite=Strict, Path=/; GET /v1/session renews nothing;
// - sessions end: idle (--session-idle) and absolute (--session-ttl) even
//   while used; then the cookie with its token is refused;
// - sign-out deletes the session on the server: the same cookie and token
//   replayed are refused; a sign-out through a cookie needs the token too;
// - a WebSocket (terminal attach) opened through a session ends with it:
//   closed (4401) at once at sign-out, and within about a second once the
//   session idles out, reaches its lifetime while in use, or its user is
//   removed; a WebSocket opened with an API key ends with its key: closed
//   (4401) within about a second once the key's user is removed, while one
//   opened with another user's key stays open and its terminal still echoes.
// Each expectation is reported, and all of them are checked, before failing.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { run, check, rawHttp, tmpdir, sleep, scaled, onCleanup, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, addLocalSandbox, api, attach } from '../interop/airlockd.mjs';
import { Controller } from '../interop/airlock.mjs';

const CLOSE_SESSION_ENDED = 4401; // websess.h WEBSESS_CLOSE_ENDED
const CHECK_MS = 1000; // api_wsess.c API_WSESS_CHECK_MS: each session with WebSockets is looked up this often
const SLACK_MS = 1500; // a loaded machine's delay on top of a bound

const fails = [];
function want(cond, msg) {
  console.log(`${cond ? 'ok' : 'not ok'} - ${msg}`);
  if (!cond) fails.push(msg);
}

await run('airlockd_session', async () => {
  const base = tmpdir('session');
  const dir = path.join(base, 'data');
  const key = addUser(dir, 'otto', 'operator');
  const admin = addUser(dir, 'ada', 'admin');
  const ullaKey = addUser(dir, 'ulla', 'viewer'); // removed while her WebSocket is open
  const TTL = 5, IDLE = 2;
  const d = await startAirlockd({ dir, args: ['--session-ttl', String(TTL), '--session-idle', String(IDLE)] });
  const origin = `http://127.0.0.1:${d.port}`;
  const raw = (method, target, headers = {}, body = '') => rawHttp(d.port, `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\n` +
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') +
    (method !== 'GET' ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : '') + `\r\n${body}`);
  const login = (headers) => raw('POST', '/v1/session', headers, JSON.stringify({ key }));
  const json = { 'Content-Type': 'application/json' };

  // ---- login CSRF
  let r = await login({ 'Content-Type': 'text/plain' });
  want(r.status === 415 && !/set-cookie/i.test(r.head), `a text/plain sign-in is refused, no cookie (${r.status})`);
  r = await login({ 'Content-Type': 'application/x-www-form-urlencoded', Origin: origin });
  want(r.status === 415, `a form-encoded sign-in is refused (${r.status})`);
  r = await login({});
  want(r.status === 415, `a sign-in without Content-Type is refused (${r.status})`);
  r = await login({ ...json, Origin: 'http://127.0.0.1:1' });
  want(r.status === 403 && !/set-cookie/i.test(r.head), `a sign-in from another port's Origin is refused (${r.status})`);
  r = await login({ ...json, Origin: 'null' });
  want(r.status === 403, `a sign-in from an opaque Origin (null) is refused (${r.status})`);
  r = await login({ ...json, 'Sec-Fetch-Site': 'same-site' });
  want(r.status === 403, `a sign-in with Sec-Fetch-Site: same-site (another port) is refused (${r.status})`);
  r = await login({ ...json, 'Sec-Fetch-Site': 'cross-site' });
  want(r.status === 403, `a sign-in with Sec-Fetch-Site: cross-site is refused (${r.status})`);
  r = await login({ ...json, Origin: origin, 'Sec-Fetch-Site': 'same-origin' });
  want(r.status === 200, `a same-origin JSON sign-in works (${r.status})`);
  r = await login({ 'Content-Type': 'application/json; charset=utf-8' });
  want(r.status === 200, `a JSON sign-in without Origin (not a browser) works (${r.status})`);

  // ---- what a sign-in hands out
  const start = Date.now();
  const s = JSON.parse(r.body || '{}');
  const setCookie = /set-cookie:\s*([^\r\n]*)/i.exec(r.head)?.[1] || '';
  const cookie = setCookie.split(';')[0];
  want(/^[A-Za-z0-9_-]{20,}$/.test(s.csrf || '') && !setCookie.includes(s.csrf), 'the CSRF token is in the body, not the cookie');
  want(/HttpOnly/.test(setCookie) && /SameSite=Strict/.test(setCookie) && /Path=\//.test(setCookie) && !/Domain/i.test(setCookie),
    `the cookie: HttpOnly, SameSite=Strict, Path=/, no Domain (${setCookie.replace(/=[^;]*/, '=…')})`);
  want(new RegExp(`Max-Age=${TTL}\\b`).test(setCookie), 'the cookie lives as long as the session');
  want(Math.abs(s.expires_at - (start / 1000 + TTL)) < 2 && s.idle_timeout === IDLE, 'the answer says when it expires and its idle limit');
  const auth = { Cookie: cookie, 'X-Airlock-CSRF': s.csrf };
  r = await raw('GET', '/v1/session', auth);
  want(r.status === 200 && !/set-cookie/i.test(r.head), `GET /v1/session with cookie and token: 200, no new cookie (${r.status})`);
  r = await raw('GET', '/v1/session', { Cookie: cookie });
  want(r.status === 401, `GET /v1/session with the cookie alone: 401 (${r.status})`);
  r = await raw('GET', '/v1/sandboxes', { Authorization: `Bearer ${key}` });
  want(r.status === 200, 'an API key needs no CSRF token');

  // ---- absolute expiry: used every second, the session still ends at TTL
  let lastOk = 0;
  for (let i = 0; i < 2 * TTL + 4; i++) {
    r = await raw('GET', '/v1/sandboxes', auth);
    if (r.status === 200) lastOk = (Date.now() - start) / 1000;
    else break;
    await sleep(500);
  }
  want(r.status === 401 && lastOk >= TTL - 2 && lastOk < TTL + 1,
    `a session in use ends at its absolute expiry (${TTL} s): last accepted at ${lastOk.toFixed(1)} s, then ${r.status}`);

  // ---- idle expiry
  r = await login(json);
  const s2 = JSON.parse(r.body || '{}');
  const auth2 = { Cookie: (/set-cookie:\s*([^;\r\n]*)/i.exec(r.head) || [])[1], 'X-Airlock-CSRF': s2.csrf };
  r = await raw('GET', '/v1/session', auth2);
  want(r.status === 200, 'a new session works');
  await sleep(IDLE * 1000 + 700); // the behaviour under test: the idle limit passing
  r = await raw('GET', '/v1/session', auth2);
  want(r.status === 401, `a session unused for its idle limit (${IDLE} s) ends (${r.status})`);

  // ---- sign-out revokes on the server
  r = await login(json);
  const s3 = JSON.parse(r.body || '{}');
  const auth3 = { Cookie: (/set-cookie:\s*([^;\r\n]*)/i.exec(r.head) || [])[1], 'X-Airlock-CSRF': s3.csrf };
  r = await raw('DELETE', '/v1/session', { Cookie: auth3.Cookie, Origin: origin });
  want(r.status === 401, `a sign-out through the cookie without its token is refused (${r.status})`);
  r = await raw('GET', '/v1/session', auth3);
  want(r.status === 200, '... and the session lives on');
  r = await raw('DELETE', '/v1/session', { ...auth3, Origin: origin });
  want(r.status === 200 && /Max-Age=0/.test(r.head), `sign-out: 200, the cookie cleared (${r.status})`);
  r = await raw('GET', '/v1/session', auth3);
  want(r.status === 401, `the signed-out cookie and token replayed: 401 (${r.status})`);

  // ---- a WebSocket opened through a session ends with the session
  await addLocalSandbox(d.port, admin, 'box');
  r = await api(d.port, 'POST', '/v1/terminals', key, { sandbox: 'box', argv: ['cat'] });
  check(r.status === 201, 'a terminal to attach to');
  const url = `ws://127.0.0.1:${d.port}/v1/terminals/${r.json.id}/attach?mode=read`;
  const signIn = async (k = key) => {
    const x = await raw('POST', '/v1/session', json, JSON.stringify({ key: k }));
    return { cookie: (/set-cookie:\s*([^;\r\n]*)/i.exec(x.head) || [])[1], csrf: JSON.parse(x.body || '{}').csrf, at: Date.now() };
  };
  const wsAttach = async (sess) => {
    const ctl = new Controller();
    ctl.adoptChannel(1);
    onCleanup(async () => { try { ctl.ws.terminate(); } catch { /* gone */ } });
    await ctl.connect(url, { Cookie: sess.cookie }, { protocols: ['airlock.v1', `airlock-csrf.${sess.csrf}`] });
    return ctl;
  };
  // the close the WebSocket got within ms (scaled), or null
  const closedWithin = async (ctl, ms) => {
    for (const until = Date.now() + scaled(ms); !ctl.closeInfo && Date.now() < until;) await sleep(50);
    return ctl.closeInfo;
  };
  const isSessionEnd = (c, why) => c && c.code === CLOSE_SESSION_ENDED && why.test(c.reason);
  const termId = r.json.id;
  const keyed = await attach(d.port, termId, key); // with the API key: the writer
  await keyed.ch.wait(() => keyed.ch.role === 1, 'the keyed client is the writer');
  keyed.ch.write('echo-before\n');
  await keyed.ch.waitOutput(/echo-before/, 10000);

  // sign-out: both WebSockets of the session (two tabs) close at once
  const s4 = await signIn();
  const w4 = [await wsAttach(s4), await wsAttach(s4)];
  want(w4.every((c) => c.ready && !c.closeInfo), 'two WebSockets attached through a session');
  r = await raw('DELETE', '/v1/session', { Cookie: s4.cookie, 'X-Airlock-CSRF': s4.csrf, Origin: origin });
  want(r.status === 200, `sign-out (${r.status})`);
  const t4 = Date.now();
  const c4 = [await closedWithin(w4[0], 1000), await closedWithin(w4[1], 1000)];
  want(c4.every((c) => isSessionEnd(c, /signed out/)),
    `sign-out closes the session's WebSockets within ${Date.now() - t4} ms: ${c4.map((c) => JSON.stringify(c)).join(', ')}`);

  // idle: a session left unused ends with its WebSocket open
  const s5 = await signIn();
  const w5 = await wsAttach(s5);
  const c5 = await closedWithin(w5, IDLE * 1000 + CHECK_MS + SLACK_MS);
  const at5 = (Date.now() - s5.at) / 1000;
  want(isSessionEnd(c5, /expired/) && at5 >= IDLE - 0.2,
    `a session idle for ${IDLE} s closes its WebSocket (after ${at5.toFixed(1)} s: ${JSON.stringify(c5)})`);

  // lifetime: a session in use still ends at its expiry, and its WebSocket with it
  const s6 = await signIn();
  const w6 = await wsAttach(s6);
  let used = 0;
  for (const until = s6.at + scaled(TTL * 1000 + CHECK_MS + SLACK_MS); !w6.closeInfo && Date.now() < until; used++) {
    await raw('GET', '/v1/session', { Cookie: s6.cookie, 'X-Airlock-CSRF': s6.csrf });
    await sleep(500); // the behaviour under test: a session kept in use
  }
  const at6 = (Date.now() - s6.at) / 1000;
  want(isSessionEnd(w6.closeInfo, /expired/) && at6 >= TTL - 0.5 && used >= TTL,
    `a session used every 0.5 s closes its WebSocket at its lifetime (${TTL} s): after ${at6.toFixed(1)} s, ${JSON.stringify(w6.closeInfo)}`);

  // the user removed (from the command line, beside the running airlockd):
  // the session's row is gone, found by the next lookup
  // the WebSocket she opened with her API key (read-only: she is a viewer)
  // ends with it too
  const s7 = await signIn(ullaKey);
  const w7 = await wsAttach(s7);
  const k7 = await attach(d.port, termId, ullaKey, { read: true });
  want(k7.ctl.ready && !k7.ctl.closeInfo, 'a WebSocket attached with her API key');
  execFileSync(path.join(BIN, 'airlockd'), ['user', 'rm', 'ulla', '--data', dir]);
  const t7 = Date.now();
  const c7 = await closedWithin(w7, CHECK_MS + SLACK_MS);
  want(isSessionEnd(c7, /^session ended$/),
    `removing the user closes her session's WebSocket within ${Date.now() - t7} ms (${JSON.stringify(c7)})`);
  const ck7 = await closedWithin(k7.ctl, CHECK_MS + SLACK_MS);
  want(isSessionEnd(ck7, /^API key revoked: its user was removed$/),
    `... and the WebSocket opened with her API key within ${Date.now() - t7} ms (${JSON.stringify(ck7)})`);

  // the WebSocket opened with an API key is untouched, and its terminal echoes
  want(keyed.ctl.ready && !keyed.ctl.closeInfo, "the WebSocket opened with another user's API key stays open");
  keyed.ch.write('echo-after\n');
  await keyed.ch.waitOutput(/echo-after/, 10000);
  want(true, 'its terminal still echoes');
  const log = fs.readFileSync(d.log, 'utf8');
  want(/session ended: signed out: 2 WebSockets closed/.test(log) && /session ended: expired: 1 WebSocket closed/.test(log) &&
    /API key revoked: its user was removed: 1 WebSocket closed/.test(log),
    'airlockd logs each session end with the number of WebSockets closed');

  await d.stop();
  check(fails.length === 0, `every expectation held${fails.length ? `; failed: ${fails.join(' | ')}` : ''}`);
}, 180000);
