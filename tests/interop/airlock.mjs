// An independent JavaScript implementation of airlock.v1 (docs/protocol.md),
// written from the spec, for interop tests against the C code. It is a
// controller: it opens channels on a host, tracks offsets, grants credit,
// and resumes after a dropped connection with ATTACH. As a relay session's
// client (spec §9) it follows ROLE (stdin only within the writer's credit),
// keeps VIEWERS, asks for TAKEOVER and records resyncs (GAP then SNAPSHOT).
// Host is the other role, as much of it as a test needs to stand in for a
// runner: channels whose output the test writes, and SNAPSHOT_REQs the
// test answers (or not).

import WebSocket from 'ws';
import { scaled } from './harness.mjs';

export const T = {
  HELLO: 0x01, PING: 0x02, PONG: 0x03, TOKEN: 0x04, ERROR: 0x05, LIST: 0x06, LIST_REPLY: 0x07,
  OPEN: 0x10, OPENED: 0x11, DATA: 0x12, ACK: 0x13, RESIZE: 0x14, SIGNAL: 0x15, EOF: 0x16,
  EXIT: 0x17, CLOSE: 0x18, ATTACH: 0x19, ATTACHED: 0x1a, GAP: 0x1b, SNAPSHOT_REQ: 0x1c,
  SNAPSHOT: 0x1d, ROLE: 0x1e, TAKEOVER: 0x1f, VIEWERS: 0x20,
};
export const STDIN = 0, STDOUT = 1, STDERR = 2;
export const WRITER = 1, VIEWER = 2; // relay roles (ROLE, VIEWERS)
export const HOST = 1, CONTROLLER = 2; // HELLO roles
export const E = { PROTOCOL: 1, TOO_BIG: 4, NO_CHANNEL: 5, CHANNEL_EXISTS: 6, STATE: 12 }; // ERROR codes (§10)
export const MAX_DATA = 65528;
export const MAX_VIEWERS = 64, MAX_VIEWER_NAME = 64;

function header(type, flags, channel, plen) {
  const b = Buffer.alloc(10);
  b.writeUInt8(type, 0);
  b.writeUInt8(flags, 1);
  b.writeUInt32BE(channel, 2);
  b.writeUInt32BE(plen, 6);
  return b;
}

function str(s) {
  const b = Buffer.from(s, 'utf8');
  const l = Buffer.alloc(2);
  l.writeUInt16BE(b.length);
  return Buffer.concat([l, b]);
}

function u64(v) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(v));
  return b;
}

export function frame(type, flags, channel, payload = Buffer.alloc(0)) {
  return Buffer.concat([header(type, flags, channel, payload.length), payload]);
}

export const enc = {
  hello: (name = 'js-controller', role = CONTROLLER) => {
    const p = Buffer.alloc(9);
    p.writeUInt16BE(1, 0); p.writeUInt16BE(1, 2); p.writeUInt8(role, 4); p.writeUInt32BE(65546, 5);
    return frame(T.HELLO, 0, 0, Buffer.concat([p, str(name)]));
  },
  open: (ch, argv, { mode = 0, cols = 80, rows = 24, term = 'xterm-256color', cwd = '', env = [] } = {}) => {
    const p = Buffer.alloc(5);
    p.writeUInt8(mode, 0); p.writeUInt16BE(cols, 1); p.writeUInt16BE(rows, 3);
    const n = (v) => { const b = Buffer.alloc(2); b.writeUInt16BE(v); return b; };
    return frame(T.OPEN, 0, ch, Buffer.concat([p, str(term), str(cwd), n(argv.length),
      ...argv.map(str), n(env.length), ...env.map(str)]));
  },
  data: (ch, stream, off, bytes) => frame(T.DATA, stream, ch, Buffer.concat([u64(off), bytes])),
  ack: (ch, stream, ack, limit) => frame(T.ACK, stream, ch, Buffer.concat([u64(ack), u64(limit)])),
  resize: (ch, cols, rows) => { const p = Buffer.alloc(4); p.writeUInt16BE(cols, 0); p.writeUInt16BE(rows, 2); return frame(T.RESIZE, 0, ch, p); },
  signal: (ch, signo, scope = 0) => frame(T.SIGNAL, 0, ch, Buffer.from([signo, scope])),
  eof: (ch, stream, off) => frame(T.EOF, stream, ch, u64(off)),
  close: (ch) => frame(T.CLOSE, 0, ch),
  // resume: flag RESUME, "I hold what comes before next, even at 0" (§7)
  attach: (ch, outNext, outLimit, errNext, errLimit, cols = 0, rows = 0, resume = false) => {
    const p = Buffer.alloc(4); p.writeUInt16BE(cols, 0); p.writeUInt16BE(rows, 2);
    return frame(T.ATTACH, resume ? 1 : 0, ch, Buffer.concat([u64(outNext), u64(outLimit), u64(errNext), u64(errLimit), p]));
  },
  snapshotReq: (ch) => frame(T.SNAPSHOT_REQ, 0, ch),
  takeover: (ch) => frame(T.TAKEOVER, 0, ch),
  // host -> controller; here to build test inputs
  role: (ch, role, inNext, inLimit) => frame(T.ROLE, 0, ch, Buffer.concat([Buffer.from([role]), u64(inNext), u64(inLimit)])),
  viewers: (ch, list) => {
    const n = Buffer.alloc(2); n.writeUInt16BE(list.length);
    return frame(T.VIEWERS, 0, ch, Buffer.concat([n, ...list.map((v) => Buffer.concat([str(v.name), Buffer.from([v.role])]))]));
  },
  // host -> controller, for Host
  opened: (ch, pid) => { const p = Buffer.alloc(4); p.writeUInt32BE(pid); return frame(T.OPENED, 0, ch, p); },
  attached: (ch, state, inNext, inLimit) => frame(T.ATTACHED, 0, ch, Buffer.concat([Buffer.from([state]), u64(inNext), u64(inLimit)])),
  error: (ch, code, msg) => { const c = Buffer.alloc(2); c.writeUInt16BE(code); return frame(T.ERROR, 0, ch, Buffer.concat([c, str(msg)])); },
  snapshot: (ch, more, off, cols, rows, bytes) => {
    const p = Buffer.alloc(4); p.writeUInt16BE(cols, 0); p.writeUInt16BE(rows, 2);
    return frame(T.SNAPSHOT, more ? 1 : 0, ch, Buffer.concat([u64(off), p, bytes]));
  },
  listReply: (entries) => {
    const n = Buffer.alloc(2); n.writeUInt16BE(entries.length);
    return frame(T.LIST_REPLY, 0, 0, Buffer.concat([n, ...entries.map((e) => {
      const b = Buffer.alloc(35);
      b.writeUInt32BE(e.channel, 0); b[4] = e.state; b[5] = e.mode; b.writeInt32BE(e.exitCode, 6); b[10] = e.exitSignal;
      b.writeBigUInt64BE(BigInt(e.outEnd), 11); b.writeBigUInt64BE(BigInt(e.errEnd), 19); b.writeBigUInt64BE(BigInt(e.inNext), 27);
      return b;
    })]));
  },
  token: (tok) => frame(T.TOKEN, 0, 0, Buffer.from(tok)),
  ping: (ts) => frame(T.PING, 0, 0, u64(ts)),
  pong: (ts) => frame(T.PONG, 0, 0, u64(ts)),
  list: () => frame(T.LIST, 0, 0),
};

export function decode(buf) {
  if (buf.length < 10) throw new Error('short frame');
  const f = { type: buf[0], flags: buf[1], channel: buf.readUInt32BE(2) };
  const plen = buf.readUInt32BE(6);
  if (plen !== buf.length - 10) throw new Error('length mismatch');
  const p = buf.subarray(10);
  switch (f.type) {
    case T.HELLO: f.vmin = p.readUInt16BE(0); f.vmax = p.readUInt16BE(2); f.role = p[4]; f.maxFrame = p.readUInt32BE(5);
      f.name = p.length >= 11 ? p.subarray(11, 11 + p.readUInt16BE(9)).toString('utf8') : ''; break;
    case T.PING: case T.PONG: f.ts = p.readBigUInt64BE(0); break;
    case T.TOKEN: f.token = p.toString('latin1'); break;
    case T.OPEN: {
      f.mode = p[0]; f.cols = p.readUInt16BE(1); f.rows = p.readUInt16BE(3);
      let o = 5;
      const s = () => { const l = p.readUInt16BE(o); const v = p.subarray(o + 2, o + 2 + l).toString('utf8'); o += 2 + l; return v; };
      f.term = s(); f.cwd = s();
      const argc = p.readUInt16BE(o); o += 2; f.argv = [];
      for (let i = 0; i < argc; i++) f.argv.push(s());
      const envc = p.readUInt16BE(o); o += 2; f.env = [];
      for (let i = 0; i < envc; i++) f.env.push(s());
      if (o !== p.length) throw new Error('OPEN: trailing bytes');
      break;
    }
    case T.ATTACH:
      f.outNext = Number(p.readBigUInt64BE(0)); f.outLimit = Number(p.readBigUInt64BE(8));
      f.errNext = Number(p.readBigUInt64BE(16)); f.errLimit = Number(p.readBigUInt64BE(24));
      f.cols = p.readUInt16BE(32); f.rows = p.readUInt16BE(34); break;
    case T.RESIZE: f.cols = p.readUInt16BE(0); f.rows = p.readUInt16BE(2); break;
    case T.SIGNAL: f.signo = p[0]; f.scope = p[1]; break;
    case T.ERROR: f.code = p.readUInt16BE(0); f.msg = p.subarray(4, 4 + p.readUInt16BE(2)).toString(); break;
    case T.OPENED: f.pid = p.readUInt32BE(0); break;
    case T.DATA: f.offset = Number(p.readBigUInt64BE(0)); f.bytes = p.subarray(8); break;
    case T.ACK: f.ack = Number(p.readBigUInt64BE(0)); f.limit = Number(p.readBigUInt64BE(8)); break;
    case T.EOF: f.offset = Number(p.readBigUInt64BE(0)); break;
    case T.EXIT: f.code = p.readInt32BE(0); f.signo = p[4]; f.core = p[5];
      f.outEnd = Number(p.readBigUInt64BE(6)); f.errEnd = Number(p.readBigUInt64BE(14)); break;
    case T.ATTACHED: f.state = p[0]; f.inNext = Number(p.readBigUInt64BE(1)); f.inLimit = Number(p.readBigUInt64BE(9)); break;
    case T.GAP: f.from = Number(p.readBigUInt64BE(0)); f.to = Number(p.readBigUInt64BE(8)); break;
    case T.SNAPSHOT: f.offset = Number(p.readBigUInt64BE(0)); f.cols = p.readUInt16BE(8); f.rows = p.readUInt16BE(10); f.bytes = p.subarray(12); break;
    case T.ROLE:
      if (p.length !== 17) throw new Error('ROLE: bad length');
      f.role = p[0]; f.inNext = Number(p.readBigUInt64BE(1)); f.inLimit = Number(p.readBigUInt64BE(9));
      if (f.role !== WRITER && f.role !== VIEWER) throw new Error(`ROLE: bad role ${f.role}`);
      if (f.inLimit < f.inNext) throw new Error('ROLE: in_limit < in_next');
      break;
    case T.TAKEOVER:
      if (p.length !== 0) throw new Error('TAKEOVER: payload');
      break;
    case T.VIEWERS: {
      const n = p.readUInt16BE(0); f.viewers = [];
      if (n > MAX_VIEWERS) throw new Error(`VIEWERS: ${n} entries`);
      let o = 2;
      for (let i = 0; i < n; i++) {
        const l = p.readUInt16BE(o);
        if (l < 1 || l > MAX_VIEWER_NAME || o + 2 + l + 1 > p.length) throw new Error('VIEWERS: bad name');
        const name = p.subarray(o + 2, o + 2 + l);
        if (name.includes(0)) throw new Error('VIEWERS: NUL in a name');
        const role = p[o + 2 + l];
        if (role !== WRITER && role !== VIEWER) throw new Error(`VIEWERS: bad role ${role}`);
        f.viewers.push({ name: name.toString('utf8'), role });
        o += 2 + l + 1;
      }
      if (o !== p.length) throw new Error('VIEWERS: trailing bytes');
      break;
    }
    case T.LIST_REPLY: {
      const n = p.readUInt16BE(0); f.entries = [];
      for (let i = 0, o = 2; i < n; i++, o += 35) {
        f.entries.push({ channel: p.readUInt32BE(o), state: p[o + 4], mode: p[o + 5], exitCode: p.readInt32BE(o + 6),
          exitSignal: p[o + 10], outEnd: Number(p.readBigUInt64BE(o + 11)), errEnd: Number(p.readBigUInt64BE(o + 19)),
          inNext: Number(p.readBigUInt64BE(o + 27)) });
      }
      break;
    }
    default: break;
  }
  return f;
}

const WINDOW = 512 * 1024;
const SETTLE_MS = 250; // EP_ACK_SETTLE_US

// One channel as the controller sees it.
class Channel {
  constructor(ctl, id, argv, opts) {
    Object.assign(this, { ctl, id, argv, opts });
    this.out = []; this.err = [];
    this.next = [0, 0, 0]; this.limitSent = [0, 0, 0]; this.ackSent = [0, 0, 0]; this.settleT = [null, null, null];
    this.inSent = 0; this.inAcked = 0; this.inLimit = 0; this.inBuf = Buffer.alloc(0); this.inBase = 0;
    this.inEof = false; this.inEofSent = false;
    this.opened = false; this.exit = null; this.closed = false; this.linked = false;
    this.waiters = [];
    this.paused = false; // stop granting credit (a reader that stops)
    this.keepTyped = false; // relay sessions: the only writer's input survives a ROLE (below)
    // relay sessions: role from the last ROLE (undefined before), who is
    // attached, snapshots seen, resyncs (a stdout GAP then a SNAPSHOT)
    this.role = undefined; this.roles = 0; this.viewers = [];
    this.snapshots = 0; this.resyncs = []; this.lastGap = null;
  }
  output() { return Buffer.concat(this.out); }
  // What reached this client of the terminal's stdout: the last snapshot's
  // bytes (a client that attached after the text was printed gets it
  // there), then the stdout received. For waiting on text, not for exactness.
  seen() { return this.snapshot ? Buffer.concat([this.snapshot.bytes, this.output()]) : this.output(); }
  stderr() { return Buffer.concat(this.err); }
  write(bytes) { this.inBuf = Buffer.concat([this.inBuf, Buffer.from(bytes)]); this.pump(); }
  endInput() { this.inEof = true; this.pump(); }
  resize(cols, rows) { this.ctl.send(enc.resize(this.id, cols, rows)); }
  signal(signo, scope = 0) { this.ctl.send(enc.signal(this.id, signo, scope)); }
  close() { this.ctl.send(enc.close(this.id)); }
  takeover() { this.ctl.takeover(this.id); }
  // send stdin within the host's credit, from the resend buffer (a relay
  // viewer has none: what it types stays here)
  pump() {
    if (!this.linked || !this.ctl.ready) return;
    const end = this.inBase + this.inBuf.length;
    while (this.inSent < end && this.inSent < this.inLimit) {
      const n = Math.min(end - this.inSent, this.inLimit - this.inSent, 32768);
      const from = this.inSent - this.inBase;
      this.ctl.send(enc.data(this.id, STDIN, this.inSent, this.inBuf.subarray(from, from + n)));
      this.inSent += n;
    }
    if (this.inEof && !this.inEofSent && this.inSent === end) {
      this.ctl.send(enc.eof(this.id, STDIN, end)); this.inEofSent = true;
    }
  }
  // An ACK when the credit moves by a quarter window, and once the stream
  // has been quiet for SETTLE_MS with bytes not acknowledged (as
  // src/common/endpoint.c does: the host may then free its ring).
  grant(stream) {
    if (this.paused) return;
    const limit = this.next[stream] + WINDOW;
    if (limit - this.limitSent[stream] >= WINDOW / 4) {
      this.limitSent[stream] = limit;
      this.ackSent[stream] = this.next[stream];
      this.ctl.send(enc.ack(this.id, stream, this.next[stream], limit));
    }
    clearTimeout(this.settleT[stream]);
    if (this.next[stream] > this.ackSent[stream]) {
      this.settleT[stream] = setTimeout(() => {
        if (this.paused || this.next[stream] <= this.ackSent[stream] || this.ctl.ws?.readyState !== 1) return;
        this.ackSent[stream] = this.next[stream];
        this.limitSent[stream] = Math.max(this.limitSent[stream], this.next[stream] + WINDOW);
        this.ctl.send(enc.ack(this.id, stream, this.next[stream], this.limitSent[stream]));
      }, SETTLE_MS);
      this.settleT[stream].unref?.();
    }
  }
  resume() { this.paused = false; this.limitSent = [0, 0, 0]; this.ackSent = [...this.next]; this.grant(STDOUT); if (this.opts.mode === 1) this.grant(STDERR); }
  wait(pred, what, ms = 20000) {
    if (pred()) return Promise.resolve();
    return new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error(`timeout waiting for ${what} on channel ${this.id}`)), scaled(ms));
      this.waiters.push(() => { if (pred()) { clearTimeout(t); res(); return true; } return false; });
    });
  }
  wake() { this.waiters = this.waiters.filter((w) => !w()); }
  waitExit(ms) { return this.wait(() => this.exit !== null, 'exit', ms); }
  waitOutput(re, ms) { return this.wait(() => re.test(this.seen().toString('latin1')), `output ${re}`, ms); }
}

// A controller session: survives reconnects (resume), like the C endpoint.
export class Controller {
  constructor({ onError } = {}) {
    this.channels = new Map(); this.nextId = 1; this.ready = false; this.errors = [];
    this.onError = onError; this.ws = null; this.closeInfo = null; this.pongs = 0;
    this.waiters = [];
  }
  // Listen on a WebSocket for frames; onHello runs when the host's HELLO arrives.
  wire(ws, onHello = () => {}) {
    this.ready = false; this.closeInfo = null; this.ws = ws;
    ws.binaryType = 'nodebuffer';
    ws.on('message', (data, isBinary) => {
      if (!isBinary) throw new Error('text message from host');
      const f = decode(data);
      if (f.type === T.HELLO) { this.peerName = f.name; this.ready = true; this.onReady(); onHello(); }
      this.handle(f);
    });
    ws.on('close', (code, reason) => {
      if (this.ws !== ws) return;
      this.ready = false; this.closeInfo = { code, reason: reason.toString() };
      for (const c of this.channels.values()) c.linked = false;
      this.wake();
    });
  }
  // opts: ws's options, and protocols (default ['airlock.v1']).
  connect(url, headers = {}, { protocols = ['airlock.v1'], ...opts } = {}) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, protocols, { headers, perMessageDeflate: false, ...opts });
      ws.on('unexpected-response', (req, res) => {
        req.destroy(); // ws leaves the request to this listener: no 'close' follows
        reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode }));
      });
      ws.on('error', (e) => reject(e));
      ws.on('open', () => { ws.send(enc.hello()); });
      // a close before the peer's HELLO fails the connect at once (after
      // it, rejecting is a no-op): else the caller waits forever
      ws.on('close', (code, reason) => reject(Object.assign(
        new Error(`the connection closed before HELLO (${code} ${reason.toString()})`), { code })));
      this.wire(ws, () => resolve(this));
    });
  }
  // Speak on a socket someone else accepted (the host dialed us).
  adopt(ws) {
    this.wire(ws);
    ws.send(enc.hello());
  }
  send(buf) { if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(buf); }
  // relay session: ask to become the channel's writer (answer: ROLE or ERROR 11)
  takeover(ch) { this.send(enc.takeover(ch)); }
  onReady() {
    for (const c of this.channels.values()) {
      if (c.closed) continue;
      if (!c.openSent) { c.openSent = true; this.send(enc.open(c.id, c.argv, c.opts)); continue; }
      c.limitSent[STDOUT] = c.next[STDOUT] + WINDOW; c.limitSent[STDERR] = c.next[STDERR] + WINDOW;
      if (c.paused) { c.limitSent[STDOUT] = c.next[STDOUT] + 1; c.limitSent[STDERR] = c.next[STDERR] + 1; }
      this.send(enc.attach(c.id, c.next[STDOUT], c.limitSent[STDOUT], c.next[STDERR], c.limitSent[STDERR], 0, 0, c.held));
    }
  }
  // Take over a channel known from elsewhere (a controller that restarted):
  // the next link ATTACHes it wanting stdout from outNext.
  // resume: it held the channel before (ATTACH says RESUME); a fresh relay
  // client does not (airlockd may start it from a snapshot)
  adoptChannel(id, { outNext = 0, errNext = 0, mode = 0, resume = false } = {}) {
    const c = new Channel(this, id, ['(adopted)'], { mode });
    c.openSent = true; c.opened = true; c.next = [0, outNext, errNext]; c.held = resume;
    this.channels.set(id, c);
    if (id >= this.nextId) this.nextId = id + 1;
    return c;
  }
  open(argv, opts = {}) {
    const c = new Channel(this, this.nextId++, argv, { mode: 0, ...opts });
    this.channels.set(c.id, c);
    if (this.ready) { c.openSent = true; this.send(enc.open(c.id, argv, c.opts)); }
    return c;
  }
  handle(f) {
    const c = this.channels.get(f.channel);
    switch (f.type) {
      case T.PING: this.pings = (this.pings || 0) + 1; this.send(enc.pong(f.ts)); break;
      case T.PONG: this.pongs++; this.lastPongTs = f.ts; break;
      case T.ERROR:
        this.errors.push(f);
        if (c) c.lastError = f;
        if (c && f.code === 5 && !c.opened) { this.send(enc.open(c.id, c.argv, c.opts)); break; }
        if (c && f.code === 8) { c.openError = f.msg; c.closed = true; }
        if (this.onError) this.onError(f);
        break;
      case T.OPENED:
        c.opened = true; c.pid = f.pid; c.linked = true; c.held = true; c.limitSent = [0, 0, 0]; c.ackSent = [...c.next];
        c.grant(STDOUT); if (c.opts.mode === 1) c.grant(STDERR); c.pump();
        break;
      case T.ATTACHED:
        c.opened = true; c.linked = true; c.held = true;
        if (f.inNext < c.inBase) throw new Error('host wants stdin we dropped');
        if (f.inNext > c.inBase + c.inBuf.length) {
          // beyond what we wrote: a relay host merged another writer's input
          // (or we restarted); stdin goes on there
          c.inBuf = Buffer.alloc(0); c.inBase = f.inNext; c.inAcked = f.inNext;
        }
        c.inSent = f.inNext; c.inLimit = f.inLimit; c.inEofSent = false; c.pump();
        break;
      case T.ROLE: {
        if (!c.linked) throw new Error(`ROLE before ATTACHED on channel ${c.id}`);
        // what was never sent is dropped; what was sent from inNext on is
        // sent again. keepTyped (a client that is the terminal's only
        // writer, so that the merged stream is its own input): all of its
        // input from inNext on is kept, whatever the role, and sent once it
        // writes again (spec §9 lets a writer send again what it typed)
        const sent = c.inBuf.subarray(0, c.inSent - c.inBase);
        c.role = f.role; c.roles++;
        if (c.keepTyped) c.inBuf = f.inNext >= c.inBase && f.inNext <= c.inBase + c.inBuf.length ? c.inBuf.subarray(f.inNext - c.inBase) : Buffer.alloc(0);
        else if (f.inNext >= c.inBase && f.inNext <= c.inSent) c.inBuf = sent.subarray(f.inNext - c.inBase);
        else c.inBuf = Buffer.alloc(0);
        c.inBase = f.inNext; c.inAcked = f.inNext; c.inSent = f.inNext; c.inLimit = f.inLimit;
        c.inEofSent = false; c.pump();
        break;
      }
      case T.VIEWERS: c.viewers = f.viewers; break;
      case T.ACK:
        if (f.flags === STDIN) {
          if (f.ack > c.inAcked) { // release acknowledged input
            c.inBuf = c.inBuf.subarray(f.ack - c.inBase); c.inBase = f.ack; c.inAcked = f.ack;
            if (c.inSent < f.ack) c.inSent = f.ack; // sent before a ROLE, no need to again
          }
          if (f.limit > c.inLimit) c.inLimit = f.limit;
          c.pump();
        }
        break;
      case T.DATA: {
        const s = f.flags;
        if (f.offset > c.next[s]) throw new Error(`hole on channel ${c.id}: got ${f.offset}, want ${c.next[s]}`);
        const skip = c.next[s] - f.offset;
        if (s === STDOUT) c.lastGap = null;
        if (skip < f.bytes.length) {
          const b = Buffer.from(f.bytes.subarray(skip));
          (s === STDOUT ? c.out : c.err).push(b);
          c.next[s] = f.offset + f.bytes.length;
          if (c.onData) c.onData(s, b);
        }
        c.grant(s);
        break;
      }
      case T.GAP:
        c.gaps = (c.gaps || 0) + 1;
        (c.gapList = c.gapList || []).push({ stream: f.flags, from: f.from, to: f.to, next: c.next[f.flags], at: Date.now() });
        if (f.flags === STDOUT) c.lastGap = { from: f.from, to: f.to };
        c.next[f.flags] = f.to; c.grant(f.flags); break;
      case T.EOF: c.eof = c.eof || {}; c.eof[f.flags] = true; break;
      case T.EXIT:
        if (f.outEnd !== c.next[STDOUT] || f.errEnd !== c.next[STDERR]) throw new Error('EXIT before all output');
        c.exit = { code: f.code, signo: f.signo }; break;
      case T.CLOSE: if (c) c.closed = true; break;
      case T.SNAPSHOT:
        c.snapParts = c.snapParts || [];
        c.snapParts.push(Buffer.from(f.bytes));
        if (!(f.flags & 1)) {
          // next: where stdout stood when it arrived (the host sends it at next = offset)
          c.snapshot = { bytes: Buffer.concat(c.snapParts), offset: f.offset, cols: f.cols, rows: f.rows, next: c.next[STDOUT] };
          // stdout bytes already in c.out: the screen is the snapshot, then c.out from here
          c.snapshotOutLen = c.out.reduce((n, b) => n + b.length, 0);
          c.snapParts = []; c.snapshots++;
          if (c.onSnapshot) c.onSnapshot(c.snapshot);
          if (c.lastGap && c.lastGap.to === f.offset) c.resyncs.push({ ...c.lastGap, offset: f.offset });
          c.lastGap = null;
        }
        break;
      case T.LIST_REPLY: this.list = f.entries; break;
      default: break;
    }
    if (c) c.wake();
    this.wake();
  }
  wait(pred, what, ms = 20000) {
    if (pred()) return Promise.resolve();
    return new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error(`timeout waiting for ${what}`)), scaled(ms));
      this.waiters.push(() => { if (pred()) { clearTimeout(t); res(); return true; } return false; });
    });
  }
  wake() { this.waiters = this.waiters.filter((w) => !w()); }
  drop() { if (this.ws) this.ws.terminate(); this.ready = false; }
  // Sends a PING and resolves to the milliseconds until its PONG.
  async timedPing(ts, ms = 20000) {
    const before = this.pongs, sent = performance.now();
    this.send(enc.ping(BigInt(ts)));
    await this.wait(() => this.pongs > before, `PONG ${ts}`, ms);
    return performance.now() - sent;
  }
}

// ---- the host role ---------------------------------------------------------------

// A host session on one WebSocket at a time (adopt() each new one): it
// answers HELLO, PING, LIST, OPEN (OPENED, then stdin credit), ATTACH
// (ATTACHED, then its output again from the controller's next), CLOSE;
// it acknowledges stdin, keeps a channel's stdout whole and sends it
// within the controller's credit as the test writes it (write()); RESIZE
// sets the size. A SNAPSHOT_REQ is recorded in snapReqs ({ channel, at })
// and passed to onSnapshotReq(channel, host), which may answer with
// snapshot() or error(), or never. Every frame received is in frames.
export class Host {
  constructor({ name = 'js-host', onSnapshotReq = () => {} } = {}) {
    Object.assign(this, { name, onSnapshotReq });
    this.channels = new Map(); this.snapReqs = []; this.frames = []; this.tokens = [];
    this.ws = null; this.ready = false; this.waiters = []; this.nextPid = 4000;
  }
  adopt(ws) {
    this.ws = ws; this.ready = false;
    ws.binaryType = 'nodebuffer';
    ws.on('message', (data, isBinary) => {
      if (!isBinary) throw new Error('text message from controller');
      this.handle(decode(data));
      this.wake();
    });
    ws.on('close', () => { if (this.ws === ws) { this.ws = null; this.ready = false; this.wake(); } });
    ws.send(enc.hello(this.name, HOST));
  }
  send(buf) { if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(buf); }
  // stdout of channel ch: appended, sent as credit allows
  write(ch, bytes) {
    const c = this.channels.get(ch);
    c.out = Buffer.concat([c.out, Buffer.from(bytes)]);
    this.pump(c);
  }
  // answers to a SNAPSHOT_REQ of ch: the screen (at the stdout sent), or an ERROR
  snapshot(ch, bytes) {
    const c = this.channels.get(ch);
    if (c.sent !== c.out.length) throw new Error('a snapshot before its stdout is sent (§8, snapshot order)');
    this.send(enc.snapshot(ch, false, c.sent, c.cols, c.rows, Buffer.from(bytes)));
  }
  error(ch, code, msg) { this.send(enc.error(ch, code, msg)); }
  pump(c) {
    if (!this.ready) return;
    while (c.sent < c.out.length && c.sent < c.limit) {
      const n = Math.min(c.out.length - c.sent, c.limit - c.sent, MAX_DATA);
      this.send(enc.data(c.id, STDOUT, c.sent, c.out.subarray(c.sent, c.sent + n)));
      c.sent += n;
    }
  }
  handle(f) {
    this.frames.push(f);
    const c = this.channels.get(f.channel);
    const IN_WINDOW = 64 * 1024;
    switch (f.type) {
      case T.HELLO:
        if (f.role !== CONTROLLER) throw new Error(`HELLO role ${f.role}: a host needs a controller`);
        this.ready = true; break;
      case T.PING: this.send(enc.pong(f.ts)); break;
      case T.TOKEN: this.tokens.push(f.token); break;
      case T.LIST:
        this.send(enc.listReply([...this.channels.values()].map((x) => ({ channel: x.id, state: 1, mode: x.mode,
          exitCode: 0, exitSignal: 0, outEnd: x.out.length, errEnd: 0, inNext: x.inNext }))));
        break;
      case T.OPEN:
        if (c) { this.error(f.channel, E.CHANNEL_EXISTS, 'channel in use'); break; }
        this.channels.set(f.channel, { id: f.channel, mode: f.mode, cols: f.cols, rows: f.rows, argv: f.argv,
          out: Buffer.alloc(0), sent: 0, limit: 0, inNext: 0, input: [] });
        this.send(enc.opened(f.channel, this.nextPid++));
        this.send(enc.ack(f.channel, STDIN, 0, IN_WINDOW));
        break;
      case T.ATTACH:
        if (!c) { this.error(f.channel, E.NO_CHANNEL, 'no such channel'); break; }
        if (f.outNext > c.out.length) throw new Error('ATTACH beyond the output');
        c.sent = f.outNext; c.limit = f.outLimit;
        if (f.cols) { c.cols = f.cols; c.rows = f.rows; }
        this.send(enc.attached(f.channel, 1, c.inNext, c.inNext + IN_WINDOW));
        this.pump(c);
        break;
      case T.ACK:
        if (c && f.flags === STDOUT && f.limit > c.limit) { c.limit = f.limit; this.pump(c); }
        break;
      case T.DATA:
        if (c && f.flags === STDIN && f.offset + f.bytes.length > c.inNext) {
          c.input.push(Buffer.from(f.bytes.subarray(c.inNext - f.offset)));
          c.inNext = f.offset + f.bytes.length;
          this.send(enc.ack(c.id, STDIN, c.inNext, c.inNext + IN_WINDOW));
        }
        break;
      case T.RESIZE: if (c) { c.cols = f.cols; c.rows = f.rows; } break;
      case T.SNAPSHOT_REQ:
        if (!c) { this.error(f.channel, E.NO_CHANNEL, 'no such channel'); break; }
        this.snapReqs.push({ channel: f.channel, at: Date.now() });
        this.onSnapshotReq(f.channel, this);
        break;
      case T.CLOSE:
        if (!c) { this.error(f.channel, E.NO_CHANNEL, 'no such channel'); break; }
        this.channels.delete(f.channel); this.send(enc.close(f.channel));
        break;
      default: break;
    }
  }
  wait(pred, what, ms = 20000) {
    if (pred()) return Promise.resolve();
    return new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error(`host: timeout waiting for ${what}`)), scaled(ms));
      this.waiters.push(() => { if (pred()) { clearTimeout(t); res(); return true; } return false; });
    });
  }
  wake() { this.waiters = this.waiters.filter((w) => !w()); }
}
