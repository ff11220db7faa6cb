// Resource bounds where no control group can be written: an airlockd
// running as nobody (so its local sandboxes get the rlimit fallback:
// RLIMIT_NPROC per sandbox user namespace, RLIMIT_DATA per process, nice
// 10) with small bounds. A fork bomb and a memory hog, each in its own
// sandbox: airlockd's /healthz and a terminal in a third sandbox answer
// quickly while they run; the bomb never has more processes than its bound;
// the hog never gets its gigabyte; the agents run at nice 10; closing the
// bomb's terminal ends every one of its processes. Every loop is bounded.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, sleep, rawHttp } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, addLocalSandbox, asNobody } from '../interop/airlockd.mjs';
import { descendants } from '../interop/procs.mjs';

const PIDS = 64;
const SAMPLE_MS = 8000; // how long the bomb and the hog are watched

async function timed(fn) {
  const t0 = Date.now();
  await fn();
  return Date.now() - t0;
}

// One command in a sandbox, in pipe mode: its output and exit.
async function runIn(port, key, sandbox, argv, ms = 20000) {
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox, argv, mode: 'pipes' });
  if (r.status !== 201) throw new Error(`terminal: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, key);
  await a.ch.waitExit(ms);
  a.ctl.ws.terminate();
  return { out: Buffer.concat(a.ch.out).toString() + Buffer.concat(a.ch.err || []).toString(), exit: a.ch.exit };
}

await run('sandbox_rlimits', async () => {
  check(process.getuid() === 0, 'this test runs as root (as CI does), to start airlockd as nobody');
  const base = tmpdir('rlimits');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const d = await startAirlockd(asNobody(base, dir,
    ['--sandbox-pids', String(PIDS), '--sandbox-memory', '256M', '--sandbox-cpu', '50']));
  for (const id of ['bomb', 'hog', 'calm']) await addLocalSandbox(d.port, admin, id);
  const log = fs.readFileSync(d.log, 'utf8');
  check(/bounding it with rlimits instead/.test(log), 'airlockd says the sandboxes are bounded by rlimits (no control group)');
  const bombRunner = Number(fs.readFileSync(path.join(dir, 'sandboxes', 'bomb', 'run', 'runner.pid'), 'utf8'));

  const calm = await runIn(d.port, admin, 'calm', ['sh', '-c', 'echo nice=$(nice)']);
  check(/nice=10/.test(calm.out), `the agents run at nice 10 (${calm.out.trim()})`);

  // the bomb grows below a shell that forks once and then only sleeps: a
  // shell that forked for every branch itself met the bound in the middle
  // of its own forks (the bomb's children fill it within microseconds),
  // exited, and its terminal's end took the whole bomb with it (CI saw 2
  // processes, the terminal exited)
  let r = await api(d.port, 'POST', '/v1/terminals', admin, { sandbox: 'bomb', argv: ['sh', '-c', 'f() { f & f & sleep 30; }; f & exec sleep 60'] });
  check(r.status === 201, 'a fork bomb starts');
  const bombId = r.json.id;
  r = await api(d.port, 'POST', '/v1/terminals', admin,
    { sandbox: 'hog', argv: ['perl', '-e', '$x = "x" x (1024 * 1024 * 1024); print "got a gigabyte\\n"; sleep 5'], mode: 'pipes' });
  check(r.status === 201, 'a memory hog starts');
  const hog = await attach(d.port, r.json.id, admin);

  let worstHealth = 0, worstEcho = 0, maxProcs = 0;
  const sampler = setInterval(() => { maxProcs = Math.max(maxProcs, descendants(bombRunner).length); }, 50);
  const until = Date.now() + SAMPLE_MS;
  for (let i = 0; Date.now() < until && i < 40; i++) {
    worstHealth = Math.max(worstHealth, await timed(async () => {
      const h = await rawHttp(d.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 5000);
      if (h.status !== 200) throw new Error(`/healthz: ${h.status}`);
    }));
    worstEcho = Math.max(worstEcho, await timed(async () => {
      const e = await runIn(d.port, admin, 'calm', ['sh', '-c', 'echo calm-$((20+22))'], 10000);
      if (!/calm-42/.test(e.out)) throw new Error(`no echo from the calm sandbox: ${e.out}`);
    }));
    await sleep(100);
  }
  // under a sanitizer the bomb may grow slower than the sample window:
  // wait (bounded) for it to reach half its bound before judging, still
  // sampling for a count above it
  for (const end = Date.now() + 30000; maxProcs <= PIDS / 2 && Date.now() < end;) await sleep(100);
  clearInterval(sampler);
  // the bound counts the sandbox's own processes: its runner, keepers and
  // jails are among them, so the bomb gets fewer than PIDS
  // the bound is per user: what else runs as nobody on the machine counts
  const others = execFileSync('ps', ['-u', 'nobody', '-o', 'pid=']).toString().trim().split(/\s+/).length;
  const bombView = await api(d.port, 'GET', `/v1/terminals/${bombId}`, admin);
  check(maxProcs > PIDS / 2 && maxProcs <= PIDS + 2,
    `the bomb reached its bound and no further (${maxProcs} processes below its bubblewrap, bound ${PIDS}; ` +
    `nobody runs ${others} processes now; the bomb's terminal: ${JSON.stringify(bombView.json)})`);
  check(worstHealth < 1000, `airlockd's /healthz answered within a second throughout (worst ${worstHealth} ms)`);
  check(worstEcho < 5000, `a terminal in another sandbox ran within 5 s throughout (worst ${worstEcho} ms)`);

  await hog.ch.waitExit(30000);
  const hogOut = Buffer.concat(hog.ch.out).toString() + Buffer.concat(hog.ch.err || []).toString();
  check(!/got a gigabyte/.test(hogOut) && hog.ch.exit.code !== 0,
    `the memory hog never got its gigabyte (${JSON.stringify(hog.ch.exit)}: ${hogOut.trim().slice(0, 80)})`);

  r = await api(d.port, 'DELETE', `/v1/terminals/${bombId}`, admin);
  check(r.status === 202, 'the bomb is closed');
  let left = NaN;
  for (const end = Date.now() + 20000; Date.now() < end; await sleep(200)) {
    left = descendants(bombRunner).length;
    if (left <= 2) break; /* the runner and its bwrap stay */
  }
  check(left <= 2, `every process of the bomb is gone (${left} left below its bubblewrap: the runner)`);
  await d.stop();
}, 180000);
