// Flow control reaches the PTY: a client that stops granting credit while
// `yes` runs for 20 s. The runner's memory stays bounded (its ring plus a
// margin), `yes` ends up blocked on write instead of spinning, and once the
// client reads again the stream continues without loss.
import fs from 'node:fs';
import { run, check, tmpdir, keygen, mint, startRunner, sleep, rssKb } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';

function cpuTicks(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(f[11]) + Number(f[12]); // utime + stime
}

await run('runner_flow', async () => {
  const dir = tmpdir('flow');
  keygen(dir);
  const r = await startRunner({ dir, args: ['--ring', '1048576'] });
  const ctl = new Controller();
  await ctl.connect(r.url, { Authorization: `Bearer ${mint(dir, r.id)}` });
  const rss0 = rssKb(r.proc.pid);
  const y = ctl.open(['yes']);
  await y.wait(() => y.opened, 'opened');
  y.paused = true; // stop granting credit: only the first window arrives
  const start = Date.now();
  let peak = 0, before = 0, yesPid = y.pid;
  while (Date.now() - start < 20000) {
    await sleep(500);
    peak = Math.max(peak, rssKb(r.proc.pid));
    if (Date.now() - start > 15000 && before === 0) before = cpuTicks(yesPid);
  }
  const after = cpuTicks(yesPid);
  const got = y.output().length;
  check(got <= 512 * 1024 + 65536, `without credit the client got only its window (${got} bytes)`);
  // the ring (1 MiB) plus a small constant: the terminal, its screen model,
  // buffers (measured: ~1.0 MiB normal, ~1.3 MiB under ASan)
  check(peak - rss0 < 1024 + 2048, `runner RSS grew by ${peak - rss0} KiB (< ring 1 MiB + 2 MiB) over 20 s of yes`);
  check(after - before <= 20, `yes is blocked, not spinning (${after - before} ticks in its last 5 s)`);
  const state = fs.readFileSync(`/proc/${yesPid}/stat`, 'utf8').split(') ')[1][0];
  check(state === 'S', `yes sleeps on write (state ${state})`);
  // read again: the stream resumes, every line intact
  y.resume();
  // past the ring (1 MiB): fresh output, not only what was held; "y\r\n"
  // lines are the screen model's slowest case, so the bound is generous
  await y.wait(() => y.output().length > got + 2 * 1024 * 1024, 'more output after resuming', 60000);
  const text = y.output().toString('latin1');
  const lines = text.slice(0, text.lastIndexOf('\r\n')).split('\r\n');
  const bad = lines.findIndex((l) => l !== 'y');
  check(bad < 0, `every line is "y": nothing lost or torn${bad < 0 ? '' : ` (line ${bad}: ${JSON.stringify(lines[bad])})`}`);
  y.signal(9, 1);
  await y.waitExit();
  check(y.exit.signo === 9, 'killed by signal 9 (tree)');
}, 120000);
