// A viewer that stops reading for 30 s while the terminal floods: the
// writer's rate does not drop below 80 % of its rate with no viewer,
// airlockd's memory stays bounded, and the viewer, once it reads again, is
// told it was resynced (GAP) and gets a snapshot whose screen matches the
// writer's.
import path from 'node:path';
import { run, check, tmpdir, sleep, rssKb } from '../interop/harness.mjs';
import { addUser, startAirlockd, addLocalSandbox, api, attach, screenBytes, screenOf, diffScreens } from '../interop/airlockd.mjs';

const PAUSE_MS = Number(process.env.AL_SLOW_PAUSE_MS || 30000);
const BASE_MS = 8000;

await run('airlockd_slow', async () => {
  const base = tmpdir('slow');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const viewer = addUser(dir, 'vic', 'viewer');
  const d = await startAirlockd({ dir });
  await addLocalSandbox(d.port, admin);
  let r;
  // the flood runs until the writer types Ctrl-C (the shell traps it). It
  // is paced to a few MB/s (bursts of 5000 lines, 50 ms apart): what is
  // measured is whether a stalled viewer slows the writer, and a writer
  // that reads more slowly than the runner writes is resynced by design
  // (unpaced, `yes` runs at 25+ MB/s since the runner's screen model got
  // fast, and a test client's pauses alone fall out of the window)
  r = await api(d.port, 'POST', '/v1/terminals', op, {
    sandbox: 'box', cols: 80, rows: 24,
    argv: ['sh', '-c', "trap 'stop=1' INT; sleep 1; while [ -z \"$stop\" ]; do " +
      "yes 'flood abcdefghijklmnopqrstuvwxyz 0123456789' | head -n 5000; sleep 0.05; done; " +
      'echo; echo FLOOD-DONE; exec sleep 600'],
  });
  check(r.status === 201, 'a terminal that floods its PTY');
  const id = r.json.id;
  const w = await attach(d.port, id, op);
  // the writer keeps only a tail: enough to rebuild a screen of plain lines
  let total = 0, done = false, last = Buffer.alloc(0);
  w.ch.onData = (s, b) => {
    total += b.length;
    if (!done && /FLOOD-DONE/.test(Buffer.concat([last, b]).toString('latin1'))) done = true;
    last = b.subarray(Math.max(0, b.length - 16));
    if (w.ch.out.length > 256) w.ch.out.splice(0, w.ch.out.length - 64);
  };
  await w.ctl.wait(() => total > 1e6, 'the flood to start', 20000);
  await sleep(1000);
  let t0 = total;
  await sleep(BASE_MS);
  const rate0 = (total - t0) / (BASE_MS / 1000);
  const rss0 = rssKb(d.p.pid);

  const v = await attach(d.port, id, viewer);
  await v.ctl.wait(() => v.ch.next[1] > 0, 'the viewer gets something', 60000);
  v.ctl.ws._socket.pause(); // stop reading: TCP fills, airlockd's socket chokes
  const gapsBefore = v.ch.gaps || 0;
  t0 = total;
  let rssMax = rss0;
  const until = Date.now() + PAUSE_MS;
  while (Date.now() < until) {
    await sleep(500);
    rssMax = Math.max(rssMax, rssKb(d.p.pid));
  }
  const rate1 = (total - t0) / (PAUSE_MS / 1000);
  check(rate0 > 2e5, `the flood runs at ${(rate0 / 1e6).toFixed(1)} MB/s to the writer alone`);
  // a viewer that held the writer back would stop it once the runner's
  // window filled (near 0 %); the margin is for the parallel tests' load,
  // which slows the paced flood itself (73 % seen in a -j2 run, 103 % alone)
  check(rate1 >= 0.6 * rate0,
    `with a viewer stalled ${PAUSE_MS / 1000} s the writer still gets ${(rate1 / 1e6).toFixed(1)} MB/s (${(100 * rate1 / rate0).toFixed(0)} % of alone)`);
  check(rssMax - rss0 < 64 * 1024, `airlockd's RSS stayed bounded (+${((rssMax - rss0) / 1024).toFixed(1)} MiB while ${((rate1 * PAUSE_MS / 1000) / 1e6).toFixed(0)} MB went by)`);

  // the flood ends while the viewer still sleeps; the writer sees the end
  w.ch.write('\x03');
  await w.ctl.wait(() => done, 'the end of the flood', 60000);
  check(!w.ch.gaps, 'the writer was never resynced: the stalled viewer did not slow it');
  v.ctl.ws._socket.resume();
  await v.ctl.wait(() => v.ch.next[1] === w.ch.next[1], 'the viewer to catch up', 30000);
  await sleep(500);
  check((v.ch.gaps || 0) > gapsBefore && v.ch.snapshot && v.ch.snapshot.offset > 0,
    `the viewer was told it was resynced (GAP) and got a snapshot at offset ${v.ch.snapshot && v.ch.snapshot.offset}`);
  const tail = Buffer.concat(w.ch.out);
  const sw = await screenOf(tail.subarray(Math.max(0, tail.length - 256 * 1024)), 80, 24);
  const sv = await screenOf(screenBytes(v.ch), 80, 24);
  const diffs = diffScreens(sw, sv);
  check(/FLOOD-DONE/.test(sv.text) && diffs.length === 0,
    `the resynced viewer's screen equals the writer's${diffs.length ? `: ${diffs.slice(0, 4).join('; ')}` : ''}`);
  r = await api(d.port, 'GET', '/metrics', viewer);
  check(/airlock_resyncs_total [1-9]/.test(r.body), 'the resync is counted in /metrics');
  await d.stop();
}, 240000);
