// The credential proxy's audit (docs/proxy.md, "Audit and metrics"). This
// test reads the database itself (the sqlite3 CLI), never GET /v1/audit,
// which writes what is queued before it reads.
//
// - A terminal's calls (here its upstream refuses the connection: 502)
//   are one row each, queued and written in batches: in the database
//   within about AUDITQ_FLUSH_MS (100 ms) with no reader (the queue's
//   timer); more than a batch (512) in waves of 100 at once, each once.
// - The attacker: an agent floods its runner's listener, and airlockd's
//   direct path, with calls whose credential is not valid (4,000 of
//   them). Such refusals are counted in memory, as the API's own
//   unauthenticated refusals are: a handful of `proxy_refused` rows whose
//   counts add up to every call, not a row each (the audit's row bound,
//   audit-keep-rows, would otherwise let an agent push every older row
//   out of the log).
// - A clean stop (SIGTERM) right after calls loses none of their rows.
// - airlockd killed with -9: the rows of calls that ended a second
//   before are in the database (only the last 100 ms may be lost).
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, waitFor, reportedPort, scaled, sleep } from '../interop/harness.mjs';
import { startAirlockd, addUser, addLocalSandbox, api, attach } from '../interop/airlockd.mjs';

const sql = (dir, q) => execFileSync('sqlite3', [path.join(dir, 'airlock.db'), q]).toString().trim();
const rows = (dir, action = 'proxy_call') => Number(sql(dir, `SELECT count(*) FROM audit WHERE action = '${action}'`));

// One POST through the proxy at port (path prefix base) with credential
// cred; resolves with the status (0: no answer).
function call(port, base, cred) {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: `${base}/v1/messages`,
      agent: false, headers: { authorization: `Bearer ${cred}`, 'content-length': 2 } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve(0));
    req.end('{}');
  });
}

// n calls in waves of `wave` at once; resolves with their statuses.
async function waves(n, wave, fn) {
  const out = [];
  for (let i = 0; i < n; i += wave) out.push(...await Promise.all(Array.from({ length: Math.min(wave, n - i) }, fn)));
  return out;
}

await run('proxy_audit', async () => {
  const base = tmpdir('proxya');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'oli', 'operator');
  const secret = path.join(base, 'k.key');
  fs.writeFileSync(secret, 'sk-airlocktest-audit\n', { mode: 0o600 });
  const conf = path.join(base, 'airlockd.conf');
  fs.writeFileSync(conf, ['upstream.anthropic.url = http://127.0.0.1:9', 'upstream.anthropic.kind = anthropic',
    'upstream.anthropic.header = x-api-key', `upstream.anthropic.secret-file = ${secret}`,
    'upstream.anthropic.requests-per-minute = 100000', 'upstream.anthropic.concurrent = 200', ''].join('\n'));
  const args = ['--config', conf, '--proxy-listen', '127.0.0.1:0'];
  let d = await startAirlockd({ dir, args });
  let dport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { what: 'the direct path' });
  await addLocalSandbox(d.port, admin, 'box');
  const t = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', mode: 'pipes', proxy: ['anthropic'],
    argv: ['sh', '-c', 'echo "TOKEN=$AIRLOCK_PROXY_TOKEN"; echo "URL=$AIRLOCK_PROXY_URL"; exec sleep 600'] });
  check(t.status === 201, `a terminal with the upstream (${t.status})`);
  const a = await attach(d.port, t.json.id, op, { read: true });
  await a.ch.waitOutput(/URL=\S+\n/, scaled(20000));
  const out = a.ch.output().toString();
  a.ctl.ws.terminate();
  const cred = /TOKEN=(\S+)/.exec(out)[1];
  const rport = Number((/URL=http:\/\/127\.0\.0\.1:(\d+)\//.exec(out) || [])[1] || 0);
  check(rport > 0 && rport !== dport, `its runner's listener (${rport})`);
  const own = () => call(dport, '/v1/proxy/anthropic', cred);

  // ---- a terminal's calls: the timer writes them, no reader needed
  for (let i = 0; i < 5; i++) check(await own() === 502, `call ${i + 1}: 502 (the upstream refuses the connection)`);
  const t0 = Date.now();
  await waitFor(() => rows(dir) === 5, scaled(5000), 'the 5 rows written by the queue\'s timer', 10);
  const ms = Date.now() - t0;
  check(ms < scaled(1000), `the 5 rows are in the database ${ms} ms after the last call ended, with no GET /v1/audit`);
  check(Number(sql(dir, `SELECT count(*) FROM audit WHERE action = 'proxy_call' AND target = '${t.json.id}'`)) === 5,
    'each names the terminal');

  // ---- more than a batch
  const many = await waves(600, 100, own);
  check(many.every((x) => x === 502), `600 calls in waves of 100 at once: 502 each (${[...new Set(many)]})`);
  await waitFor(() => rows(dir) === 605, scaled(5000), 'the 600 rows', 20);
  await sleep(300);
  check(rows(dir) === 605, `each call is one row, written once (${rows(dir)} of 605)`);

  // ---- the attacker: calls with a credential that is not valid
  const before = Number(sql(dir, 'SELECT count(*) FROM audit'));
  const viaRunner = await waves(3000, 100, () => call(rport, '/v1/proxy/anthropic', 'alp_nope'));
  const viaDirect = await waves(1000, 100, () => call(dport, '/v1/proxy/anthropic', 'alp_nope'));
  check(viaRunner.every((x) => x === 401) && viaDirect.every((x) => x === 401),
    `4,000 calls with a bad credential, 3,000 through the runner's listener, 1,000 direct: 401 each (${[...new Set([...viaRunner, ...viaDirect])]})`);
  const list = await api(d.port, 'GET', '/v1/audit?action=proxy_refused', admin); // writes the counts
  const refused = (list.json || []).filter((x) => x.action === 'proxy_refused').map((x) => JSON.parse(x.detail));
  const counted = refused.reduce((n, x) => n + Number(x.count || 0), 0);
  const added = Number(sql(dir, 'SELECT count(*) FROM audit')) - before;
  check(counted === 4000 && refused.every((x) => /401/.test(x.why)),
    `the refusals are counted: ${refused.length} rows whose counts add up to ${counted} of 4000 (${JSON.stringify(refused.slice(0, 2))})`);
  check(added <= 12, `the audit grew by ${added} rows for 4,000 refused calls, not a row each`);
  check(refused.some((x) => x.peer === 'sandbox box') && refused.some((x) => x.peer === '127.0.0.1'),
    `each row names where the calls came from: the sandbox's runner, or the direct path's peer (${[...new Set(refused.map((x) => x.peer))]})`);
  check(rows(dir) === 605, `no proxy_call row for them (${rows(dir)})`);

  // ---- a clean stop right after calls
  for (let i = 0; i < 7; i++) await own();
  const ex = await d.stop();
  check(ex.code === 0, `airlockd stopped cleanly (${JSON.stringify(ex)})`);
  check(rows(dir) === 612, `a clean stop writes every queued row (${rows(dir)} of 612)`);

  // ---- killed: what ended a second before is there
  d = await startAirlockd({ dir, args });
  dport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { from: d.from, what: 'the direct path' });
  await waitFor(async () => (await own()) === 502, scaled(20000), 'the terminal\'s calls once its runner is linked again', 200);
  const n0 = rows(dir);
  for (let i = 0; i < 4; i++) await own();
  await sleep(1000);
  d.p.kill('SIGKILL');
  await d.exited;
  check(rows(dir) >= n0 + 4, `killed with -9: the rows of calls ended a second before are kept (${rows(dir) - n0} of at least 4)`);
});
