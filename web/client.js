// airlock.v1 in the browser: the client side of a relay session
// (docs/protocol.md §9) over one binary WebSocket, feeding an xterm.js
// Terminal.
//
// Data model (all offsets are byte counts of a stream since the terminal
// opened, the terminal's own numbering; numbers stay below 2^53). For each
// output stream (rx[1] stdout, rx[2] stderr, which only a pipe-mode
// terminal has; `out` is rx[1]):
//   next       the first byte not yet received (what ATTACH asks for)
//   delivered  every byte below it has been parsed by xterm.js (its write
//              callback ran): that is what ACK acknowledges
//   limitSent  the credit granted to the host (ACK limit); always
//              delivered + WINDOW at the time it was sent, so xterm.js
//              never holds more than WINDOW unparsed bytes of a stream
//   in.base..      the writer's stdin kept for resending: bytes [in.base,
//                  in.base + in.buf.length) of the merged input stream, of
//                  which those below in.sent went out; in.limit is the
//                  host's credit. A viewer has in.limit = in.next and never
//                  sends; what it types is dropped at once.
// The state outlives connections: a reconnect ATTACHes with out.next, so no
// output is lost or repeated, and stdin resumes where ATTACHED says.

export const T = {
  HELLO: 0x01, PING: 0x02, PONG: 0x03, TOKEN: 0x04, ERROR: 0x05, LIST: 0x06, LIST_REPLY: 0x07,
  OPEN: 0x10, OPENED: 0x11, DATA: 0x12, ACK: 0x13, RESIZE: 0x14, SIGNAL: 0x15, EOF: 0x16,
  EXIT: 0x17, CLOSE: 0x18, ATTACH: 0x19, ATTACHED: 0x1a, GAP: 0x1b, SNAPSHOT_REQ: 0x1c,
  SNAPSHOT: 0x1d, ROLE: 0x1e, TAKEOVER: 0x1f, VIEWERS: 0x20,
};
export const STDIN = 0, STDOUT = 1, STDERR = 2;
export const WRITER = 1, VIEWER = 2;
export const ERR = {
  PROTOCOL: 1, VERSION: 2, UNKNOWN_TYPE: 3, TOO_BIG: 4, NO_CHANNEL: 5, CHANNEL_EXISTS: 6,
  LIMIT: 7, OPEN_FAILED: 8, TOKEN_INVALID: 9, TOKEN_EXPIRED: 10, FORBIDDEN: 11, STATE: 12,
  INTERNAL: 13, TIMEOUT: 14,
};

const CH = 1;                       // a relay session's one channel
const HDR = 10;                     // frame header bytes
const MAX_PAYLOAD = 65536;          // AL_MAX_PAYLOAD
const MAX_FRAME = HDR + MAX_PAYLOAD;
const MAX_SNAPSHOT = 4 * 1024 * 1024; // AL_MAX_SNAPSHOT
export const WINDOW = 512 * 1024;
const SETTLE_MS = 250; // a quiet stream's last ACK (the protocol's EP_ACK_SETTLE_US)   // stdout credit beyond what xterm.js parsed
export const MAX_PENDING = 1024 * 1024; // never grant while xterm.js holds more
const IN_CHUNK = 32768;             // stdin bytes per DATA frame
const PING_MS = 15000;              // PING interval (spec default)
const IDLE_MS = 45000;              // nothing received for this long: reconnect
const BACKOFF_MIN_MS = 250, BACKOFF_MAX_MS = 8000;
const MAX_IN_BUF = 1024 * 1024;     // typed/pasted input held for the host
export const CLOSE_SESSION_ENDED = 4401; // protocol.md §10: the web session was signed out or expired

export class ProtocolError extends Error {}

// ---- codec ---------------------------------------------------------------

const utf8 = new TextEncoder();
const utf8d = new TextDecoder('utf-8', { fatal: false });

function frame(type, flags, payload = new Uint8Array(0)) {
  const b = new Uint8Array(HDR + payload.length);
  const v = new DataView(b.buffer);
  v.setUint8(0, type); v.setUint8(1, flags); v.setUint32(2, type < 0x10 ? 0 : CH); v.setUint32(6, payload.length);
  b.set(payload, HDR);
  return b;
}

function u64(view, off, v) { view.setBigUint64(off, BigInt(v)); }

export const enc = {
  hello(name) {
    const nb = utf8.encode(name).subarray(0, 255);
    const p = new Uint8Array(9 + 2 + nb.length); const v = new DataView(p.buffer);
    v.setUint16(0, 1); v.setUint16(2, 1); v.setUint8(4, 2); v.setUint32(5, MAX_FRAME);
    v.setUint16(9, nb.length); p.set(nb, 11);
    return frame(T.HELLO, 0, p);
  },
  ping(ts) { const p = new Uint8Array(8); u64(new DataView(p.buffer), 0, ts); return frame(T.PING, 0, p); },
  pong(tsBytes) { return frame(T.PONG, 0, tsBytes); },
  error(code, msg) {
    const mb = utf8.encode(msg).subarray(0, 1024);
    const p = new Uint8Array(4 + mb.length); const v = new DataView(p.buffer);
    v.setUint16(0, code); v.setUint16(2, mb.length); p.set(mb, 4);
    return frame(T.ERROR, 0, p); // channel 0: about the connection
  },
  // resume: flag RESUME, "this page holds what comes before outNext, even 0"
  attach(outNext, outLimit, errNext = 0, errLimit = 0, cols = 0, rows = 0, resume = false) {
    const p = new Uint8Array(36); const v = new DataView(p.buffer);
    u64(v, 0, outNext); u64(v, 8, outLimit); u64(v, 16, errNext); u64(v, 24, errLimit);
    v.setUint16(32, cols); v.setUint16(34, rows);
    return frame(T.ATTACH, resume ? 1 : 0, p);
  },
  data(stream, off, bytes) {
    const p = new Uint8Array(8 + bytes.length); u64(new DataView(p.buffer), 0, off); p.set(bytes, 8);
    return frame(T.DATA, stream, p);
  },
  ack(stream, ack, limit) {
    const p = new Uint8Array(16); const v = new DataView(p.buffer); u64(v, 0, ack); u64(v, 8, limit);
    return frame(T.ACK, stream, p);
  },
  resize(cols, rows) { const p = new Uint8Array(4); const v = new DataView(p.buffer); v.setUint16(0, cols); v.setUint16(2, rows); return frame(T.RESIZE, 0, p); },
  signal(signo, scope = 0) { return frame(T.SIGNAL, 0, new Uint8Array([signo, scope])); },
  close() { return frame(T.CLOSE, 0); },
  snapshotReq() { return frame(T.SNAPSHOT_REQ, 0); },
  takeover() { return frame(T.TAKEOVER, 0); },
};

// Decode one host → controller frame, strictly (protocol.md §2): a frame
// that does not decode exactly is a protocol error.
export function decode(buf) {
  const b = new Uint8Array(buf);
  if (b.length < HDR) throw new ProtocolError('short frame');
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const f = { type: v.getUint8(0), flags: v.getUint8(1), channel: v.getUint32(2) };
  const plen = v.getUint32(6);
  if (plen > MAX_PAYLOAD) throw new ProtocolError('frame too big');
  if (plen !== b.length - HDR) throw new ProtocolError('frame length does not match the message');
  const p = b.subarray(HDR), pv = new DataView(b.buffer, b.byteOffset + HDR, plen);
  const need = (n, exact = true) => { if (exact ? p.length !== n : p.length < n) throw new ProtocolError(`frame 0x${f.type.toString(16)}: bad payload length`); };
  const num = (o) => { const x = pv.getBigUint64(o); if (x > BigInt(Number.MAX_SAFE_INTEGER)) throw new ProtocolError('offset out of range'); return Number(x); };
  const conn = f.type < 0x10 && f.type !== T.ERROR;
  if (conn && f.channel !== 0) throw new ProtocolError('connection frame on a channel');
  if (f.type >= 0x10 && f.channel === 0) throw new ProtocolError('channel frame on channel 0');
  const streamFlags = () => { if (f.flags > 2) throw new ProtocolError('bad stream'); };
  const noFlags = () => { if (f.flags !== 0) throw new ProtocolError('unused flags set'); };
  switch (f.type) {
    case T.HELLO: {
      noFlags(); need(11, false);
      f.vmin = pv.getUint16(0); f.vmax = pv.getUint16(2); f.role = pv.getUint8(4); f.maxFrame = pv.getUint32(5);
      const l = pv.getUint16(9); need(11 + l); f.name = utf8d.decode(p.subarray(11));
      break;
    }
    case T.PING: case T.PONG: noFlags(); need(8); f.tsBytes = p.slice(0, 8); f.ts = pv.getBigUint64(0); break;
    case T.ERROR: {
      noFlags(); need(4, false);
      f.code = pv.getUint16(0); const l = pv.getUint16(2); need(4 + l);
      f.msg = utf8d.decode(p.subarray(4));
      break;
    }
    case T.DATA: streamFlags(); need(9, false); f.offset = num(0); f.bytes = p.subarray(8); break;
    case T.ACK: streamFlags(); need(16); f.ack = num(0); f.limit = num(8); break;
    case T.EOF: streamFlags(); need(8); f.offset = num(0); break;
    case T.EXIT: noFlags(); need(22); f.code = pv.getInt32(0); f.signo = pv.getUint8(4); f.core = pv.getUint8(5); f.outEnd = num(6); f.errEnd = num(14); break;
    case T.CLOSE: noFlags(); need(0); break;
    case T.ATTACHED: noFlags(); need(17); f.state = pv.getUint8(0); f.inNext = num(1); f.inLimit = num(9); break;
    case T.GAP: streamFlags(); need(16); f.from = num(0); f.to = num(8); if (f.to <= f.from) throw new ProtocolError('empty GAP'); break;
    case T.SNAPSHOT:
      if (f.flags & ~1) throw new ProtocolError('unused flags set');
      need(12, false); f.offset = num(0); f.cols = pv.getUint16(8); f.rows = pv.getUint16(10); f.bytes = p.subarray(12);
      break;
    case T.ROLE:
      noFlags(); need(17); f.role = pv.getUint8(0); f.inNext = num(1); f.inLimit = num(9);
      if (f.role !== WRITER && f.role !== VIEWER) throw new ProtocolError('ROLE: bad role');
      if (f.inLimit < f.inNext) throw new ProtocolError('ROLE: in_limit below in_next');
      break;
    case T.VIEWERS: {
      noFlags(); need(2, false);
      const n = pv.getUint16(0); if (n > 64) throw new ProtocolError('VIEWERS: too many');
      f.viewers = []; let o = 2;
      for (let i = 0; i < n; i++) {
        if (o + 2 > p.length) throw new ProtocolError('VIEWERS: truncated');
        const l = pv.getUint16(o);
        if (l < 1 || l > 64 || o + 2 + l + 1 > p.length) throw new ProtocolError('VIEWERS: bad name');
        const name = p.subarray(o + 2, o + 2 + l); const role = p[o + 2 + l];
        if (name.includes(0)) throw new ProtocolError('VIEWERS: NUL in a name');
        if (role !== WRITER && role !== VIEWER) throw new ProtocolError('VIEWERS: bad role');
        f.viewers.push({ name: utf8d.decode(name), role }); o += 3 + l;
      }
      if (o !== p.length) throw new ProtocolError('VIEWERS: trailing bytes');
      break;
    }
    case T.OPENED: case T.LIST_REPLY:
      break; // valid frames, never sent to a relay client; ignored
    case T.TOKEN: case T.LIST: case T.OPEN: case T.RESIZE: case T.SIGNAL: case T.ATTACH:
    case T.SNAPSHOT_REQ: case T.TAKEOVER:
      throw new ProtocolError(`frame 0x${f.type.toString(16)} in the wrong direction`);
    default: {
      const e = new ProtocolError(`unknown frame type 0x${f.type.toString(16)}`); e.code = ERR.UNKNOWN_TYPE; throw e;
    }
  }
  return f;
}

// ---- the session -----------------------------------------------------------

// TerminalLink: one terminal, attached over as many connections as it takes.
//   url      ws(s)://…/v1/terminals/ID/attach[?mode=read]
//   term     an xterm.js Terminal
//   name     our HELLO name
//   on       callbacks: status(s, detail), role(r), viewers(list), rtt(ms),
//            exit({code, signo}), gap({from, to, resync}), error(msg),
//            snapshot({cols, rows, offset}), size(cols, rows)
//   fitSize  () => {cols, rows} | null: the size the writer wants (fit addon)
//   csrf     the web session's CSRF token, offered as the subprotocol
//            "airlock-csrf.TOKEN" after airlock.v1 (a browser cannot set
//            headers on an upgrade; airlockd answers with airlock.v1)
export class TerminalLink {
  constructor({ url, term, name = 'browser', on = {}, fitSize = () => null, csrf = null }) {
    Object.assign(this, { url, term, name, on, fitSize, csrf });
    this.rx = [null, { next: 0, delivered: 0, limitSent: 0, acked: 0, settle: null },
      { next: 0, delivered: 0, limitSent: 0, acked: 0, settle: null }];
    this.out = this.rx[STDOUT];
    this.in = { base: 0, buf: new Uint8Array(0), sent: 0, limit: 0 };
    this.role = VIEWER; this.viewers = []; this.state = 'idle';
    this.ws = null; this.ready = false; this.linked = false; this.held = false; this.stopped = false;
    this.reconnects = 0; this.connections = 0; this.attempt = 0;
    this.exit = null; this.eof = false; this.rtt = null;
    this.snapParts = []; this.snapLen = 0; this.snapshots = 0; this.gaps = [];
    this.lastRx = 0; this.timer = null; this.retryTimer = null;
    this.stats = { maxPending: 0, acks: 0, dataFrames: 0 };
  }

  // bytes handed to xterm.js and not parsed yet
  pending() { return this.rx[1].next - this.rx[1].delivered + this.rx[2].next - this.rx[2].delivered; }

  start() { this.stopped = false; this.connect(); }

  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer); clearInterval(this.timer);
    if (this.ws) {
      try { if (this.ready) this.ws.send(enc.close()); } catch { /* closing anyway */ }
      try { this.ws.close(1000, 'detached'); } catch { /* gone */ }
    }
    this.ws = null; this.setStatus('closed');
  }

  setStatus(s, detail = '') { this.state = s; this.on.status?.(s, detail); }

  connect() {
    if (this.stopped) return;
    this.connections++;
    const ws = new WebSocket(this.url, this.csrf ? ['airlock.v1', `airlock-csrf.${this.csrf}`] : ['airlock.v1']);
    ws.binaryType = 'arraybuffer';
    this.ws = ws; this.ready = false; this.linked = false;
    this.snapParts = []; this.snapLen = 0; // an interrupted snapshot is discarded
    this.setStatus(this.connections > 1 ? 'reconnecting' : 'connecting');
    ws.onopen = () => { if (this.ws === ws) { this.lastRx = Date.now(); ws.send(enc.hello(this.name)); } };
    ws.onmessage = (ev) => { if (this.ws === ws) this.onMessage(ev.data); };
    ws.onclose = (ev) => { if (this.ws === ws) this.onClose(ev); };
    ws.onerror = () => { /* onclose follows */ };
    clearInterval(this.timer);
    this.timer = setInterval(() => this.tick(), 1000);
  }

  tick() {
    if (!this.ws) return;
    const now = Date.now();
    if (this.ready && now - this.lastRx > IDLE_MS) { this.drop('idle timeout'); return; }
    if (this.ready && (!this.lastPing || now - this.lastPing >= PING_MS)) this.ping();
  }

  ping() {
    if (!this.ready) return;
    this.lastPing = Date.now();
    this.send(enc.ping(Math.round(performance.timeOrigin * 1000 + performance.now() * 1000)));
  }

  // Cut the current connection (as a network fault would); reconnects.
  drop(why = 'dropped') {
    const ws = this.ws;
    if (!ws) return;
    try { ws.close(4003, why); } catch { /* gone */ }
    this.onClose({ code: 4003, reason: why });
  }

  onClose(ev) {
    const wasReady = this.ready;
    this.ws = null; this.ready = false; this.linked = false;
    clearInterval(this.timer);
    if (this.stopped) return;
    if (this.exit && this.eof) { this.setStatus('ended'); return; }
    // the session ended: reconnecting could only be refused (401)
    if (ev.code === CLOSE_SESSION_ENDED) { this.stopped = true; this.setStatus('signed-out', ev.reason || ''); return; }
    // a fatal answer (version, 4000 protocol) is not retried in a tight loop
    this.attempt = wasReady ? 0 : this.attempt + 1;
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.min(this.attempt, 6));
    const delay = wasReady ? 100 + Math.random() * 150 : base / 2 + Math.random() * base / 2;
    this.setStatus('reconnecting', `${ev.code || ''} ${ev.reason || ''}`.trim());
    this.retryTimer = setTimeout(() => { this.reconnects++; this.connect(); }, delay);
  }

  send(b) { if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(b); }

  fail(code, msg) {
    this.on.error?.(msg);
    this.send(enc.error(code, msg));
    const ws = this.ws;
    try { ws.close(code === ERR.UNKNOWN_TYPE || code === ERR.PROTOCOL ? 4000 : 4004, msg.slice(0, 120)); } catch { /* gone */ }
    this.onClose({ code: 4000, reason: msg });
  }

  onMessage(data) {
    this.lastRx = Date.now();
    if (typeof data === 'string') { this.fail(ERR.PROTOCOL, 'text message'); return; }
    let f;
    try { f = decode(data); } catch (e) { this.fail(e.code || ERR.PROTOCOL, e.message); return; }
    if (!this.ready) {
      if (f.type !== T.HELLO) { this.fail(ERR.PROTOCOL, 'first frame is not HELLO'); return; }
      if (f.vmin > 1 || f.vmax < 1) { this.fail(ERR.VERSION, 'no common version'); return; }
      if (f.role !== 1) { this.fail(ERR.PROTOCOL, 'peer is not a host'); return; }
      this.ready = true; this.attempt = 0; this.lastPing = 0;
      this.peerMaxFrame = f.maxFrame;
      // ATTACH with what we hold; credit as far as xterm.js has parsed
      for (const r of [this.rx[1], this.rx[2]]) {
        r.limitSent = Math.max(r.next, r.delivered + WINDOW);
        r.acked = r.delivered;
      }
      // RESUME once ATTACHED came: a page that reconnects holds what it
      // showed, even when nothing came yet (no snapshot in its place)
      this.send(enc.attach(this.rx[1].next, this.rx[1].limitSent, this.rx[2].next, this.rx[2].limitSent, 0, 0, this.held));
      this.ping();
      return;
    }
    if (f.type === T.HELLO) { this.fail(ERR.PROTOCOL, 'second HELLO'); return; }
    if (f.channel !== 0 && f.channel !== CH) { this.fail(ERR.PROTOCOL, `frame for channel ${f.channel}`); return; }
    try { this.handle(f); } catch (e) { this.fail(ERR.PROTOCOL, e.message); }
  }

  handle(f) {
    switch (f.type) {
      case T.PING: this.send(enc.pong(f.tsBytes)); break;
      case T.PONG: {
        const now = BigInt(Math.round(performance.timeOrigin * 1000 + performance.now() * 1000));
        if (now >= f.ts) { this.rtt = Number(now - f.ts) / 1000; this.on.rtt?.(this.rtt); }
        break;
      }
      case T.ERROR:
        this.on.error?.(`${errName(f.code)}: ${f.msg}`, f.code);
        if (f.code === ERR.NO_CHANNEL) { this.stopped = true; this.setStatus('gone', f.msg); }
        break;
      case T.ATTACHED:
        this.linked = true;
        this.held = true;
        this.attached = f.state;
        this.stdinAt(f.inNext, f.inLimit, false);
        this.setStatus('live');
        break;
      case T.ROLE:
        if (!this.linked) throw new ProtocolError('ROLE before ATTACHED');
        this.stdinAt(f.inNext, f.inLimit, true);
        if (f.role !== this.role) { this.role = f.role; }
        this.on.role?.(this.role);
        if (this.role === WRITER) this.sendSize();
        break;
      case T.VIEWERS: this.viewers = f.viewers; this.on.viewers?.(f.viewers); break;
      case T.ACK:
        if (f.flags !== STDIN) break;
        if (f.ack > this.in.base) { // the host holds these: release them
          const drop = Math.min(f.ack - this.in.base, this.in.buf.length);
          this.in.buf = this.in.buf.subarray(drop); this.in.base = f.ack;
          if (this.in.sent < f.ack) this.in.sent = f.ack;
        }
        if (f.limit > this.in.limit) this.in.limit = f.limit;
        this.pump();
        break;
      case T.DATA: this.onData(f); break;
      case T.GAP: this.onGap(f); break;
      case T.SNAPSHOT: this.onSnapshot(f); break;
      case T.EOF:
        if (f.flags !== STDIN) {
          if (f.offset !== this.rx[f.flags].next) throw new ProtocolError('EOF before all output');
          if (f.flags === STDOUT) this.eof = true;
        }
        break;
      case T.EXIT:
        if (f.outEnd !== this.rx[1].next || f.errEnd !== this.rx[2].next) throw new ProtocolError('EXIT before all output');
        if (!this.exit) {
          this.exit = { code: f.code, signo: f.signo, core: f.core };
          this.eof = true;
          // shown once xterm.js has drawn everything before it
          this.term.write(new Uint8Array(0), () => this.on.exit?.(this.exit));
        }
        break;
      case T.CLOSE: this.stopped = true; this.setStatus('closed', 'the terminal was closed'); break;
      default: break;
    }
  }

  // ---- stdout: xterm.js parses, then we credit -----------------------------

  onData(f) {
    if (f.flags === STDIN) throw new ProtocolError('stdin DATA from the host');
    const r = this.rx[f.flags];
    if (f.offset > r.next) throw new ProtocolError(`hole in stream ${f.flags}: got ${f.offset}, want ${r.next}`);
    const skip = r.next - f.offset;
    if (skip >= f.bytes.length) return; // already held (guard after a resume)
    if (f.offset + f.bytes.length > r.limitSent) throw new ProtocolError('output beyond the credit');
    const bytes = f.bytes.slice(skip);
    const end = f.offset + f.bytes.length;
    r.next = end;
    this.stats.dataFrames++;
    const s = f.flags;
    this.term.write(bytes, () => this.delivered(s, end));
    const p = this.pending();
    if (p > this.stats.maxPending) this.stats.maxPending = p;
  }

  delivered(s, end) {
    const r = this.rx[s];
    if (end > r.delivered) r.delivered = end;
    this.grant(STDOUT); this.grant(STDERR); // (a stream held back by the other's backlog too)
  }

  // Raise the host's credit to delivered + WINDOW when that moves it by a
  // quarter window; never while xterm.js still holds more than MAX_PENDING.
  // Once the stream is quiet for SETTLE_MS, acknowledge what was delivered
  // however little, so that the host may free its output ring.
  grant(s) {
    if (!this.ready || !this.linked) return;
    if (this.pending() > MAX_PENDING) return;
    const r = this.rx[s];
    const limit = r.delivered + WINDOW;
    if (limit - r.limitSent >= WINDOW / 4) {
      r.limitSent = limit;
      r.acked = r.delivered;
      this.stats.acks++;
      this.send(enc.ack(s, r.delivered, limit));
    }
    clearTimeout(r.settle);
    if (r.delivered > r.acked) {
      r.settle = setTimeout(() => {
        if (!this.ready || !this.linked || r.delivered <= r.acked) return;
        r.acked = r.delivered;
        r.limitSent = Math.max(r.limitSent, r.delivered + WINDOW);
        this.stats.acks++;
        this.send(enc.ack(s, r.delivered, r.limitSent));
      }, SETTLE_MS);
    }
  }

  onGap(f) {
    if (f.flags === STDIN) throw new ProtocolError('stdin GAP from the host');
    const r = this.rx[f.flags];
    if (f.from !== r.next) throw new ProtocolError(`GAP from ${f.from}, want ${r.next}`);
    const resync = r.next > 0; // a fresh client's GAP is its catch-up
    r.next = f.to;
    if (r.limitSent < f.to) r.limitSent = f.to;
    const g = { stream: f.flags, from: f.from, to: f.to, resync };
    if (f.flags === STDOUT) this.gaps.push(g);
    const s = f.flags;
    this.term.write(new Uint8Array(0), () => this.delivered(s, f.to));
    if (resync) this.on.gap?.(g);
  }

  onSnapshot(f) {
    this.snapParts.push(f.bytes.slice());
    this.snapLen += f.bytes.length;
    if (this.snapLen > MAX_SNAPSHOT) throw new ProtocolError('snapshot too big');
    if (f.flags & 1) return; // MORE
    const bytes = new Uint8Array(this.snapLen);
    let o = 0;
    for (const b of this.snapParts) { bytes.set(b, o); o += b.length; }
    this.snapParts = []; this.snapLen = 0;
    // (an older offset is allowed: we then hold bytes beyond it, so the screen
    // would not be reproducible; only a snapshot at our offset is applied)
    if (f.offset !== this.rx[STDOUT].next) return;
    this.snapshots++;
    const { cols, rows, offset } = f;
    // after everything before it is parsed: a clean terminal of the
    // snapshot's size, then the redraw
    this.term.write(new Uint8Array(0), () => {
      this.term.reset();
      if (cols && rows && (this.term.cols !== cols || this.term.rows !== rows)) this.term.resize(cols, rows);
    });
    this.term.write(bytes, () => {
      this.on.snapshot?.({ cols, rows, offset });
      if (this.role === WRITER) this.sendSize();
    });
  }

  // Ask for a fresh screen (the terminal was resized by another writer).
  requestSnapshot() { if (this.linked) this.send(enc.snapshotReq()); }

  // ---- stdin -----------------------------------------------------------------

  // ATTACHED or ROLE: stdin goes on at inNext with credit inLimit (§7, §9).
  stdinAt(inNext, inLimit, isRole) {
    const i = this.in;
    const end = i.base + i.buf.length;
    if (isRole) {
      // what was never sent is dropped; what was sent from inNext on goes again
      if (inNext >= i.base && inNext <= i.sent) i.buf = i.buf.subarray(inNext - i.base, i.sent - i.base);
      else i.buf = new Uint8Array(0);
    } else if (inNext >= i.base && inNext <= end) {
      i.buf = i.buf.subarray(inNext - i.base);
    } else {
      i.buf = new Uint8Array(0); // beyond what we wrote: another writer typed
    }
    i.base = inNext; i.sent = inNext; i.limit = inLimit;
    this.pump();
  }

  // Keystrokes, pastes and terminal replies from xterm.js. A viewer's stay
  // here (dropped): returns false.
  input(data) {
    if (this.role !== WRITER || !this.linked || this.exit) return false;
    const b = typeof data === 'string' ? utf8.encode(data) : data;
    if (this.in.buf.length + b.length > MAX_IN_BUF) { this.on.error?.('input buffer full: keystrokes dropped'); return false; }
    const nb = new Uint8Array(this.in.buf.length + b.length);
    nb.set(this.in.buf); nb.set(b, this.in.buf.length);
    this.in.buf = nb;
    this.pump();
    return true;
  }

  pump() {
    if (!this.ready || !this.linked) return;
    const i = this.in;
    const end = i.base + i.buf.length;
    while (i.sent < end && i.sent < i.limit) {
      const n = Math.min(end - i.sent, i.limit - i.sent, IN_CHUNK);
      const from = i.sent - i.base;
      this.send(enc.data(STDIN, i.sent, i.buf.subarray(from, from + n)));
      i.sent += n;
    }
  }

  // ---- writer controls ---------------------------------------------------------

  sendSize() {
    if (this.role !== WRITER || !this.linked) return;
    const s = this.fitSize();
    if (!s) return;
    this.send(enc.resize(s.cols, s.rows));
  }

  takeover() { if (this.linked) this.send(enc.takeover()); }
  signal(signo) { if (this.role === WRITER && this.linked) this.send(enc.signal(signo, 0)); }
}

export function errName(code) {
  return Object.keys(ERR).find((k) => ERR[k] === code) || `error ${code}`;
}
