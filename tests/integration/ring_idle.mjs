// An idle terminal holds no output ring (issue 16): once what the runner's
// ring holds is all acknowledged and the stream has been quiet for
// EP_RING_IDLE_US, the runner gives the ring's memory back. airlockd, the
// controller, acknowledges what it consumed once the stream goes quiet
// (EP_ACK_SETTLE_US), not only a quarter window at a time, so that the last
// bytes of a burst do not pin the ring. Measured on a local sandbox's real
// runner: its RSS after 16 MB through the default 4 MiB ring, the terminal
// still open and idle, is back near its level before the burst.
import path from 'node:path';
import fs from 'node:fs';
import { run, check, tmpdir, sleep, waitFor, rssKb } from '../interop/harness.mjs';
import { addUser, startAirlockd, addLocalSandbox, api, attach, screenBytes } from '../interop/airlockd.mjs';
import { descendants } from '../interop/procs.mjs';
import { SANITIZED } from '../interop/abuse.mjs';

const RING_KB = 4096; // the runner's default output ring (4 MiB)

const comm = (pid) => { try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { return ''; } };

await run('ring_idle', async () => {
  const base = tmpdir('ringidle');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const d = await startAirlockd({ dir });
  await addLocalSandbox(d.port, admin, 'box');
  const runner = await waitFor(() => descendants(d.p.pid).find((p) => comm(p) === 'airlock-runner'), 10000, 'the local runner');

  const r = await api(d.port, 'POST', '/v1/terminals', op,
    { sandbox: 'box', argv: ['sh', '-c', 'stty raw -echo; echo go; sleep 1; head -c 12000000 /dev/zero | tr "\\0" x | fold -w 99; echo; echo done; exec sleep 120'] });
  check(r.status === 201, `a terminal: ${r.status} ${r.body}`);
  const a = await attach(d.port, r.json.id, op);
  // (an attach that lands after 'go' gets it in a snapshot: the screen, not ch.out)
  await a.ctl.wait(() => screenBytes(a.ch).includes('go'), 'the terminal started', 20000);
  await sleep(500);
  const before = rssKb(runner);
  let peak = before;
  const sampler = setInterval(() => { try { peak = Math.max(peak, rssKb(runner)); } catch { /* gone */ } }, 20);
  await a.ctl.wait(() => a.ch.next[1] > 12000000 && Buffer.concat(a.ch.out.slice(-4)).includes('done'), 'all 12 MB', 60000);
  clearInterval(sampler);
  const quiet = rssKb(runner);
  // EP_ACK_SETTLE_US (250 ms) for airlockd's last ACK, EP_RING_IDLE_US (2 s)
  // of quiet, and the runner's next tick, which its pings bound (15 s)
  // Under the sanitizers the frames' freed buffers stay resident in ASan's
  // quarantine, so the RSS cannot come back to its level before the burst:
  // there the check is that the ring's own mapping (RING_KB) goes back.
  const given = (k) => (SANITIZED ? quiet - k >= RING_KB - 256 : k - before < 1500);
  const after = await waitFor(() => { const k = rssKb(runner); return given(k) ? k : 0; }, 20000,
    `the ring given back (RSS ${before} before, peak ${peak})`, 250).catch(() => rssKb(runner));
  check(peak - before > 3000, `the burst took the ring (runner RSS ${before} -> peak ${peak} KB)`);
  check(given(after), `idle and acknowledged, the ring is given back (RSS ${before} -> ${quiet} -> ${after} KB${
    SANITIZED ? `; sanitizers: ${quiet - after} KB of the ${RING_KB} KB ring returned` : ''})`);
  // and taken again when the terminal prints: it still works
}, 120000);
