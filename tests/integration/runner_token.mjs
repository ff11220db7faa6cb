// The connection lives only as long as a valid token: it closes with code
// 4002 when its token expires, unless a fresh valid token arrives in band;
// an invalid refresh is refused (ERROR 9) and changes nothing. A silent
// peer is dropped after the idle timeout (4003). Terminals survive all of it.
import { run, check, tmpdir, keygen, mint, startRunner, sleep } from '../interop/harness.mjs';
import { Controller, enc } from '../interop/airlock.mjs';

await run('runner_token', async () => {
  const dir = tmpdir('tok');
  keygen(dir);
  const r = await startRunner({ dir, args: ['--leeway', '0', '--ping-interval', '500', '--idle-timeout', '3000'] });

  // expires: closed with 4002 and a clear reason
  const c1 = new Controller();
  const short = mint(dir, r.id, 'runner:connect', 3);
  const exp = JSON.parse(Buffer.from(short.split('.')[1], 'base64url')).exp;
  await c1.connect(r.url, { Authorization: `Bearer ${short}` });
  const t = c1.open(['sh', '-c', 'sleep 60']);
  await t.wait(() => t.opened, 'opened');
  await c1.wait(() => c1.closeInfo, 'close', 10000);
  const late = Date.now() - exp * 1000;
  check(c1.closeInfo.code === 4002, `expired token: closed with ${c1.closeInfo.code} (${c1.closeInfo.reason})`);
  check(late >= -50 && late < 1000, `closed ${late} ms after exp (within a second, not before)`);
  check(c1.errors.some((e) => e.code === 10), 'ERROR TOKEN_EXPIRED was sent before closing');

  // refreshed in band: lives past the first expiry. Every token is minted
  // before the connection (a mint is a process of its own, slow on a busy
  // machine), and the fresh one is sent a second before the first expires.
  const fresh = mint(dir, r.id, 'runner:connect', 60);
  const foreign = mint(dir, 'someone-else', 'runner:connect', 60);
  const first = mint(dir, r.id, 'runner:connect', 4);
  const firstExp = JSON.parse(Buffer.from(first.split('.')[1], 'base64url')).exp * 1000;
  const c2 = new Controller();
  await c2.connect(r.url, { Authorization: `Bearer ${first}` });
  c2.send(enc.token('not.a.token'));
  await c2.wait(() => c2.errors.some((e) => e.code === 9), 'TOKEN_INVALID').catch(() => {});
  check(c2.errors.some((e) => e.code === 9) && c2.ready, 'an invalid in-band token is refused with ERROR 9; the link stays up');
  c2.send(enc.token(foreign));
  await c2.wait(() => c2.errors.filter((e) => e.code === 9).length >= 2, 'the second ERROR 9', 5000).catch(() => {});
  check(c2.errors.filter((e) => e.code === 9).length === 2, 'a token for another audience is refused too');
  // the behaviour under test: time passing towards the first token's expiry
  await sleep(Math.max(0, firstExp - 1000 - Date.now()));
  check(c2.ready && !c2.closeInfo, 'the connection is up a second before its first token expires');
  c2.send(enc.token(fresh));
  await sleep(Math.max(0, firstExp + 2500 - Date.now())); // ... and past it, with the fresh token
  check(c2.ready && !c2.closeInfo, 'a fresh valid token keeps the connection past the first expiry');
  check(c2.pings > 2, `the runner pings at its interval (${c2.pings} pings in ~5 s at 500 ms)`);
  c2.send(enc.ping(424242));
  await c2.wait(() => c2.pongs > 0, 'pong');
  check(c2.lastPongTs === 424242n, 'a PING is answered with its own timestamp');
  // the terminal opened on the first connection is still there
  c2.send(enc.list());
  await c2.wait(() => c2.list, 'list');
  check(c2.list.some((e) => e.channel === t.id && e.state === 1), 'the terminal survived the expired connection');

  // a silent peer: stop answering pings -> 4003 after the idle timeout
  const c3 = new Controller();
  await c3.connect(r.url, { Authorization: `Bearer ${mint(dir, r.id)}` });
  c3.ws.removeAllListeners('message'); // deaf and mute from now on
  c3.ws.on('message', () => {});
  c3.ws.pause();
  await c3.wait(() => c3.closeInfo, 'idle close', 15000).catch(() => {});
  c3.ws.resume();
  await c3.wait(() => c3.closeInfo, 'idle close', 5000);
  check([4003, 1006].includes(c3.closeInfo.code), `a silent peer is dropped (${c3.closeInfo.code})`);
});
