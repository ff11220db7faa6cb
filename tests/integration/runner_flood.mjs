// Fairness of the runner's loop under flooding terminals (issue 16): the
// screen model may not hold the loop for one terminal's output. Eight
// terminals opened at once, each running `yes` (the cheapest flood there is
// for the program and the dearest for the model: a scroll every 3 bytes):
//  - every OPENED arrives within OPENED_MS of the OPENs being sent;
//  - while all eight flood, PINGs are answered within PONG_MS (eight
//    PINGs, spaced, each timed: the median within PONG_MS, each within
//    PONG_WORST);
//  - each terminal's output keeps flowing meanwhile (no terminal starves);
//  - a snapshot taken in the middle of the flood is a screen of `y` lines,
//    at the offset the stream stood at.
// A sanitizer build is several times slower at the model: the bounds are
// then generous (detected as tests/integration/web_flood.mjs does). It
// times responses, so CMakeLists.txt runs it alone (RUN_SERIAL).
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, keygen, mint, startRunner, sleep, BIN } from '../interop/harness.mjs';
import { Controller, enc } from '../interop/airlock.mjs';

let sanitized = false;
try { sanitized = /AIRLOCK_SANITIZE:BOOL=ON/.test(fs.readFileSync(path.join(BIN, 'CMakeCache.txt'), 'utf8')); } catch { /* not a build dir */ }
const TERMS = 8;
const OPENED_MS = sanitized ? 3000 : 500;
const PONG_MS = sanitized ? 400 : 50;
const PONG_WORST = 5 * PONG_MS;
const PINGS = 8;
const PING_EVERY_MS = 150;

await run('runner_flood', async () => {
  const dir = tmpdir('flood');
  keygen(dir);
  const r = await startRunner({ dir });
  const ctl = new Controller();
  await ctl.connect(r.url, { Authorization: `Bearer ${mint(dir, r.id)}` });

  // keep only counts of the output: 8 floods would fill the test's heap
  const got = new Map();
  const t0 = performance.now();
  const chans = [];
  for (let i = 0; i < TERMS; i++) {
    // niced: on 2 cores, 8 busy writers would otherwise measure the
    // scheduler's share for the runner, not how long its loop is held
    const c = ctl.open(['nice', '-n', '19', 'yes'], { cols: 80, rows: 24 });
    c.openedAt = null;
    got.set(c.id, 0);
    c.onData = (s, b) => { got.set(c.id, got.get(c.id) + b.length); c.out.length = 0; };
    chans.push(c);
  }
  // timestamps of OPENED and PONG, taken as the frames are handled
  for (const c of chans) {
    c.waiters.push(() => { if (c.opened && c.openedAt === null) c.openedAt = performance.now(); return c.openedAt !== null; });
  }
  await Promise.all(chans.map((c) => c.wait(() => c.opened || c.openError, `OPEN ${c.id} answered`, 60000)));
  const openMs = chans.map((c) => (c.openedAt ?? performance.now()) - t0);
  const worstOpen = Math.max(...openMs);
  check(chans.every((c) => c.opened), `all ${TERMS} terminals opened`);
  check(worstOpen <= OPENED_MS,
    `every OPENED of ${TERMS} flooding terminals arrived within ${OPENED_MS} ms (slowest ${worstOpen.toFixed(0)} ms, all: ${openMs.map((m) => m.toFixed(0)).join(' ')})`);

  // all eight flooding: PINGs, each timed from send to PONG
  await sleep(300);
  const rtts = [];
  for (let i = 0; i < PINGS; i++) {
    rtts.push(await ctl.timedPing(i + 1, 20000));
    await sleep(PING_EVERY_MS);
  }
  // The median must meet the bound and every PING come within PONG_WORST:
  // a PONG also waits behind the output frames already in the socket's send
  // buffer and behind this process decoding them, which a loaded 2-core
  // machine stretches now and then. (Before issue 16's fixes: seconds; with
  // the loop fixed but libvterm's screen, a median of about 150 ms.)
  const sorted = [...rtts].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)], worstPong = sorted[sorted.length - 1];
  check(median <= PONG_MS && worstPong <= PONG_WORST,
    `with ${TERMS} terminals running yes, PINGs are answered within ${PONG_MS} ms at the median (${median.toFixed(1)} ms) and ${PONG_WORST} ms at worst (${worstPong.toFixed(1)} ms; all: ${rtts.map((m) => m.toFixed(1)).join(' ')})`);

  // every terminal made progress, none starved
  const counts = chans.map((c) => got.get(c.id));
  const least = Math.min(...counts), most = Math.max(...counts);
  check(least > 0 && least * 8 >= most,
    `each of the ${TERMS} floods got its share of the loop (bytes: ${counts.join(' ')})`);

  // a snapshot in the middle of the flood: a screen of y lines
  const c0 = chans[0];
  ctl.send(enc.snapshotReq(c0.id));
  await c0.wait(() => c0.snapshot, 'a snapshot of a flooding terminal', 20000);
  const text = c0.snapshot.bytes.toString('latin1');
  check(c0.snapshot.offset > 0 && (text.match(/y/g) || []).length >= 20,
    `a snapshot taken mid-flood at offset ${c0.snapshot.offset} shows the y lines`);

  for (const c of chans) c.signal(15);
  await Promise.all(chans.map((c) => c.waitExit(30000)));
  check(true, 'all floods ended on SIGTERM');
});
