// Web sessions from airlockd's side (issue 10, item 7), without a browser:
// - sign-in (POST /v1/session) only as application/json, never when Origin
//   or Sec-Fetch-Site says another origin (login CSRF); a non-browser client
//   (no Origin) may sign in;
// - the answer's body holds the CSRF token; the cookie is HttpOnly,
//   SameSite=Strict, Path=/; GET /v1/session renews nothing;
// - sessions end: idle (--session-idle) and absolute (--session-ttl) even
//   while used; then the cookie with its token is refused;
// - sign-out deletes the session on the server: the same cookie and token
//   replayed are refused; a sign-out through a cookie needs the token too.
// Each expectation is reported, and all of them are checked, before failing.
import path from 'node:path';
import { run, check, rawHttp, tmpdir, sleep } from '../interop/harness.mjs';
import { addUser, startAirlockd } from '../interop/airlockd.mjs';

const fails = [];
function want(cond, msg) {
  console.log(`${cond ? 'ok' : 'not ok'} - ${msg}`);
  if (!cond) fails.push(msg);
}

await run('airlockd_session', async () => {
  const base = tmpdir('session');
  const dir = path.join(base, 'data');
  const key = addUser(dir, 'otto', 'operator');
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

  await d.stop();
  check(fails.length === 0, `every expectation held${fails.length ? `; failed: ${fails.join(' | ')}` : ''}`);
}, 120000);
