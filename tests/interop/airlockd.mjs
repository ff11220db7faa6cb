// Test helpers around a real `airlockd serve`: start it on 127.0.0.1, call
// its JSON API, attach clients to its terminals (airlock.v1 relay sessions
// through the independent JS client), and model screens with a real
// terminal emulator (@xterm/headless) to compare them cell by cell.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, execFileSync } from 'node:child_process';
import xtermHeadless from '@xterm/headless';
import { Controller } from './airlock.mjs';
import { BIN, rawHttp, sleep, onCleanup, addLog, reportedPort, waitFor, scaled, failNow } from './harness.mjs';

const { Terminal } = xtermHeadless;
let started = 0; // numbers the logs of airlockds started on port 0

// db: a database URL for --db (e.g. PostgreSQL); omitted: DIR/airlock.db.
// exe: another airlockd binary than BIN's.
export function addUser(dir, name, role, db) {
  return execFileSync(path.join(BIN, 'airlockd'),
    ['user', 'add', name, '--role', role, '--data', dir, ...(db ? ['--db', db] : [])])
    .toString().trim();
}

// Local sandboxes' runners outlive airlockd by design: stop those it started
// (each leads its own process group, recorded in its pid file).
export function stopLocalRunners(dir) {
  let ids;
  try { ids = fs.readdirSync(path.join(dir, 'sandboxes')); } catch { return; }
  for (const id of ids) {
    try {
      const pid = Number(fs.readFileSync(path.join(dir, 'sandboxes', id, 'run', 'runner.pid'), 'utf8'));
      if (pid > 1) process.kill(-pid, 'SIGKILL');
    } catch { /* not running */ }
  }
}

// The control groups airlockd made for the sandboxes of data directory dir
// (airlock/<tag>-<id>, the tag from the directory's real path: lsbx.c):
// removed once their processes are gone (bounded wait), so that test runs
// leave none behind.
export async function removeCgroups(dir) {
  let real;
  try { real = fs.realpathSync(dir); } catch { return; }
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(real)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  const tag = `${h.toString(16).padStart(16, '0').slice(0, 8)}-`;
  const roots = ['/sys/fs/cgroup/airlock', ...['memory', 'pids', 'cpu'].map((c) => `/sys/fs/cgroup/${c}/airlock`)];
  for (let i = 0; i < 20; i++) {
    let left = 0;
    for (const root of roots) {
      let names;
      try { names = fs.readdirSync(root).filter((n) => n.startsWith(tag)); } catch { continue; }
      for (const n of names) { try { fs.rmdirSync(path.join(root, n)); } catch { left++; } }
    }
    if (!left) return;
    await sleep(100);
  }
}

// What a sanitizer prints when it stops a program (ASan, LSan, UBSan).
const SANITIZER_RE = /ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: /;

// The log line airlockd prints once it listens (api.c), with the port.
export const SERVING_RE = /serving https? on [^ ]+:(\d+) \(/;

// The port each data directory's airlockd last listened on: local sandboxes
// started with it dial that address, so a restart on the same directory
// listens there again (a sandbox already in the directory is started
// before airlockd knows a port it binds as 0).
const lastPort = new Map();

// Start airlockd; resolves once /healthz answers. { p, port, log, exited, stop() }
// port: omitted, the port of the directory's last start, or else port 0 and
// the port airlockd reports (SERVING_RE).
// wrap: a command line to run it under (e.g. ['prlimit', '--fsize=N', '--']).
// db: a database URL for --db (e.g. PostgreSQL); omitted: DIR/airlock.db.
// exe: another airlockd binary than BIN's.
export async function startAirlockd({ dir, port, args = [], wrap = [], db, exe }) {
  port = port || lastPort.get(dir);
  const log = path.join(path.dirname(dir), port ? `airlockd-${port}.log` : `airlockd-0-${++started}.log`);
  const from = fs.existsSync(log) ? fs.statSync(log).size : 0;
  const out = fs.openSync(log, 'a');
  addLog(log);
  const argv = [exe || path.join(BIN, 'airlockd'),
    'serve', '--data', dir, ...(db ? ['--db', db] : []), '--listen', `127.0.0.1:${port || 0}`, '--verbose', ...args];
  const p = spawn(wrap.length ? wrap[0] : argv[0], [...wrap.slice(1), ...(wrap.length ? argv : argv.slice(1))],
    { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const d = { p, port, log, from, dead: false, asked: false }; // from: where this process's lines begin
  // a signal the test sends is asked for; a crash or a sanitizer's report
  // (UBSan exits with 1 after its report) fails the test at once
  const kill = p.kill.bind(p);
  p.kill = (sig) => { d.asked = true; return kill(sig); };
  d.exited = new Promise((res) => p.on('exit', (code, sig) => {
    d.dead = true;
    res({ code, sig });
    if (d.asked) return;
    let text = '';
    try { text = fs.readFileSync(log, 'latin1').slice(from); } catch { /* gone */ }
    if (SANITIZER_RE.test(text) || (sig && sig !== 'SIGTERM' && sig !== 'SIGKILL'))
      failNow(new Error(`airlockd (pid ${p.pid}) died unasked (code ${code}, signal ${sig})${SANITIZER_RE.test(text) ? ' with a sanitizer report' : ''}; log ${log}`));
  }));
  d.stop = async () => { if (!d.dead) { p.kill('SIGTERM'); return d.exited; } return d.exited; };
  onCleanup(async () => {
    if (!d.dead) { p.kill('SIGKILL'); await d.exited; }
    stopLocalRunners(dir);
    await removeCgroups(dir);
  });
  try {
    if (!port) d.port = port = await reportedPort(log, SERVING_RE, p, { from, what: 'airlockd to listen' });
    lastPort.set(dir, port);
    await waitFor(async () => {
      if (d.dead) throw new Error('it exited');
      try { return (await rawHttp(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')).status === 200; } catch { return false; }
    }, 10000, 'airlockd to answer /healthz', 50);
  } catch (e) {
    throw new Error(`airlockd did not start (${e.message}); log:\n${fs.readFileSync(log, 'utf8')}`, { cause: e });
  }
  return d;
}

// Options for startAirlockd that run airlockd as the unprivileged user
// nobody (the caller must be root): its own copy of airlockd and the
// runner, and base (which holds dir) given to nobody. Such an airlockd can
// write no control group, so its local sandboxes get the rlimit fallback.
export function asNobody(base, dir, args = []) {
  const bin = path.join(base, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  for (const f of ['airlockd', 'airlock-runner']) {
    fs.copyFileSync(path.join(BIN, f), path.join(bin, f));
    fs.chmodSync(path.join(bin, f), 0o755);
  }
  execFileSync('chown', ['-R', 'nobody:nogroup', base]);
  return { dir, exe: path.join(bin, 'airlockd'), args: ['--runner', path.join(bin, 'airlock-runner'), ...args],
    wrap: ['setpriv', '--reuid', 'nobody', '--regid', 'nogroup', '--clear-groups'] };
}

// Add a local sandbox (admin key) and wait until its runner has linked up;
// throws if it does not within ms. extra: more members of the request body
// (e.g. { network: 'none' }).
export async function addLocalSandbox(port, adminKey, id = 'box', ms = 10000, extra = {}) {
  const r = await api(port, 'POST', '/v1/sandboxes', adminKey, { ...extra, id, kind: 'local' });
  if (r.status !== 201) throw new Error(`adding sandbox ${id}: ${r.status} ${r.body}`);
  for (const until = Date.now() + scaled(ms); Date.now() < until; await sleep(100)) {
    const l = await api(port, 'GET', '/v1/sandboxes', adminKey);
    const sb = l.json && l.json.find((x) => x.id === id);
    if (sb && sb.link_up) return sb;
  }
  throw new Error(`sandbox ${id}: the local runner did not link up within ${ms} ms`);
}

// A checksummed stream for the kill -9 tests: about `bytes` of numbered
// lines written to WORK/data.txt, and the argv of a PTY program that prints
// them in 64 KiB chunks 20 ms apart (about 2.5 MB/s), then END-OF-STREAM.
// The pace matters: airlockd holds the runner's credit back for a client at
// most RL_CLIENT_LAG (512 KiB) behind, so a client that falls further behind
// when airlockd dies is resynced by design (docs/control-plane.md,
// "Durability"); unpaced, a test client starved of CPU on a loaded machine
// did. Resolves { expected, argv }.
export function checksummedStream(work, bytes) {
  fs.mkdirSync(work, { recursive: true });
  const lines = [];
  for (let i = 0, n = 0; n < bytes; i++) {
    const l = `${String(i).padStart(8, '0')} ${crypto.createHash('md5').update(String(i)).digest('hex').repeat(2)}\n`;
    lines.push(l); n += l.length;
  }
  const data = Buffer.from(lines.join(''));
  fs.writeFileSync(path.join(work, 'data.txt'), data);
  const chunks = Math.ceil(data.length / 65536);
  const prog = `stty -onlcr -echo; sleep 2; i=0; while [ $i -lt ${chunks} ]; do ` +
    'dd if=data.txt bs=65536 skip=$i count=1 status=none; i=$((i+1)); sleep 0.02; done; ' +
    'echo END-OF-STREAM; sleep 1';
  return { expected: Buffer.concat([data, Buffer.from('END-OF-STREAM\n')]), argv: ['sh', '-c', prog] };
}

// One API call; resolves { status, body, json }.
export async function api(port, method, target, key, body) {
  const data = body === undefined ? '' : (typeof body === 'string' ? body : JSON.stringify(body));
  const r = await rawHttp(port, `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
    (key ? `Authorization: Bearer ${key}\r\n` : '') +
    (method !== 'GET' ? `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(data)}\r\n` : '') +
    `\r\n${data}`, scaled(15000));
  let json = null;
  try { json = JSON.parse(r.body); } catch { /* not JSON */ }
  return { ...r, json };
}

// Attach to a terminal: a Controller whose channel 1 is the terminal.
// { ctl, ch } with ch.role / ch.viewers / ch.out as the JS client keeps them.
// resume: the client held the terminal before (ATTACH says RESUME).
export async function attach(port, termId, key, { read = false, outNext = 0, mode = 0, resume = false } = {}) {
  const ctl = new Controller();
  const ch = ctl.adoptChannel(1, { outNext, mode, resume });
  const url = `ws://127.0.0.1:${port}/v1/terminals/${termId}/attach${read ? '?mode=read' : ''}`;
  await ctl.connect(url, { Authorization: `Bearer ${key}` });
  onCleanup(async () => { try { ctl.ws.terminate(); } catch { /* gone */ } });
  return { ctl, ch, url, headers: { Authorization: `Bearer ${key}` } };
}

// Everything a client must feed a terminal emulator to show its screen:
// the last snapshot, then the stdout bytes received after it.
export function screenBytes(ch) {
  const out = Buffer.concat(ch.out);
  if (!ch.snapshot) return out;
  const after = out.subarray(Math.max(0, ch.snapshotOutLen ?? out.length));
  return Buffer.concat([ch.snapshot.bytes, after]);
}

// Feed bytes to a fresh xterm and return its screen as rows of cells
// (chars + attributes), plus the cursor.
export function screenOf(bytes, cols, rows) {
  const t = new Terminal({ cols, rows, allowProposedApi: true, scrollback: 0 });
  return new Promise((resolve) => t.write(bytes, () => {
    const b = t.buffer.active, grid = [];
    for (let y = 0; y < rows; y++) {
      const line = b.getLine(b.viewportY + y), cells = [];
      for (let x = 0; x < cols; x++) {
        const c = line.getCell(x);
        cells.push(`${c.getChars() || ' '}|${c.getFgColorMode()}:${c.getFgColor()}|${c.getBgColorMode()}:${c.getBgColor()}|${c.isBold()}${c.isInverse()}${c.isUnderline()}`);
      }
      grid.push(cells);
    }
    const res = { grid, text: grid.map((r) => r.map((c) => c[0]).join('').trimEnd()).join('\n'), cursor: [b.cursorX, b.cursorY], alt: b.type };
    t.dispose();
    resolve(res);
  }));
}

export function diffScreens(a, b) {
  const diffs = [];
  for (let y = 0; y < a.grid.length; y++) {
    for (let x = 0; x < a.grid[y].length; x++) {
      if (a.grid[y][x] !== b.grid[y]?.[x]) diffs.push(`(${x},${y}) ${a.grid[y][x]} != ${b.grid[y]?.[x]}`);
    }
  }
  if (a.cursor[0] !== b.cursor[0] || a.cursor[1] !== b.cursor[1]) diffs.push(`cursor ${a.cursor} != ${b.cursor}`);
  return diffs;
}

export { sleep };
