// Shared set-up for the `airlock` CLI tests: a real airlockd with users and
// a local sandbox whose link is up, the CLI run as a command (through bash
// for redirections), a tmux server of its own to drive it as a person
// would, and a TCP gate that can cut connections and keep them cut.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import https from 'node:https';
import { spawn, execFileSync } from 'node:child_process';
import { tmpdir, BIN, sleep, onCleanup, addLog, reportedPort, scaled, waitFor } from './harness.mjs';
import { addUser, startAirlockd, api, stopLocalRunners } from './airlockd.mjs';

export const AIRLOCK = path.join(BIN, 'airlock');

// The CLI's exit codes (src/cli/cli_err.h, `airlock --help`).
export const EXIT = { USAGE: 64, REFUSED: 65, NOTFOUND: 66, DOWN: 69, OTHER: 70, PROTO: 76, AUTH: 77, FORBIDDEN: 78 };

// Quote one word for bash.
export const sq = (a) => `'${String(a).replace(/'/g, "'\\''")}'`;

// Wait until sandbox id's link is up (GET /v1/sandboxes); returns its row.
export async function waitLink(port, key, id, ms = 20000, { https = null } = {}) {
  const until = Date.now() + scaled(ms);
  while (Date.now() < until) {
    const r = https ? await https('/v1/sandboxes') : await api(port, 'GET', '/v1/sandboxes', key);
    const s = r.json && r.json.find((x) => x.id === id);
    if (s && s.link_up) return s;
    await sleep(100);
  }
  throw new Error(`sandbox ${id}: link never came up`);
}

// A fresh airlockd with an admin, an operator and a viewer, and (unless
// sandbox is null) a local sandbox with its link up. Returns
// { base, dir, d, port, url, admin, op, viewer, env(key, extra) }:
// env() gives the environment for the CLI (a HOME of its own, no config).
export async function cliServer(tag, { sandbox = 'box', args = [] } = {}) {
  const base = tmpdir(tag);
  const dir = path.join(base, 'data');
  const home = path.join(base, 'home');
  fs.mkdirSync(home);
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const viewer = addUser(dir, 'vic', 'viewer');
  const d = await startAirlockd({ dir, args });
  const url = `http://127.0.0.1:${d.port}`;
  if (sandbox) {
    await api(d.port, 'POST', '/v1/sandboxes', admin, { id: sandbox, kind: 'local' });
    await waitLink(d.port, admin, sandbox);
  }
  const env = (key, extra = {}) => ({ HOME: home, XDG_CONFIG_HOME: '', AIRLOCK_URL: url, AIRLOCK_API_KEY: key, ...extra });
  return { base, dir, home, d, port: d.port, url, admin, op, viewer, env };
}

// Run the CLI; resolves { code, out, err }. args are words, or shell is a
// whole bash command line (for redirections).
export function runCli(args, { env = {}, shell = null, timeout = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    const cmd = shell ?? [AIRLOCK, ...args].map(sq).join(' ');
    const p = spawn('bash', ['-c', cmd], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', (x) => { out += x; });
    p.stderr.on('data', (x) => { err += x; });
    const t = setTimeout(() => { p.kill('SIGKILL'); reject(new Error(`airlock ${args.join(' ')}: timed out`)); }, scaled(timeout));
    p.on('exit', (code, sig) => { clearTimeout(t); resolve({ code: code ?? 128 + (sig ? 9 : 0), out, err }); });
  });
}

// A tmux server of its own: type with send-keys, read with capture-pane.
// The pane runs bash with PS1 'local$ ', the CLI on its PATH and env.
export function startTmux(dir, { cols = 100, rows = 30, env = {} } = {}) {
  const sock = path.join(dir, 'tmux.sock');
  const rc = path.join(dir, 'bashrc');
  fs.writeFileSync(rc, "PS1='local$ '\n");
  const fullEnv = { ...process.env, PATH: `${BIN}:${process.env.PATH}`, HISTFILE: '/dev/null', TERM: 'xterm-256color', ...env };
  const tmux = (...args) => execFileSync('tmux', ['-S', sock, ...args], { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  tmux('-f', '/dev/null', 'new-session', '-d', '-s', 'main', '-x', String(cols), '-y', String(rows),
    `bash --rcfile ${rc} --noprofile -i`);
  tmux('set-option', '-g', 'remain-on-exit', 'on');
  onCleanup(async () => { try { tmux('kill-server'); } catch { /* gone */ } });
  const t = {
    tmux,
    window: 'main',
    // Open another window running cmd; returns its target.
    newWindow(name, command) {
      tmux('new-window', '-d', '-n', name, '-t', 'main', command);
      return `main:${name}`;
    },
    keys(...k) { tmux('send-keys', '-t', t.window, ...k); },
    literal(s, target = t.window) { tmux('send-keys', '-t', target, '-l', s); },
    type(line, target = t.window) { tmux('send-keys', '-t', target, '-l', line); tmux('send-keys', '-t', target, 'Enter'); },
    screen(target = t.window, escapes = false) {
      return tmux('capture-pane', '-p', ...(escapes ? ['-e'] : []), '-t', target);
    },
    cursor(target = t.window) { return tmux('display-message', '-p', '-t', target, '#{cursor_x},#{cursor_y}').trim(); },
    resize(c, r) { tmux('resize-window', '-t', 'main', '-x', String(c), '-y', String(r)); },
    async waitFor(re, what, ms = 15000, target = t.window) {
      ms = scaled(ms);
      const until = Date.now() + ms;
      let s = '';
      while (Date.now() < until) {
        s = t.screen(target);
        if (re.test(s)) return s;
        await sleep(100);
      }
      throw new Error(`tmux: waited ${ms} ms for ${what} (${re}); screen:\n${s}`);
    },
    // The pane's modes (stty -a) saved to a file and read back.
    async stty(tag) {
      const f = path.join(dir, `stty.${tag}`);
      t.type(`stty -a > ${f}; echo saved-${tag}`);
      await t.waitFor(new RegExp(`^saved-${tag}$`, 'm'), `stty -a saved (${tag})`);
      return fs.readFileSync(f, 'utf8');
    },
  };
  return t;
}

// A TCP gate in front of targetPort: cut() drops every connection through
// it (new ones go through); down() drops them and refuses new ones (they
// are accepted and closed at once, as a dead path would) until up().
export async function startGate(targetPort) {
  const conns = new Set();
  let open = true, accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    if (!open) { client.destroy(); return; }
    const upstream = net.connect(targetPort, '127.0.0.1');
    const pair = { client, upstream };
    conns.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => { client.destroy(); upstream.destroy(); conns.delete(pair); };
    client.on('error', end); upstream.on('error', end);
    client.on('close', end); upstream.on('close', end);
  });
  await new Promise((res) => server.listen(0, '127.0.0.1', res));
  const g = {
    port: server.address().port,
    get accepted() { return accepted; },
    get open() { return conns.size; },
    cut() { const n = conns.size; for (const p of conns) { p.client.destroy(); p.upstream.destroy(); } conns.clear(); return n; },
    down() { open = false; return g.cut(); },
    up() { open = true; },
    close() { g.cut(); return new Promise((res) => server.close(res)); },
  };
  onCleanup(() => g.close());
  return g;
}

// Poll fn() until it returns a truthy value; bounded by ms.
export async function until(fn, what, ms = 15000, every = 50) {
  return waitFor(fn, ms, what, every);
}

// A self-signed certificate for 127.0.0.1 in dir: { cert, key } paths.
export function selfSigned(dir) {
  const cert = path.join(dir, 'cert.pem'), key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
    '-days', '1', '-subj', '/CN=127.0.0.1'], { stdio: 'ignore' });
  return { cert, key };
}

// One request to an https server, the certificate not checked; resolves
// { status, body, json }.
export function httpsApi(port, method, target, key, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? '' : JSON.stringify(body);
    const q = https.request({ host: '127.0.0.1', port, path: target, method, rejectUnauthorized: false,
      headers: { ...(key ? { Authorization: `Bearer ${key}` } : {}), ...(data ? { 'Content-Type': 'application/json' } : {}) } }, (r) => {
      let b = ''; r.on('data', (x) => { b += x; }); r.on('end', () => {
        let json = null;
        try { json = JSON.parse(b); } catch { /* not JSON */ }
        resolve({ status: r.statusCode, body: b, json });
      });
    });
    q.setTimeout(15000, () => q.destroy(new Error('https request timed out')));
    q.on('error', reject);
    q.end(data);
  });
}

// airlockd serving https with a self-signed certificate (startAirlockd
// waits for plain http). { p, port, log, cert, stop() }
// tls: { cert, key } to use instead of a fresh self-signed pair; env: the
// process's environment (this one's by default).
export async function startTlsAirlockd({ dir, args = [], tls, env }) {
  const { cert, key } = tls || selfSigned(path.dirname(dir));
  const log = path.join(path.dirname(dir), `airlockd-tls-${++tlsStarted}.log`);
  const out = fs.openSync(log, 'a');
  addLog(log);
  const p = spawn(path.join(BIN, 'airlockd'), ['serve', '--data', dir, '--listen', '127.0.0.1:0',
    '--tls-cert', cert, '--tls-key', key, '--verbose', ...args], { stdio: ['ignore', out, out], env: env || process.env });
  fs.closeSync(out);
  const d = { p, port: 0, log, cert, dead: false };
  d.exited = new Promise((res) => p.on('exit', (code, sig) => { d.dead = true; res({ code, sig }); }));
  d.stop = async () => { if (!d.dead) p.kill('SIGTERM'); return d.exited; };
  onCleanup(async () => {
    if (!d.dead) { p.kill('SIGKILL'); await d.exited; }
    stopLocalRunners(dir);
  });
  try {
    const port = d.port = await reportedPort(log, /serving https on [^ ]+:(\d+) \(/, p, { what: 'airlockd (TLS) to listen' });
    await waitFor(async () => {
      if (d.dead) throw new Error('it exited');
      try { return (await httpsApi(port, 'GET', '/healthz')).status === 200; } catch { return false; }
    }, 10000, 'airlockd (TLS) to answer /healthz', 50);
  } catch (e) {
    throw new Error(`airlockd (TLS) did not start (${e.message}); log:\n${fs.readFileSync(log, 'utf8')}`, { cause: e });
  }
  return d;
}
let tlsStarted = 0;

// Start a command line (as printed for a person) with bash in cwd; it is
// stopped by PID at clean-up (TERM, then KILL after 5 s) and must have
// stopped cleanly. { proc, exited }
export function startCommand(line, { cwd, env = {}, log }) {
  const out = fs.openSync(log, 'a');
  addLog(log);
  const proc = spawn('bash', ['-c', `exec ${line}`], { cwd, stdio: ['ignore', out, out],
    env: { ...process.env, PATH: `${BIN}:${process.env.PATH}`, ...env } });
  fs.closeSync(out);
  const exited = new Promise((res) => proc.on('exit', (code, sig) => res({ code, sig })));
  onCleanup(async () => {
    let st;
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
      st = await exited; clearTimeout(t);
    } else {
      st = await exited;
    }
    if (st.code !== 0 || st.sig) throw new Error(`${line.split(' ')[0]} stopped badly: ${JSON.stringify(st)} (see ${log})`);
  });
  return { proc, exited };
}
