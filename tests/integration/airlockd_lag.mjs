// A viewer that stops reading must not stop a terminal that prints at a
// moderate pace either: airlockd holds the runner's credit back for the
// slowest client by at most RL_CLIENT_LAG, and many small recording syncs
// must not pin that credit (the runner's window would then run out and the
// writer would stall). The paced output makes each sync small; the viewer
// stalls from the first byte; the writer must still get every byte without
// a long pause, and the viewer, reading again, catches up.
import path from 'node:path';
import { run, check, tmpdir } from '../interop/harness.mjs';
import { addUser, startAirlockd, addLocalSandbox, api, attach } from '../interop/airlockd.mjs';

// past the runner's window (2 MiB), within the idle time a stalled client is
// kept (45 s): 10 lines every 200 ms take 24 s plus the loop's own cost (a
// line every 20 ms, one sleep each, took 48 s under ASan on a loaded machine
// and the stalled viewer was dropped before the end)
const LINES = Number(process.env.AL_LAG_LINES || 1200);
const BURST = 10; // lines per sleep
const LINE = 2000; // bytes per line before the newline

await run('airlockd_lag', async () => {
  const base = tmpdir('lag');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const viewer = addUser(dir, 'vic', 'viewer');
  const d = await startAirlockd({ dir });
  await addLocalSandbox(d.port, admin);
  let r;
  // about 20 kB every 200 ms: each 200 ms recording sync sees one burst, less
  // than RL_HIST_STEP (32 KiB), so the syncs are small
  r = await api(d.port, 'POST', '/v1/terminals', op, {
    sandbox: 'box', cols: 80, rows: 24,
    argv: ['sh', '-c', `stty -onlcr; sleep 1; i=0; while [ $i -lt ${LINES} ]; do printf "%${LINE}d\\n" $i; i=$((i+1)); [ $((i % ${BURST})) -ne 0 ] || sleep 0.2; done; echo LAG-DONE; exec sleep 600`],
  });
  check(r.status === 201, 'a terminal that prints at a steady, moderate pace');
  const id = r.json.id;
  const w = await attach(d.port, id, op);
  const v = await attach(d.port, id, viewer);
  await v.ctl.wait(() => v.ch.role !== undefined, 'the viewer to be told its role', 20000);
  v.ctl.ws._socket.pause(); // stops reading before the first byte
  let total = 0, done = false, last = '', lastAt = 0, maxQuiet = 0;
  w.ch.onData = (s, b) => {
    const now = Date.now();
    if (lastAt) maxQuiet = Math.max(maxQuiet, now - lastAt);
    lastAt = now;
    total += b.length;
    const txt = last + b.toString('latin1');
    if (/LAG-DONE/.test(txt)) done = true;
    last = txt.slice(-16);
    if (w.ch.out.length > 256) w.ch.out.splice(0, w.ch.out.length - 64);
  };
  const want = LINES * (LINE + 1);
  const t0 = Date.now();
  await w.ctl.wait(() => done, `the writer to get all ${(want / 1048576).toFixed(1)} MiB with the viewer stalled`,
    Math.max(120000, LINES * 100));
  check(total >= want, `the writer got ${total} bytes in ${((Date.now() - t0) / 1000).toFixed(1)} s while a viewer read nothing`);
  check(!w.ch.gaps, 'the writer was never resynced');
  check(maxQuiet < 10000, `the writer's output never paused long (longest quiet ${maxQuiet} ms)`);

  // the viewer, still attached, catches up (from the log, or resynced)
  v.ctl.ws._socket.resume();
  await v.ctl.wait(() => v.ch.next[1] === w.ch.next[1], 'the viewer, reading again, to catch up', 30000);
  r = await api(d.port, 'GET', `/v1/terminals/${id}`, admin);
  check(r.json.viewers.length === 2, `both clients are still attached (${JSON.stringify(r.json.viewers)})`);
  await d.stop();
}, 240000);
