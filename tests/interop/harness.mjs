// Shared set-up for the integration tests: a temporary data dir with a
// signing key, tokens minted by the real airlockd, a real airlock-runner on
// 127.0.0.1, and clean-up of everything started (by PID).
//
// Ports: a program under test binds port 0 itself and says which port it
// got in its start-up log line (reportedPort); nothing hands a port from
// one process to another. Times: every wait and time limit here scales
// with AIRLOCK_TEST_TIMEOUT_MULT (CMakeLists.txt sets it, 3 under the
// sanitizers; scaled()), and waits poll a condition (waitFor) rather than
// sleep a fixed time.

import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const BIN = process.env.AL_BIN || path.resolve('build');
export const SRC = process.env.AL_SRC || path.resolve('.');

const cleanups = [];
const logs = [];
const dirs = [];
let failed = false;

export function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
  console.log(`ok - ${msg}`);
}

// Run fn at clean-up (in reverse order of registration); show log on failure.
export function onCleanup(fn) { cleanups.push(fn); }
export function addLog(file) { logs.push(file); }

export function tmpdir(tag) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `airlock-${tag}-`));
  // searchable (not listable) by the sandbox user airlockd runs local sandboxes as
  fs.chmodSync(d, 0o711);
  dirs.push(d);
  return d;
}

export function keygen(dir) {
  execFileSync(path.join(BIN, 'airlockd'), ['keygen', '--data', dir], { stdio: 'pipe' });
}

export function mint(dir, aud, scope = 'runner:connect', ttl = 300, sub = 'test') {
  return execFileSync(path.join(BIN, 'airlockd'),
    ['token', '--data', dir, '--aud', aud, '--scope', scope, '--ttl', String(ttl), '--sub', sub],
    { stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim();
}

// A port nothing listens on, for tests of a refused connection only: no
// server is to be started on it (a server binds port 0 itself).
export function closedPort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The timeout multiplier for slow machines (sanitizers, a loaded host).
export const TIMEOUT_MULT = Math.max(1, Number(process.env.AIRLOCK_TEST_TIMEOUT_MULT) || 1);
export const scaled = (ms) => ms * TIMEOUT_MULT;

// Poll fn() (may be async) every `every` ms until it returns a truthy value,
// which is returned; throws after ms (scaled) naming what was awaited.
export async function waitFor(fn, ms, what, every = 20) {
  const limit = scaled(ms);
  const end = Date.now() + limit;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() >= end) throw new Error(`waited ${limit} ms for ${what}`);
    await sleep(every);
  }
}

// Poll fn() until pred(value) holds or ms (scaled) pass, and return the
// last value either way: the check that follows says what was wrong.
// For a fixed sleep before a check of something that settles.
export async function pollUntil(fn, pred, ms, every = 50) {
  const end = Date.now() + scaled(ms);
  for (;;) {
    const v = await fn();
    if (pred(v) || Date.now() >= end) return v;
    await sleep(every);
  }
}

// The port a child bound (it was told port 0), read from its log file:
// the first match of re (one group: the port) in what the log holds from
// byte `from` on. Fails early, with the log, if the child exits first.
export async function reportedPort(log, re, proc, { from = 0, ms = 10000, what = 'the port in the log' } = {}) {
  let text = '';
  const port = await waitFor(() => {
    try { text = fs.readFileSync(log, 'latin1').slice(from); } catch { text = ''; }
    const m = re.exec(text);
    if (m) return Number(m[1]);
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${what}: it exited first`);
    return 0;
  }, ms, what).catch((e) => { throw new Error(`${e.message}; log:\n${text}`, { cause: e }); });
  return port;
}

let started = 0; // numbers the logs of children started without a port

// A raw HTTP exchange: returns { status, head, body } of the response.
// The head is parsed once; the body's chunks are kept apart and joined at
// the end (joining on every chunk made a 16 MB read cost seconds).
export function rawHttp(port, request, ms = 5000) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let head = Buffer.alloc(0);
    let resp = null; // { status, head, want } once the head is in
    const chunks = [];
    let got = 0;
    const t = setTimeout(() => { sock.destroy(); reject(new Error(`raw HTTP timeout (${got} body bytes in)`)); }, ms);
    const done = () => {
      clearTimeout(t); sock.destroy();
      resolve({ status: resp.status, head: resp.head, body: Buffer.concat(chunks).subarray(0, resp.want).toString('latin1') });
    };
    sock.on('connect', () => sock.write(request));
    sock.on('data', (d) => {
      if (resp) {
        chunks.push(d); got += d.length;
        if (got >= resp.want) done();
        return;
      }
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n', 0, 'latin1');
      if (end < 0) return;
      const s = head.subarray(0, end).toString('latin1');
      const m = /content-length:\s*(\d+)/i.exec(s);
      resp = { status: Number(s.split(' ')[1]), head: s, want: m ? Number(m[1]) : 0 };
      const rest = head.subarray(end + 4);
      chunks.push(rest); got = rest.length;
      if (resp.status === 101 || got >= resp.want) done();
    });
    sock.on('error', (e) => { clearTimeout(t); reject(e); });
    // A settled promise ignores the reject: this only speaks for a cut answer.
    sock.on('close', () => {
      clearTimeout(t);
      reject(new Error(resp ? `closed mid-answer (${got} of ${resp.want} body bytes)` : 'closed without answer'));
    });
  });
}

// Start airlock-runner; resolves once /healthz answers.
// port: a port to listen on again (a restart); omitted, it binds port 0 and
// reports the one it got ("listening on 127.0.0.1:PORT", runner_listen.c).
export async function startRunner({ id = 'sbx-1', dir, args = [], port, env = {}, wrap = [], bin } = {}) {
  const log = path.join(dir, port ? `runner-${port}.log` : `runner-${id}-${++started}.log`);
  const from = fs.existsSync(log) ? fs.statSync(log).size : 0;
  const out = fs.openSync(log, 'a');
  logs.push(log);
  const argv = [bin || path.join(BIN, 'airlock-runner'),
    '--listen', `127.0.0.1:${port || 0}`, '--identifier', id, '--jwks', path.join(dir, 'jwks.json'), ...args];
  const cmd = [...wrap, ...argv];
  const p = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', out, out], env: { ...process.env, ...env } });
  fs.closeSync(out);
  const r = { proc: p, port, id, log, from, dir }; // from: where this process's lines begin
  r.exited = new Promise((res) => p.on('exit', (code, sig) => res({ code, sig })));
  cleanups.push(async () => {
    let st;
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGTERM');
      const t = setTimeout(() => p.kill('SIGKILL'), 5000);
      st = await r.exited; clearTimeout(t);
    } else {
      st = await r.exited;
    }
    // a clean stop, which under ASan also means no leak and no error
    if (!wrap.length && (st.code !== 0 || st.sig)) {
      throw new Error(`runner on port ${port} stopped badly: ${JSON.stringify(st)} (see ${log})`);
    }
  });
  try {
    if (!port) {
      port = r.port = await reportedPort(log, /listening on [^ ]+:(\d+) for identifier/, p,
        { from, what: 'the runner to listen' });
    }
    r.url = `ws://127.0.0.1:${port}/?identifier=${id}&api-version=2024-02-02-preview`;
    await waitFor(async () => {
      if (p.exitCode !== null) throw new Error('it exited');
      try { return (await rawHttp(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 1000)).status === 200; } catch { return false; }
    }, 5000, 'the runner to answer /healthz', 50);
  } catch (e) {
    throw new Error(`runner did not start (${e.message}); log:\n${fs.readFileSync(log, 'utf8')}`, { cause: e });
  }
  return r;
}

// Start airlock-runner --connect towards a controller that a test runs as a
// ws server on 127.0.0.1; resolves once the runner has dialed in and the
// Controller (tests/interop/airlock.mjs) has it. Returns { ctl, proc, token, log }.
export async function startDialRunner({ id = 'sbx-1', dir, args = [], env = {}, Controller }) {
  const { WebSocketServer } = await import('ws');
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.on('listening', r));
  const ctl = new Controller();
  wss.on('connection', (ws) => ctl.adopt(ws));
  const token = mint(dir, id, 'runner:connect', 600);
  const tokfile = path.join(dir, `token-${id}`);
  fs.writeFileSync(tokfile, `${token}\n`, { mode: 0o600 });
  const log = path.join(dir, `runner-dial-${wss.address().port}.log`);
  const out = fs.openSync(log, 'a');
  logs.push(log);
  const p = spawn(path.join(BIN, 'airlock-runner'), ['--connect', `ws://127.0.0.1:${wss.address().port}/v1/runners/connect`,
    '--identifier', id, '--jwks', path.join(dir, 'jwks.json'), '--token-file', tokfile, ...args],
  { stdio: ['ignore', out, out], env: { ...process.env, ...env } });
  fs.closeSync(out);
  const exited = new Promise((res) => p.on('exit', (code, sig) => res({ code, sig })));
  cleanups.push(async () => {
    let st;
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGTERM');
      const t = setTimeout(() => p.kill('SIGKILL'), 5000);
      st = await exited; clearTimeout(t);
    } else {
      st = await exited;
    }
    wss.close();
    if (st.code !== 0 || st.sig) throw new Error(`dialing runner stopped badly: ${JSON.stringify(st)} (see ${log})`);
  });
  await ctl.wait(() => ctl.ready, 'the runner to dial in', 10000);
  return { ctl, proc: p, token, log };
}

export function rssKb(pid) {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(s)[1]);
}

// failNow(err): the test fails at once, whatever its body awaits (a program
// under test died: waiting on it would only reach the time limit).
let failNowFn = null;
export function failNow(err) { if (failNowFn) failNowFn(err); }

// Clean-ups at the end of a test, each bounded: one that hangs is reported
// and the next runs.
const CLEANUP_MS = 15000;
async function cleanUp() {
  for (const c of cleanups.reverse()) {
    let timer;
    const limit = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`a clean-up took over ${CLEANUP_MS} ms`)), CLEANUP_MS); });
    try { await Promise.race([c(), limit]); } catch (e) { failed = true; console.error(`clean-up: ${e.message || e}`); }
    clearTimeout(timer);
  }
  cleanups.length = 0;
}

// Run a test body with clean-up and a hard time limit; exit code says it all.
// At the time limit the body is abandoned and the clean-ups still run (else
// the sandboxes' runners it started would outlive it).
export async function run(name, body, limitMs = 240000) {
  limitMs = scaled(limitMs);
  let timer;
  const limit = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`time limit of ${limitMs} ms reached`)), limitMs); });
  const now = new Promise((_, rej) => { failNowFn = rej; });
  try {
    await Promise.race([body(), limit, now]);
    console.log(`${name}: passed`);
  } catch (e) {
    failed = true;
    console.error(`${name}: FAILED: ${e.stack || e}`);
  } finally {
    clearTimeout(timer);
    await cleanUp();
  }
  if (failed) {
    for (const l of logs) {
      try { console.error(`--- ${l}\n${fs.readFileSync(l, 'utf8').slice(-Number(process.env.AL_LOG_TAIL || 4000))}`); } catch { /* gone */ }
    }
  }
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
}
