// The fault proxy itself (tests/tools/faultproxy.mjs), against a plain TCP
// sink and a WebSocket echo server on 127.0.0.1: each fault of its table
// fires and does what it says (a cut at the drawn byte, a cut inside a
// frame's payload, an RST, a stall, a delay, a rate, an idle cut, an age
// cut), and the same seed draws the same cut points again.
import net from 'node:net';
import { WebSocketServer, WebSocket } from 'ws';
import { run, check, sleep, waitFor, onCleanup } from '../interop/harness.mjs';
import { startFaultProxy } from '../tools/faultproxy.mjs';

// A TCP server that counts what it receives per connection and, on
// demand, sends `bytes` to each new connection.
async function sink({ send = 0 } = {}) {
  const got = [];
  const server = net.createServer((s) => {
    const rec = { n: 0, closed: false, err: null };
    got.push(rec);
    s.on('data', (b) => { rec.n += b.length; });
    s.on('error', (e) => { rec.err = e.code; });
    s.on('close', () => { rec.closed = true; });
    if (send) s.end(Buffer.alloc(send, 0x61));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  onCleanup(() => new Promise((r) => server.close(r)));
  return { port: server.address().port, got };
}

// Connect through the proxy; resolves the socket and what it receives.
function client(port) {
  const s = net.connect(port, '127.0.0.1');
  const c = { s, n: 0, closed: false, err: null, chunks: [] };
  s.on('data', (b) => { c.n += b.length; c.chunks.push({ t: Date.now(), n: b.length }); });
  s.on('error', (e) => { c.err = e.code; });
  s.on('close', () => { c.closed = true; });
  onCleanup(() => s.destroy());
  return c;
}

await run('fault_proxy', async () => {
  // ---- cut at a random byte, upwards: the target gets exactly that many
  const t = await sink();
  let p = await startFaultProxy({ target: t.port, seed: 7, quiet: true,
    faults: [{ fault: 'cut', dir: 'up', bytes: [100000, 200000], times: 1 }] });
  let c = client(p.port);
  c.s.write(Buffer.alloc(1000000, 1));
  await waitFor(() => c.closed && t.got[0]?.closed, 5000, 'the cut');
  const at = p.events[0].at;
  check(p.fired('cut') === 1 && at >= 100000 && at <= 200000, `a cut fired once, at byte ${at} of [100000, 200000]`);
  check(t.got[0].n === at, `the target got exactly ${at} bytes (${t.got[0].n})`);
  await p.close();
  // the same seed draws the same byte; another seed another
  p = await startFaultProxy({ target: t.port, seed: 7, quiet: true, faults: [{ fault: 'cut', dir: 'up', bytes: [100000, 200000] }] });
  c = client(p.port); c.s.write(Buffer.alloc(1000000, 1));
  await waitFor(() => p.events.length, 5000, 'the replayed cut');
  check(p.events[0].at === at, `seed 7 again: the cut falls at the same byte (${p.events[0].at})`);
  await p.close();
  p = await startFaultProxy({ target: t.port, seed: 8, quiet: true, faults: [{ fault: 'cut', dir: 'up', bytes: [100000, 200000] }] });
  c = client(p.port); c.s.write(Buffer.alloc(1000000, 1));
  await waitFor(() => p.events.length, 5000, 'the other seed\'s cut');
  check(p.events[0].at !== at, `seed 8: another byte (${p.events[0].at})`);
  await p.close();

  // ---- reset, downwards: the client sees ECONNRESET
  const big = await sink({ send: 4000000 });
  p = await startFaultProxy({ target: big.port, quiet: true, faults: [{ fault: 'reset', dir: 'down', bytes: [50000, 60000] }] });
  c = client(p.port);
  await waitFor(() => c.closed, 5000, 'the reset');
  // (the side that writes sees the RST: the client, which reads only, may
  // be told of it as an end, depending on when it arrives)
  await waitFor(() => big.got[0]?.closed, 5000, 'the target to see the reset');
  check(p.fired('reset') === 1 && /ECONNRESET|EPIPE/.test(big.got[0].err), `a reset fired and the target writing to it got ${big.got[0].err}`);
  check(c.n <= p.events[0].at, `the client got at most the bytes before it (${c.n} <= ${p.events[0].at})`);
  await p.close();

  // ---- cut inside a WebSocket frame
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.on('listening', r));
  onCleanup(() => new Promise((r) => { for (const w of wss.clients) w.terminate(); wss.close(r); }));
  wss.on('connection', (ws) => { for (let i = 0; i < 50; i++) ws.send(Buffer.alloc(10000 + i, i)); });
  p = await startFaultProxy({ target: wss.address().port, quiet: true, seed: 3,
    faults: [{ fault: 'cut-frame', dir: 'down', bytes: [100000, 150000] }] });
  const sizes = [];
  const ws = new WebSocket(`ws://127.0.0.1:${p.port}/`);
  ws.on('message', (m) => sizes.push(m.length));
  ws.on('error', () => {});
  const closed = new Promise((r) => ws.on('close', r));
  await closed;
  const ev = p.events[0];
  check(p.fired('cut-frame') === 1 && ev.frame && ev.at > ev.frame.start + ev.frame.header &&
    ev.at < ev.frame.start + ev.frame.header + ev.frame.payload,
  `the cut fell inside a frame's payload (byte ${ev.at}, frame at ${ev.frame?.start}, header ${ev.frame?.header}, payload ${ev.frame?.payload})`);
  check(sizes.length >= 9 && sizes.length < 50 && sizes.every((n, i) => n === 10000 + i),
    `the client got ${sizes.length} whole messages before it, none torn`);
  await p.close();

  // ---- stall, then unstall: nothing passes meanwhile, all of it after
  p = await startFaultProxy({ target: t.port, quiet: true });
  c = client(p.port);
  await waitFor(() => p.open === 1, 2000, 'the connection');
  const stall = p.stall('up');
  await sleep(50);
  c.s.write(Buffer.alloc(200000, 2));
  await sleep(500);
  const last = t.got[t.got.length - 1];
  check(stall.fired === 1 && last.n === 0, `stalled: nothing reached the target in 500 ms (${last.n} bytes)`);
  p.unstall();
  await waitFor(() => last.n === 200000, 5000, 'the bytes after the stall');
  check(true, 'unstalled: all 200000 bytes arrive');
  await p.close();

  // ---- delay and throttle
  p = await startFaultProxy({ target: big.port, quiet: true, faults: [{ fault: 'delay', dir: 'down', ms: 300 },
    { fault: 'throttle', dir: 'down', rate: 1000000 }] });
  const t0 = Date.now();
  c = client(p.port);
  await waitFor(() => c.closed, 15000, 'the throttled transfer');
  const first = c.chunks[0].t - t0, total = Date.now() - t0;
  check(p.fired('delay') === 1 && first >= 290, `delay: the first byte came after ${first} ms (>= 300)`);
  check(p.fired('throttle') === 1 && c.n === 4000000 && total >= 3500 && total < 8000,
    `throttle at 1 MB/s: 4 MB took ${total} ms (4 s at that rate)`);
  await p.close();

  // ---- idle cut and age cut
  p = await startFaultProxy({ target: t.port, quiet: true, faults: [{ fault: 'idle-cut', ms: 400 }] });
  c = client(p.port);
  const busy = setInterval(() => c.s.write('x'), 100);
  await sleep(1000);
  check(!c.closed && p.fired('idle-cut') === 0, 'a connection carrying a byte every 100 ms is not idle-cut in 1 s');
  clearInterval(busy);
  await waitFor(() => c.closed, 2000, 'the idle cut');
  check(p.fired('idle-cut') === 1 && p.events[0].idle >= 400, `silent, it is cut after ${p.events[0].idle} ms`);
  await p.close();
  p = await startFaultProxy({ target: t.port, quiet: true, faults: [{ fault: 'age-cut', ms: 500 }] });
  c = client(p.port);
  const keep = setInterval(() => c.s.write('x'), 50);
  await waitFor(() => c.closed, 3000, 'the age cut');
  clearInterval(keep);
  check(p.fired('age-cut') === 1 && p.events[0].age >= 490 && p.events[0].age < 1500,
    `a busy connection is cut at its age of ${p.events[0].age} ms`);
  await p.close();

  // ---- a wrong entry is refused
  let err = '';
  try { await startFaultProxy({ target: t.port, quiet: true, faults: [{ fault: 'cut', dir: 'sideways', bytes: [1, 2] }] }); } catch (e) { err = e.message; }
  check(/parameter dir/.test(err), `an entry with a wrong parameter is refused (${err})`);
}, 60000);
