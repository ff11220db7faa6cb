// A fault-injection TCP proxy (issue 15) on 127.0.0.1, usable between any
// two parts of Airlock: a client and airlockd, airlockd and a runner it
// dials (a static sandbox's URL pointed at the proxy), a reverse runner and
// airlockd (its --connect URL pointed at the proxy). It forwards bytes both
// ways and injects the faults of one table, FAULTS below, each a named entry
// with its parameters:
//
//   cut        cut the connection (both sockets closed) after a random
//              number of bytes in one direction, drawn from `bytes: [min, max]`
//   cut-frame  the same, but inside a WebSocket frame: once `bytes` have
//              passed, the next frame with 2 payload bytes or more is cut
//              at a random byte strictly inside its payload (the proxy
//              parses the RFC 6455 frame headers of plain ws:// after the
//              HTTP upgrade)
//   reset      as cut, with an RST instead of a FIN (socket.resetAndDestroy)
//   stall      stop forwarding one direction (reading it stops too, so TCP
//              pushes back) after `afterMs`, for `forMs` (0: until unstall())
//   delay      hold every chunk of one direction `ms` before forwarding it
//   throttle   forward one direction at most `rate` bytes per second
//   idle-cut   cut a connection that carried no byte either way for `ms`
//   age-cut    cut a connection once it is `ms` old, whatever it carries
//
// A fault entry: { fault: NAME, dir: 'up' (client -> target) | 'down'
// (target -> client), ...its parameters, times: N (at most N fires over the
// proxy's life; omitted: no limit), conns: [first, last] (connection numbers
// it applies to, from 1; omitted: all) }.
//
// Every random decision comes from a seeded PRNG (mulberry32): the seed is
// printed at start as `faultproxy seed=N`, and SEED=N in the environment
// (or the `seed` option) replays the proxy's decisions exactly. Connection
// k draws from its own generator (seed and k), so its faults do not depend
// on how other connections interleave. Every fault that fires is counted in
// stats.fired[NAME] and logged (events[], and a line on stdout unless
// quiet), so a test can assert that its fault really happened.
//
// As a module: startFaultProxy({ target: PORT | 'HOST:PORT', faults, seed,
//   port, quiet, label }) -> { port, seed, stats, events, setFaults(list),
//   stall(dir), unstall(), cutAll(), close() }.
// As a program: node faultproxy.mjs --target HOST:PORT [--port N]
//   [--seed N] [--fault 'NAME:key=value,key=min-max,...']...
// prints `faultproxy seed=N`, `faultproxy on 127.0.0.1:PORT -> HOST:PORT`
// and one line per fault fired, and runs until SIGTERM/SIGINT.
import net from 'node:net';

const HIGH_WATER = 1 << 20;      // bytes queued in one direction before its reading pauses
const TIMER_MS = 20;             // the idle and age checks' period
const HTTP_HEAD_MAX = 64 * 1024; // bytes of an upgrade's head the frame parser skips at most
const EVENTS_MAX = 10000;        // events kept (the counts go on)
const DIRS = ['up', 'down'];

// mulberry32: small, fast, and the same sequence for the same seed
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const between = (rng, [min, max]) => Math.floor(min + rng() * (max - min + 1));

// The faults. params: the parameters each needs (checked at setFaults);
// arm(conn, spec, rng) sets the fault up on a new connection.
const FAULTS = {
  cut: {
    params: ['dir', 'bytes'],
    arm: (c, f, rng) => c.flow[f.dir].cutAt(f, c.flow[f.dir].count + between(rng, f.bytes), 'cut'),
  },
  'cut-frame': {
    params: ['dir', 'bytes'],
    arm: (c, f, rng) => { c.flow[f.dir].frameCut = { f, from: c.flow[f.dir].count + between(rng, f.bytes), rng }; },
  },
  reset: {
    params: ['dir', 'bytes'],
    arm: (c, f, rng) => c.flow[f.dir].cutAt(f, c.flow[f.dir].count + between(rng, f.bytes), 'reset'),
  },
  stall: {
    params: ['dir', 'afterMs', 'forMs'],
    arm: (c, f) => c.later(f.afterMs, () => {
      if (!c.fire(f, { dir: f.dir })) return;
      c.flow[f.dir].setStalled(true);
      if (f.forMs) c.later(f.forMs, () => c.flow[f.dir].setStalled(false));
    }),
  },
  delay: {
    params: ['dir', 'ms'],
    arm: (c, f) => { if (c.fire(f, { dir: f.dir, ms: f.ms })) c.flow[f.dir].delayMs = f.ms; },
  },
  throttle: {
    params: ['dir', 'rate'],
    arm: (c, f) => { if (c.fire(f, { dir: f.dir, rate: f.rate })) c.flow[f.dir].rate = f.rate; },
  },
  'idle-cut': {
    params: ['ms'],
    arm: (c, f) => { c.idleCut = f; },
  },
  'age-cut': {
    params: ['ms'],
    arm: (c, f) => c.later(f.ms, () => { if (c.fire(f, { age: Date.now() - c.born })) c.kill('cut'); }),
  },
};
export const FAULT_NAMES = Object.keys(FAULTS);

function checkFault(f) {
  const def = FAULTS[f.fault];
  if (!def) throw new Error(`faultproxy: unknown fault '${f.fault}' (one of ${FAULT_NAMES.join(', ')})`);
  for (const p of def.params) {
    const v = f[p];
    const ok = p === 'dir' ? DIRS.includes(v)
      : p === 'bytes' ? Array.isArray(v) && v.length === 2 && v[0] >= 0 && v[1] >= v[0]
        : Number.isFinite(v) && v >= 0;
    if (!ok) throw new Error(`faultproxy: ${f.fault}: parameter ${p} missing or wrong (${JSON.stringify(v)})`);
  }
  return { ...f, fired: 0 };
}

// RFC 6455 frame boundaries in one direction's bytes, after the HTTP
// upgrade's head: calls onFrame(start, headerLen, payloadLen) as each
// frame's header is whole (start: the direction's byte offset of the frame).
class WsParser {
  constructor(onFrame) {
    this.onFrame = onFrame;
    this.inHead = true; this.tail = '';  // the HTTP head, until CRLF CRLF
    this.hdr = [];                        // a frame header's bytes so far
    this.skip = 0;                        // payload bytes of the current frame still to pass
    this.broken = false;                  // not HTTP then frames: parsing stops
  }
  feed(buf, at) {
    let i = 0;
    while (i < buf.length && !this.broken) {
      if (this.inHead) {
        const s = this.tail + buf.subarray(i, Math.min(buf.length, i + HTTP_HEAD_MAX)).toString('latin1');
        const e = s.indexOf('\r\n\r\n');
        if (e < 0) {
          if (s.length > HTTP_HEAD_MAX) this.broken = true;
          this.tail = s.slice(-3); i = buf.length; continue;
        }
        i += e + 4 - this.tail.length; this.tail = ''; this.inHead = false; continue;
      }
      if (this.skip > 0) { const n = Math.min(this.skip, buf.length - i); this.skip -= n; i += n; continue; }
      this.hdr.push(buf[i++]);
      const h = this.hdr;
      if (h.length < 2) continue;
      const len7 = h[1] & 0x7f, masked = (h[1] & 0x80) ? 4 : 0;
      const need = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + masked;
      if (h.length < need) continue;
      let len = len7;
      if (len7 === 126) len = (h[2] << 8) | h[3];
      else if (len7 === 127) len = Number(Buffer.from(h.slice(2, 10)).readBigUInt64BE());
      this.onFrame(at + i - need, need, len);
      this.hdr = []; this.skip = len;
    }
  }
}

// One direction of one connection: bytes read from src, queued (delay,
// throttle, stall), written to dst; cut points by byte offset.
class Flow {
  constructor(conn, dir, src, dst) {
    Object.assign(this, { conn, dir, src, dst });
    this.count = 0;        // bytes of this direction taken in (the offsets cuts count)
    this.queue = [];       // { buf, due } not yet written
    this.queued = 0;
    this.delayMs = 0; this.rate = 0; this.stalled = false;
    this.sentAt = Date.now(); this.credit = 0; // the throttle's bucket
    this.cut = null;       // { at, how, f }: the connection ends after byte `at`
    this.frameCut = null;  // { f, from, rng }: cut inside the first frame after `from`
    this.parser = new WsParser((start, h, len) => this.onFrame(start, h, len));
    this.timer = null; this.waitingDrain = false;
    this.srcEnded = false; this.endSent = false;
    src.on('data', (b) => this.take(b));
    // the end (FIN) goes through the queue too, after the bytes before it
    src.on('end', () => { this.srcEnded = true; this.pump(); });
    dst.on('drain', () => { this.waitingDrain = false; this.pump(); });
  }
  cutAt(f, at, how) { if (this.conn.active(f) && (!this.cut || at < this.cut.at)) this.cut = { at, how, f }; }
  onFrame(start, h, len) {
    const fc = this.frameCut;
    if (!fc || start < fc.from || len < 2 || !this.conn.active(fc.f)) return;
    this.frameCut = null;
    const at = start + h + 1 + Math.floor(fc.rng() * (len - 1)); // 1..len-1 payload bytes pass
    this.cutAt(fc.f, at, 'cut');
    this.cut.frame = { start, header: h, payload: len };
  }
  take(buf) {
    if (this.conn.dead || this.conn.dying) return; // a cut: nothing more goes through
    const at = this.count;
    if (this.frameCut) this.parser.feed(buf, at);
    this.count += buf.length;
    if (this.cut && this.count >= this.cut.at) {
      const keep = buf.subarray(0, this.cut.at - at);
      const { how, f, frame } = this.cut;
      if (!this.conn.fire(f, { dir: this.dir, at: this.cut.at, ...(frame ? { frame } : {}) })) {
        this.cut = null; this.enqueue(buf); return;
      }
      this.conn.dying = { how, flow: this };
      this.enqueue(keep);
      return;
    }
    this.enqueue(buf);
  }
  enqueue(buf) {
    if (buf.length) { this.queue.push({ buf, due: Date.now() + this.delayMs }); this.queued += buf.length; }
    if (this.queued > HIGH_WATER) this.src.pause();
    this.pump();
  }
  setStalled(on) {
    this.stalled = on;
    if (on) this.src.pause(); else { if (this.queued <= HIGH_WATER) this.src.resume(); this.pump(); }
  }
  pump() {
    clearTimeout(this.timer); this.timer = null;
    const now = Date.now();
    while (!this.stalled && !this.waitingDrain && this.queue.length && !this.conn.dead) {
      const q = this.queue[0];
      if (q.due > now) { this.timer = setTimeout(() => this.pump(), q.due - now); return; }
      let n = q.buf.length;
      if (this.rate) {
        this.credit = Math.min(this.rate, this.credit + ((now - this.sentAt) * this.rate) / 1000);
        this.sentAt = now;
        if (this.credit < 1) { this.timer = setTimeout(() => this.pump(), Math.ceil(1000 / this.rate) + 1); return; }
        n = Math.min(n, Math.floor(this.credit));
        this.credit -= n;
      }
      const part = q.buf.subarray(0, n);
      if (n === q.buf.length) this.queue.shift(); else q.buf = q.buf.subarray(n);
      this.queued -= n;
      this.conn.touch();
      if (!this.dst.write(part)) this.waitingDrain = true;
    }
    if (!this.stalled && this.queued <= HIGH_WATER && this.src.isPaused()) this.src.resume();
    // a cut's kept bytes are out: now the connection ends
    if (this.srcEnded && !this.endSent && !this.queue.length && !this.waitingDrain && !this.conn.dying) {
      this.endSent = true; this.dst.end();
    }
    const d = this.conn.dying;
    if (d && d.flow === this && !this.queue.length && !this.waitingDrain && !this.conn.dead) this.conn.kill(d.how);
  }
}

export async function startFaultProxy({ target, faults = [], seed, port = 0, quiet = false, label = 'faultproxy' } = {}) {
  const [thost, tport] = typeof target === 'number' ? ['127.0.0.1', target]
    : [String(target).split(':')[0], Number(String(target).split(':')[1])];
  if (seed === undefined) seed = process.env.SEED !== undefined ? Number(process.env.SEED) : Math.floor(Math.random() * 2 ** 31);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`faultproxy: seed must be a whole number, not ${seed}`);
  const log = (line) => { if (!quiet) console.log(`${label}: ${line}`); };
  console.log(`${label} seed=${seed}`);
  let specs = faults.map(checkFault);
  const conns = new Set();
  const stats = { connections: 0, open: 0, fired: Object.fromEntries(FAULT_NAMES.map((n) => [n, 0])),
    bytes: { up: 0, down: 0 } };
  const events = [];
  let nconn = 0;

  function startConn(client) {
    const n = ++nconn;
    stats.connections++; stats.open++;
    const upstream = net.connect({ port: tport, host: thost, allowHalfOpen: true });
    const rng = prng((seed ^ Math.imul(n, 0x9e3779b1)) >>> 0);
    const c = {
      n, rng, born: Date.now(), last: Date.now(), dead: false, dying: null, timers: [], idleCut: null,
      touch() { c.last = Date.now(); },
      later(ms, fn) { c.timers.push(setTimeout(fn, ms)); },
      applies: (f) => !f.conns || (n >= f.conns[0] && n <= f.conns[1]),
      active: (f) => f.times === undefined || f.fired < f.times,
      // counts and logs one fault; false when its `times` are used up
      fire(f, detail) {
        if (!c.active(f) || c.dead) return false;
        f.fired++; stats.fired[f.fault]++;
        const ev = { t: Date.now(), conn: n, fault: f.fault, ...detail };
        if (events.length < EVENTS_MAX) events.push(ev);
        log(`conn ${n} ${f.fault} ${JSON.stringify(detail)}`);
        return true;
      },
      kill(how) {
        if (c.dead) return;
        c.dead = true;
        for (const t of c.timers) clearTimeout(t);
        for (const fl of Object.values(c.flow)) clearTimeout(fl.timer);
        for (const s of [client, upstream]) {
          if (how === 'reset' && typeof s.resetAndDestroy === 'function' && !s.connecting) s.resetAndDestroy();
          else s.destroy();
        }
      },
    };
    c.flow = { up: new Flow(c, 'up', client, upstream), down: new Flow(c, 'down', upstream, client) };
    conns.add(c);
    const end = () => {
      if (!conns.has(c)) return;
      conns.delete(c); stats.open--;
      stats.bytes.up += c.flow.up.count; stats.bytes.down += c.flow.down.count;
      c.kill('cut');
    };
    for (const s of [client, upstream]) { s.on('close', end); s.on('error', end); }
    for (const f of specs) if (c.applies(f) && c.active(f)) FAULTS[f.fault].arm(c, f, rng);
    c.timers.push(setInterval(() => {
      if (c.idleCut && Date.now() - c.last >= c.idleCut.ms && c.fire(c.idleCut, { idle: Date.now() - c.last })) c.kill('cut');
    }, TIMER_MS));
    // bytes from either side count as traffic for the idle cut
    client.on('data', c.touch); upstream.on('data', c.touch);
  }

  const server = net.createServer({ allowHalfOpen: true }, startConn);
  server.on('error', (e) => log(`server error ${e.message}`));
  await new Promise((res, rej) => { server.once('error', rej); server.listen(port, '127.0.0.1', res); });
  log(`on 127.0.0.1:${server.address().port} -> ${thost}:${tport}`);
  const p = {
    port: server.address().port, seed, stats, events,
    // faults for the connections accepted from now on
    setFaults(list) { specs = list.map(checkFault); },
    // one fault armed now on every open connection (it fires as its
    // parameters say); returns the entry, whose `fired` counts its fires
    inject(f) {
      const spec = checkFault(f);
      for (const c of conns) if (!c.dead) FAULTS[spec.fault].arm(c, spec, c.rng);
      return spec;
    },
    fired: (name) => stats.fired[name],
    stall(dir) { return p.inject({ fault: 'stall', dir, afterMs: 0, forMs: 0 }); },
    unstall() { for (const c of conns) for (const d of DIRS) c.flow[d].setStalled(false); },
    cutAll() { const k = conns.size; for (const c of [...conns]) c.kill('cut'); return k; },
    get open() { return conns.size; },
    async close() {
      p.cutAll();
      await new Promise((r) => server.close(r));
    },
  };
  return p;
}

// 'cut:dir=down,bytes=1000-5000,times=3' -> { fault: 'cut', dir: 'down', bytes: [1000, 5000], times: 3 }
export function parseFault(s) {
  const [name, rest = ''] = s.split(':');
  const f = { fault: name };
  for (const kv of rest.split(',').filter(Boolean)) {
    const [k, v] = kv.split('=');
    if (v === undefined) throw new Error(`faultproxy: ${s}: ${kv} is not key=value`);
    if (k === 'dir') f.dir = v;
    else if (k === 'bytes' || k === 'conns') f[k] = v.split('-').map(Number);
    else f[k] = Number(v);
  }
  return checkFault(f);
}

async function main(argv) {
  let target = null, port = 0, seed;
  const faults = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => { if (i + 1 >= argv.length) throw new Error(`${a} needs a value`); return argv[++i]; };
    if (a === '--target') target = v();
    else if (a === '--port') port = Number(v());
    else if (a === '--seed') seed = Number(v());
    else if (a === '--fault') faults.push(parseFault(v()));
    else throw new Error(`unknown option ${a}`);
  }
  if (!target || !/^[^:]+:\d+$/.test(target)) {
    throw new Error(`usage: faultproxy.mjs --target HOST:PORT [--port N] [--seed N] [--fault 'NAME:key=value,...']... (faults: ${FAULT_NAMES.join(', ')})`);
  }
  const p = await startFaultProxy({ target, faults, seed, port });
  const stop = async () => { await p.close(); console.log(`faultproxy: fired ${JSON.stringify(p.stats.fired)}`); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).catch((e) => { console.error(e.message.startsWith('faultproxy:') ? e.message : `faultproxy: ${e.message}`); process.exit(64); });
}
