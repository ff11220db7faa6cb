// Replay of an asciicast recording (docs/recording.md) into an xterm.js
// Terminal: play/pause, speed, a timeline to seek, idle time compressed,
// markers.
//
// Data model: parseCast() turns the file into a header and a list of events
// { t, raw, code, data } where raw is the event's time in seconds since the
// start as recorded and t the time on the player's clock: the same with
// every pause between two events cut to at most `idleLimit` seconds. The
// player keeps `target` (the clock: where playback stands) and `cursor`
// (the index of the first event not yet handed to xterm.js). It hands
// events over in order as the clock passes them, and never leaves more
// than MAX_PENDING characters unparsed in xterm.js, so a long recording
// neither blocks the tab nor overflows xterm.js's write buffer.

const MAX_PENDING = 1 << 20;   // characters handed to xterm.js, not parsed yet
const BATCH = 64 * 1024;       // characters per write
const DEFAULT_IDLE = 2;        // seconds, when the header sets no limit

export class CastError extends Error {}

// Parse an asciicast v3 (or v2) file. Strict enough to refuse garbage,
// lenient where the spec says players must be (unknown codes, members).
export function parseCast(text) {
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  if (!lines.length) throw new CastError('empty recording');
  let h;
  try { h = JSON.parse(lines[0]); } catch { throw new CastError('line 1: the header is not JSON'); }
  if (!h || typeof h !== 'object' || Array.isArray(h)) throw new CastError('line 1: the header is not an object');
  const header = { version: h.version, idleLimit: null, title: h.title || '', command: h.command || '' };
  if (h.version === 3) {
    header.cols = h.term && h.term.cols; header.rows = h.term && h.term.rows;
  } else if (h.version === 2) {
    header.cols = h.width; header.rows = h.height;
  } else {
    throw new CastError(`line 1: unsupported version ${h.version}`);
  }
  const okSize = (n) => Number.isInteger(n) && n >= 1 && n <= 4096;
  if (!okSize(header.cols) || !okSize(header.rows)) throw new CastError('line 1: bad terminal size');
  if (typeof h.idle_time_limit === 'number' && h.idle_time_limit > 0) header.idleLimit = h.idle_time_limit;
  const events = [];
  let raw = 0;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    if (h.version === 3 && line.startsWith('#')) continue;
    let e;
    try { e = JSON.parse(line); } catch { throw new CastError(`line ${i + 1}: not JSON`); }
    if (!Array.isArray(e) || e.length !== 3 || typeof e[0] !== 'number' || !(e[0] >= 0) ||
        typeof e[1] !== 'string' || typeof e[2] !== 'string') {
      throw new CastError(`line ${i + 1}: not an event [time, code, data]`);
    }
    if (h.version === 3) raw += e[0];
    else { if (e[0] < raw) throw new CastError(`line ${i + 1}: time goes backwards`); raw = e[0]; }
    const ev = { raw, t: 0, code: e[1], data: e[2] };
    if (ev.code === 'r') {
      const m = /^(\d+)x(\d+)$/.exec(ev.data);
      if (!m || !okSize(Number(m[1])) || !okSize(Number(m[2]))) throw new CastError(`line ${i + 1}: bad resize`);
      ev.cols = Number(m[1]); ev.rows = Number(m[2]);
    }
    events.push(ev);
  }
  return { header, events };
}

// Set each event's player time: pauses longer than `limit` seconds become
// `limit` (no compression when limit is 0 or null).
export function compressIdle(events, limit) {
  let prevRaw = 0, t = 0;
  for (const e of events) {
    const dt = e.raw - prevRaw;
    t += limit ? Math.min(dt, limit) : dt;
    e.t = t; prevRaw = e.raw;
  }
  return events.length ? events[events.length - 1].t : 0;
}

export class Player {
  // term: an xterm.js Terminal; cast: parseCast()'s result;
  // on: { time(t, duration), state('playing'|'paused'|'ended'), exit(status), resize(cols, rows) }
  constructor(term, cast, on = {}) {
    Object.assign(this, { term, cast, on });
    this.speed = 1; this.playing = false; this.target = 0; this.cursor = 0;
    this.pending = 0; this.gen = 0; this.raf = null; this.exitStatus = null;
    this.markers = [];
    this.setIdleCompression(true);
    this.restart();
  }

  get duration() { return this.dur; }

  setIdleCompression(on) {
    const limit = on ? (this.cast.header.idleLimit || DEFAULT_IDLE) : 0;
    this.idleLimit = limit;
    this.dur = compressIdle(this.cast.events, limit);
    this.markers = this.cast.events.filter((e) => e.code === 'm').map((e) => ({ t: e.t, label: e.data }));
    if (this.cursor) this.seek(Math.min(this.target, this.dur)); // times moved: redraw here
  }

  // A fresh terminal of the recording's initial size, through the write
  // queue so that nothing queued before lands after it.
  restart() {
    this.gen++;
    this.cursor = 0; this.exitStatus = null;
    const { cols, rows } = this.cast.header;
    this.term.write('', () => {
      this.term.reset();
      if (this.term.cols !== cols || this.term.rows !== rows) this.term.resize(cols, rows);
      this.on.resize?.(cols, rows);
    });
  }

  play() {
    if (this.target >= this.dur) this.seek(0);
    this.playing = true;
    this.wallStart = performance.now(); this.base = this.target;
    this.on.state?.('playing');
    this.loop();
  }

  pause() {
    this.playing = false;
    cancelAnimationFrame(this.raf); clearTimeout(this.raf);
    this.on.state?.('paused');
  }

  setSpeed(x) {
    if (!(x > 0)) return;
    if (this.playing) { this.base = this.target; this.wallStart = performance.now(); }
    this.speed = x;
  }

  seek(t) {
    t = Math.max(0, Math.min(t, this.dur));
    // backwards, or within what was already handed over: start again
    const queued = this.cursor > 0 ? this.cast.events[this.cursor - 1].t : 0;
    if (t < queued || t < this.target) this.restart();
    this.target = t;
    if (this.playing) { this.base = t; this.wallStart = performance.now(); }
    this.fill();
    this.on.time?.(this.target, this.dur);
  }

  loop() {
    if (!this.playing) return;
    this.target = Math.min(this.dur, this.base + (performance.now() - this.wallStart) / 1000 * this.speed);
    this.fill();
    this.on.time?.(this.target, this.dur);
    if (this.target >= this.dur) {
      this.playing = false;
      this.whenDrawn(() => this.on.state?.('ended'));
      return;
    }
    // requestAnimationFrame does not run in a hidden tab: fall back on a timer
    this.raf = document.hidden ? setTimeout(() => this.loop(), 50) : requestAnimationFrame(() => this.loop());
  }

  // Hand xterm.js every event up to the clock, in batches, within MAX_PENDING.
  fill() {
    const ev = this.cast.events;
    const gen = this.gen;
    let text = '';
    const flush = () => {
      if (!text) return;
      const n = text.length;
      this.pending += n;
      this.term.write(text, () => { this.pending -= n; if (gen === this.gen) this.fill(); });
      text = '';
    };
    while (this.cursor < ev.length && ev[this.cursor].t <= this.target && this.pending + text.length < MAX_PENDING) {
      const e = ev[this.cursor++];
      if (e.code === 'o') {
        text += e.data;
        if (text.length >= BATCH) flush();
      } else if (e.code === 'r') {
        flush();
        this.term.write('', () => { if (gen === this.gen) { this.term.resize(e.cols, e.rows); this.on.resize?.(e.cols, e.rows); } });
      } else if (e.code === 'x') {
        flush();
        this.exitStatus = e.data;
        this.term.write('', () => { if (gen === this.gen) this.on.exit?.(e.data); });
      }
      // 'i' (the writer's input), 'm' (markers, shown on the timeline) and
      // unknown codes draw nothing
    }
    flush();
  }

  // Everything up to the clock parsed by xterm.js?
  get drawn() {
    const ev = this.cast.events;
    return this.pending === 0 && (this.cursor >= ev.length || ev[this.cursor].t > this.target);
  }

  whenDrawn(fn) {
    const check = () => (this.drawn ? this.term.write('', fn) : setTimeout(check, 20));
    check();
  }
}
