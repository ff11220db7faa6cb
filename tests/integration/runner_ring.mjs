// The output ring and the grace time. A controller that comes back with an
// older offset than the ring still holds gets an explicit GAP, then the
// bytes the ring kept, exactly; terminals outlive a lost controller for the
// grace time, and no longer.
import { run, check, tmpdir, keygen, mint, startRunner, sleep } from '../interop/harness.mjs';
import { Controller, enc } from '../interop/airlock.mjs';

await run('runner_ring', async () => {
  const dir = tmpdir('ring');
  keygen(dir);
  const RING = 1048576;
  const r = await startRunner({ dir, args: ['--ring', String(RING), '--grace', '3'] });
  const auth = () => ({ Authorization: `Bearer ${mint(dir, r.id)}` });

  // a first controller reads 2 MB of a known 6.9 MB stream, then stops
  // granting credit and goes: the runner keeps what was not acknowledged
  // in its ring (an acknowledged, quiet ring is given back after 2 s,
  // which a loaded machine can take between two connections)
  const all = Buffer.from(`${Array.from({ length: 1000000 }, (_, i) => i + 1).join('\n')}\n`);
  const a = new Controller();
  await a.connect(r.url, auth());
  const t = a.open(['sh', '-c', 'stty raw -echo; seq 1 1000000; sleep 30']);
  await t.wait(() => t.output().length > 2000000, 'the first 2 MB', 60000);
  t.paused = true;
  await sleep(300);
  const gotA = t.output().length;
  check(all.subarray(0, gotA).equals(t.output()), `the first controller got the stream's first ${gotA} bytes`);
  a.drop();

  // a second controller knows the channel but only up to offset 1000
  const b = new Controller();
  const c = b.adoptChannel(t.id, { outNext: 1000 });
  await b.connect(r.url, auth());
  await c.wait(() => c.gaps === 1 && c.next[1] === all.length, 'gap then the rest', 30000)
    .catch((e) => { throw new Error(`${e.message}: ${c.gaps || 0} gaps, next ${c.next[1]} of ${all.length}`); });
  check(c.gaps === 1, 'an explicit GAP arrives');
  const from = all.length - c.output().length;
  check(from > 1000 && from <= gotA && gotA - from <= RING,
    `the GAP ends where the ring starts: at ${from}, within the ring's ${RING} bytes before what the first controller got (${gotA})`);
  check(c.output().equals(all.subarray(from)), 'after the gap, every byte from the ring on, exactly, to the end');

  // grace: drop the controller; within the grace time the terminal is there
  b.drop();
  await sleep(1000);
  const d = new Controller();
  await d.connect(r.url, auth());
  d.send(enc.list());
  await d.wait(() => d.list, 'list');
  check(d.list.some((e) => e.channel === t.id), 'within the grace time the terminal is still there');
  d.drop();
  await sleep(4500); // the behaviour under test: the grace time (3 s) passing with no controller
  const e = new Controller();
  await e.connect(r.url, auth());
  e.send(enc.list());
  await e.wait(() => e.list, 'list');
  check(e.list.length === 0, 'after the grace time (3 s) with no controller, the terminal is gone');
  const log = (await import('node:fs')).readFileSync(r.log, 'utf8');
  check(/no controller for 3 s: ending 1 terminal/.test(log), 'the runner logged why');
}, 120000);
