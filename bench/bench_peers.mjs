// bench_peers: Airlock beside what users would pick instead, in one run,
// interleaved round by round on this machine (issue 15 point 5):
//
//   bare PTY    node-pty (npm) spawning the command: the limit of a PTY read
//               by one Node process
//   ws+node-pty a web terminal made the common way (bench/peer_ptyws.mjs:
//               npm `ws` + node-pty, no flow control), read by a ws client
//   tmux        tmux (Debian) running the command in a session, a client
//               attached through a PTY (it renders a screen, so its bytes
//               are not the command's: its time is until the command ends)
//   Airlock     airlockd on SQLite with a local sandbox (its runner under
//               bubblewrap), read by the protocol's JS client
//               (tests/interop/airlock.mjs) through airlockd
//
// Each round, in a rotating order, per target:
//   throughput  MB megabytes of 76-column base64 text (`stty raw -echo;
//               cat FILE`), from the keystroke that starts it to the end
//               marker (tmux: to the command's signal that it ended);
//   stalled     the same with a second viewer attached that stops reading
//               before the stream starts: the healthy viewer's rate, the
//               server's RSS peak above its level before, and what the
//               stalled viewer gets once it reads again;
//   echo        ECHO_N one-byte round trips to `stty raw -echo; cat`, then
//               the same while another terminal of the same server runs
//               `yes` (read by a client of its own);
//   idle        the server's RSS per idle terminal, over IDLE_N `cat`s;
//   viewers     the server's RSS per viewer, VIEWERS_N viewers added to one
//               terminal (tmux: its attached clients are processes of their
//               own, shown apart).
// "The server" is the peer's process (tmux: its server; ws: the Node peer)
// and, for Airlock, airlockd plus the sandbox's runner. Ratios are taken
// round by round (a target ÷ the bare PTY, or ÷ itself alone, in the same
// round), then the median over rounds.
//
// Bounded: every phase has PHASE_MS, the whole run BENCH_PEERS_LIMIT_S
// (default 900 s; no round starts that would not end in time); clean-up
// (tmux server, the ws peer, airlockd and its runner, every PTY) runs on
// failure and on SIGINT/SIGTERM too.
// Usage: node bench/bench_peers.mjs [MB] [RUNS]; AL_BIN=build; BENCH_ONLY=tmux
// (the bare PTY and that target only).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, execFileSync } from 'node:child_process';
import WebSocket from 'ws';
import pty from '@lydell/node-pty';
import { run, tmpdir, sleep, waitFor, rssKb, onCleanup } from '../tests/interop/harness.mjs';
import { addUser, startAirlockd, addLocalSandbox, api, attach } from '../tests/interop/airlockd.mjs';
import { descendants } from '../tests/interop/procs.mjs';

const MB = Number(process.argv[2] || 20);
const RUNS = Number(process.argv[3] || 3);
const ECHO_N = 200, IDLE_N = 20, VIEWERS_N = 20;
const MARK = 'END-OF-BENCH';
const RAW = 'stty raw -echo';
// The command of a stream: it waits for one keystroke (the start), and it
// does not end after the marker. node-pty loses a PTY's last output when
// the command exits (9 runs in 20 of `cat` 10 MB here never delivered the
// end): a run waited for the marker for ever in round 2 that way.
const streamCmd = (file) => `${RAW}; head -c1 >/dev/null; cat '${file}'; echo ${MARK}; exec sleep 600`;
const CATCH_UP_MS = 60000;  // a stalled viewer that reads again: its time to get to the end
const SAMPLE_MS = 100;      // RSS sampling period during a stream
const SETTLE_MS = 500, SETTLE_KB = 16;
const LIMIT_MS = Number(process.env.BENCH_PEERS_LIMIT_S || 900) * 1000;

const PHASE_MS = 180000; // a phase that takes longer ends the run with a clear line
const within = (p, what) => Promise.race([p, new Promise((res, rej) => {
  const t = setTimeout(() => rej(new Error(`${what}: no result within ${PHASE_MS / 1000} s`)), PHASE_MS);
  t.unref();
})]);
const median = (a) => { const s = a.filter((x) => !Number.isNaN(x)).sort((x, y) => x - y); return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN; };
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.min(s.length - 1, Math.floor(s.length * p))] : NaN; };
const comm = (pid) => { try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { return ''; } };
const rss = (pids) => pids.reduce((n, p) => { try { return n + rssKb(p); } catch { return n; } }, 0);

// rss(pids) once it has settled (three samples SETTLE_MS apart within
// SETTLE_KB, at most 12 samples): what a closed terminal or a stream held
// is returned before a memory figure starts
async function settledRss(pids) {
  let a = rss(pids), calm = 0;
  for (let i = 0; i < 12 && calm < 2; i++) {
    await sleep(SETTLE_MS);
    const b = rss(pids);
    calm = Math.abs(b - a) <= SETTLE_KB ? calm + 1 : 0;
    a = b;
  }
  return a;
}

// The peak of rss(pids()) above its level now, sampled until stop().
function rssPeak(pids) {
  const before = rss(pids());
  let peak = before;
  const t = setInterval(() => { peak = Math.max(peak, rss(pids())); }, SAMPLE_MS);
  return () => { clearInterval(t); peak = Math.max(peak, rss(pids())); return (peak - before) / 1024; };
}

// echo: a byte written, the same byte seen; resolves the round-trip times
async function echoTimes(write, seen, n) {
  const t = [];
  for (let i = 0; i < n; i++) {
    const c = String.fromCharCode(97 + (i % 26));
    const t0 = process.hrtime.bigint();
    const got = seen(c);
    write(c);
    await got;
    t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return t;
}

// a byte stream as a source of "have I seen c since now?" promises
function watcher() {
  let waiting = null;
  return {
    feed(d) { if (waiting && String(d).includes(waiting.c)) { const w = waiting; waiting = null; clearTimeout(w.t); w.res(); } },
    seen(c) {
      return new Promise((res, rej) => { waiting = { c, res, t: setTimeout(() => rej(new Error('echo timed out')), 10000) }; });
    },
  };
}

// ---- targets: each { name, start(), stream(file, stalled), echo(flood), idle(), viewers(), stop() }
// stream: { bytes, ms, peakMb: the server's RSS peak above before, late:
// what the stalled viewer got once it read again (stalled only) }

function bareTarget() {
  return {
    name: 'bare PTY',
    stalls: false,
    async start() {},
    stream(file) {
      return new Promise((res) => {
        const p = pty.spawn('sh', ['-c', streamCmd(file)], { cols: 80, rows: 24 });
        let t0 = 0, n = 0, tail = '';
        setTimeout(() => { t0 = Date.now(); p.write('g'); }, 300);
        p.onData((d) => {
          if (!t0) return;
          n += d.length; tail = (tail + d).slice(-64);
          if (tail.includes(MARK)) { res({ bytes: n, ms: Date.now() - t0 }); p.kill('SIGKILL'); }
        });
      });
    },
    async echo(flood) {
      const f = flood ? pty.spawn('yes', [], { cols: 80, rows: 24 }) : null;
      if (f) f.onData(() => {});
      const w = watcher();
      const p = pty.spawn('sh', ['-c', `${RAW}; exec cat`], { cols: 80, rows: 24 });
      p.onData((d) => w.feed(d));
      await sleep(300);
      const t = await echoTimes((c) => p.write(c), (c) => w.seen(c), ECHO_N);
      p.kill(); if (f) f.kill();
      return t;
    },
    async idle() { return NaN; },
    async viewers() { return { server: NaN, own: NaN }; },
    async stop() {},
  };
}

function wsTarget() {
  let srv, port, k = 0;
  // a client; share: the name of a shared terminal (the first starts argv)
  const open = (argv, onData, share) => new Promise((res, rej) => {
    const q = `argv=${encodeURIComponent(JSON.stringify(argv))}${share ? `&share=${share}` : ''}`;
    const ws = new WebSocket(`ws://127.0.0.1:${port}/?${q}`, { perMessageDeflate: false });
    ws.on('open', () => res(ws)); ws.on('error', rej); ws.on('message', (m) => onData(m));
    onCleanup(() => ws.terminate());
  });
  return {
    name: 'ws+node-pty',
    stalls: true,
    async start() {
      srv = spawn('node', [path.join(path.dirname(new URL(import.meta.url).pathname), 'peer_ptyws.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
      onCleanup(() => srv.kill());
      let out = '';
      srv.stdout.on('data', (d) => { out += d; });
      port = await waitFor(() => Number((/peer listening (\d+)/.exec(out) || [])[1] || 0), 10000, 'the ws peer');
    },
    async stream(file, stalled) {
      const share = `s${++k}`, argv = ['sh', '-c', streamCmd(file)];
      let n = 0, tail = '', done, fail;
      const finished = new Promise((res, rej) => { done = res; fail = rej; });
      const ws = await open(argv, (m) => {
        n += m.length; tail = (tail + m.toString('latin1').slice(-64)).slice(-64);
        if (tail.includes(MARK)) done();
      }, share);
      ws.on('close', () => fail(new Error('the peer closed the stream before its end')));
      let s = null, sn = 0, stail = '';
      if (stalled) {
        s = await open(argv, (m) => { sn += m.length; stail = (stail + m.toString('latin1').slice(-64)).slice(-64); }, share);
        s._socket.pause(); // stop reading: the peer's sends queue up
      }
      await sleep(300);
      const peak = rssPeak(() => [srv.pid]);
      const t0 = Date.now();
      ws.send('g');
      await finished;
      const ms = Date.now() - t0;
      const res = { bytes: n, ms, peakMb: peak() };
      if (s) {
        const before = sn;
        s._socket.resume();
        const end = Date.now() + CATCH_UP_MS;
        while (!stail.includes(MARK) && Date.now() < end) await sleep(50);
        res.late = `${((sn - before) / 1e6).toFixed(1)} MB queued, delivered late${stail.includes(MARK) ? '' : ' (not all)'}`;
        s.close();
      }
      ws.close();
      await sleep(200);
      return res;
    },
    async echo(flood) {
      const f = flood ? await open(['yes'], () => {}) : null;
      const w = watcher();
      const ws = await open(['sh', '-c', `${RAW}; exec cat`], (m) => w.feed(m.toString()));
      await sleep(300);
      const t = await echoTimes((c) => ws.send(c), (c) => w.seen(c), ECHO_N);
      ws.close(); if (f) f.close();
      await sleep(300);
      return t;
    },
    async idle() {
      const before = await settledRss([srv.pid]);
      const socks = [];
      for (let i = 0; i < IDLE_N; i++) socks.push(await open(['cat'], () => {}));
      const per = (await settledRss([srv.pid]) - before) / IDLE_N;
      for (const s of socks) s.close();
      await sleep(500);
      return per;
    },
    async viewers() {
      const share = `v${++k}`;
      const socks = [await open(['cat'], () => {}, share)];
      const before = await settledRss([srv.pid]);
      for (let i = 0; i < VIEWERS_N; i++) socks.push(await open(['cat'], () => {}, share));
      const per = (await settledRss([srv.pid]) - before) / VIEWERS_N;
      for (const s of socks) s.close();
      await sleep(500);
      return { server: per, own: NaN };
    },
    async stop() { srv.kill(); },
  };
}

function tmuxTarget() {
  const sock = `bench-${process.pid}`;
  const tmux = (...a) => execFileSync('tmux', ['-L', sock, ...a], { stdio: 'pipe' }).toString();
  let k = 0;
  const attachTo = (name, onData) => {
    const p = pty.spawn('tmux', ['-L', sock, 'attach', '-t', name], { name: 'xterm-256color', cols: 80, rows: 24 });
    p.onData(onData);
    return p;
  };
  const serverPid = () => Number(tmux('display-message', '-p', '#{pid}').trim());
  // tmux leaves its socket file behind when its server is killed
  const socketFile = path.join(process.env.TMUX_TMPDIR || '/tmp', `tmux-${process.getuid()}`, sock);
  const kill = () => { try { tmux('kill-server'); } catch { /* gone */ } fs.rmSync(socketFile, { force: true }); };
  return {
    name: 'tmux',
    stalls: true,
    async start() {
      tmux('-f', '/dev/null', 'new-session', '-d', '-s', 'keep', '-x', '80', '-y', '24', 'sleep 100000');
      onCleanup(kill); // a failed run too
      // no status line: its redraws would put letters in the echo's bytes
      tmux('set-option', '-g', 'status', 'off');
    },
    async stream(file, stalled) {
      const name = `s${++k}`, sig = `done-${name}`;
      tmux('new-session', '-d', '-s', name, '-x', '80', '-y', '24', `sh -c "tmux -L ${sock} wait-for ${name}-go; ${RAW}; cat '${file}'; tmux -L ${sock} wait-for -S ${sig}; sleep 600"`);
      const c = attachTo(name, () => {});
      let sn = 0;
      const s = stalled ? attachTo(name, (d) => { sn += d.length; }) : null;
      await sleep(500);
      if (s) s.pause(); // stop reading its PTY: the server's writes to it block
      const pid = serverPid();
      const peak = rssPeak(() => [pid]);
      const ended = new Promise((res) => { const w = spawn('tmux', ['-L', sock, 'wait-for', sig]); w.on('exit', res); });
      const t0 = Date.now();
      execFileSync('tmux', ['-L', sock, 'wait-for', '-S', `${name}-go`]);
      await ended;
      const res = { bytes: fs.statSync(file).size, ms: Date.now() - t0, peakMb: peak() };
      if (s) {
        const before = sn;
        s.resume();
        await sleep(2000);
        res.late = `${((sn - before) / 1e3).toFixed(0)} KB of the ${(res.bytes / 1e6).toFixed(0)} MB (its screen)`;
        s.kill();
      }
      c.kill(); tmux('kill-session', '-t', name);
      return res;
    },
    async echo(flood) {
      const name = `e${++k}`;
      if (flood) tmux('new-session', '-d', '-s', `${name}f`, '-x', '80', '-y', '24', 'yes');
      const fc = flood ? attachTo(`${name}f`, () => {}) : null;
      tmux('new-session', '-d', '-s', name, '-x', '80', '-y', '24', `sh -c "${RAW}; exec cat"`);
      const w = watcher();
      const c = attachTo(name, (d) => w.feed(d));
      await sleep(500);
      const t = await echoTimes((ch) => c.write(ch), (ch) => w.seen(ch), ECHO_N);
      c.kill(); tmux('kill-session', '-t', name);
      if (fc) { fc.kill(); tmux('kill-session', '-t', `${name}f`); }
      return t;
    },
    async idle() {
      const pid = serverPid(), before = await settledRss([pid]);
      for (let i = 0; i < IDLE_N; i++) tmux('new-session', '-d', '-s', `i${i}`, '-x', '80', '-y', '24', 'cat');
      const per = (await settledRss([pid]) - before) / IDLE_N;
      for (let i = 0; i < IDLE_N; i++) tmux('kill-session', '-t', `i${i}`);
      return per;
    },
    async viewers() {
      const name = `v${++k}`;
      tmux('new-session', '-d', '-s', name, '-x', '80', '-y', '24', 'cat');
      const cs = [attachTo(name, () => {})];
      const pid = serverPid(), before = await settledRss([pid]);
      for (let i = 0; i < VIEWERS_N; i++) cs.push(attachTo(name, () => {}));
      await waitFor(() => Number(tmux('display-message', '-p', '-t', name, '#{session_attached}').trim()) === VIEWERS_N + 1, 10000, 'the clients to attach');
      const server = (await settledRss([pid]) - before) / VIEWERS_N;
      const own = rss(cs.slice(1).map((c) => c.pid)) / VIEWERS_N; // the tmux client processes
      for (const c of cs) c.kill();
      tmux('kill-session', '-t', name);
      return { server, own };
    },
    async stop() { kill(); },
  };
}

function airlockTarget(base) {
  let d, op, runnerPid, vics;
  const term = async (argv) => {
    const r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv });
    if (r.status !== 201) throw new Error(`terminal: ${r.status} ${r.body}`);
    return r.json.id;
  };
  // closes a live terminal (its processes end) and forgets a closed one
  const close = async (id) => {
    const r = await api(d.port, 'DELETE', `/v1/terminals/${id}`, op);
    if (r.status !== 202) throw new Error(`closing ${id}: ${r.status} ${r.body}`);
  };
  const servers = () => [d.p.pid, runnerPid];
  // a client keeps only a tail of what it got (the count is in n)
  const counting = (a) => {
    a.n = 0;
    a.ch.onData = (s, b) => { a.n += b.length; if (a.ch.out.length > 64) a.ch.out.splice(0, a.ch.out.length - 8); };
    return a;
  };
  return {
    name: 'Airlock',
    stalls: true,
    async start() {
      const dir = path.join(base, 'data');
      const admin = addUser(dir, 'ada', 'admin');
      op = addUser(dir, 'otto', 'operator');
      // airlockd lets one user attach to a terminal at most 8 times: each viewer is a user
      vics = Array.from({ length: VIEWERS_N }, (_, i) => addUser(dir, `vic${i}`, 'viewer'));
      d = await startAirlockd({ dir });
      await addLocalSandbox(d.port, admin, 'box');
      runnerPid = await waitFor(() => descendants(d.p.pid).find((p) => comm(p) === 'airlock-runner'), 10000, 'the runner');
    },
    async stream(file, stalled) {
      // the sandbox has a /tmp of its own: the text goes in its workspace
      const work = path.join(base, 'data', 'sandboxes', 'box', 'work');
      if (!fs.existsSync(path.join(work, 'text.b64'))) fs.copyFileSync(file, path.join(work, 'text.b64'));
      fs.chmodSync(path.join(work, 'text.b64'), 0o644);
      const id = await term(['sh', '-c', streamCmd('text.b64')]);
      const a = counting(await attach(d.port, id, op));
      await a.ctl.wait(() => a.ch.linked, 'the writer attached', 10000);
      const v = stalled ? counting(await attach(d.port, id, vics[0], { read: true })) : null;
      if (v) {
        await v.ctl.wait(() => v.ch.linked, 'the viewer attached', 10000);
        v.ctl.ws._socket.pause(); // stop reading: TCP fills, airlockd's socket chokes
      }
      await sleep(300);
      const peak = rssPeak(servers);
      const t0 = Date.now();
      a.ch.write(Buffer.from('g'));
      // the marker may be skipped by a resync (a GAP): the end is the stream's size
      const size = fs.statSync(file).size + MARK.length + 1;
      await a.ctl.wait(() => a.ch.next[1] >= size, 'the end of the stream', PHASE_MS);
      const ms = Date.now() - t0;
      const res = { bytes: a.n, ms, gaps: a.ch.gaps || 0, peakMb: peak() };
      if (v) {
        const before = v.n;
        v.ctl.ws._socket.resume();
        await v.ctl.wait(() => v.ch.next[1] >= a.ch.next[1], 'the stalled viewer to catch up', CATCH_UP_MS).catch(() => {});
        const skipped = v.ch.next[1] - v.n;
        res.late = `${((v.n - before) / 1e6).toFixed(1)} MB, ${v.ch.gaps ? `resynced (GAP of ${(skipped / 1e6).toFixed(1)} MB, ${v.ch.snapshots ? 'snapshot' : 'no snapshot'})` : 'no GAP'}` +
          `${v.ch.next[1] >= a.ch.next[1] ? '' : ' (not at the end)'}`;
        v.ctl.ws.terminate();
      }
      a.ctl.ws.terminate();
      await close(id);
      return res;
    },
    async echo(flood) {
      const fid = flood ? await term(['yes']) : null;
      const fa = flood ? counting(await attach(d.port, fid, op)) : null;
      const id = await term(['sh', '-c', `${RAW}; exec cat`]);
      const a = await attach(d.port, id, op);
      await sleep(500);
      const w = watcher();
      a.ch.onData = (s, b) => { w.feed(b.toString()); a.ch.out.length = 0; };
      const t = await echoTimes((c) => a.ch.write(Buffer.from(c)), (c) => w.seen(c), ECHO_N);
      a.ctl.ws.terminate();
      await close(id);
      if (fa) { fa.ctl.ws.terminate(); await close(fid); }
      return t;
    },
    async idle() {
      const before = await settledRss(servers()), d0 = rss([d.p.pid]);
      const ids = [];
      for (let i = 0; i < IDLE_N; i++) ids.push(await term(['cat']));
      const per = (await settledRss(servers()) - before) / IDLE_N, dPer = (rss([d.p.pid]) - d0) / IDLE_N;
      for (const id of ids) await close(id);
      return { kb: per, detail: `airlockd ${dPer.toFixed(0)} + runner ${(per - dPer).toFixed(0)}` };
    },
    async viewers() {
      const id = await term(['cat']);
      const as = [await attach(d.port, id, op)];
      const before = await settledRss(servers());
      for (let i = 0; i < VIEWERS_N; i++) as.push(await attach(d.port, id, vics[i], { read: true }));
      await waitFor(() => as.every((a) => a.ch.linked), 10000, 'the viewers to attach');
      const per = (await settledRss(servers()) - before) / VIEWERS_N;
      for (const a of as) a.ctl.ws.terminate();
      await close(id);
      return { server: per, own: NaN };
    },
    async stop() { await d.stop(); },
  };
}

// Everything the run started and still running after its clean-up: killed
// by PID and named (a clean run prints nothing).
async function sweep() {
  await waitFor(() => !descendants(process.pid).length, 3000, 'the processes to end').catch(() => {});
  const left = descendants(process.pid);
  for (const p of left) {
    console.error(`clean-up: process ${p} (${comm(p)}) was still running: killed`);
    try { process.kill(p, 'SIGKILL'); } catch { /* gone */ }
  }
}

await run('bench_peers', async () => {
  const deadline = Date.now() + LIMIT_MS;
  let abort;
  const aborted = new Promise((res, rej) => { abort = rej; });
  aborted.catch(() => {}); // raced by every step
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => abort(new Error(`${sig}: stopped`)));
  const over = setTimeout(() => abort(new Error(`the run's limit of ${LIMIT_MS / 1000} s (BENCH_PEERS_LIMIT_S) was reached`)), LIMIT_MS);
  over.unref();
  onCleanup(sweep); // runs last

  const base = tmpdir('peers');
  const file = path.join(base, 'text.b64');
  const raw = crypto.createHash('sha256');
  const lines = [];
  for (let n = 0, i = 0; n < MB * 1e6; i++) { const l = Buffer.from(raw.copy().update(String(i)).digest('hex').repeat(4)).toString('base64').slice(0, 76) + '\n'; lines.push(l); n += l.length; }
  fs.writeFileSync(file, lines.join(''));
  fs.chmodSync(base, 0o755); fs.chmodSync(file, 0o644); // the sandbox user reads it
  const only = process.env.BENCH_ONLY; // e.g. "tmux" (the bare PTY is always measured)
  const targets = [bareTarget(), wsTarget(), tmuxTarget(), airlockTarget(base)]
    .filter((t) => !only || t.name === 'bare PTY' || t.name === only);
  const step = async (p, what) => Promise.race([within(p, what), aborted]);
  for (const t of targets) await step(t.start(), `${t.name} start`);
  // per target, per round: one record
  const res = Object.fromEntries(targets.map((t) => [t.name, []]));
  const load0 = os.loadavg()[0];
  let rounds = 0, roundMs = 0;
  for (let r = 0; r < RUNS; r++) {
    if (r && Date.now() + 1.5 * roundMs > deadline) {
      console.log(`(stopping after ${r} rounds: another would pass the run's limit of ${LIMIT_MS / 1000} s)`);
      break;
    }
    const r0 = Date.now();
    for (let i = 0; i < targets.length; i++) {
      const t = targets[(i + r) % targets.length];
      const x = {};
      // alone and beside a stalled viewer, in turn first: no order bias
      for (const stalled of r % 2 ? [true, false] : [false, true]) {
        if (!stalled) x.s = await step(t.stream(file, false), `round ${r + 1}: ${t.name} throughput`);
        else if (t.stalls) x.st = await step(t.stream(file, true), `round ${r + 1}: ${t.name} throughput beside a stalled viewer`);
      }
      x.echo = await step(t.echo(false), `round ${r + 1}: ${t.name} echo`);
      x.flood = await step(t.echo(true), `round ${r + 1}: ${t.name} echo under a flood`);
      // viewers first: closing the idle terminals frees memory for a while
      x.view = await step(t.viewers(), `round ${r + 1}: ${t.name} memory per viewer`);
      x.idle = await step(t.idle(), `round ${r + 1}: ${t.name} idle memory`);
      if (typeof x.idle === 'object') { x.idleDetail = x.idle.detail; x.idle = x.idle.kb; }
      x.mbps = x.s.bytes / 1e6 / (x.s.ms / 1000);
      if (x.st) x.stMbps = x.st.bytes / 1e6 / (x.st.ms / 1000);
      res[t.name][r] = x;
      const f1 = (v) => (Number.isNaN(v) ? '-' : v.toFixed(1));
      console.log(`round ${r + 1}: ${t.name}: ${f1(x.mbps)} MB/s${x.s.gaps ? ` (${x.s.gaps} GAP)` : ''}` +
        `${x.st ? `, ${f1(x.stMbps)} MB/s beside a stalled viewer (server +${f1(x.st.peakMb)} MB; it got ${x.st.late})` : ''}` +
        `, echo p50 ${pct(x.echo, 0.5).toFixed(2)} ms, under a flood ${pct(x.flood, 0.5).toFixed(2)} ms, ` +
        `${f1(x.idle)} KB per idle terminal${x.idleDetail ? ` (${x.idleDetail})` : ''}, ${f1(x.view.server)} KB per viewer, load ${os.loadavg()[0].toFixed(2)}`);
    }
    rounds = r + 1;
    roundMs = Date.now() - r0;
  }
  for (const t of targets) await step(t.stop(), `${t.name} stop`);
  clearTimeout(over);

  const bare = res['bare PTY'];
  const f = (v, d = 1) => (v === undefined || Number.isNaN(v) ? '-' : v.toFixed(d));
  const mm = (a, d = 1) => (Number.isNaN(median(a)) ? '-' : `${f(median(a), d)} (${f(Math.min(...a), d)}-${f(Math.max(...a), d)})`);
  const perRound = (name, fn) => res[name].map((x, r) => fn(x, bare[r]));
  console.log(`\nbench_peers: ${MB} MB of 76-column text, ${rounds} rounds interleaved, ${os.cpus().length} cores, ` +
    `1-min load ${load0.toFixed(2)} at the start and ${os.loadavg()[0].toFixed(2)} at the end`);
  console.log('\nOutput throughput (median of rounds, min-max; ratios taken per round)');
  console.log('| target | MB/s | ÷ bare PTY |');
  console.log('|---|---|---|');
  for (const t of targets) {
    const x = res[t.name];
    const gaps = x.filter((y) => y.s.gaps).length;
    console.log(`| ${t.name} | ${mm(x.map((y) => y.mbps))}${gaps ? ` (resynced in ${gaps} rounds)` : ''} | ${mm(perRound(t.name, (y, b) => y.mbps / b.mbps), 2)} |`);
  }
  console.log('\nKeystroke echo, ms (all round trips of all rounds; ratios: p50 ÷ the bare PTY\'s p50 of the same round, median of rounds)');
  console.log('| target | p50 / p99 | ÷ bare p50 | while another terminal runs `yes`: p50 / p99 | ÷ bare p50 |');
  console.log('|---|---|---|---|---|');
  for (const t of targets) {
    const x = res[t.name];
    const all = (k) => x.flatMap((y) => y[k]);
    const ratio = (k) => median(perRound(t.name, (y, b) => pct(y[k], 0.5) / pct(b[k], 0.5)));
    console.log(`| ${t.name} | ${f(pct(all('echo'), 0.5), 2)} / ${f(pct(all('echo'), 0.99), 2)} | ${f(ratio('echo'))} | ` +
      `${f(pct(all('flood'), 0.5), 2)} / ${f(pct(all('flood'), 0.99), 2)} | ${f(ratio('flood'))} |`);
  }
  console.log(`\nMemory of the server, KB (median of rounds, min-max; ${IDLE_N} idle \`cat\` terminals; ${VIEWERS_N} viewers added to one terminal; ` +
    'round 1 is a fresh server\'s, later rounds reuse memory freed by earlier phases)');
  console.log('| target | per idle terminal | round 1 | per viewer | round 1 | per viewer, its own process |');
  console.log('|---|---|---|---|---|---|');
  for (const t of targets) {
    const x = res[t.name];
    const idle = x.map((y) => y.idle), view = x.map((y) => y.view.server);
    console.log(`| ${t.name} | ${mm(idle, 0)} | ${f(idle[0], 0)}${x[0].idleDetail ? ` (${x[0].idleDetail})` : ''} | ${mm(view, 0)} | ${f(view[0], 0)} | ${f(median(x.map((y) => y.view.own)), 0)} |`);
  }
  console.log('\nA viewer that stops reading while another reads the stream (median of rounds)');
  console.log('| target | healthy viewer MB/s | ÷ alone, same round | server RSS peak above before, MB | the same, one viewer alone | what the stalled viewer got once it read again (last round) |');
  console.log('|---|---|---|---|---|---|');
  for (const t of targets.filter((y) => y.stalls)) {
    const x = res[t.name];
    console.log(`| ${t.name} | ${mm(x.map((y) => y.stMbps))} | ${mm(x.map((y) => y.stMbps / y.mbps), 2)} | ${mm(x.map((y) => y.st.peakMb))} | ` +
      `${mm(x.map((y) => y.s.peakMb))} | ${x[x.length - 1].st.late} |`);
  }
  console.log('(bare PTY: no server, one reader. tmux renders a screen: its figure is the command\'s bytes over the time until the command ended, its client attached)');
}, LIMIT_MS + 120000);
