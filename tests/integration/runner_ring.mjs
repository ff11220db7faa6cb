// The output ring and the grace time. A controller that comes back with an
// older offset than the ring still holds gets an explicit GAP, then the
// bytes the ring kept, exactly; terminals outlive a lost controller for the
// grace time, and no longer.
import crypto from 'node:crypto';
import { run, check, tmpdir, keygen, mint, startRunner, sleep } from '../interop/harness.mjs';
import { Controller, enc } from '../interop/airlock.mjs';

await run('runner_ring', async () => {
  const dir = tmpdir('ring');
  keygen(dir);
  const RING = 1048576;
  const r = await startRunner({ dir, args: ['--ring', String(RING), '--grace', '3'] });
  const auth = () => ({ Authorization: `Bearer ${mint(dir, r.id)}` });

  // a first controller reads 5 MB of output, acknowledging as it goes
  const a = new Controller();
  await a.connect(r.url, auth());
  const t = a.open(['sh', '-c', 'stty raw -echo; head -c 5000000 /dev/urandom | base64 -w 100; sleep 30']);
  await t.wait(() => t.output().length > 6600000, 'all output', 60000);
  await sleep(300);
  const all = t.output();
  a.drop();

  // a second controller knows the channel but only up to offset 1000
  const b = new Controller();
  const c = b.adoptChannel(t.id, { outNext: 1000 });
  await b.connect(r.url, auth());
  await c.wait(() => c.gaps === 1 && c.output().length >= RING, 'gap then the ring', 20000);
  check(c.gaps === 1, 'an explicit GAP arrives');
  check(c.next[1] === all.length, `it resumes at the end (${c.next[1]} = ${all.length})`);
  const kept = c.output();
  check(kept.length === RING, `after the gap, exactly the ring's ${RING} bytes`);
  check(crypto.createHash('sha256').update(kept).digest('hex') ===
        crypto.createHash('sha256').update(all.subarray(all.length - RING)).digest('hex'),
  'and they are the last bytes printed, unchanged');

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
