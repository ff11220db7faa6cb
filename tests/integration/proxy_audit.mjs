// The credential proxy's audit rows are queued and written in batches
// (docs/proxy.md, "Audit and metrics"): this test reads the database
// itself (the sqlite3 CLI), never GET /v1/audit, which writes the queue
// before it reads.
//
// - Calls that end (here: refused, 401, on airlockd's direct path) are
//   in the database within about AUDITQ_FLUSH_MS (100 ms) with no reader:
//   the queue's timer writes them.
// - More calls than a batch (512) in waves of 100 at once: every row
//   written, each once.
// - A clean stop (SIGTERM) right after calls loses none of their rows.
// - airlockd killed with -9: the rows of calls that ended a second
//   before are in the database (only the last 100 ms may be lost).
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, waitFor, reportedPort, scaled, sleep } from '../interop/harness.mjs';
import { startAirlockd, addUser } from '../interop/airlockd.mjs';

const rows = (dir) => Number(execFileSync('sqlite3', [path.join(dir, 'airlock.db'),
  "SELECT count(*) FROM audit WHERE action = 'proxy_call'"]).toString().trim());

function call(port) {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/proxy/anthropic/v1/messages',
      agent: false, headers: { authorization: 'Bearer alp_nope', 'content-length': 2 } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve(0));
    req.end('{}');
  });
}

await run('proxy_audit', async () => {
  const base = tmpdir('proxya');
  const dir = path.join(base, 'data');
  addUser(dir, 'ada', 'admin');
  const secret = path.join(base, 'k.key');
  fs.writeFileSync(secret, 'sk-airlocktest-audit\n', { mode: 0o600 });
  const conf = path.join(base, 'airlockd.conf');
  fs.writeFileSync(conf, ['upstream.anthropic.url = http://127.0.0.1:9', 'upstream.anthropic.kind = anthropic',
    'upstream.anthropic.header = x-api-key', `upstream.anthropic.secret-file = ${secret}`, ''].join('\n'));
  const args = ['--config', conf, '--proxy-listen', '127.0.0.1:0'];
  let d = await startAirlockd({ dir, args });
  let pport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { what: 'the direct path' });

  // ---- the timer writes them, no reader needed
  for (let i = 0; i < 5; i++) check(await call(pport) === 401, `call ${i + 1}: 401 (an unknown credential)`);
  const t0 = Date.now();
  await waitFor(() => rows(dir) === 5, scaled(5000), 'the 5 rows written by the queue\'s timer', 10);
  const ms = Date.now() - t0;
  check(ms < scaled(1000), `the 5 rows are in the database ${ms} ms after the last call ended, with no GET /v1/audit`);

  // ---- more than a batch at once
  const many = [];
  for (let w = 0; w < 6; w++) many.push(...await Promise.all(Array.from({ length: 100 }, () => call(pport))));
  check(many.every((s) => s === 401), '600 calls in waves of 100 at once: 401 each');
  await waitFor(() => rows(dir) === 605, scaled(5000), 'the 600 rows', 20);
  await sleep(300);
  check(rows(dir) === 605, `each call is one row, written once (${rows(dir)} of 605)`);

  // ---- a clean stop right after calls
  for (let i = 0; i < 7; i++) await call(pport);
  const ex = await d.stop();
  check(ex.code === 0, `airlockd stopped cleanly (${JSON.stringify(ex)})`);
  check(rows(dir) === 612, `a clean stop writes every queued row (${rows(dir)} of 612)`);

  // ---- killed: what ended a second before is there
  d = await startAirlockd({ dir, args });
  pport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { from: d.from, what: 'the direct path' });
  for (let i = 0; i < 4; i++) await call(pport);
  await sleep(1000);
  d.p.kill('SIGKILL');
  await d.exited;
  check(rows(dir) === 616, `killed with -9: the rows of calls ended a second before are kept (${rows(dir)} of 616)`);
});
