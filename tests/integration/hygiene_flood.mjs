// A connection flood against both servers, each started with RLIMIT_NOFILE
// 1024: 1,500 slow unauthenticated POST bodies (a byte a second) and 1,100
// idle connections, all from one address (127.0.0.2). Each server keeps
// answering a legitimate request from 127.0.0.1 within a second, uses
// little CPU, writes a bounded number of log lines, refuses what is over
// its limits with a clear answer (429), and closes the connections that
// did not finish a request within the deadline. Before wslisten.c,
// airlockd buffered every body (+103 MB), spun at 87 % of a core on
// EMFILE and wrote ~4 million "accept: errno 24" lines; the runner alike.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { run, check, tmpdir, keygen, startRunner, rawHttp, sleep, rssKb } from '../interop/harness.mjs';
import { startAirlockd } from '../interop/airlockd.mjs';

const SLOW = 1500, IDLE = 1100, BATCH = 100;
const HOLD_MS = 13000;      // longer than the 10 s request deadline
const ATTACKER = '127.0.0.2';
const TICK = 100;           // clock ticks per second (/proc/PID/stat)

function cpuS(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / TICK; // utime + stime
}
const lines = (file) => fs.readFileSync(file, 'utf8').split('\n').length;

// Open n sockets from the attacker's address, BATCH at a time; each one
// sends head (if any) once connected. Resolves with the sockets' states.
async function openMany(port, n, head) {
  const socks = [];
  for (let i = 0; i < n; i += BATCH) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + BATCH); j++) {
      const st = { open: false, closed: false, data: '' };
      st.sock = net.connect({ port, host: '127.0.0.1', localAddress: ATTACKER });
      st.sock.on('error', () => {});
      st.sock.on('data', (d) => { if (st.data.length < 256) st.data += d.toString('latin1'); });
      st.sock.on('close', () => { st.closed = true; });
      batch.push(new Promise((res) => {
        st.sock.on('connect', () => { st.open = true; if (head) st.sock.write(head); res(); });
        st.sock.on('close', res);
        setTimeout(res, 3000);
      }));
      socks.push(st);
    }
    await Promise.all(batch);
  }
  return socks;
}

async function flood(name, pid, port, log) {
  const cpu0 = cpuS(pid), lines0 = lines(log), rss0 = rssKb(pid), t0 = Date.now();
  const slow = await openMany(port, SLOW,
    'POST /v1/terminals HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{');
  const idle = await openMany(port, IDLE, null);
  const all = [...slow, ...idle];
  let worst = 0, answered = 0, asked = 0, rssMax = rss0;
  const trickle = setInterval(() => { for (const s of slow) if (!s.closed) s.sock.write(' '); }, 1000);
  for (const until = t0 + HOLD_MS; Date.now() < until; await sleep(1000)) {
    asked++;
    const a = Date.now();
    const r = await rawHttp(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 5000).catch(() => ({ status: 0 }));
    if (r.status === 200) answered++;
    worst = Math.max(worst, Date.now() - a);
    rssMax = Math.max(rssMax, rssKb(pid));
  }
  clearInterval(trickle);
  await sleep(1000);
  const wall = (Date.now() - t0) / 1000, cpu = cpuS(pid) - cpu0, newLines = lines(log) - lines0;
  const refused = all.filter((s) => /^HTTP\/1\.1 429/.test(s.data)).length;
  const held = all.filter((s) => !s.closed).length;
  for (const s of all) s.sock.destroy();
  check(answered === asked, `${name}: ${answered}/${asked} legitimate requests answered during the flood`);
  check(worst < 1000, `${name}: the slowest legitimate answer took ${worst} ms (< 1 s)`);
  check(cpu / wall < 0.2, `${name}: CPU ${(100 * cpu / wall).toFixed(1)} % of a core during the flood (< 20 %)`);
  check(newLines < 100, `${name}: ${newLines} log lines for ${SLOW + IDLE} hostile connections (< 100)`);
  check(refused > SLOW + IDLE - 200, `${name}: ${refused} connections over the per-address limit were answered 429`);
  check(held === 0, `${name}: no hostile connection outlived the request deadline (${held} held)`);
  check(rssMax - rss0 < 32 * 1024, `${name}: RSS grew ${((rssMax - rss0) / 1024).toFixed(1)} MiB (< 32)`);
  const r = await rawHttp(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  check(r.status === 200, `${name}: still serving after the flood`);
}

await run('hygiene_flood', async () => {
  const wrap = ['prlimit', '--nofile=1024:1024', '--'];
  const base = tmpdir('flood');
  const dir = path.join(base, 'data');
  fs.mkdirSync(dir);
  const d = await startAirlockd({ dir, wrap });
  // prlimit execs airlockd: the PID is airlockd's
  check(/Max open files\s+1024\s+1024/.test(fs.readFileSync(`/proc/${d.p.pid}/limits`, 'utf8')), 'airlockd runs with RLIMIT_NOFILE 1024');
  await flood('airlockd', d.p.pid, d.port, d.log);
  await d.stop();

  const rdir = tmpdir('flood-runner');
  keygen(rdir);
  const r = await startRunner({ id: 'sbx-1', dir: rdir, wrap });
  check(/Max open files\s+1024\s+1024/.test(fs.readFileSync(`/proc/${r.proc.pid}/limits`, 'utf8')), 'the runner runs with RLIMIT_NOFILE 1024');
  await flood('airlock-runner --listen', r.proc.pid, r.port, r.log);
}, 200000);
