// The web page's JavaScript without a browser: web/client.js decodes every
// host → client vector of docs/protocol.md §12 (and refuses the others and
// malformed frames), encodes the client's frames byte for byte; TerminalLink
// (with a fake WebSocket and a fake xterm.js) acknowledges output only as
// the terminal parses it, never lets more than a window wait unparsed,
// resumes with its offset, follows ROLE and drops a viewer's keystrokes;
// web/replay.js parses asciicast v3/v2, compresses idle time and plays to
// the end through seeks.
import fs from 'node:fs';
import path from 'node:path';
import { run, check, SRC } from '../interop/harness.mjs';

// import the page's modules as they are served (no package.json "type")
const load = (f) => import(`data:text/javascript;base64,${fs.readFileSync(path.join(SRC, 'web', f)).toString('base64')}`);
const C = await load('client.js');
const R = await load('replay.js');

function vectors() {
  const md = fs.readFileSync(path.join(SRC, 'docs', 'protocol.md'), 'utf8');
  const block = md.slice(md.indexOf('vector HELLO'));
  const out = {};
  let name = null;
  for (const line of block.split('\n')) {
    const m = /^vector (\w+)/.exec(line);
    if (m) { name = m[1]; out[name] = []; continue; }
    if (line.startsWith('```')) break;
    if (name && line.trim()) out[name].push(...line.trim().split(/\s+/).map((x) => parseInt(x, 16)));
  }
  for (const k of Object.keys(out)) out[k] = Uint8Array.from(out[k]);
  return out;
}
const hex = (b) => Buffer.from(b).toString('hex');
const throws = (fn) => { try { fn(); return false; } catch (e) { return e instanceof C.ProtocolError; } };

await run('web_codec', async () => {
  const v = vectors();
  check(Object.keys(v).length >= 26 && v.VIEWERS && v.HELLO, `read ${Object.keys(v).length} vectors from docs/protocol.md`);

  // ---- decoding what a host sends
  let f = C.decode(v.HELLO);
  check(f.type === C.T.HELLO && f.vmin === 1 && f.vmax === 1 && f.role === 1 && f.maxFrame === 65546 && f.name === 'runner', 'HELLO');
  f = C.decode(v.PING); check(f.ts === 1000000n, 'PING');
  f = C.decode(v.ERROR); check(f.code === 5 && f.channel === 7 && f.msg === 'no such channel', 'ERROR');
  f = C.decode(v.DATA_STDOUT);
  check(f.flags === 1 && f.offset === 4096 && Buffer.from(f.bytes).toString() === '\x1b[1mhi\x1b[0m\r\n', 'DATA (stdout)');
  f = C.decode(v.ACK); check(f.ack === 4096 && f.limit === 4096 + 512 * 1024, 'ACK');
  f = C.decode(v.EOF); check(f.flags === 0 && f.offset === 3, 'EOF');
  f = C.decode(v.EXIT); check(f.code === 3 && f.signo === 0 && f.outEnd === 4107 && f.errEnd === 0, 'EXIT');
  f = C.decode(v.EXIT_SIGNAL); check(f.code === -1 && f.signo === 9 && f.outEnd === 10 && f.errEnd === 2, 'EXIT (signal)');
  f = C.decode(v.CLOSE); check(f.type === C.T.CLOSE, 'CLOSE');
  f = C.decode(v.ATTACHED); check(f.state === 1 && f.inNext === 3 && f.inLimit === 3 + 512 * 1024, 'ATTACHED');
  f = C.decode(v.GAP); check(f.flags === 1 && f.from === 0 && f.to === 1 << 20, 'GAP');
  f = C.decode(v.SNAPSHOT);
  check(f.offset === 4107 && f.cols === 80 && f.rows === 24 && (f.flags & 1) === 0 && Buffer.from(f.bytes).toString() === '\x1b[H\x1b[2Jhi', 'SNAPSHOT');
  f = C.decode(v.ROLE); check(f.role === C.WRITER && f.inNext === 3 && f.inLimit === 3 + 512 * 1024, 'ROLE');
  f = C.decode(v.VIEWERS);
  check(f.viewers.length === 2 && f.viewers[0].name === 'alice' && f.viewers[0].role === 1 && f.viewers[1].name === 'bob' && f.viewers[1].role === 2, 'VIEWERS');
  check(C.decode(v.OPENED).type === C.T.OPENED && C.decode(v.LIST_REPLY).type === C.T.LIST_REPLY, 'OPENED and LIST_REPLY decode (and are ignored)');
  for (const k of ['TOKEN', 'LIST', 'OPEN', 'RESIZE', 'SIGNAL', 'ATTACH', 'SNAPSHOT_REQ', 'TAKEOVER']) {
    check(throws(() => C.decode(v[k])), `${k} (controller to host) is refused as a protocol error`);
  }

  // ---- strictness
  const mut = (b, fn) => { const c = Uint8Array.from(b); fn(c); return c; };
  check(throws(() => C.decode(v.ROLE.subarray(0, 9))), 'a short frame is refused');
  check(throws(() => C.decode(Uint8Array.from([...v.CLOSE, 0]))), 'a frame longer than its length is refused');
  check(throws(() => C.decode(mut(v.ROLE, (c) => { c[10] = 3; }))), 'ROLE with role 3 is refused');
  check(throws(() => C.decode(mut(v.ROLE, (c) => { c[1] = 1; }))), 'unused flag bits are refused');
  check(throws(() => C.decode(mut(v.DATA_STDOUT, (c) => { c[1] = 3; }))), 'DATA for stream 3 is refused');
  check(throws(() => C.decode(mut(v.PING, (c) => { c[5] = 1; }))), 'a connection frame on a channel is refused');
  check(throws(() => C.decode(mut(v.CLOSE, (c) => { c[5] = 0; }))), 'a channel frame on channel 0 is refused');
  check(throws(() => C.decode(mut(v.GAP, (c) => { c[23] = 0; }))), "an empty GAP is refused");
  const vw = Uint8Array.from([...v.VIEWERS, 7]); new DataView(vw.buffer).setUint32(6, 17);
  check(throws(() => C.decode(vw)), 'VIEWERS with trailing bytes is refused');
  const unk = Uint8Array.from([0x7f, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
  let code = 0; try { C.decode(unk); } catch (e) { code = e.code; }
  check(code === C.ERR.UNKNOWN_TYPE, 'an unknown type is UNKNOWN_TYPE');

  // ---- encoding what the client sends
  check(hex(C.enc.attach(4096, 4096 + 512 * 1024, 0, 512 * 1024, 80, 24)) === hex(v.ATTACH), 'ATTACH encodes as the vector');
  check(hex(C.enc.data(0, 0, Buffer.from('ls\r'))) === hex(v.DATA_STDIN), 'DATA (stdin) encodes as the vector');
  check(hex(C.enc.ack(1, 4096, 4096 + 512 * 1024)) === hex(v.ACK), 'ACK encodes as the vector');
  check(hex(C.enc.resize(132, 43)) === hex(v.RESIZE), 'RESIZE encodes as the vector');
  check(hex(C.enc.signal(2, 0)) === hex(v.SIGNAL), 'SIGNAL encodes as the vector');
  check(hex(C.enc.close()) === hex(v.CLOSE) && hex(C.enc.takeover()) === hex(v.TAKEOVER) && hex(C.enc.snapshotReq()) === hex(v.SNAPSHOT_REQ),
    'CLOSE, TAKEOVER, SNAPSHOT_REQ encode as the vectors');
  check(hex(C.enc.ping(1000000)) === hex(v.PING) && hex(C.enc.pong(C.decode(v.PING).tsBytes)) === hex(v.PONG), 'PING and PONG encode as the vectors');
  f = C.decode(C.enc.hello('browser'));
  check(f.role === 2 && f.vmin === 1 && f.vmax === 1 && f.name === 'browser' && f.maxFrame === 65546, 'HELLO as a controller');

  // ---- TerminalLink with a fake socket and a fake xterm.js
  const sent = [];
  const raw = (b) => { const u = Uint8Array.from(b); const d = new DataView(u.buffer); return { type: u[0], flags: u[1], u, d }; };
  class FakeWS {
    constructor(url, protos) { this.url = url; this.protos = protos; this.readyState = 0; FakeWS.last = this; }
    send(b) { sent.push(raw(b)); }
    close() { this.readyState = 3; }
  }
  FakeWS.OPEN = 1;
  globalThis.WebSocket = FakeWS;
  const writes = [];
  const term = {
    cols: 80, rows: 24,
    write(data, cb) { writes.push({ data, cb }); },
    reset() { this.resets = (this.resets || 0) + 1; },
    resize(c, r) { this.cols = c; this.rows = r; },
  };
  const parse = (n = writes.length) => { for (const w of writes.splice(0, n)) if (w.cb) w.cb(); };
  const link = new C.TerminalLink({ url: 'ws://x/v1/terminals/t/attach', term, fitSize: () => { term.resize(100, 30); return { cols: 100, rows: 30 }; } });
  const recv = (b) => link.onMessage(Uint8Array.from(b).buffer);
  const hostHello = v.HELLO;
  link.start();
  const ws1 = FakeWS.last;
  check(ws1.protos[0] === 'airlock.v1', 'the socket offers the airlock.v1 subprotocol');
  ws1.readyState = 1; ws1.onopen();
  check(sent.length === 1 && sent[0].type === C.T.HELLO, 'HELLO first');
  recv(hostHello);
  const att = sent.find((x) => x.type === C.T.ATTACH);
  check(att && att.d.getBigUint64(10) === 0n && att.d.getBigUint64(18) === BigInt(C.WINDOW), 'ATTACH channel 1 from 0 with a window of credit');
  check(att.d.getUint8(1) === 0, 'the first ATTACH does not say RESUME (a fresh page may get a snapshot)');
  link.handle({ type: C.T.ATTACHED, state: 1, inNext: 0, inLimit: 0 });
  link.handle({ type: C.T.ROLE, role: C.VIEWER, inNext: 0, inLimit: 0 });
  check(link.input('ls\r') === false && !sent.some((x) => x.type === C.T.DATA), "a viewer's keystrokes are dropped, nothing is sent");
  // output: 64 KiB frames, not parsed yet: no ACK, and the host's credit is never exceeded
  const chunk = new Uint8Array(65528).fill(0x79);
  let off = 0;
  for (let i = 0; i < 8; i++) { link.handle({ type: C.T.DATA, flags: 1, offset: off, bytes: chunk }); off += chunk.length; }
  check(!sent.some((x) => x.type === C.T.ACK), 'no ACK while xterm.js has parsed nothing');
  check(throws(() => link.handle({ type: C.T.DATA, flags: 1, offset: off, bytes: chunk })), 'output beyond the granted window is a protocol error');
  parse(2);
  check(!sent.some((x) => x.type === C.T.ACK), 'parsed 2 frames: credit would rise by less than a quarter window, no ACK yet');
  parse(1);
  const acks = () => sent.filter((x) => x.type === C.T.ACK).map((x) => [Number(x.d.getBigUint64(10)), Number(x.d.getBigUint64(18))]);
  check(acks().length === 1 && acks()[0][0] === 3 * 65528 && acks()[0][1] === 3 * 65528 + C.WINDOW,
    `parsed 3 frames: ACK of exactly what was parsed, credit = parsed + window (${JSON.stringify(acks())})`);
  parse();
  check(link.stats.maxPending <= C.WINDOW, `never more than a window unparsed (${link.stats.maxPending})`);
  // resume: the socket drops, the new connection asks for exactly what it lacks
  ws1.onclose({ code: 1006, reason: '' });
  await new Promise((r) => setTimeout(r, 400));
  const ws2 = FakeWS.last;
  check(ws2 !== ws1, 'the link reconnects by itself');
  sent.length = 0; ws2.readyState = 1; ws2.onopen(); recv(hostHello);
  const att2 = sent.find((x) => x.type === C.T.ATTACH);
  check(att2 && Number(att2.d.getBigUint64(10)) === off, `the new ATTACH asks for stdout from ${off}, what the page holds`);
  check(att2.d.getUint8(1) === 1, 'a reconnect ATTACH says RESUME (the page holds what came before, even none)');
  // writer: stdin within credit, resent from the host's in_next
  link.handle({ type: C.T.ATTACHED, state: 1, inNext: 5, inLimit: 5 });
  link.handle({ type: C.T.ROLE, role: C.WRITER, inNext: 5, inLimit: 8 });
  check(sent.some((x) => x.type === C.T.RESIZE && x.d.getUint16(10) === 100 && x.d.getUint16(12) === 30), 'as the writer the page sends its fitted size');
  link.input('hello');
  let ins = sent.filter((x) => x.type === C.T.DATA);
  check(ins.length === 1 && Number(ins[0].d.getBigUint64(10)) === 5 && Buffer.from(ins[0].u.subarray(18)).toString() === 'hel',
    'stdin goes out at in_next, only within the credit');
  link.handle({ type: C.T.ACK, flags: 0, ack: 8, limit: 20 });
  ins = sent.filter((x) => x.type === C.T.DATA);
  check(ins.length === 2 && Number(ins[1].d.getBigUint64(10)) === 8 && Buffer.from(ins[1].u.subarray(18)).toString() === 'lo', 'the rest follows the new credit');
  // GAP then SNAPSHOT: reset and the snapshot's size, after what was queued
  link.handle({ type: C.T.GAP, flags: 1, from: off, to: off + 1000 });
  link.handle({ type: C.T.SNAPSHOT, flags: 0, offset: off + 1000, cols: 90, rows: 20, bytes: Buffer.from('\x1b[H\x1b[2Jsnap') });
  check(term.resets === undefined, 'nothing is reset before xterm.js parsed what came before');
  let resized = null;
  const rs = term.resize; term.resize = function (c2, r2) { if (!resized) resized = [c2, r2]; rs.call(this, c2, r2); };
  parse();
  check(term.resets === 1 && resized.join() === '90,20' && term.cols === 100 && link.snapshots === 1,
    `the snapshot resets the terminal at its size, then the writer fits it again (${resized} then ${term.cols}x${term.rows})`);
  link.stop();

  // ---- replay
  const cast = [
    '{"version":3,"term":{"cols":20,"rows":5,"type":"xterm-256color"},"timestamp":1700000000,"idle_time_limit":1.5,"command":"/bin/sh"}',
    '[0.250000,"o","hello "]', '# a comment', '[0.000000,"m","start"]', '[10.000000,"o","world\\r\\n"]',
    '[0.100000,"i","ls\\r"]', '[0.500000,"r","30x6"]', '[3.000000,"m","end"]', '[0.000001,"o","bye"]', '[0.000000,"x","0"]', '',
  ].join('\n');
  const c = R.parseCast(cast);
  check(c.header.cols === 20 && c.header.rows === 5 && c.header.idleLimit === 1.5 && c.events.length === 8, 'a v3 recording parses');
  const dur = R.compressIdle(c.events, 1.5);
  check(Math.abs(c.events[2].raw - 10.25) < 1e-9 && Math.abs(c.events[2].t - 1.75) < 1e-9 && Math.abs(dur - 3.850001) < 1e-6,
    `idle time is cut to the limit (10 s pause shown as 1.5 s; ${dur.toFixed(6)} s in all)`);
  check(R.compressIdle(c.events, 0) > 13.8, 'without compression the recorded times');
  const v2 = R.parseCast('{"version":2,"width":10,"height":3}\n[0.5,"o","a"]\n[1.5,"o","b"]\n');
  check(v2.header.cols === 10 && v2.events[1].raw === 1.5, 'a v2 recording parses (absolute times)');
  for (const [bad, why] of [['{"version":4,"term":{"cols":1,"rows":1}}', 'version 4'], ['{"version":3,"term":{"cols":0,"rows":1}}', 'size 0'],
    ['{"version":3,"term":{"cols":5,"rows":1}}\n[1,"o"]', 'a short event'], ['{"version":3,"term":{"cols":5,"rows":1}}\n[1,"r","5y5"]', 'a bad resize'],
    ['{"version":2,"width":5,"height":1}\n[2,"o","a"]\n[1,"o","b"]', 'v2 time going back'], ['not json', 'garbage']]) {
    let ok = false; try { R.parseCast(bad); } catch (e) { ok = e instanceof R.CastError; }
    check(ok, `refused: ${why}`);
  }
  // the player through a fake terminal: seek to the end, back, to the end
  const out = [];
  const t2 = {
    cols: 0, rows: 0, text: '',
    write(d, cb) { out.push(() => { if (typeof d === 'string') this.text += d; if (cb) cb(); }); setTimeout(() => { const w = out.shift(); if (w) w(); }, 0); },
    reset() { this.text = ''; }, resize(a, b) { this.cols = a; this.rows = b; },
  };
  globalThis.requestAnimationFrame = (fn) => setTimeout(fn, 5); globalThis.cancelAnimationFrame = clearTimeout;
  globalThis.document = { hidden: false };
  let exit = null;
  const pl = new R.Player(t2, c, { exit: (x) => { exit = x; } });
  check(pl.markers.length === 2 && pl.markers[0].label === 'start' && Math.abs(pl.markers[1].t - 3.85) < 1e-3, 'markers with their times');
  pl.seek(pl.duration);
  await new Promise((r) => pl.whenDrawn(r));
  check(t2.text === 'hello world\r\nbye' && t2.cols === 30 && t2.rows === 6 && exit === '0', `seek to the end draws everything (${JSON.stringify(t2.text)} ${t2.cols}x${t2.rows})`);
  pl.seek(1);
  await new Promise((r) => pl.whenDrawn(r));
  check(t2.text === 'hello ' && t2.cols === 20, 'seek back to 1 s redraws from the start: only what came before');
  pl.setSpeed(16); pl.play();
  await new Promise((r) => { const w = () => (!pl.playing && pl.drawn ? r() : setTimeout(w, 10)); w(); });
  check(t2.text === 'hello world\r\nbye', 'playing at 16× reaches the same end');
}, 60000);
