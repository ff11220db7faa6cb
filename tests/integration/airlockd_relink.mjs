// Runners that dial airlockd relink after its restart even when the token
// they started with is gone: a reverse runner's enrollment token is short
// lived (here: deleted, as an expired one would be refused), so it redials
// with the newest token airlockd handed it in band; a local runner's token
// file is rewritten by airlockd at start, linked or not. Also: the
// enrollment token's lifetime is chosen per request, within bounds.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { run, check, tmpdir, BIN, sleep, onCleanup, addLog } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach } from '../interop/airlockd.mjs';

async function waitLink(port, key, id, want = true, ms = 30000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const r = await api(port, 'GET', '/v1/sandboxes', key);
    const s = r.json && r.json.find((x) => x.id === id);
    if (s && s.link_up === want) return true;
    await sleep(100);
  }
  return false;
}

async function runPipes(port, key, sandbox, script) {
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox, argv: ['sh', '-c', script], mode: 'pipes' });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, key, { mode: 1 });
  await a.ch.waitExit(20000);
  return { code: a.ch.exit.code, out: Buffer.concat(a.ch.out).toString() };
}

await run('airlockd_relink', async () => {
  const base = tmpdir('relink');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  let d = await startAirlockd({ dir });
  const port = d.port;

  // ---- enrollment token lifetime
  let r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'rev', kind: 'reverse' });
  check(r.status === 201, 'an admin adds a reverse sandbox');
  r = await api(port, 'POST', '/v1/sandboxes/rev/enroll', admin, { ttl: 4 });
  check(r.status === 400 && /"ttl": must be an integer from 5 to 86400/.test(r.json.error),
    `an enrollment lifetime under the bound is refused: 400 (${r.json && r.json.error})`);
  r = await api(port, 'POST', '/v1/sandboxes/rev/enroll', admin, { ttl: 30, scope: 'x' });
  check(r.status === 400 && /"scope": unknown member/.test(r.json.error), 'an unknown member is refused: 400');
  r = await api(port, 'POST', '/v1/sandboxes/rev/enroll', admin, { ttl: 30 });
  check(r.status === 200 && r.json.expires_in === 30 && r.json.token, 'enroll with "ttl": 30 gives a token living 30 s');
  const claims = JSON.parse(Buffer.from(r.json.token.split('.')[1], 'base64url').toString());
  check(claims.exp - claims.iat === 30 && claims.aud === 'rev', `the token says so (exp - iat = ${claims.exp - claims.iat})`);

  // ---- a reverse runner with it
  const rdir = tmpdir('relink-rev');
  const tokfile = path.join(rdir, 'token');
  fs.writeFileSync(path.join(rdir, 'jwks.json'), JSON.stringify(r.json.jwks));
  fs.writeFileSync(tokfile, r.json.token, { mode: 0o600 });
  const rlog = path.join(rdir, 'runner.log');
  addLog(rlog);
  const rout = fs.openSync(rlog, 'a');
  const rp = spawn(path.join(BIN, 'airlock-runner'), ['--connect', r.json.url, '--identifier', 'rev',
    '--jwks', path.join(rdir, 'jwks.json'), '--token-file', tokfile, '--verbose'], { stdio: ['ignore', rout, rout] });
  fs.closeSync(rout);
  const rexit = new Promise((res) => rp.on('exit', res));
  onCleanup(async () => { rp.kill('SIGTERM'); await rexit; });
  check(await waitLink(port, admin, 'rev'), 'the reverse runner links up with its enrollment token');
  let t = await runPipes(port, op, 'rev', 'echo before; exit 4');
  check(t.code === 4 && t.out === 'before\n', 'a command runs on it');

  // ---- a local runner
  r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'loc', kind: 'local' });
  check(r.status === 201 && await waitLink(port, admin, 'loc'), 'a local sandbox links up');
  const loctok = path.join(dir, 'sandboxes', 'loc', 'run', 'token');

  // ---- airlockd goes away; both tokens the runners started with are gone
  fs.rmSync(tokfile);
  fs.writeFileSync(loctok, 'not-a-token');
  const st = await d.stop();
  check(st.code === 0, 'airlockd stops on SIGTERM (the runners keep running)');
  await sleep(500);
  d = await startAirlockd({ dir, port });
  check(await waitLink(port, admin, 'rev'), 'the reverse runner relinks without its enrollment token (the in-band one)');
  check(/dialing with the newest in-band token/.test(fs.readFileSync(rlog, 'utf8')), 'its log says which token it used');
  check(await waitLink(port, admin, 'loc'), 'the local runner relinks');
  check(fs.readFileSync(loctok, 'utf8').split('.').length === 3, 'airlockd rewrote the local runner\'s token file at start');
  t = await runPipes(port, op, 'rev', 'echo after; exit 6');
  check(t.code === 6 && t.out === 'after\n', 'reverse: a command runs end to end after the relink');
  t = await runPipes(port, op, 'loc', 'echo local-after; exit 7');
  check(t.code === 7 && t.out === 'local-after\n', 'local: a command runs end to end after the relink');
  await d.stop();
}, 180000);
