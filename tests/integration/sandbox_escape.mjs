// An agent in a local sandbox tries to get out, twice: under an airlockd
// running as root, and under one running as an unprivileged user (nobody,
// with its own copy of the binaries). Each time: the escape tool (tests/tools/escape.c) checks its capabilities
// (none), no_new_privs and seccomp, tries open_by_handle_at, mknod,
// mount, new namespaces, packet and raw sockets, TIOCSTI, bpf, perf,
// userfaultfd, keyrings and kexec, looks at every process and descriptor
// it can see (nothing of the runner or airlockd), tries the signing key
// and the runner's token by their host paths and through /proc/N/root,
// reads every file it can for the token and the key, and at the end
// sends SIGKILL to every process it may signal. Then: the runner still
// runs and stays linked, a new terminal works, nothing the agent wrote
// to /proc/1/fd/* reached airlockd's log, and an impostor holding a
// copy of the runner's token (which the agent could not read: the test
// reads it as root) is refused, audited, and changes nothing.
import fs from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, sleep, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, addLocalSandbox } from '../interop/airlockd.mjs';

async function runIn(port, key, argv, ms = 60000) {
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox: 'box', argv, mode: 'pipes' });
  if (r.status !== 201) throw new Error(`terminal: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, key);
  await a.ch.waitExit(ms);
  return { out: Buffer.concat(a.ch.out).toString('utf8'), exit: a.ch.exit };
}

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

async function attempt(asRoot) {
  const who = asRoot ? 'root' : 'nobody';
  const base = tmpdir(`escape-${who}`);
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  let opts = { dir };
  if (!asRoot) {
    // its own copy of the programs, all of it owned by nobody
    const bin = path.join(base, 'bin');
    fs.mkdirSync(bin);
    for (const f of ['airlockd', 'airlock-runner']) fs.copyFileSync(path.join(BIN, f), path.join(bin, f));
    fs.chmodSync(path.join(bin, 'airlockd'), 0o755);
    fs.chmodSync(path.join(bin, 'airlock-runner'), 0o755);
    execFileSync('chown', ['-R', 'nobody:nogroup', base]);
    opts = { dir, exe: path.join(bin, 'airlockd'), args: ['--runner', path.join(bin, 'airlock-runner')],
      wrap: ['setpriv', '--reuid', 'nobody', '--regid', 'nogroup', '--clear-groups'] };
  }
  const d = await startAirlockd(opts);
  await addLocalSandbox(d.port, admin);

  const run_ = path.join(dir, 'sandboxes', 'box', 'run');
  const work = path.join(dir, 'sandboxes', 'box', 'work');
  const runnerPid = Number(fs.readFileSync(path.join(run_, 'runner.pid'), 'utf8'));
  check(alive(runnerPid), `the runner runs (pid ${runnerPid})`);
  const st = fs.readFileSync(`/proc/${runnerPid}/status`, 'utf8');
  const uid = Number(/^Uid:\s+(\d+)/m.exec(st)[1]);
  check(uid !== 0, `${who}: the sandbox runs as an unprivileged host user, not root (uid ${uid})`);

  fs.copyFileSync(path.join(BIN, 'escape'), path.join(work, 'escape'));
  fs.chmodSync(path.join(work, 'escape'), 0o755);
  const token = fs.readFileSync(path.join(run_, 'token'), 'utf8').trim();
  const pem = fs.readFileSync(path.join(dir, 'signing-key.pem'), 'utf8');
  const keyLine = pem.split('\n').find((l) => l && !l.startsWith('-----'));
  const hostPaths = [path.join(dir, 'signing-key.pem'), path.join(run_, 'token'),
    path.join(dir, 'airlock.db'), '/airlock/run/token', '/run/airlock/token'];
  const argv = ['/workspace/escape', '--secret', token.slice(-40), '--secret', keyLine.slice(0, 40),
    ...hostPaths.flatMap((p) => ['--path', p]), '--kill-all'];
  const e = await runIn(d.port, admin, argv);
  console.log(e.out);
  for (const l of e.out.split('\n').filter((x) => x.startsWith('FAIL '))) check(false, `inside the sandbox: ${l}`);
  check(/escape: \d+ held, 0 failed/.test(e.out), 'every escape attempt failed inside the sandbox');
  check(/ok CapEff: 0000000000000000/.test(e.out) && /ok Seccomp: 2/.test(e.out), 'CapEff is 0 and a seccomp filter is on');
  check(/ok no secret readable/.test(e.out), 'neither the token nor the signing key is readable anywhere the agent looks');

  // the agent signalled everything it could: the runner was not among them
  await sleep(500);
  check(alive(runnerPid), 'kill(-1, SIGKILL) from the agent left the runner running');
  let r = await api(d.port, 'GET', '/v1/sandboxes', admin);
  check(r.json.find((x) => x.id === 'box').link_up, 'the runner is still linked');
  const forge = await runIn(d.port, admin,
    ['sh', '-c', 'for f in /proc/1/fd/1 /proc/1/fd/2; do echo FORGED-BY-AGENT >> $f; done; echo done-forging'], 20000);
  check(/done-forging/.test(forge.out), 'a new terminal in the same sandbox works');
  await sleep(300);
  const log = fs.readFileSync(d.log, 'utf8');
  check(!/^FORGED-BY-AGENT/m.test(log), "what the agent writes to /proc/1/fd/* never becomes a line of airlockd's log");

  // an impostor with a copy of the runner's token
  const url = `ws://127.0.0.1:${d.port}/v1/runners/connect?identifier=box`;
  const tryLink = (headers) => new Promise((res) => {
    const ws = new WebSocket(url, ['airlock.v1'], { headers });
    ws.on('upgrade', () => { res(101); ws.terminate(); });
    ws.on('unexpected-response', (_q, resp) => { res(resp.statusCode); resp.resume(); });
    ws.on('error', () => res(-1));
  });
  check(await tryLink({ Authorization: `Bearer ${token}` }) === 403, 'the copied token without the runner key: 403');
  check(await tryLink({ Authorization: `Bearer ${token}`, 'X-Airlock-Runner-Key': 'A'.repeat(43) }) === 403,
    'the copied token with a guessed runner key: 403');
  r = await api(d.port, 'GET', '/v1/audit', admin);
  const imp = r.json.filter((x) => x.action === 'runner_impostor' && x.target === 'box');
  check(imp.length >= 2, `the attempts are audited (${imp.length} runner_impostor rows)`);
  check(/runner link from .* refused: /.test(fs.readFileSync(d.log, 'utf8')), 'and logged as errors');
  r = await api(d.port, 'GET', '/v1/sandboxes', admin);
  check(r.json.find((x) => x.id === 'box').link_up && alive(runnerPid), 'the real runner is unaffected');
  const after = await runIn(d.port, admin, ['sh', '-c', 'echo still-$((40+2))'], 20000);
  check(/still-42/.test(after.out), `${who}: and its terminals still work`);
  await d.stop();
}

await run('sandbox_escape', async () => {
  check(process.getuid() === 0, 'this test runs as root (as CI does)');
  await attempt(true);
  await attempt(false);

  // a host that cannot isolate a sandbox (here: no such sandbox user) refuses
  // local sandboxes and says why, instead of starting an unsafe one
  const dir = path.join(tmpdir('escape-nouser'), 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const d = await startAirlockd({ dir, args: ['--sandbox-user', 'no-such-user-here'] });
  const r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'box', kind: 'local' });
  check(r.status === 503 && /no user 'no-such-user-here'/.test(r.body),
    `without the sandbox user, a local sandbox is refused with the reason (${r.status} ${r.body})`);
  check(/local sandboxes cannot run here: .*no user/.test(fs.readFileSync(d.log, 'utf8')), 'and airlockd says so at start');
  const s = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'rev', kind: 'reverse' });
  check(s.status === 201, 'other kinds of sandboxes are unaffected');
});
