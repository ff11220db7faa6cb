// The upgrade matrix of airlock-runner --listen, with a raw HTTP client:
// exactly what a platform ingress forwards gets 101; everything else gets
// the status the issue lists, and nothing is upgraded.
import { run, check, tmpdir, keygen, mint, startRunner, rawHttp } from '../interop/harness.mjs';

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
function upgrade(target, headers = {}) {
  const h = { Host: '127.0.0.1', Upgrade: 'websocket', Connection: 'Upgrade',
    'Sec-WebSocket-Key': KEY, 'Sec-WebSocket-Version': '13', ...headers };
  return `GET ${target} HTTP/1.1\r\n${Object.entries(h).filter(([, v]) => v !== null).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`;
}

await run('runner_upgrade', async () => {
  const dir = tmpdir('upg');
  keygen(dir);
  const other = tmpdir('upg-other');
  keygen(other);
  const r = await startRunner({ id: 'sbx-1', dir });
  const q = '/?identifier=sbx-1&api-version=2024-02-02-preview';
  const good = mint(dir, 'sbx-1');

  // the seed request, verbatim (no subprotocol header)
  let res = await rawHttp(r.port, upgrade(q, { Authorization: `Bearer ${good}` }));
  check(res.status === 101, 'seed request shape with a valid token: 101');
  res = await rawHttp(r.port, upgrade(q, { Authorization: `Bearer ${good}`, 'Sec-WebSocket-Protocol': 'airlock.v1' }));
  check(res.status === 101 && /sec-websocket-protocol: airlock.v1/i.test(res.head), 'with subprotocol airlock.v1: 101, protocol echoed');

  res = await rawHttp(r.port, upgrade(q));
  check(res.status === 403 && res.body.trim() === 'Unauthenticated', 'no token: 403 Unauthenticated');
  res = await rawHttp(r.port, upgrade(q, { Authorization: 'Bearer garbage.token.here' }));
  check(res.status === 403 && res.body.trim() === 'Forbidden', 'bad token: 403, no detail');
  res = await rawHttp(r.port, upgrade(q, { Authorization: `Bearer ${mint(dir, 'sbx-2')}` }));
  check(res.status === 403, 'wrong audience: 403');
  res = await rawHttp(r.port, upgrade(q, { Authorization: `Bearer ${mint(dir, 'sbx-1', 'terminal:write')}` }));
  check(res.status === 403, 'wrong scope: 403');
  res = await rawHttp(r.port, upgrade(q, { Authorization: `Bearer ${mint(other, 'sbx-1')}` }));
  check(res.status === 403, 'unknown kid (another key set): 403');
  res = await rawHttp(r.port, upgrade(q, { Authorization: `Basic ${good}` }));
  check(res.status === 403, 'not a Bearer token: 403');

  res = await rawHttp(r.port, upgrade('/?identifier=sbx-2&api-version=2024-02-02-preview', { Authorization: `Bearer ${good}` }));
  check(res.status === 403 && res.body.trim() === 'Forbidden', 'another identifier with a valid token: 403 Forbidden, as a bad token');
  const wrongNoTok = await rawHttp(r.port, upgrade('/?identifier=sbx-2&api-version=2024-02-02-preview'));
  check(wrongNoTok.status === 403 && wrongNoTok.body.trim() === 'Unauthenticated', 'another identifier without a token: 403 Unauthenticated, as ours without one');
  const wrongBad = await rawHttp(r.port, upgrade('/?identifier=sbx-2&api-version=2024-02-02-preview', { Authorization: 'Bearer garbage.token.here' }));
  check(wrongBad.status === 403 && wrongBad.body.trim() === 'Forbidden', 'another identifier with a bad token: 403 Forbidden (the token is checked first)');
  res = await rawHttp(r.port, upgrade('/?identifier=sbx-1', { Authorization: `Bearer ${good}` }));
  check(res.status === 400, 'missing api-version: 400');
  res = await rawHttp(r.port, upgrade('/?identifier=sbx-1&api-version=2023-01-01', { Authorization: `Bearer ${good}` }));
  check(res.status === 400, 'unknown api-version: 400');
  res = await rawHttp(r.port, upgrade('/other?identifier=sbx-1&api-version=2024-02-02-preview', { Authorization: `Bearer ${good}` }));
  check(res.status === 404, 'another path: 404');

  res = await rawHttp(r.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  check(res.status === 200 && res.body.trim() === 'ok', 'GET /healthz: 200 without auth');
  res = await rawHttp(r.port, 'GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n');
  check(res.status === 200 && res.body.trim() === 'ready', 'GET /readyz: 200 without auth (the platforms\' readiness probe)');
  res = await rawHttp(r.port, 'GET /anything HTTP/1.1\r\nHost: x\r\n\r\n');
  check(res.status === 404, 'other plain GET: 404');

  // oversized headers are refused, not buffered without bound
  res = await rawHttp(r.port, upgrade(q, { Authorization: `Bearer ${'A'.repeat(20000)}` })).catch(() => ({ status: 'closed' }));
  check(res.status !== 101, `oversized header refused (${res.status})`);

  // the runner logs the precise reason, the client got none of it
  const fs = await import('node:fs');
  const log = fs.readFileSync(r.log, 'utf8');
  check(/refused 403: token refused: wrong audience/.test(log), 'log has the precise reason (wrong audience)');
  check(/refused 403: token refused: (unknown key id|scope)/.test(log), 'log names kid/scope failures');

  // a configurable token header, for fronts that consume Authorization
  const r2 = await startRunner({ id: 'sbx-1', dir, args: ['--token-header', 'X-Airlock-Token'] });
  res = await rawHttp(r2.port, upgrade(q, { 'X-Airlock-Token': `Bearer ${good}` }));
  check(res.status === 101, '--token-header X-Airlock-Token: token there gives 101');
  res = await rawHttp(r2.port, upgrade(q, { Authorization: `Bearer ${good}` }));
  check(res.status === 403, '--token-header: Authorization alone is not enough');
});
