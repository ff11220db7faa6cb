// A runner that cannot know its identifier before its first request (a
// managed platform starts a session's container, then routes the first
// request of an identifier to it): `--identifier-from request` takes the
// identifier of the first upgrade whose runner:connect token is valid for
// it, and keeps it (issue 14). Through the platform stand-in
// (tests/tools/platform_front.mjs), the runner started without an
// identifier:
// - a controller with the token of the session's identifier gets 101 and
//   runs a terminal; the runner logs the identifier it took;
// - an attacker reaching the runner's port directly with a valid token of
//   another identifier is refused (403), before and after a reconnect of
//   the rightful controller; a probe token does not pin an identifier;
// - the option's misuse is refused at start.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { run, check, tmpdir, keygen, mint, rawHttp, BIN, SRC, waitFor } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';
import { startFront, runnerSession } from '../tools/platform_front.mjs';

const API = 'api-version=2024-02-02-preview';
const upgradeReq = (id, tok) => `GET /?identifier=${id}&${API} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n` +
  'Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
  `X-Airlock-Token: Bearer ${tok}\r\n\r\n`;

await run('runner_identifier', async () => {
  const dir = tmpdir('ident');
  keygen(dir);
  const bin = path.join(BIN, 'airlock-runner');
  const jwks = path.join(dir, 'jwks.json');
  let session = null;
  const start = runnerSession(bin, jwks, ['--token-header', 'X-Airlock-Token'], { fromRequest: true });
  const front = await startFront({ startSession: async (id) => { session = await start(id); return session; } });
  const sid = 'sess-7d0c2a91f4';
  const furl = `ws://127.0.0.1:${front.port}/?identifier=${sid}&${API}`;
  const ptok = await front.mintToken();

  // the port, straight: a probe token of another identifier does not pin it
  // (the front allocates the session on the first request; reach it first)
  const probeFirst = new Controller();
  await probeFirst.connect(furl, { Authorization: `Bearer ${ptok}`, 'X-Airlock-Token': `Bearer ${mint(dir, sid, 'runner:probe', 60)}` })
    .catch(() => {});
  check(session && /identifier \(the first valid upgrade's\)/.test(session.log()), 'the runner started without an identifier');
  const other = 'sess-attacker1';
  let r = await rawHttp(session.port, upgradeReq(other, mint(dir, other, 'runner:probe', 60)));
  check(r.status === 101, `a probe token of another identifier opens a probe session (${r.status}) ...`);
  check(!/taken from the first valid upgrade/.test(session.log()), '... and pins nothing');

  // the rightful controller, through the front
  const ctl = await new Controller().connect(furl, { Authorization: `Bearer ${ptok}`, 'X-Airlock-Token': `Bearer ${mint(dir, sid, 'runner:connect', 600)}` });
  const t = ctl.open(['sh', '-c', 'echo identified-$((6*7))']);
  await t.waitOutput(/identified-42/, 10000);
  check(true, 'a controller with the session identifier\'s token runs a terminal');
  await waitFor(() => new RegExp(`identifier ${sid} taken from the first valid upgrade`).test(session.log()), 5000, 'the log line');
  check(true, `the runner logged the identifier it took (${sid})`);

  // an attacker straight at the runner's port with another sandbox's valid token
  r = await rawHttp(session.port, upgradeReq(other, mint(dir, other, 'runner:connect', 60)));
  check(r.status === 403, `another identifier's valid token at its own identifier: 403 (${r.status})`);
  r = await rawHttp(session.port, upgradeReq(sid, mint(dir, other, 'runner:connect', 60)));
  check(r.status === 403, `another identifier's token at this identifier: 403 (${r.status})`);
  check(ctl.ready && !ctl.closeInfo, 'the controller\'s link was not disturbed');
  const again = await new Controller().connect(furl, { Authorization: `Bearer ${ptok}`, 'X-Airlock-Token': `Bearer ${mint(dir, sid, 'runner:connect', 600)}` });
  check(again.ready, 'the rightful controller reconnects (and replaces its old link)');
  r = await rawHttp(session.port, upgradeReq(other, mint(dir, other, 'runner:connect', 60)));
  check(r.status === 403, 'still 403 for the other identifier after the reconnect');
  await front.close();

  // the image's start script (deploy/aca/entrypoint.sh), as the platform
  // runs it: the JWKS in AIRLOCK_JWKS, one session per identifier, the
  // pool's limit answered 404 by the front
  const img = await startFront({
    startSession: runnerSession(bin, jwks, [], { entrypoint: path.join(SRC, 'deploy/aca/entrypoint.sh') }),
    maxSessions: 1,
  });
  const iid = 'sess-image0001';
  const iurl = `ws://127.0.0.1:${img.port}/?identifier=${iid}&${API}`;
  const itok = await img.mintToken();
  const ictl = await new Controller().connect(iurl, { Authorization: `Bearer ${itok}`, 'X-Airlock-Token': `Bearer ${mint(dir, iid, 'runner:connect', 600)}` });
  const it = ictl.open(['sh', '-c', 'echo image-$((6*7)) $(id -u)']);
  await it.waitOutput(/image-42/, 10000);
  check(true, 'the image\'s entrypoint starts a runner that serves the session\'s controller');
  r = await rawHttp(img.port, upgradeReq('sess-image0002', 'x').replace('X-Airlock-Token', `Authorization: Bearer ${itok}\r\nX-Airlock-Token`));
  check(r.status === 404, `a second identifier past the pool's one session: 404 from the front (${r.status})`);
  ictl.ws.close();
  await img.close();
  const nojwks = spawnSync('sh', [path.join(SRC, 'deploy/aca/entrypoint.sh')],
    { encoding: 'utf8', timeout: 10000, env: { ...process.env, AIRLOCK_RUNNER: bin, AIRLOCK_LISTEN: '127.0.0.1:0', AIRLOCK_JWKS: '' } });
  check(nojwks.status === 64 && /no JWKS/.test(nojwks.stderr), `the entrypoint without a JWKS: exit 64 (${nojwks.stderr.trim()})`);

  // misuse refused at start
  for (const [args, why] of [
    [['--identifier-from', 'request', '--identifier', 'x'], 'with --identifier'],
    [['--identifier-from', 'env'], 'an unknown source'],
    [['--identifier-from', 'request', '--connect', 'ws://127.0.0.1:9/', '--token-file', jwks], 'with --connect'],
  ]) {
    const p = spawnSync(bin, [...(args.includes('--connect') ? [] : ['--listen', '127.0.0.1:0']), ...args, '--jwks', jwks],
      { encoding: 'utf8', timeout: 10000 });
    check(p.status !== 0 && /identifier-from|bad option/.test(p.stderr), `--identifier-from ${why}: refused (${p.stderr.trim()})`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
});
