// A channel's process tree ends with the channel (docs/protocol.md §5):
// a process that called setsid() and was left behind by the channel's own
// process (its parent exited) is still the channel's, and is gone after a
// scope-1 SIGNAL, after CLOSE, after the runner's own SIGTERM, and when
// the runner ends its channels a grace time after losing its controller
// (--grace; on_grace in src/runner/runner.c). Each
// case runs with the runner starting agents directly and in its bubblewrap
// jail (--agent-sandbox bwrap). The left-behind process is a sleep with a
// duration no other process uses, found by its command line in /proc (in
// the jail, the pid the agent sees is its namespace's, not ours).
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, keygen, mint, startRunner, sleep, onCleanup } from '../interop/harness.mjs';
import { Controller, enc } from '../interop/airlock.mjs';

const WAIT_MS = 10000; // the longest a process may take to appear or go
const GRACE_S = 3; // --grace of the runner that loses its controller
const SIGTERM = 15;
let serial = 0;
const markers = [];

// Whatever a failing run left behind is ended here (our own sleeps only).
onCleanup(async () => {
  for (const m of markers) for (const pid of findSleep(m)) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
});

// Live (not zombie) sleep processes whose argv is exactly sleep <marker>.
function findSleep(marker) {
  const found = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${name}/cmdline`, 'latin1').split('\0');
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'latin1');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (path.basename(argv[0]) === 'sleep' && argv[1] === marker && state !== 'Z') found.push(Number(name));
    } catch { /* it ended meanwhile */ }
  }
  return found;
}

async function waitFor(pred, what) {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    if (pred()) return true;
    await sleep(20);
  }
  console.log(`# timed out waiting: ${what}`);
  return false;
}

// A marker of our own (a duration of 3000 s and a fraction no one else uses).
function marker() {
  serial += 1;
  const m = `3000.${process.pid}${serial}`;
  markers.push(m);
  return m;
}

async function startOne(kind, dir, extra = []) {
  const ws = path.join(dir, `ws-${kind}`);
  fs.mkdirSync(ws, { recursive: true });
  fs.chmodSync(ws, 0o777);
  const args = kind === 'jailed'
    ? ['--agent-sandbox', 'bwrap', '--agent-user', 'nobody', '--workspace', ws]
    : [];
  const r = await startRunner({ dir, args: [...args, ...extra] });
  const ctl = new Controller();
  await ctl.connect(r.url, { Authorization: `Bearer ${mint(dir, r.id)}` });
  return { r, ctl };
}

// Open sh that starts a setsid'd sleep, waits for a line, then exits
// without waiting for it. Plain, the sleep is left behind; jailed, the
// namespace ends with the command and takes the sleep with it. Resolves
// once the channel reported its exit.
async function leaveOrphan(ctl, kind, m, mode) {
  const c = ctl.open(['sh', '-c', `setsid sleep ${m} </dev/null >/dev/null 2>&1 & echo started; read x`], { mode });
  await c.waitOutput(/started/);
  check(await waitFor(() => findSleep(m).length === 1, `sleep ${m} running`), `${kind}: the setsid'd sleep ${m} runs`);
  c.write('\n');
  await c.waitExit();
  if (kind === 'plain') {
    await sleep(100);
    check(findSleep(m).length === 1, `plain: the sleep ${m} is left after its parent, the channel's process, exited`);
  } else {
    check(await waitFor(() => findSleep(m).length === 0, `sleep ${m} gone`),
      `jailed: the namespace ended the sleep ${m} with the channel's process`);
  }
  return c;
}

async function scenario(kind) {
  console.log(`# runner ${kind}`);
  const dir = tmpdir(`tree-${kind}`);
  keygen(dir);
  const { r, ctl } = await startOne(kind, dir);

  // scope-1 SIGNAL after the channel's process exited
  for (const mode of [0, 1]) {
    const m = marker();
    const c = await leaveOrphan(ctl, kind, m, mode);
    c.signal(SIGTERM, 1);
    check(await waitFor(() => findSleep(m).length === 0, `sleep ${m} gone`),
      `${kind}, ${mode ? 'pipes' : 'pty'}: SIGNAL TERM scope 1 after exit ends the left-behind sleep`);
    c.close();
    await c.wait(() => c.closed, 'close confirmed');
  }

  // CLOSE after the channel's process exited
  {
    const m = marker();
    const c = await leaveOrphan(ctl, kind, m, 0);
    c.close();
    await c.wait(() => c.closed, 'close confirmed');
    check(await waitFor(() => findSleep(m).length === 0, `sleep ${m} gone`),
      `${kind}: CLOSE after exit ends the left-behind sleep`);
  }

  // a daemon that double-forked while the channel's process runs: its
  // parent is gone and it has a session of its own, yet it is the
  // channel's, and scope 1 ends it with the channel's process
  {
    const m = marker();
    const c = ctl.open(['sh', '-c', `(setsid sleep ${m} </dev/null >/dev/null 2>&1 &); echo started; exec sleep 300`]);
    await c.waitOutput(/started/);
    check(await waitFor(() => findSleep(m).length === 1, `sleep ${m} running`), `${kind}: the daemon ${m} runs`);
    c.signal(SIGTERM, 1);
    await c.waitExit();
    check(c.exit.signo === SIGTERM, `${kind}: scope 1 ends the channel's process: ${JSON.stringify(c.exit)}`);
    check(await waitFor(() => findSleep(m).length === 0, `sleep ${m} gone`),
      `${kind}: scope 1 ends the double-forked daemon too`);
    c.close();
    await c.wait(() => c.closed, 'close confirmed');
  }

  // the runner's own exit on SIGTERM ends every channel's tree
  const ms = [marker(), marker()];
  for (const m of ms) await leaveOrphan(ctl, kind, m, 0);
  const lm = marker(); // and a channel whose process still runs, with a daemon of its own
  const dm = marker();
  const live = ctl.open(['sh', '-c', `(setsid sleep ${dm} </dev/null >/dev/null 2>&1 &); echo live; exec sleep ${lm}`]);
  await live.waitOutput(/live/);
  check(await waitFor(() => findSleep(lm).length === 1 && findSleep(dm).length === 1, 'live sleeps'),
    `${kind}: a running channel and its daemon before the SIGTERM`);
  ms.push(lm, dm);
  r.proc.kill('SIGTERM');
  const st = await Promise.race([r.exited, sleep(WAIT_MS).then(() => null)]);
  check(st && st.code === 0, `${kind}: the runner exits 0 on SIGTERM: ${JSON.stringify(st)}`);
  for (const m of ms) {
    check(await waitFor(() => findSleep(m).length === 0, `sleep ${m} gone`),
      `${kind}: after the runner's SIGTERM, no sleep ${m} of any channel is alive`);
  }
  ctl.drop();
}

// A lost controller: GRACE_S after the link dropped, the runner ends every
// channel with its whole tree: what an exited channel's process left
// behind (plain; jailed, its namespace ended it already) and a running
// channel with its daemon. Not before the grace time; a new controller
// then finds no channel.
async function graceScenario(kind) {
  console.log(`# runner ${kind}, a lost controller, --grace ${GRACE_S}`);
  const dir = tmpdir(`tree-grace-${kind}`);
  keygen(dir);
  const { r, ctl } = await startOne(kind, dir, ['--grace', String(GRACE_S)]);
  const ms = [];
  const left = marker();
  await leaveOrphan(ctl, kind, left, 0);
  if (kind === 'plain') ms.push(left);
  const lm = marker(), dm = marker();
  const live = ctl.open(['sh', '-c', `(setsid sleep ${dm} </dev/null >/dev/null 2>&1 &); echo live; exec sleep ${lm}`]);
  await live.waitOutput(/live/);
  check(await waitFor(() => findSleep(lm).length === 1 && findSleep(dm).length === 1, 'live sleeps'),
    `${kind}: a running channel and its daemon before the controller goes`);
  ms.push(lm, dm);
  ctl.drop();
  const dropped = Date.now();
  await sleep(1000); // the behaviour under test: within the grace time, the channels live on
  check(ms.every((m) => findSleep(m).length === 1),
    `${kind}: 1 s after the controller went, within the grace time, every sleep still runs`);
  for (const m of ms) {
    check(await waitFor(() => findSleep(m).length === 0, `sleep ${m} gone`),
      `${kind}: after the grace time, the sleep ${m} is gone`);
  }
  const after = Date.now() - dropped;
  check(after >= GRACE_S * 1000, `${kind}: they ended ${after} ms after the controller went, not before the grace time`);
  const c2 = new Controller();
  await c2.connect(r.url, { Authorization: `Bearer ${mint(dir, r.id)}` });
  c2.send(enc.list());
  await c2.wait(() => c2.list, 'LIST_REPLY');
  check(c2.list.length === 0, `${kind}: a new controller finds no channel (${c2.list.length})`);
  c2.drop();
}

run('runner_tree', async () => {
  await scenario('plain');
  await graceScenario('plain');
  if (process.getuid() === 0 && fs.existsSync('/usr/bin/bwrap')) {
    await scenario('jailed');
    await graceScenario('jailed');
  } else {
    console.log('# skipping the jailed runner: needs root and /usr/bin/bwrap');
  }
});
