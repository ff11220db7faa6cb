// An agent in a local sandbox, run as the sandbox's unprivileged user,
// floods its own terminals with the sequences dearest to the screen model
// (RIS, a whole reset in two bytes, and DECALN, a screen of E's in three,
// both made inside the sandbox by `yes`), at 300x100, to slow down what
// else its runner and airlockd serve. Through airlockd, meanwhile:
//  - a person's terminal in the same sandbox (the same runner, the same
//    models' thread) echoes each keystroke within ECHO_MS at the median
//    and ECHO_WORST each (with one FIFO ring for every model and no bound
//    on what a terminal may queue, the flood kept that ring full and the
//    echo's read waited for room behind it);
//  - a person in another sandbox likewise;
//  - a burst of plain text (BURST_MB) printed in the same sandbox takes at
//    most 1 / BURST_SHARE of its time alone (x0.03 of its pace alone
//    when what a terminal may queue for the models' thread was not
//    bounded; x0.29-0.50 since, the floods taking their share of the
//    thread);
//  - a viewer attaching to a flooding terminal gets its screen (the
//    snapshot it starts from) within SNAP_MS;
//  - a new terminal in the flooding sandbox opens and prints within
//    OPEN_MS;
//  - the floods are the agent's own: their processes run under the
//    sandbox's user (not root), in a pid namespace of their own.
// Timed: CMakeLists.txt runs it alone (RUN_SERIAL); bounds are generous
// under the sanitizers.
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, sleep, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, addLocalSandbox } from '../interop/airlockd.mjs';
import { descendants } from '../interop/procs.mjs';

let sanitized = false;
try { sanitized = /AIRLOCK_SANITIZE:BOOL=ON/.test(fs.readFileSync(path.join(BIN, 'CMakeCache.txt'), 'utf8')); } catch { /* not a build dir */ }
const ECHO_MS = sanitized ? 400 : 50;
const ECHO_WORST = 5 * ECHO_MS;
const SNAP_MS = sanitized ? 5000 : 1000;
const OPEN_MS = sanitized ? 5000 : 1000;
const KEYS = 16; // keystrokes timed per person
const BURST_MB = 8; // MB of 100-column lines
const BURST_SHARE = 0.15; // of the burst's pace alone, beside the floods
const FLOODS = [
  { name: 'RIS', seq: '\\033c' },
  { name: 'DECALN', seq: '\\033#8' },
];

const uidOf = (pid) => { try { return Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]); } catch { return -1; } };
const commOf = (pid) => { try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { return ''; } };
const pidNs = (pid) => { try { return fs.readlinkSync(`/proc/${pid}/ns/pid`); } catch { return null; } };
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// A person's terminal: `cat` in raw mode, attached as its writer.
async function person(port, key, sandbox) {
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox, argv: ['sh', '-c', 'stty raw -echo; printf READY; exec cat'] });
  if (r.status !== 201) throw new Error(`person's terminal: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, key);
  await a.ch.wait(() => a.ch.role === 1, 'the person is the writer');
  await a.ch.waitOutput(/READY/, 20000);
  return a;
}

// Milliseconds from each keystroke to its echo, KEYS of them.
async function echoTimes(a, tag) {
  const ms = [];
  for (let i = 0; i < KEYS; i++) {
    const word = `<${tag}${i}>`;
    const t0 = performance.now();
    a.ch.write(word);
    await a.ch.waitOutput(new RegExp(word), 60000);
    ms.push(performance.now() - t0);
    await sleep(50);
  }
  return ms;
}

// Seconds a burst of BURST_MB of text takes in the sandbox, from the
// terminal's creation to its exit as airlockd records it.
async function burstSecs(port, key, sandbox) {
  const argv = ['sh', '-c', `head -c ${BURST_MB * 1000000} /dev/zero | tr '\\0' x | fold -w 100`];
  const t0 = performance.now();
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox, argv });
  if (r.status !== 201) throw new Error(`burst: ${r.status} ${r.body}`);
  for (const until = Date.now() + 120000; Date.now() < until; await sleep(20)) {
    const t = (await api(port, 'GET', `/v1/terminals/${r.json.id}`, key)).json;
    if (t.state === 'exited') {
      if (t.exit_code !== 0 || t.out_bytes < BURST_MB * 1000000) throw new Error(`burst: exit ${t.exit_code}, ${t.out_bytes} bytes`);
      return (performance.now() - t0) / 1000;
    }
  }
  throw new Error('burst: no exit within 120 s');
}

await run('sandbox_flood', async () => {
  const base = tmpdir('sflood');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const d = await startAirlockd({ dir });
  await addLocalSandbox(d.port, admin, 'box');
  await addLocalSandbox(d.port, admin, 'box2');

  const near = await person(d.port, admin, 'box');
  const far = await person(d.port, admin, 'box2');
  const calmNear = await echoTimes(near, 'calm');
  const alone = await burstSecs(d.port, admin, 'box');
  console.log(`echo before the flood: ${calmNear.map((m) => m.toFixed(1)).join(' ')} ms`);

  const floods = [];
  for (const f of FLOODS) {
    // at nice 19: what is measured is what the runner gives each terminal,
    // not how the kernel shares the CPUs among the agent's processes
    const argv = ['sh', '-c', `stty raw -echo; exec nice -n 19 yes "$(printf '${f.seq}')" | nice -n 19 tr -d '\\n'`];
    const r = await api(d.port, 'POST', '/v1/terminals', admin, { sandbox: 'box', argv, cols: 300, rows: 100 });
    check(r.status === 201, `the agent's ${f.name} flood runs at 300x100`);
    floods.push({ ...f, id: r.json.id });
  }
  // the floods under way: out_bytes grow
  for (const f of floods) {
    let first = -1, now = -1;
    for (const until = Date.now() + 20000; Date.now() < until; await sleep(200)) {
      const t = (await api(d.port, 'GET', `/v1/terminals/${f.id}`, admin)).json;
      if (first < 0 && t.out_bytes > 0) first = t.out_bytes;
      now = t.out_bytes;
      if (first >= 0 && now > first + 65536) break;
    }
    check(now > first + 65536, `the ${f.name} flood is under way (${now} bytes out)`);
  }

  // the floods are the agent's: its user, its pid namespace
  const runner = Number(fs.readFileSync(path.join(dir, 'sandboxes', 'box', 'run', 'runner.pid'), 'utf8'));
  const yeses = descendants(runner).filter((p) => commOf(p) === 'yes');
  check(yeses.length === FLOODS.length, `the host sees the agent's ${yeses.length} yes processes below the sandbox`);
  check(yeses.every((p) => uidOf(p) > 0 && pidNs(p) !== pidNs(process.pid)),
    `they run as the sandbox's user (uids ${yeses.map(uidOf).join(', ')}) in a pid namespace of their own`);

  const nearMs = await echoTimes(near, 'near');
  const farMs = await echoTimes(far, 'far');
  console.log(`echo beside the floods, same sandbox: ${nearMs.map((m) => m.toFixed(1)).join(' ')} ms`);
  console.log(`echo beside the floods, another sandbox: ${farMs.map((m) => m.toFixed(1)).join(' ')} ms`);
  for (const [what, ms] of [['in the same sandbox', nearMs], ['in another sandbox', farMs]]) {
    check(median(ms) <= ECHO_MS && Math.max(...ms) <= ECHO_WORST,
      `a person's keystrokes ${what} echo within ${ECHO_MS} ms at the median (${median(ms).toFixed(1)}) and ${ECHO_WORST} ms each (worst ${Math.max(...ms).toFixed(1)})`);
  }

  const beside = await burstSecs(d.port, admin, 'box');
  check(alone / beside >= BURST_SHARE,
    `${BURST_MB} MB of text beside the floods keep ${BURST_SHARE} of their pace alone at least (${beside.toFixed(2)} s against ${alone.toFixed(2)} s: x${(alone / beside).toFixed(2)})`);

  // a viewer attaching to a flooding terminal starts from its screen
  for (const f of floods) {
    const t0 = performance.now();
    const v = await attach(d.port, f.id, admin, { read: true });
    await v.ch.wait(() => v.ch.snapshot, `the viewer's snapshot of the ${f.name} flood`, 60000);
    const ms = performance.now() - t0;
    check(ms <= SNAP_MS && v.ch.snapshot.cols === 300 && v.ch.snapshot.rows === 100,
      `a viewer attaching to the ${f.name} flood has its 300x100 screen within ${SNAP_MS} ms (${ms.toFixed(0)} ms)`);
    if (f.name === 'DECALN') check(v.ch.snapshot.bytes.toString('latin1').includes('EEEE'), 'the DECALN flood\'s screen is full of E\'s');
    v.ctl.ws.close();
  }

  // a new terminal in the flooding sandbox
  const t0 = performance.now();
  const r = await api(d.port, 'POST', '/v1/terminals', admin, { sandbox: 'box', argv: ['sh', '-c', 'echo fresh-$((6*7)); exec sleep 300'] });
  check(r.status === 201, 'a new terminal in the flooding sandbox is made');
  const fresh = await attach(d.port, r.json.id, admin, { read: true });
  await fresh.ch.wait(() => /fresh-42/.test(fresh.ch.seen().toString('latin1')) ||
    (fresh.ch.snapshot && /fresh-42/.test(fresh.ch.snapshot.bytes.toString('latin1'))), 'the new terminal\'s line', 60000);
  const openMs = performance.now() - t0;
  check(openMs <= OPEN_MS, `it opens and prints within ${OPEN_MS} ms (${openMs.toFixed(0)} ms)`);

  for (const f of floods) {
    const c = await api(d.port, 'DELETE', `/v1/terminals/${f.id}`, admin);
    check(c.status === 202, `the ${f.name} flood is closed`);
  }
});
