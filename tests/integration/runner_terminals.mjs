// An independent client (npm ws + tests/interop/airlock.mjs, not our C code)
// drives airlock-runner: several terminals over one connection, output,
// exit codes, resize, pipes, environment scrubbing, snapshots, errors.
// The same scenario runs twice: the runner listening (a platform ingress
// dials in), and the runner dialing out to a test listener.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { run, check, tmpdir, keygen, mint, startRunner, startDialRunner } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';

async function scenario(mode) {
  console.log(`# runner ${mode}`);
  const dir = tmpdir(`term-${mode}`);
  keygen(dir);
  const runnerEnv = { AIRLOCK_SECRET_SHOULD_NOT_LEAK: 'shh' };
  let ctl, token;
  if (mode === 'listening') {
    const r = await startRunner({ dir, env: runnerEnv });
    ctl = new Controller();
    token = mint(dir, r.id);
    await ctl.connect(r.url, { Authorization: `Bearer ${token}` });
  } else {
    ({ ctl, token } = await startDialRunner({ dir, env: runnerEnv, Controller }));
  }

  // the runner's HELLO names it and its version, the one --version prints
  const ver = execFileSync(path.join(process.env.AL_BIN, 'airlock-runner'), ['--version']).toString().trim();
  check(/^airlock-runner \S+$/.test(ver) && ctl.peerName === ver.replace(' ', '/'),
    `the runner's HELLO name is its version (${ctl.peerName}; --version: ${ver})`);

  // two terminals over one connection
  const a = ctl.open(['sh', '-c', 'echo one; exit 3']);
  const b = ctl.open(['sh', '-c', 'stty size; read x; stty size; exit 0'], { cols: 80, rows: 24 });
  await a.waitExit();
  check(a.exit.code === 3, 'sh -c "exit 3" gives exit code 3');
  check(/one/.test(a.output().toString()), 'first terminal output read');
  await b.waitOutput(/24 80/).catch(() => {});
  check(/24 80/.test(b.output().toString()), 'stty size shows 24 80 at open');
  b.resize(100, 30);
  b.write('\r');
  await b.waitOutput(/30 100/).catch(() => {});
  check(/30 100/.test(b.output().toString()), 'after RESIZE 100x30, stty size shows 30 100');
  await b.waitExit();
  check(b.exit.code === 0, 'second terminal exits 0');

  // pipe mode: stdout and stderr apart, stdin streamed, EOF forwarded
  const p = ctl.open(['sh', '-c', 'cat; echo err >&2; exit 7'], { mode: 1 });
  await p.wait(() => p.opened, 'opened');
  p.write('hello pipes\n');
  p.endInput();
  await p.waitExit();
  check(p.output().toString() === 'hello pipes\n', 'pipe mode: stdin reached cat, stdout exact');
  check(p.stderr().toString() === 'err\n', 'pipe mode: stderr separate');
  check(p.exit.code === 7, 'pipe mode: exit code 7');

  // the environment: allowlist + what OPEN names, nothing else
  const e = ctl.open(['sh', '-c', 'env'], { mode: 1, env: ['FOO=bar'] });
  await e.waitExit();
  const env = e.output().toString();
  check(/^FOO=bar$/m.test(env), 'OPEN env reaches the agent');
  check(!/AIRLOCK_SECRET_SHOULD_NOT_LEAK/.test(env), "the runner's own environment does not leak");
  check(/^PATH=/m.test(env), 'allowlisted PATH is passed');
  check(!env.includes(token) && !env.includes(token.split('.')[2]), 'no token in the environment');

  // no inherited descriptor
  for (const mode of [0, 1]) {
    const f = ctl.open(['sh', '-c', 'ls -l /proc/self/fd'], { mode });
    await f.waitExit();
    const entries = f.output().toString().split(/\r?\n/).filter((l) => / -> /.test(l))
      .map((l) => { const m = / (\d+) -> (.*)$/.exec(l); return { fd: Number(m[1]), to: m[2] }; });
    const others = entries.filter((e) => e.fd > 2 && !/^\/proc\/\d+\/fd$/.test(e.to));
    check(entries.filter((e) => e.fd <= 2).length === 3 && others.length === 0,
      `${mode ? 'pipes' : 'pty'}: ls -l /proc/self/fd shows only 0 1 2 (and ls's own listing of the dir): ${entries.map((e) => `${e.fd}->${e.to}`).join(', ')}`);
  }

  // a command that cannot start: a clear error, nothing runs
  const bad = ctl.open(['/nonexistent/agent']);
  await bad.wait(() => bad.openError, 'open error');
  check(/nonexistent/.test(bad.openError), `OPEN of a missing program fails clearly: ${bad.openError}`);

  // snapshot of a full-screen program, tagged with its stream offset
  const s = ctl.open(['sh', '-c', 'printf "\\033[?1049h\\033[2J\\033[5;10Hhello snapshot\\033]0;my title\\007"; sleep 30']);
  await s.waitOutput(/hello snapshot/);
  ctl.send((await import('../interop/airlock.mjs')).enc.snapshotReq(s.id));
  await s.wait(() => s.snapshot, 'snapshot');
  const snap = s.snapshot.bytes.toString('latin1');
  check(/hello snapshot/.test(snap), 'snapshot redraws the screen text');
  check(/\x1b\[\?1049h/.test(snap), 'snapshot restores the alternate screen');
  check(s.snapshot.offset === s.output().length, `snapshot offset ${s.snapshot.offset} = output so far`);
  s.signal(15);
  await s.waitExit();
  check(s.exit.signo === 15, `SIGNAL TERM to the group ends the program (signal ${s.exit.signo})`);
  s.close();
  await s.wait(() => s.closed, 'close confirmation');
  check(s.closed, 'CLOSE confirmed by the host');
}

await run('runner_terminals', async () => {
  await scenario('listening');
  await scenario('dialing out');
});
