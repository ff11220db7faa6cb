// A stand-in for a managed sandbox platform's front (issue 14): what Azure
// Container Apps dynamic sessions' management endpoint does as its public
// documentation describes it, on 127.0.0.1, for tests and for trying
// `airlock probe` by hand.
//
// - Requests reach a session as `<any path>?identifier=<id>&api-version=
//   2024-02-02-preview`; the identifier is 4 to 128 characters of
//   [A-Za-z0-9_-]. A session is allocated on the first use of its
//   identifier: the front starts one runner for it (startSession, given by
//   the caller) and forwards the path and query to it, for plain requests
//   and WebSocket upgrades alike.
// - Every request carries `Authorization: Bearer <platform token>`, a JWT
//   whose `aud` is https://dynamicsessions.io, signed by the front's own key
//   (ES256): any other, missing or expired is answered 403 with the
//   platform's own JSON body (distinct from a runner's 403).
// - The caller's `Authorization` reaches the runner or not (forwardAuth).
// - A connection that carries no byte either way for idleCutMs is cut (both
//   sockets destroyed, as an ingress does), and any connection is cut at
//   maxAgeMs, whatever it carries; 0 turns either off.
// - At most maxSessions sessions; one more identifier is answered 404 (as
//   the platform documents for a pool at its max-sessions).
// - It adds the forwarding headers an ingress adds (x-forwarded-for,
//   x-forwarded-proto, x-request-id), which the probe should see arrive.
//
// As a module: startFront(options) -> { port, close, sessions, mintToken }.
// As a program: node platform_front.mjs --runner BIN --jwks FILE [--idle-cut S]
//   [--max-age S] [--max-sessions N] [--strip-auth] [--port N] [--runner-arg A]...
// starts airlock-runner --listen 127.0.0.1:0 --identifier ID --jwks FILE per
// session, prints `platform front on 127.0.0.1:PORT` and a valid platform
// token (`platform token: ...`), and runs until SIGTERM/SIGINT.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import net from 'node:net';
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';
import { SignJWT, jwtVerify, generateKeyPair } from 'jose';

export const PLATFORM_AUD = 'https://dynamicsessions.io';
export const API_VERSION = '2024-02-02-preview';
const ID_RE = /^[A-Za-z0-9_-]{4,128}$/;
const HEAD_MAX = 64 * 1024;        // bytes of a request head the front reads
const HEAD_TIMEOUT_MS = 30000;     // a request head must be whole by then
const ALLOCATE_TIMEOUT_MS = 15000; // a session's runner must listen by then

function platformError(res, status, code, message) {
  const body = JSON.stringify({ error: { code, message } });
  res.writeHead(status, { 'content-type': 'application/json', 'x-platform-front': 'stand-in', connection: 'close' });
  res.end(body);
}

function rawError(sock, status, reason, code, message) {
  const body = JSON.stringify({ error: { code, message } });
  sock.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\nx-platform-front: stand-in\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

// Connects to 127.0.0.1:port, retrying while the runner starts.
function connectRetry(port, untilMs) {
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => { s.removeAllListeners('error'); resolve(s); });
      s.once('error', (e) => {
        s.destroy();
        if (Date.now() >= untilMs) reject(e); else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
}

export async function startFront({
  startSession,           // async (id) => { port, stop: async () => {} }
  idleCutMs = 0, maxAgeMs = 0, maxSessions = 100, forwardAuth = true, port = 0,
} = {}) {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const kid = crypto.randomBytes(8).toString('hex');
  const sessions = new Map(); // id -> Promise<{ port, stop }>
  const conns = new Set();
  const stats = { upgrades: 0, idleCuts: 0, ageCuts: 0, refused: 0 };

  const mintToken = ({ aud = PLATFORM_AUD, ttl = 3600 } = {}) =>
    new SignJWT({ oid: 'test-principal' }).setProtectedHeader({ alg: 'ES256', kid })
      .setIssuedAt().setExpirationTime(Math.floor(Date.now() / 1000) + ttl).setAudience(aud)
      .setIssuer('https://login.example.invalid/stand-in/').sign(privateKey);

  async function authorized(h) {
    const m = /^Bearer ([A-Za-z0-9._-]+)$/.exec(h || '');
    if (!m) return false;
    try {
      await jwtVerify(m[1], publicKey, { audience: PLATFORM_AUD, algorithms: ['ES256'] });
      return true;
    } catch { return false; }
  }

  // checks the target; returns { id } or { status, code, message }
  function route(url) {
    let u;
    try { u = new URL(url, 'http://front.invalid'); } catch { return { status: 400, code: 'BadRequest', message: 'bad target' }; }
    const id = u.searchParams.get('identifier');
    if (!id || !ID_RE.test(id)) return { status: 400, code: 'InvalidIdentifier', message: 'identifier: 4 to 128 of [A-Za-z0-9_-]' };
    if (u.searchParams.get('api-version') !== API_VERSION) return { status: 400, code: 'InvalidApiVersion', message: `api-version must be ${API_VERSION}` };
    return { id };
  }

  function session(id) {
    let s = sessions.get(id);
    if (!s) {
      if (sessions.size >= maxSessions) return null;
      s = startSession(id);
      sessions.set(id, s);
      s.catch(() => sessions.delete(id));
    }
    return s;
  }

  // the request head as forwarded: Authorization kept or dropped, the
  // ingress's own headers added
  function forwardHead(req, remote) {
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const k = req.rawHeaders[i], v = req.rawHeaders[i + 1];
      const lk = k.toLowerCase();
      if (lk === 'authorization' && !forwardAuth) continue;
      if (lk.startsWith('x-forwarded-') || lk === 'x-request-id') continue;
      lines.push(`${k}: ${v}`);
    }
    lines.push(`x-forwarded-for: ${remote}`, 'x-forwarded-proto: http', `x-request-id: ${crypto.randomUUID()}`);
    return `${lines.join('\r\n')}\r\n\r\n`;
  }

  // pipes a and b both ways; cuts on idleness and age
  function splice(a, b) {
    const c = { a, b, born: Date.now(), last: Date.now(), timer: null };
    conns.add(c);
    const end = () => {
      if (!conns.has(c)) return;
      conns.delete(c);
      clearInterval(c.timer);
      a.destroy(); b.destroy();
    };
    const touch = () => { c.last = Date.now(); };
    a.on('data', touch); b.on('data', touch);
    a.pipe(b); b.pipe(a);
    a.on('close', end); b.on('close', end);
    a.on('error', end); b.on('error', end);
    c.timer = setInterval(() => {
      const now = Date.now();
      if (maxAgeMs && now - c.born >= maxAgeMs) { stats.ageCuts++; end(); return; }
      if (idleCutMs && now - c.last >= idleCutMs) { stats.idleCuts++; end(); }
    }, 25);
    return c;
  }

  async function admit(req, reply) {
    if (!(await authorized(req.headers.authorization))) {
      stats.refused++;
      reply(403, 'Forbidden', 'PermissionDenied', 'the platform token is missing, invalid or for another audience');
      return null;
    }
    const r = route(req.url);
    if (!r.id) { reply(r.status, 'Bad Request', r.code, r.message); return null; }
    const s = session(r.id);
    // the platform answers 404 once the pool holds max-sessions
    if (!s) { reply(404, 'Not Found', 'SessionLimit', `the pool holds at most ${maxSessions} sessions`); return null; }
    try {
      return await s;
    } catch (e) {
      reply(502, 'Bad Gateway', 'SessionAllocationFailed', String(e.message || e));
      return null;
    }
  }

  const server = http.createServer({ maxHeaderSize: HEAD_MAX, requestTimeout: 240000, headersTimeout: HEAD_TIMEOUT_MS },
    async (req, res) => {
      const s = await admit(req, (st, _reason, code, msg) => platformError(res, st, code, msg));
      if (!s) return;
      const headers = { ...req.headers, 'x-forwarded-for': req.socket.remoteAddress, 'x-forwarded-proto': 'http',
        'x-request-id': crypto.randomUUID() };
      if (!forwardAuth) delete headers.authorization;
      const up = http.request({ host: '127.0.0.1', port: s.port, method: req.method, path: req.url, headers }, (ur) => {
        res.writeHead(ur.statusCode, ur.headers);
        ur.pipe(res);
      });
      up.on('error', (e) => { if (!res.headersSent) platformError(res, 502, 'UpstreamError', e.message); else res.destroy(); });
      req.pipe(up);
    });
  server.on('upgrade', async (req, sock, head) => {
    sock.on('error', () => sock.destroy());
    const s = await admit(req, (st, reason, code, msg) => rawError(sock, st, reason, code, msg));
    if (!s) return;
    let up;
    try {
      up = await connectRetry(s.port, Date.now() + 2000);
    } catch (e) {
      rawError(sock, 502, 'Bad Gateway', 'UpstreamError', e.message);
      return;
    }
    stats.upgrades++;
    up.write(forwardHead(req, req.socket.remoteAddress));
    if (head && head.length) up.write(head);
    splice(sock, up);
  });
  await new Promise((resolve, reject) => { server.once('error', reject); server.listen(port, '127.0.0.1', resolve); });

  return {
    port: server.address().port,
    stats,
    sessions,
    mintToken,
    async close() {
      for (const c of [...conns]) { c.a.destroy(); c.b.destroy(); clearInterval(c.timer); }
      conns.clear();
      await new Promise((r) => server.close(r));
      for (const s of sessions.values()) {
        try { await (await s).stop(); } catch { /* it never started */ }
      }
      sessions.clear();
    },
  };
}

// A session's runner: airlock-runner on a port of its own, up once it
// reports it. Exported for tests that start the front themselves.
// fromRequest: the runner is not told its identifier (as on the platform,
// whose containers start before any identifier exists): it takes the first
// valid upgrade's (--identifier-from request).
// entrypoint: the image's start script (deploy/aca/entrypoint.sh) instead,
// given the runner and the JWKS in its environment as the platform would.
export function runnerSession(bin, jwks, extra = [], { fromRequest = false, entrypoint = null } = {}) {
  return (id) => new Promise((resolve, reject) => {
    const ident = fromRequest ? ['--identifier-from', 'request'] : ['--identifier', id];
    const p = entrypoint
      ? spawn('sh', [entrypoint, ...extra], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, AIRLOCK_RUNNER: bin, AIRLOCK_LISTEN: '127.0.0.1:0', AIRLOCK_JWKS: fs.readFileSync(jwks, 'utf8'),
          TMPDIR: path.dirname(jwks) },
      })
      : spawn(bin, ['--listen', '127.0.0.1:0', ...ident, '--jwks', jwks, ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const t = setTimeout(() => { p.kill('SIGKILL'); reject(new Error(`the runner for ${id} did not listen in time`)); },
      ALLOCATE_TIMEOUT_MS);
    const onData = (d) => {
      log += d.toString();
      const m = /listening on [^ ]+:(\d+) for identifier/.exec(log);
      if (m) {
        clearTimeout(t);
        resolve({
          port: Number(m[1]), pid: p.pid, log: () => log,
          stop: () => new Promise((r) => { if (p.exitCode !== null || p.signalCode) r(); else { p.once('exit', r); p.kill('SIGTERM'); } }),
        });
      }
      if (log.length > 1 << 20) log = log.slice(-65536);
    };
    p.stdout.on('data', onData);
    p.stderr.on('data', onData);
    p.on('exit', (code) => { clearTimeout(t); reject(new Error(`the runner for ${id} exited (${code}): ${log.slice(-500)}`)); });
  });
}

async function main(argv) {
  const opt = { runner: null, jwks: null, idle: 0, age: 0, max: 100, strip: false, port: 0, extra: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => { if (i + 1 >= argv.length) throw new Error(`${a} needs a value`); return argv[++i]; };
    if (a === '--runner') opt.runner = v();
    else if (a === '--jwks') opt.jwks = v();
    else if (a === '--idle-cut') opt.idle = Number(v());
    else if (a === '--max-age') opt.age = Number(v());
    else if (a === '--max-sessions') opt.max = Number(v());
    else if (a === '--strip-auth') opt.strip = true;
    else if (a === '--port') opt.port = Number(v());
    else if (a === '--runner-arg') opt.extra.push(v());
    else throw new Error(`unknown option ${a}`);
  }
  if (!opt.runner || !opt.jwks) throw new Error('usage: platform_front.mjs --runner BIN --jwks FILE [--idle-cut S] [--max-age S] [--max-sessions N] [--strip-auth] [--port N] [--runner-arg A]...');
  for (const [k, n] of [['idle-cut', opt.idle], ['max-age', opt.age], ['max-sessions', opt.max], ['port', opt.port]]) {
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${k}: a number of 0 or more`);
  }
  const f = await startFront({ startSession: runnerSession(opt.runner, opt.jwks, opt.extra), idleCutMs: opt.idle * 1000,
    maxAgeMs: opt.age * 1000, maxSessions: opt.max, forwardAuth: !opt.strip, port: opt.port });
  console.log(`platform front on 127.0.0.1:${f.port}`);
  console.log(`platform token: ${await f.mintToken()}`);
  const stop = async () => { await f.close(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).catch((e) => { console.error(`platform_front: ${e.message}`); process.exit(64); });
}
