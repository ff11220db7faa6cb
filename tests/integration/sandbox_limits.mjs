// A fork bomb and a memory hog, each in a local sandbox of its own, under
// an airlockd running as root with small bounds (--sandbox-pids 128,
// --sandbox-memory 256M, --sandbox-cpu 50): while they run, airlockd's
// /healthz and a terminal in a third sandbox answer quickly; the bomb
// never has more processes than its bound, the hog is killed by the
// memory bound (and never gets its gigabyte); closing the bomb's terminal
// ends every one of its processes. Every loop here is bounded in time.
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, sleep, rawHttp, scaled } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, addLocalSandbox } from '../interop/airlockd.mjs';

const PIDS = 128;
const MEM = 256 << 20;

// The sandbox's v1 or v2 group: airlock/<tag>-<id> under a hierarchy, the
// tag being the first 8 hex digits of the FNV-1a hash of the data
// directory's real path (docs/control-plane.md).
function groupOf(ctrl, dir, id) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(fs.realpathSync(dir))) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  const name = `${h.toString(16).padStart(16, '0').slice(0, 8)}-${id}`;
  for (const root of [`/sys/fs/cgroup/${ctrl}/airlock`, '/sys/fs/cgroup/airlock']) {
    if (fs.existsSync(path.join(root, name))) return path.join(root, name);
  }
  return null;
}
const readNum = (f) => { try { return Number(fs.readFileSync(f, 'utf8').trim().split(/\s/)[0]); } catch { return NaN; } };

async function timed(fn) {
  const t0 = Date.now();
  await fn();
  return Date.now() - t0;
}

await run('sandbox_limits', async () => {
  check(process.getuid() === 0, 'this test runs as root (as CI does)');
  const dir = path.join(tmpdir('limits'), 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const d = await startAirlockd({ dir, args: ['--sandbox-pids', String(PIDS), '--sandbox-memory', '256M', '--sandbox-cpu', '50'] });
  for (const id of ['bomb', 'hog', 'calm']) await addLocalSandbox(d.port, admin, id);
  const pidsGroup = groupOf('pids', dir, 'bomb');
  check(pidsGroup !== null, `the bomb's sandbox has a control group (${pidsGroup})`);
  check(readNum(path.join(pidsGroup, 'pids.max')) === PIDS, `its pids.max is ${PIDS}`);

  // a bomb whose processes stay (each forks two and sleeps), so that its
  // population sits at the bound instead of dying out between samples
  let r = await api(d.port, 'POST', '/v1/terminals', admin, { sandbox: 'bomb', argv: ['sh', '-c', 'f() { f & f & sleep 30; }; f'] });
  check(r.status === 201, 'a fork bomb starts');
  const bombId = r.json.id;
  const bomb = await attach(d.port, bombId, admin, { read: true }); // its shell's complaints, if any
  r = await api(d.port, 'POST', '/v1/terminals', admin,
    { sandbox: 'hog', argv: ['perl', '-e', '$x = "x" x (1024 * 1024 * 1024); print "got a gigabyte\\n"; sleep 5'] });
  check(r.status === 201, 'a memory hog starts');
  const hog = await attach(d.port, r.json.id, admin);

  // while they run: airlockd and the other sandbox answer; the bomb's
  // population is sampled every 20 ms beside the loop
  let worstHealth = 0, worstEcho = 0, maxPids = 0;
  const sampler = setInterval(() => {
    const n = readNum(path.join(pidsGroup, 'pids.current'));
    if (n > maxPids) maxPids = n;
  }, 20);
  const until = Date.now() + 8000;
  for (let i = 0; Date.now() < until && i < 40; i++) {
    worstHealth = Math.max(worstHealth, await timed(async () => {
      const h = await rawHttp(d.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 5000);
      if (h.status !== 200) throw new Error(`/healthz: ${h.status}`);
    }));
    worstEcho = Math.max(worstEcho, await timed(async () => {
      const t = await api(d.port, 'POST', '/v1/terminals', admin, { sandbox: 'calm', argv: ['sh', '-c', 'echo calm-$((20+22))'], mode: 'pipes' });
      const a = await attach(d.port, t.json.id, admin);
      await a.ch.waitExit(10000);
      if (!/calm-42/.test(Buffer.concat(a.ch.out).toString())) throw new Error('no echo from the calm sandbox');
      a.ctl.ws.terminate();
    }));
    await sleep(100);
  }
  // a bomb that started late (a slow machine) is given a few more seconds
  // to reach its bound; the sampler goes on meanwhile
  for (const end = Date.now() + scaled(10000); maxPids <= PIDS / 2 && Date.now() < end;) await sleep(100);
  clearInterval(sampler);
  if (maxPids <= PIDS / 2)
    console.log(`the bomb's terminal printed: ${JSON.stringify(Buffer.concat(bomb.ch.out).toString().slice(-600))}`);
  check(maxPids > PIDS / 2 && maxPids <= PIDS, `the bomb reached its bound and no further (${maxPids} of ${PIDS} processes)`);
  check(worstHealth < 1000, `airlockd's /healthz answered within a second throughout (worst ${worstHealth} ms)`);
  check(worstEcho < 5000, `a terminal in another sandbox ran within 5 s throughout (worst ${worstEcho} ms)`);

  await hog.ch.waitExit(30000);
  const hogOut = Buffer.concat(hog.ch.out).toString();
  check(!/got a gigabyte/.test(hogOut) && hog.ch.exit.signo === 9,
    `the memory hog was killed by its bound (${JSON.stringify(hog.ch.exit)})`);
  const memGroup = groupOf('memory', dir, 'hog');
  const peak = readNum(path.join(memGroup || '/nonexistent', 'memory.max_usage_in_bytes')) ||
    readNum(path.join(memGroup || '/nonexistent', 'memory.peak'));
  check(!(peak > MEM), `its sandbox never used more than its bound (peak ${peak} bytes)`);

  // closing the bomb's terminal ends all of it
  r = await api(d.port, 'DELETE', `/v1/terminals/${bombId}`, admin);
  check(r.status === 202, 'the bomb is closed');
  let left = NaN;
  for (const end = Date.now() + 20000; Date.now() < end; await sleep(200)) {
    left = readNum(path.join(pidsGroup, 'pids.current'));
    if (left <= 2) break; /* the runner and its bwrap stay */
  }
  check(left <= 2, `every process of the bomb is gone (${left} left in its group: the runner)`);
});
