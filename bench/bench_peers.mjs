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
// Each round, in a rotating order, per target: throughput of MB megabytes
// of 76-column base64 text (`stty raw -echo; cat FILE`), until the end
// marker (tmux: until the command signals it ended); echo: ECHO_N one-byte
// round trips to `stty raw -echo; cat`; the same while another terminal of
// the same server runs `yes`; memory per idle terminal (the server's RSS,
// airlockd's and the runners' for Airlock, over IDLE_N idle `cat`s).
// Tables: medians over rounds (min-max), and ratios to the bare PTY.
// Usage: node bench/bench_peers.mjs [MB] [RUNS]; AL_BIN=build.
// Not measured here yet: stalled-viewer scenarios and memory per viewer.
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
const ECHO_N = 200, IDLE_N = 20;
const MARK = 'END-OF-BENCH';
const STREAM_TIMEOUT_MS = 300000;
const RAW = 'stty raw -echo';

const PHASE_MS = 180000; // a phase that takes longer ends the run with a clear line
const within = (p, what) => Promise.race([p, new Promise((res, rej) => {
  const t = setTimeout(() => rej(new Error(`${what}: no result within ${PHASE_MS / 1000} s`)), PHASE_MS);
  t.unref();
})]);
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN; };
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(s.length * p))]; };
const comm = (pid) => { try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { return ''; } };

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
    feed(d) { if (waiting && String(d).includes(waiting.c)) { const w = waiting; waiting = null; w.res(); } },
    seen(c) { return new Promise((res, rej) => { waiting = { c, res }; setTimeout(() => rej(new Error('echo timed out')), 10000); }); },
  };
}

// ---- targets: each { name, start(), stream(file), echo(flood), idle(), stop() }

function bareTarget() {
  return {
    name: 'bare PTY',
    async start() {},
    stream(file) {
      return new Promise((res) => {
        const p = pty.spawn('sh', ['-c', `${RAW}; cat '${file}'; echo ${MARK}`], { cols: 80, rows: 24 });
        const t0 = Date.now(); let n = 0, tail = '';
        p.onData((d) => { n += d.length; tail = (tail + d).slice(-64); if (tail.includes(MARK)) { res({ bytes: n, ms: Date.now() - t0 }); p.kill(); } });
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
    async stop() {},
  };
}

function wsTarget(base) {
  let srv, port;
  const open = (argv, onData) => new Promise((res, rej) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/?argv=${encodeURIComponent(JSON.stringify(argv))}`);
    ws.on('open', () => res(ws)); ws.on('error', rej); ws.on('message', (m) => onData(m));
  });
  return {
    name: 'ws+node-pty',
    async start() {
      srv = spawn('node', [path.join(path.dirname(new URL(import.meta.url).pathname), 'peer_ptyws.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
      onCleanup(() => srv.kill());
      let out = '';
      srv.stdout.on('data', (d) => { out += d; });
      port = await waitFor(() => Number((/peer listening (\d+)/.exec(out) || [])[1] || 0), 10000, 'the ws peer');
    },
    async stream(file) {
      let n = 0, tail = '', t0, done;
      const finished = new Promise((res) => { done = res; });
      t0 = Date.now();
      const ws = await open(['sh', '-c', `${RAW}; cat '${file}'; echo ${MARK}`], (m) => {
        n += m.length; tail = (tail + m.toString('latin1').slice(-64)).slice(-64);
        if (tail.includes(MARK)) done();
      });
      await finished;
      const ms = Date.now() - t0;
      ws.close();
      return { bytes: n, ms };
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
      const before = rssKb(srv.pid);
      const socks = [];
      for (let i = 0; i < IDLE_N; i++) socks.push(await open(['cat'], () => {}));
      await sleep(1000);
      const per = (rssKb(srv.pid) - before) / IDLE_N;
      for (const s of socks) s.close();
      await sleep(500);
      return per;
    },
    async stop() { srv.kill(); },
  };
}

function tmuxTarget(base) {
  const sock = `bench-${process.pid}`;
  const tmux = (...a) => execFileSync('tmux', ['-L', sock, ...a], { stdio: 'pipe' }).toString();
  let k = 0;
  const attachTo = (name, onData) => {
    const p = pty.spawn('tmux', ['-L', sock, 'attach', '-t', name], { name: 'xterm-256color', cols: 80, rows: 24 });
    p.onData(onData);
    return p;
  };
  const serverPid = () => Number(tmux('display-message', '-p', '#{pid}').trim());
  return {
    name: 'tmux',
    async start() {
      tmux('-f', '/dev/null', 'new-session', '-d', '-s', 'keep', '-x', '80', '-y', '24', 'sleep 100000');
      onCleanup(() => { try { tmux('kill-server'); } catch { /* gone */ } }); // a failed run too
    },
    async stream(file) {
      const name = `s${++k}`, sig = `done-${name}`;
      tmux('new-session', '-d', '-s', name, '-x', '80', '-y', '24', `sh -c "tmux -L ${sock} wait-for ${name}-go; ${RAW}; cat '${file}'; tmux -L ${sock} wait-for -S ${sig}; sleep 600"`);
      const c = attachTo(name, () => {});
      await sleep(300);
      const t0 = Date.now();
      execFileSync('tmux', ['-L', sock, 'wait-for', '-S', `${name}-go`]);
      await new Promise((res) => { const w = spawn('tmux', ['-L', sock, 'wait-for', sig]); w.on('exit', res); });
      const ms = Date.now() - t0;
      c.kill(); tmux('kill-session', '-t', name);
      return { bytes: fs.statSync(file).size, ms };
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
      const pid = serverPid(), before = rssKb(pid);
      for (let i = 0; i < IDLE_N; i++) tmux('new-session', '-d', '-s', `i${i}`, '-x', '80', '-y', '24', 'cat');
      await sleep(1000);
      const per = (rssKb(pid) - before) / IDLE_N;
      for (let i = 0; i < IDLE_N; i++) tmux('kill-session', '-t', `i${i}`);
      return per;
    },
    async stop() { try { tmux('kill-server'); } catch { /* gone */ } },
  };
}

function airlockTarget(base) {
  let d, op, runnerPid;
  const term = async (argv) => {
    const r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv });
    if (r.status !== 201) throw new Error(`terminal: ${r.status} ${r.body}`);
    return r.json.id;
  };
  return {
    name: 'Airlock',
    async start() {
      const dir = path.join(base, 'data');
      const admin = addUser(dir, 'ada', 'admin');
      op = addUser(dir, 'otto', 'operator');
      d = await startAirlockd({ dir });
      await addLocalSandbox(d.port, admin, 'box');
      runnerPid = await waitFor(() => descendants(d.p.pid).find((p) => comm(p) === 'airlock-runner'), 10000, 'the runner');
    },
    async stream(file) {
      // the sandbox has a /tmp of its own: the text goes in its workspace
      const work = path.join(base, 'data', 'sandboxes', 'box', 'work');
      if (!fs.existsSync(path.join(work, 'text.b64'))) fs.copyFileSync(file, path.join(work, 'text.b64'));
      fs.chmodSync(path.join(work, 'text.b64'), 0o644);
      const id = await term(['sh', '-c', `${RAW}; sleep 0.5; cat text.b64; echo ${MARK}; exec sleep 600`]);
      const a = await attach(d.port, id, op);
      await a.ch.waitOutput(/./, 20000).catch(() => {});
      const t0 = Date.now();
      await a.ctl.wait(() => a.ch.out.length && Buffer.concat(a.ch.out.slice(-2)).includes(MARK), 'the end marker', STREAM_TIMEOUT_MS);
      const ms = Date.now() - t0;
      const bytes = a.ch.next[1];
      a.ctl.ws.terminate();
      await api(d.port, 'POST', `/v1/terminals/${id}/kill`, op, { signal: 'KILL' });
      return { bytes, ms };
    },
    async echo(flood) {
      const fid = flood ? await term(['yes']) : null;
      const fa = flood ? await attach(d.port, fid, op) : null;
      const id = await term(['sh', '-c', `${RAW}; exec cat`]);
      const a = await attach(d.port, id, op);
      await sleep(500);
      const w = watcher();
      let seenLen = 0;
      const poll = setInterval(() => { const o = a.ch.out; for (; seenLen < o.length; seenLen++) w.feed(o[seenLen].toString()); }, 0);
      const t = await echoTimes((c) => a.ch.write(Buffer.from(c)), (c) => w.seen(c), ECHO_N);
      clearInterval(poll);
      a.ctl.ws.terminate();
      await api(d.port, 'POST', `/v1/terminals/${id}/kill`, op, { signal: 'KILL' });
      if (fa) { fa.ctl.ws.terminate(); await api(d.port, 'POST', `/v1/terminals/${fid}/kill`, op, { signal: 'KILL' }); }
      return t;
    },
    async idle() {
      const both = () => rssKb(d.p.pid) + rssKb(runnerPid);
      const before = both();
      const ids = [];
      for (let i = 0; i < IDLE_N; i++) ids.push(await term(['cat']));
      await sleep(1500);
      const per = (both() - before) / IDLE_N;
      for (const id of ids) await api(d.port, 'POST', `/v1/terminals/${id}/kill`, op, { signal: 'KILL' });
      return per;
    },
    async stop() { await d.stop(); },
  };
}

await run('bench_peers', async () => {
  const base = tmpdir('peers');
  const file = path.join(base, 'text.b64');
  const raw = crypto.createHash('sha256');
  const lines = [];
  for (let n = 0, i = 0; n < MB * 1e6; i++) { const l = Buffer.from(raw.copy().update(String(i)).digest('hex').repeat(4)).toString('base64').slice(0, 76) + '\n'; lines.push(l); n += l.length; }
  fs.writeFileSync(file, lines.join(''));
  fs.chmodSync(base, 0o755); fs.chmodSync(file, 0o644); // the sandbox user reads it
  const only = process.env.BENCH_ONLY; // e.g. "tmux" (the bare PTY is always measured)
  const targets = [bareTarget(), wsTarget(base), tmuxTarget(base), airlockTarget(base)]
    .filter((t) => !only || t.name === 'bare PTY' || t.name === only);
  for (const t of targets) await t.start();
  const res = Object.fromEntries(targets.map((t) => [t.name, { mbps: [], echo: [], flood: [], idle: [] }]));
  for (let r = 0; r < RUNS; r++) {
    for (let i = 0; i < targets.length; i++) {
      const t = targets[(i + r) % targets.length];
      const s = await within(t.stream(file), `${t.name} throughput`);
      res[t.name].mbps.push(s.bytes / 1e6 / (s.ms / 1000));
      res[t.name].echo.push(...await within(t.echo(false), `${t.name} echo`));
      res[t.name].flood.push(...await within(t.echo(true), `${t.name} echo under a flood`));
      res[t.name].idle.push(await within(t.idle(), `${t.name} idle memory`));
      console.log(`round ${r + 1}: ${t.name} ${(s.bytes / 1e6 / (s.ms / 1000)).toFixed(1)} MB/s`);
    }
  }
  for (const t of targets) await t.stop();
  const bare = median(res['bare PTY'].mbps);
  console.log(`\nbench_peers: ${MB} MB of 76-column text, ${RUNS} rounds interleaved, ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(2)} at the end`);
  console.log('| target | throughput MB/s (median, min-max) | ÷ bare PTY | echo p50 / p99 ms | echo while yes floods p50 / p99 ms | KB per idle terminal |');
  console.log('|---|---|---|---|---|---|');
  for (const t of targets) {
    const x = res[t.name];
    const f = (a) => a.toFixed(1);
    console.log(`| ${t.name} | ${f(median(x.mbps))} (${f(Math.min(...x.mbps))}-${f(Math.max(...x.mbps))}) | ${(median(x.mbps) / bare).toFixed(2)} | ` +
      `${pct(x.echo, 0.5).toFixed(2)} / ${pct(x.echo, 0.99).toFixed(2)} | ${pct(x.flood, 0.5).toFixed(2)} / ${pct(x.flood, 0.99).toFixed(2)} | ` +
      `${Number.isNaN(median(x.idle)) ? '-' : median(x.idle).toFixed(0)} |`);
  }
  console.log('(tmux renders a screen: its figure is the command\'s bytes over the time until the command ended, its client attached)');
}, 1800000);
