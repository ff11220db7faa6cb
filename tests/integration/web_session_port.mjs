// Web sessions are bound to the page's origin, not just its host (issue 10,
// item 7), in Debian's chromium (playwright-core) against a real airlockd:
// - a page served from ANOTHER PORT of 127.0.0.1 (an agent's dev server:
//   a tiny node http server here), visited by the signed-in browser, gets
//   the session cookie sent to it (cookies ignore ports) but can do nothing
//   with it: its own fetch and WebSocket to airlockd are refused, and its
//   server replaying the cookie with any Origin gets 401 for GET, POST and
//   the WebSocket upgrade, and no CSRF token from GET /v1/session;
// - with the CSRF token (which only the real page's sessionStorage holds)
//   the same requests work: X-Airlock-CSRF on HTTP, the subprotocol
//   "airlock-csrf.TOKEN" on the upgrade (airlockd still picks airlock.v1);
// - after sign-out the cookie and token replayed together are refused;
// - the other port's page cannot sign a browser in (login CSRF with a
//   text/plain POST): no cookie is set.
// Each expectation is reported, and all of them are checked, before failing.
import http from 'node:http';
import { WebSocket } from 'ws';
import { run, check, rawHttp, onCleanup } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { startWeb, launch, newPage, signIn, sleep } from '../web/webutil.mjs';

const fails = [];
function want(cond, msg) {
  console.log(`${cond ? 'ok' : 'not ok'} - ${msg}`);
  if (!cond) fails.push(msg);
}

// A WebSocket upgrade from node (as the other port's server would do it).
function upgrade(url, protocols, headers) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, protocols, { headers, perMessageDeflate: false });
    const t = setTimeout(() => { ws.terminate(); resolve({ status: -1 }); }, 5000);
    ws.on('unexpected-response', (q, r) => { clearTimeout(t); resolve({ status: r.statusCode }); q.destroy(); });
    ws.on('open', () => { clearTimeout(t); const protocol = ws.protocol; ws.terminate(); resolve({ status: 101, protocol }); });
    ws.on('error', () => { clearTimeout(t); resolve({ status: -1 }); });
  });
}

// The other port's page: it tries the API with the browser's cookie.
function evilPage(target, termId, adaKey) {
  return `<!doctype html><title>dev server</title><script>
const T = ${JSON.stringify(target)};
window.result = (async () => {
  const out = {};
  try { await fetch(T + '/v1/terminals', { method: 'POST', mode: 'no-cors', credentials: 'include',
    headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify({ sandbox: 'box', argv: ['sh', '-c', 'echo pwned'] }) });
    out.post = 'sent'; } catch (e) { out.post = 'error'; }
  out.ws = await new Promise((res) => {
    const ws = new WebSocket(T.replace('http', 'ws') + '/v1/terminals/${termId}/attach', ['airlock.v1']);
    ws.onopen = () => { ws.close(); res('open'); };
    ws.onerror = () => res('refused');
    setTimeout(() => res('timeout'), 5000);
  });
  if (${JSON.stringify(adaKey)}) {
    try { await fetch(T + '/v1/session', { method: 'POST', mode: 'no-cors', credentials: 'include',
      headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify({ key: ${JSON.stringify(adaKey)} }) });
      out.login = 'sent'; } catch (e) { out.login = 'error'; }
  }
  return out;
})();
</script>`;
}

await run('web_session_port', async () => {
  const w = await startWeb('wsport');
  const { port, origin, keys } = w;

  // ---- the other port: serves a page, records the cookies it is sent
  const seen = [];
  let page = '';
  const srv = http.createServer((q, r) => {
    if (q.headers.cookie) seen.push(q.headers.cookie);
    r.writeHead(200, { 'Content-Type': 'text/html' }); r.end(page);
  });
  await new Promise((res) => srv.listen(0, '127.0.0.1', res));
  const evilPort = srv.address().port;
  onCleanup(() => new Promise((res) => srv.close(res)));
  const evil = `http://127.0.0.1:${evilPort}`;

  let r = await api(port, 'POST', '/v1/terminals', keys.ada, { sandbox: 'box', argv: ['sh', '-c', 'echo cross-port; sleep 120'] });
  check(r.status === 201, 'a terminal to attach to');
  const termId = r.json.id;
  const count = async () => (await api(port, 'GET', '/v1/terminals', keys.ada)).json.length;
  const before = await count();

  const browser = await launch();
  const A = await newPage(browser);
  await signIn(A.page, origin, keys.otto);
  const token = await A.page.evaluate(() => sessionStorage.getItem('airlock.csrf'));
  const ck = (await A.ctx.cookies()).find((c) => c.name === 'airlock_session');
  want(typeof token === 'string' && token.length > 20, 'the page holds a CSRF token in its sessionStorage');
  want(ck && token && ck.value !== token && !(await A.ctx.cookies()).some((c) => c.value === token),
    'the CSRF token is in no cookie');

  // ---- the signed-in browser visits the other port
  page = evilPage(origin, termId, '');
  await A.page.goto(`${evil}/`);
  const res = await A.page.evaluate(() => window.result);
  check(seen.some((c) => c.includes('airlock_session=')), 'the other port received the session cookie (cookies ignore ports)');
  const cookie = seen.find((c) => c.includes('airlock_session=')).split(/;\s*/).find((c) => c.startsWith('airlock_session='));
  want(res.ws !== 'open', `the other port's page cannot open a WebSocket to a terminal (${res.ws})`);
  await sleep(300);
  want(await count() === before, "the other port's page could not open a terminal");

  // ---- its server replays the cookie with the Origin it likes
  const raw = (method, target, headers, body = '') => rawHttp(port, `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') +
    (method !== 'GET' ? `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` : '') + `\r\n${body}`);
  const body = JSON.stringify({ sandbox: 'box', argv: ['sh', '-c', 'echo replayed'] });
  r = await raw('GET', '/v1/terminals', { Cookie: cookie, Origin: origin });
  want(r.status === 401, `a replayed cookie without the CSRF token: GET /v1/terminals refused (${r.status})`);
  r = await raw('GET', `/v1/terminals/${termId}/recording`, { Cookie: cookie });
  want(r.status === 401, `... GET of a recording refused (${r.status})`);
  r = await raw('GET', '/v1/session', { Cookie: cookie });
  want(r.status === 401 && !(token && r.body.includes(token)), `... GET /v1/session refused and hands out no token (${r.status})`);
  r = await raw('POST', '/v1/terminals', { Cookie: cookie, Origin: origin }, body);
  want(r.status === 401, `... POST /v1/terminals with our Origin forged refused (${r.status})`);
  r = await raw('POST', '/v1/terminals', { Cookie: cookie, Origin: origin, 'X-Airlock-CSRF': 'alc_' + 'A'.repeat(43) }, body);
  want(r.status === 401, `... with a wrong token refused (${r.status})`);
  const wsUrl = `ws://127.0.0.1:${port}/v1/terminals/${termId}/attach`;
  let u = await upgrade(wsUrl, ['airlock.v1'], { Cookie: cookie, Origin: origin });
  want(u.status === 401, `... WebSocket upgrade refused (${u.status})`);
  u = await upgrade(wsUrl, ['airlock.v1', 'airlock-csrf.alc_' + 'A'.repeat(43)], { Cookie: cookie, Origin: origin });
  want(u.status === 401, `... WebSocket upgrade with a wrong token refused (${u.status})`);
  want(await count() === before, 'no terminal was opened by replaying the cookie');

  // ---- the cookie with the page's token works (what the real page sends)
  r = await raw('GET', '/v1/session', { Cookie: cookie, 'X-Airlock-CSRF': token });
  want(r.status === 200 && /otto/.test(r.body) && !/set-cookie/i.test(r.head), `the cookie with its token: GET /v1/session says who, renews nothing (${r.status})`);
  r = await raw('POST', '/v1/terminals', { Cookie: cookie, Origin: origin, 'X-Airlock-CSRF': token }, body);
  want(r.status === 201, `the cookie with its token and our Origin: POST /v1/terminals 201 (${r.status})`);
  u = await upgrade(wsUrl, ['airlock.v1', `airlock-csrf.${token}`], { Cookie: cookie, Origin: origin });
  want(u.status === 101 && u.protocol === 'airlock.v1', `the cookie with its token as a subprotocol: upgraded, airlock.v1 chosen (${u.status} ${u.protocol})`);
  u = await upgrade(wsUrl, ['airlock.v1'], { Authorization: `Bearer ${keys.otto}`, Origin: origin });
  want(u.status === 101, 'an API key needs no CSRF token');

  // ---- the real page still works with its token (a live terminal)
  await A.page.goto(`${origin}/#/t/${termId}/watch`);
  await A.page.waitForSelector('#role[data-role=viewer]', { timeout: 10000 }).catch(() => {});
  want(await A.page.$('#role[data-role=viewer]') !== null, 'the page (same tab, token kept) attaches to the terminal');

  // ---- sign-out revokes: the cookie and token replayed together are refused
  await A.page.click('#signout');
  await A.page.waitForSelector('#key', { timeout: 10000 });
  want(await A.page.evaluate(() => sessionStorage.getItem('airlock.csrf')) === null, 'sign-out forgets the token in the page');
  r = await raw('GET', '/v1/terminals', { Cookie: cookie, 'X-Airlock-CSRF': token });
  want(r.status === 401, `after sign-out, cookie and token replayed: GET refused (${r.status})`);
  r = await raw('POST', '/v1/terminals', { Cookie: cookie, Origin: origin, 'X-Airlock-CSRF': token }, body);
  want(r.status === 401, `... POST refused (${r.status})`);
  u = await upgrade(wsUrl, ['airlock.v1', `airlock-csrf.${token}`], { Cookie: cookie, Origin: origin });
  want(u.status === 401, `... WebSocket upgrade refused (${u.status})`);

  // ---- login CSRF: the other port's page posts a key as text/plain
  const B = await newPage(browser);
  page = evilPage(origin, termId, keys.ada);
  await B.page.goto(`${evil}/`);
  const resB = await B.page.evaluate(() => window.result);
  want(resB.login === 'sent', 'the cross-site sign-in was sent');
  want(!(await B.ctx.cookies()).some((c) => c.name === 'airlock_session'), 'a cross-site text/plain sign-in sets no session cookie');
  r = await api(port, 'GET', '/v1/audit', keys.ada);
  want(r.json.some((e) => e.action === 'logout' && e.actor === 'otto'), 'the sign-out is audited');

  check(fails.length === 0, `every expectation held${fails.length ? `; failed: ${fails.join(' | ')}` : ''}`);
}, 180000);
