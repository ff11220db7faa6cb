// airlockd serve, first slice: the signing key made on first start (and a
// key others can read refused), the JSON API behind API keys: 401 without
// or with a wrong key, 403 where the role does not reach, 200 otherwise;
// failed attempts audited; no API key ever in the log; a clean stop.
import fs from 'node:fs';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { run, check, tmpdir, rawHttp, waitFor, reportedPort, BIN } from '../interop/harness.mjs';
import { SERVING_RE } from '../interop/airlockd.mjs';

function get(port, target, key) {
  return rawHttp(port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${key ? `Authorization: Bearer ${key}\r\n` : ''}\r\n`);
}

let serves = 0;
async function serve(dir) {
  const log = path.join(dir, `serve-${++serves}.log`);
  const out = fs.openSync(log, 'a');
  const p = spawn(path.join(BIN, 'airlockd'), ['serve', '--data', dir, '--listen', '127.0.0.1:0', '--verbose'],
    { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const exited = new Promise((res) => p.on('exit', (code, sig) => res({ code, sig })));
  return { p, log, exited };
}

await run('airlockd_api', async () => {
  const dir = path.join(tmpdir('api'), 'data');
  const addUser = (name, role) => execFileSync(path.join(BIN, 'airlockd'), ['user', 'add', name, '--role', role, '--data', dir]).toString().trim();
  const admin = addUser('ada', 'admin');
  const viewer = addUser('vic', 'viewer');
  const s = await serve(dir);
  const port = await reportedPort(s.log, SERVING_RE, s.p, { what: 'airlockd to listen' });
  const up = await waitFor(async () => {
    try { return (await get(port, '/healthz')).status === 200; } catch { return false; }
  }, 5000, 'GET /healthz', 50).catch(() => false);
  check(up, 'GET /healthz answers 200 without a key');
  const st = fs.statSync(path.join(dir, 'signing-key.pem'));
  check((st.mode & 0o777) === 0o600, 'the signing key was created on first start, mode 0600');

  let r = await get(port, '/v1/terminals');
  check(r.status === 401 && /API key/.test(r.body), 'no key: 401 with a clear message');
  r = await get(port, '/v1/terminals', 'alk_' + 'A'.repeat(43));
  check(r.status === 401, 'an unknown (well-formed) key: 401');
  r = await get(port, '/v1/terminals', 'not-a-key');
  check(r.status === 401, 'a malformed key: 401');
  r = await get(port, '/v1/terminals', viewer);
  check(r.status === 200 && JSON.stringify(JSON.parse(r.body)) === '[]', 'a viewer lists terminals: 200 []');
  r = await get(port, '/v1/sandboxes', viewer);
  check(r.status === 200 && Array.isArray(JSON.parse(r.body)), 'a viewer lists sandboxes: 200');
  r = await get(port, '/v1/audit', viewer);
  check(r.status === 403, 'a viewer may not read the audit log: 403');
  r = await get(port, '/v1/audit', admin);
  const audit = JSON.parse(r.body);
  check(r.status === 200 && audit.filter((e) => e.action === 'auth_failed').length === 3,
    'an admin reads the audit log: the 3 failed attempts are there');
  r = await get(port, '/v1/nothing', admin);
  check(r.status === 404, 'an unknown route: 404');
  r = await rawHttp(port, `POST /v1/terminals HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nAuthorization: Bearer ${admin}\r\n\r\n`);
  check(r.status === 400 && /body|JSON|json/.test(r.body), 'POST /v1/terminals with an empty body: 400 with a reason');
  r = await rawHttp(port, `PUT /v1/terminals HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nAuthorization: Bearer ${admin}\r\n\r\n`);
  check(r.status === 405 || r.status === 400, `an unserved method gets ${r.status}, not a crash`);

  s.p.kill('SIGTERM');
  const ex = await s.exited;
  check(ex.code === 0, `SIGTERM stops it cleanly (${JSON.stringify(ex)})`);
  const log = fs.readFileSync(s.log, 'utf8');
  check(/refused auth_failed \/v1\/terminals from 127.0.0.1/.test(log), 'the log records the refusals (once per interval, with a count)');
  check(!log.includes(admin) && !log.includes(viewer) && !log.includes(admin.slice(4, 20)),
    'no API key, nor a piece of one, in the log');

  // a signing key that others can read: airlockd refuses to start
  fs.chmodSync(path.join(dir, 'signing-key.pem'), 0o644);
  const s2 = await serve(dir);
  const ex2 = await s2.exited;
  check(ex2.code === 1 && /signing key/.test(fs.readFileSync(s2.log, 'utf8')), 'a key readable by others: refuses to start, says why');
});
