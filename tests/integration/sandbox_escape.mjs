// An agent in a local sandbox tries to get out, twice: under an airlockd
// running as root, and under one running as an unprivileged user (nobody,
// with its own copy of the binaries). Each time: the escape tool (tests/tools/escape.c) checks its capabilities
// (none), no_new_privs and seccomp, tries open_by_handle_at, mknod,
// mount, new namespaces, packet and raw sockets, TIOCSTI, bpf, perf,
// userfaultfd, keyrings and kexec, looks at every process and descriptor
// it can see (nothing of the runner or airlockd), tries the signing key
// and the runner's token by their host paths and through /proc/N/root,
// reads every file it can for the token and the key, tries to SIGSTOP
// the runner, writes a forged log line ("x\nFORGED-BY-AGENT ...") to every
// descriptor it holds or can open under /proc/N/fd, and at the end sends
// SIGKILL to every process it may signal. Then:
// - the runner still runs, not stopped, and stays linked; a new terminal
//   works;
// - no line of airlockd's log holds the marker outside an escaped context
//   (only right after an escaped newline, "\n", may it appear): neither
//   written straight into the log file nor relayed as a line of its own
//   through the runner's output pipe, where it would arrive prefixed;
// - seen from the host, no descriptor of any process in an agent's pid
//   namespace is one of airlockd's (its log, its pipes, its sockets, its
//   database), one of the runner's standard streams or sockets, or a file
//   of the data directory outside the workspace (same device and inode);
// - the impostor sequence of the attack: with a person attached to a
//   terminal, the agent tries SIGSTOP on the runner (it fails), then an
//   impostor holding a copy of the runner's token (which the agent could
//   not read: the test reads it as root) dials, without the runner's key
//   and with a guessed one, also while the runner is stopped (by the test,
//   as root: what the agent could not do): refused, audited, logged; the
//   link is the same one, and the person's terminal still echoes.
import fs from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, sleep, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, addLocalSandbox } from '../interop/airlockd.mjs';

const MARKER = 'FORGED-BY-AGENT'; // tests/tools/escape.c forge_one
const DATA_WALK_MAX = 20000; // entries of the data directory compared at most

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

// The process's state letter (R, S, T for stopped ...), or '' when gone.
function stateOf(pid) {
  try { return /^State:\s+(\S)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]; } catch { return ''; }
}

// The log lines where the marker appears outside an escaped context: each
// occurrence must follow an escaped newline ("\n", as al_log writes one);
// one at the start of a line, or after a prefix (a line relayed from the
// runner's pipe), was a line of its own.
function forgedLines(log) {
  return log.split('\n').filter((l) => {
    for (let i = l.indexOf(MARKER); i >= 0; i = l.indexOf(MARKER, i + 1)) if (l.slice(Math.max(0, i - 2), i) !== '\\n') return true;
    return false;
  });
}

// dev:ino of what a descriptor (or path) leads to; null when it cannot be
// read, or for a character device (/dev/null, a tty: shared by design).
function ident(p) {
  try {
    const st = fs.statSync(p, { bigint: true });
    return st.isCharacterDevice() ? null : `${st.dev}:${st.ino}`;
  } catch { return null; }
}

// fd number -> { id: dev:ino, target } of every descriptor of a process,
// but anonymous inodes (epoll, eventfd, signalfd ...: one inode shared by
// all of them, nothing to reach through) and character devices.
function fdsOf(pid) {
  const out = new Map();
  let names;
  try { names = fs.readdirSync(`/proc/${pid}/fd`); } catch { return out; }
  for (const n of names) {
    let target;
    try { target = fs.readlinkSync(`/proc/${pid}/fd/${n}`); } catch { continue; }
    if (target.startsWith('anon_inode:')) continue;
    const id = ident(`/proc/${pid}/fd/${n}`);
    if (id) out.set(Number(n), { id, target });
  }
  return out;
}

// pid -> parent pid of every process.
function parents() {
  const parent = new Map();
  for (const p of fs.readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    try {
      const st = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      parent.set(Number(p), Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]));
    } catch { /* gone */ }
  }
  return parent;
}

// The processes below `top` (bounded walk up each chain).
function descendants(top) {
  const parent = parents();
  return [...parent.keys()].filter((pid) => {
    let q = parent.get(pid);
    for (let depth = 0; depth < 64 && q > 1 && q !== top; depth++) q = parent.get(q);
    return q === top;
  });
}

const cmdline = (pid) => { try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0'); } catch { return []; } };
const pidNs = (pid) => { try { return fs.readlinkSync(`/proc/${pid}/ns/pid`); } catch { return null; } };

// The airlock-runner process itself, below the bubblewrap whose pid the pid
// file holds (its keepers are forks of it, below it).
function realRunner(bwrapPid) {
  const isRunner = (pid) => { const a = cmdline(pid); return /airlock-runner$/.test(a[0] || '') && a.includes('--connect'); };
  const parent = parents();
  const found = descendants(bwrapPid).filter((pid) => isRunner(pid) && !isRunner(parent.get(pid)));
  return found.length === 1 ? found[0] : 0;
}

// The processes in agents' pid namespaces: the runner's descendants outside
// the runner's own pid namespace (each terminal's jail has its own).
function agentPids(runner) {
  const runnerNs = pidNs(runner);
  return descendants(runner).filter((pid) => pidNs(pid) && pidNs(pid) !== runnerNs);
}

// dev:ino -> what it is, for everything no agent may hold: airlockd's
// descriptors and log, the runner's standard streams and sockets, and every
// entry of the data directory outside the sandbox's workspace.
function forbiddenIds({ airlockdPid, runnerPid, log, dir, work }) {
  const out = new Map();
  for (const [n, f] of fdsOf(airlockdPid)) out.set(f.id, `airlockd's fd ${n} (${f.target})`);
  for (const [n, f] of fdsOf(runnerPid)) {
    if (n <= 2 || f.target.startsWith('socket:')) out.set(f.id, `the runner's fd ${n} (${f.target})`);
  }
  out.set(ident(log), "airlockd's log file");
  const stack = [dir];
  for (let seen = 0; stack.length && seen < DATA_WALK_MAX; seen++) {
    const p = stack.pop();
    if (p === work) continue; // the agent's own workspace
    const id = ident(p);
    if (id) out.set(id, `data directory: ${p}`);
    let st;
    try { st = fs.lstatSync(p); } catch { continue; }
    if (st.isDirectory()) for (const n of fs.readdirSync(p)) stack.push(path.join(p, n));
  }
  return out;
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
  const runner = realRunner(runnerPid);
  check(runner > 0, `the airlock-runner process below it (pid ${runner})`);

  fs.copyFileSync(path.join(BIN, 'escape'), path.join(work, 'escape'));
  fs.chmodSync(path.join(work, 'escape'), 0o755);
  const token = fs.readFileSync(path.join(run_, 'token'), 'utf8').trim();
  const pem = fs.readFileSync(path.join(dir, 'signing-key.pem'), 'utf8');
  const keyLine = pem.split('\n').find((l) => l && !l.startsWith('-----'));
  const hostPaths = [path.join(dir, 'signing-key.pem'), path.join(run_, 'token'),
    path.join(dir, 'airlock.db'), '/airlock/run/token', '/run/airlock/token'];
  const argv = ['/workspace/escape', '--secret', token.slice(-40), '--secret', keyLine.slice(0, 40),
    ...hostPaths.flatMap((p) => ['--path', p]), '--stop', String(runner), '--forge', '--kill-all'];
  const e = await runIn(d.port, admin, argv);
  console.log(e.out);
  for (const l of e.out.split('\n').filter((x) => x.startsWith('FAIL '))) check(false, `inside the sandbox: ${l}`);
  check(/escape: \d+ held, 0 failed/.test(e.out), 'every escape attempt failed inside the sandbox');
  check(/ok CapEff: 0000000000000000/.test(e.out) && /ok Seccomp: 2/.test(e.out), 'CapEff is 0 and a seccomp filter is on');
  check(/ok no secret readable/.test(e.out), 'neither the token nor the signing key is readable anywhere the agent looks');
  check(/ok SIGSTOP of the runner: /.test(e.out) && stateOf(runner) !== 'T',
    `the agent's SIGSTOP of the runner fails (${(/SIGSTOP of the runner: (.*)/.exec(e.out) || [])[1]}); the runner is not stopped`);
  const forged = /forged lines into (\d+) descriptors/.exec(e.out);
  check(forged && Number(forged[1]) > 0, `the agent wrote its forged line to ${forged && forged[1]} descriptors`);

  // the agent signalled everything it could: the runner was not among them
  await sleep(500);
  check(alive(runnerPid), 'kill(-1, SIGKILL) from the agent left the runner running');
  let r = await api(d.port, 'GET', '/v1/sandboxes', admin);
  check(r.json.find((x) => x.id === 'box').link_up, 'the runner is still linked');
  // the same from a shell, as the attack did (the marker put together at run time: not in argv)
  const forge = await runIn(d.port, admin, ['sh', '-c',
    'm=FORGED; m="$m-BY-AGENT"; for f in /proc/[0-9]*/fd/* /dev/stdout /dev/stderr; do ' +
    'timeout 2 sh -c \'printf "x\\n%s %s\\n" "$1" "$2" >> "$2"\' - "$m" "$f"; done 2>/dev/null; echo done-forging'], 30000);
  check(/done-forging/.test(forge.out), 'a new terminal in the same sandbox works');
  await sleep(300);
  const log = fs.readFileSync(d.log, 'utf8');
  const bad = forgedLines(log);
  check(bad.length === 0, `no line of airlockd's log holds ${MARKER} outside an escaped context` +
    `${bad.length ? `: ${bad.length} lines, e.g. ${JSON.stringify(bad[0].slice(0, 200))}` : ''}`);

  // an agent left running on pipes (a terminal's stdio are a tty otherwise,
  // a character device), holding files of its own too
  r = await api(d.port, 'POST', '/v1/terminals', admin,
    { sandbox: 'box', mode: 'pipes', argv: ['sh', '-c', 'exec 3>/tmp/agent-file 4</workspace/escape; echo holding; exec sleep 300'] });
  check(r.status === 201, 'an agent runs on pipes');
  const holder = await attach(d.port, r.json.id, admin, { read: true });
  await holder.ch.waitOutput(/holding/, 10000);

  // a person at a terminal of the sandbox, before the attack
  r = await api(d.port, 'POST', '/v1/terminals', admin, { sandbox: 'box', argv: ['cat'] });
  check(r.status === 201, 'a person opens a terminal');
  const person = await attach(d.port, r.json.id, admin);
  await person.ch.wait(() => person.ch.role === 1, 'the person is the writer');
  person.ch.write('before-impostor\n');
  await person.ch.waitOutput(/before-impostor/, 10000);

  // seen from the host: no descriptor an agent holds (its processes, the
  // jail's, all it may reach under /proc) is airlockd's, the runner's or the
  // data directory's
  const agents = agentPids(runner);
  check(agents.length > 0, `the agent's processes are found from the host (${agents.length})`);
  const forbidden = forbiddenIds({ airlockdPid: d.p.pid, runnerPid: runner, log: d.log, dir, work });
  const runnerErr = fdsOf(runner).get(2);
  check(runnerErr && /^pipe:/.test(runnerErr.target) && [...fdsOf(d.p.pid).values()].some((f) => f.id === runnerErr.id),
    "the comparison sees through pipes: the runner's stderr is a pipe airlockd reads (same inode)");
  let compared = 0;
  const reached = [];
  for (const pid of agents) {
    for (const [n, f] of fdsOf(pid)) {
      compared++;
      if (forbidden.has(f.id)) reached.push(`pid ${pid} fd ${n} (${f.target}) is ${forbidden.get(f.id)}`);
    }
  }
  check(compared > 0 && reached.length === 0, `none of the ${compared} descriptors of ${agents.length} agent processes ` +
    `is one of ${forbidden.size} of airlockd, the runner or the data directory${reached.length ? `: ${reached.join('; ')}` : ''}`);

  // the impostor sequence: the agent stops the runner, then poses as it
  r = await api(d.port, 'GET', '/v1/sandboxes', admin);
  const since = r.json.find((x) => x.id === 'box').link_since;
  const stop = await runIn(d.port, admin, ['sh', '-c', `kill -STOP ${runner}; echo "stop-rc=$?"`], 20000);
  check(/stop-rc=[1-9]/.test(stop.out) && stateOf(runner) !== 'T',
    `the agent cannot SIGSTOP the runner (${stop.out.trim().split('\n').pop()}; runner state ${stateOf(runner)})`);
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
  // what the agent could not do, done as root: the runner stopped while the impostor dials
  process.kill(runner, 'SIGSTOP');
  let stopped;
  try {
    stopped = await tryLink({ Authorization: `Bearer ${token}` });
  } finally {
    process.kill(runner, 'SIGCONT');
  }
  check(stopped === 403, `with the real runner stopped, the copied token is still refused (${stopped})`);
  r = await api(d.port, 'GET', '/v1/audit', admin);
  const imp = r.json.filter((x) => x.action === 'runner_impostor' && x.target === 'box');
  check(imp.length >= 3, `the attempts are audited (${imp.length} runner_impostor rows)`);
  check(/runner link from .* refused: /.test(fs.readFileSync(d.log, 'utf8')), 'and logged as errors');
  r = await api(d.port, 'GET', '/v1/sandboxes', admin);
  const box = r.json.find((x) => x.id === 'box');
  check(box.link_up && box.link_since === since && alive(runner) && stateOf(runner) !== 'T',
    'the real runner is unaffected: running, and the same link (it never dropped)');
  check(person.ctl.ready && !person.ctl.closeInfo, "the person's connection stayed open");
  person.ch.write('after-impostor\n');
  await person.ch.waitOutput(/after-impostor/, 10000);
  check(true, "and the person's terminal still echoes");
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
