// Limits and bad input reach the runner as clear errors, never a crash or an
// unbounded allocation: text messages, oversized messages, malformed and
// unknown frames, too many channels, a client that never finishes its
// handshake. The runner keeps serving afterwards.
import net from 'node:net';
import { run, check, tmpdir, keygen, mint, startRunner } from '../interop/harness.mjs';
import { Controller, frame } from '../interop/airlock.mjs';

await run('runner_limits', async () => {
  const dir = tmpdir('lim');
  keygen(dir);
  const r = await startRunner({ dir });
  const auth = () => ({ Authorization: `Bearer ${mint(dir, r.id)}` });

  const c1 = new Controller();
  await c1.connect(r.url, auth());
  c1.ws.send('hello as text');
  await c1.wait(() => c1.closeInfo, 'close');
  check(c1.closeInfo.code === 4000, `a text message: closed with 4000 (${c1.closeInfo.reason})`);

  const c2 = new Controller();
  await c2.connect(r.url, auth());
  c2.ws.send(Buffer.alloc(70000, 1));
  await c2.wait(() => c2.closeInfo, 'close');
  check(c2.closeInfo.code === 4004, `a 70000-byte message: closed with 4004 (${c2.closeInfo.reason})`);

  const c3 = new Controller();
  await c3.connect(r.url, auth());
  c3.send(frame(0x42, 0, 0));
  await c3.wait(() => c3.closeInfo, 'close');
  check(c3.closeInfo.code === 4000 && c3.errors.some((e) => e.code === 3 && /0x42/.test(e.msg)),
    `an unknown frame type: ERROR UNKNOWN_TYPE naming it, then 4000 (${c3.errors.map((e) => e.msg)})`);

  const c4 = new Controller();
  await c4.connect(r.url, auth());
  c4.send(Buffer.from([0x12, 0, 0, 0, 0, 1, 0, 0, 0, 3, 1, 2, 3])); // DATA shorter than its offset
  await c4.wait(() => c4.closeInfo, 'close');
  check(c4.closeInfo.code === 4000 && c4.errors.some((e) => e.code === 1), `a malformed frame: ERROR PROTOCOL, then 4000`);

  // channels per connection: the 257th is refused, the link stays up
  const c5 = new Controller();
  await c5.connect(r.url, auth());
  const chans = [];
  for (let i = 0; i < 257; i++) chans.push(c5.open(['sleep', '300'], { mode: 1 }));
  await c5.wait(() => c5.errors.some((e) => e.code === 7), 'LIMIT error', 60000);
  await c5.wait(() => chans.filter((c) => c.opened).length === 256, '256 opened', 60000);
  check(c5.ready, 'the 257th channel is refused with ERROR LIMIT; the connection stays up');
  for (const c of chans) if (c.opened) c.close();
  await c5.wait(() => chans.every((c) => !c.opened || c.closed), 'all closed', 60000);
  check(chans.filter((c) => c.closed).length === 256, 'all 256 closed again, each confirmed');

  // a client that connects and says nothing is dropped after the handshake timeout
  const t0 = Date.now();
  const closedAt = await new Promise((resolve) => {
    const s = net.connect(r.port, '127.0.0.1');
    s.on('close', () => resolve(Date.now()));
    s.on('error', () => {});
  });
  check(closedAt - t0 < 15000, `a silent TCP client is dropped after ${closedAt - t0} ms`);

  // and the runner still serves
  const c6 = new Controller();
  await c6.connect(r.url, auth());
  const t = c6.open(['sh', '-c', 'echo still here']);
  await t.waitExit();
  check(/still here/.test(t.output().toString()), 'the runner still serves after all that');
}, 150000);
