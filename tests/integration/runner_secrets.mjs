// The runner holds no secret an agent could take: it is not dumpable, so a
// same-user agent cannot read its environment or memory through /proc; with
// --agent-user the agent runs as another user; the binary carries no
// signing code, database or HTTP client (see also boundary.sh).
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, keygen, mint, startRunner, BIN } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';

await run('runner_secrets', async () => {
  const dir = tmpdir('sec');
  keygen(dir);
  fs.chmodSync(dir, 0o755);
  fs.chmodSync(path.join(dir, 'jwks.json'), 0o644);

  // same user as the runner (nobody, so that root's powers do not blur it)
  // (a copy of the binary in a directory nobody can reach: CI's checkout may not be)
  const bin = path.join(dir, 'airlock-runner');
  fs.copyFileSync(path.join(BIN, 'airlock-runner'), bin);
  fs.chmodSync(bin, 0o755);
  const r = await startRunner({ dir, bin, env: { RUNNER_PRIVATE_THING: 'hunter2' }, wrap: ['runuser', '-u', 'nobody', '--'] });
  const ctl = new Controller();
  await ctl.connect(r.url, { Authorization: `Bearer ${mint(dir, r.id)}` });
  const t = ctl.open(['sh', '-c', 'id -u; cat /proc/$PPID/environ; echo rc=$?; head -c 1 /proc/$PPID/mem; echo mem=$?; cat /proc/self/environ >/dev/null; echo self=$?'], { mode: 1 });
  await t.waitExit();
  const out = t.output().toString() + t.stderr().toString();
  check(/^65534$/m.test(out), 'runner and agent run as the same user (nobody)');
  check(!/hunter2/.test(out), "the agent cannot read the runner's environment");
  check(/rc=1/.test(out) && /mem=1/.test(out), 'reading /proc/<runner>/environ and /mem is refused');
  check(/self=0/.test(out), 'positive control: the agent reads its own /proc/self/environ');

  // --agent-user: the runner (root) starts agents as another user
  const r2 = await startRunner({ dir, args: ['--agent-user', 'nobody'] });
  const c2 = new Controller();
  await c2.connect(r2.url, { Authorization: `Bearer ${mint(dir, r2.id)}` });
  const u = c2.open(['id', '-u'], { mode: 1 });
  await u.waitExit();
  check(u.output().toString().trim() === '65534', '--agent-user nobody: the agent runs as uid 65534');

  // what the binary links
  const ldd = execFileSync('ldd', [path.join(BIN, 'airlock-runner')]).toString();
  check(!/libsqlite3|libpq|libcurl/.test(ldd), 'airlock-runner links no SQLite, libpq or libcurl');
});
