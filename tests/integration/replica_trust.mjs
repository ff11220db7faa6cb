// Trust between replicas (issue 17, third slice; docs/scale-out.md):
// three `airlockd serve --db URL` replicas on a throw-away PostgreSQL, one
// reverse sandbox whose runner dials through a forwarder the test points
// at one replica or another.
// - runner keys are pinned in the database: an impostor holding the
//   sandbox's token (copied from the runner's token file) but not its key,
//   dialing a replica that never saw the sandbox's runner, is refused (403)
//   there as at the owner, and the lease does not move; the real runner,
//   moved to a replica that never saw it, is accepted there (the same pin);
// - each replica has its own key and its own jwks.json, nothing copied:
//   every replica publishes its public keys in the database and accepts
//   the tokens of every registered replica (the enrollment token minted by
//   one and the in-band tokens of another verify where the runner lands;
//   a token minted by replica 0's key verifies at replica 2), while a
//   token signed by a key no replica published is refused; the enrollment
//   answer lists every replica's key, so the runner verifies whichever
//   replica's in-band tokens;
// - a lone airlockd (SQLite) keeps a pin an airlockd from before schema 10
//   left in its data directory: another key is refused, the pinned one
//   accepted, and the pin moves into the database.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import { run, check, tmpdir, waitFor, addLog, onCleanup, rawHttp, mint, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';
import { startPostgres } from '../interop/pg.mjs';

const psql = (db, sql) => execFileSync('psql', ['-XAtq', '-d', db, '-c', sql], { timeout: 20000 }).toString().trim();

// A TCP forwarder on 127.0.0.1 to one replica's port at a time; to() points
// it at another and cuts the connections it carries (the runner redials).
async function forwarder(port0) {
  let target = port0;
  const socks = new Set();
  const srv = net.createServer((c) => {
    const u = net.connect(target, '127.0.0.1');
    socks.add(c); socks.add(u);
    c.pipe(u); u.pipe(c);
    const end = () => { c.destroy(); u.destroy(); socks.delete(c); socks.delete(u); };
    c.on('error', end); u.on('error', end); c.on('close', end); u.on('close', end);
  });
  await new Promise((res) => srv.listen(0, '127.0.0.1', res));
  onCleanup(() => { for (const s of socks) s.destroy(); srv.close(); });
  return { port: srv.address().port, to(p) { target = p; for (const s of socks) s.destroy(); } };
}

await run('replica_trust', async () => {
  const pg = startPostgres();
  const base = tmpdir('replica-trust');
  const dirs = [0, 1, 2].map((i) => path.join(base, `data${i}`));
  const rdir = path.join(base, 'runner');
  fs.mkdirSync(rdir);
  // each replica its own key and jwks.json: nothing copied between them
  for (const d of dirs) execFileSync(path.join(BIN, 'airlockd'), ['keygen', '--data', d], { stdio: 'pipe' });
  const kidOf = (d) => JSON.parse(fs.readFileSync(path.join(d, 'jwks.json'), 'utf8')).keys.map((k) => k.kid);
  const kids = dirs.map((d) => kidOf(d)[0]);
  const admin = addUser(dirs[0], 'ada', 'admin', pg);
  const rs = [];
  for (let i = 0; i < 3; i++) rs.push(await startAirlockd({ dir: dirs[i], db: `${pg}&application_name=replica${i}` }));
  const idOf = [];
  for (const r of rs) idOf.push((await api(r.port, 'GET', '/v1/replicas', admin)).json.find((x) => x.self).id);
  const revOf = async (port) => (await api(port, 'GET', '/v1/sandboxes', admin)).json.find((x) => x.id === 'rev1');

  // ---- a reverse sandbox, its runner linked to replica 0 (the owner)
  let r = await api(rs[0].port, 'POST', '/v1/sandboxes', admin, { id: 'rev1', kind: 'reverse' });
  check(r.status === 201 && r.json.owner === idOf[0], 'a reverse sandbox owned by replica 0');
  r = await api(rs[0].port, 'POST', '/v1/sandboxes/rev1/enroll', admin, {});
  check(r.status === 200 && r.json.token, 'its enrollment token');
  const token = r.json.token;
  fs.writeFileSync(path.join(rdir, 'token'), token, { mode: 0o600 });
  const ekids = r.json.jwks.keys.map((k) => k.kid);
  check(kids.every((k) => ekids.includes(k)) && ekids.length === 3,
    `the enrollment answer's jwks lists every replica's key (${ekids.length}), the runner's jwks.json`);
  fs.writeFileSync(path.join(rdir, 'jwks.json'), JSON.stringify(r.json.jwks));
  for (let i = 0; i < 3; i++)
    check(kidOf(dirs[i]).length === 1, `replica ${i}'s own jwks.json has its own key only`);
  const pub = psql(pg, 'SELECT count(*) FROM replicas WHERE jwks IS NOT NULL');
  check(Number(pub) === 3, `each replica published its public keys in its replicas row (${pub})`);
  const fwd = await forwarder(rs[0].port);
  const rlog = path.join(base, 'reverse-runner.log');
  const out = fs.openSync(rlog, 'a');
  addLog(rlog);
  const rev = spawn(path.join(BIN, 'airlock-runner'), ['--connect', `ws://127.0.0.1:${fwd.port}/v1/runners/connect?identifier=rev1`,
    '--identifier', 'rev1', '--jwks', path.join(rdir, 'jwks.json'), '--token-file', path.join(rdir, 'token'), '--verbose'],
  { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const revExit = new Promise((res) => rev.on('exit', (code, sig) => res({ code, sig })));
  onCleanup(async () => { if (rev.exitCode === null && rev.signalCode === null) { rev.kill('SIGTERM'); await revExit; } });
  const up = await waitFor(async () => { const x = await revOf(rs[0].port); return x.link_up && x.owner === idOf[0] ? x : false; },
    10000, 'the runner to link to replica 0', 100);
  check(up.fence === 1, 'the runner is linked to replica 0, which owns the sandbox (fence 1)');

  // ---- an impostor: the runner's token, another key, at replicas that
  // never saw the runner (and at the owner)
  const upgrade = (port, key, tok = token, id = 'rev1') => rawHttp(port, `GET /v1/runners/connect?identifier=${id} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
    'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: airlock.v1\r\n' +
    `X-Airlock-Runner-Key: ${key}\r\nAuthorization: Bearer ${tok}\r\n\r\n`);
  for (const i of [1, 2, 0]) {
    const u = await upgrade(rs[i].port, 'B'.repeat(43));
    const x = await revOf(rs[i].port);
    check(u.status === 403 && x.owner === idOf[0] && x.fence === 1 && x.link_up,
      `an impostor with the runner's token and another key at replica ${i}${i ? ', which never saw the runner' : ' (the owner)'}: ${u.status}, the lease unmoved (owner replica 0, fence ${x.fence}), the runner still linked`);
    check(x.refused_links >= 1, `... counted there (refused_links ${x.refused_links})`);
  }
  const pin = psql(pg, "SELECT runner_key FROM sandboxes WHERE id = 'rev1'");
  check(/^[0-9a-f]{64}$/.test(pin), 'the runner\'s key is pinned in the database, beside the lease (a SHA-256, not the key)');
  check(!fs.existsSync(path.join(dirs[0], 'runner-keys', 'rev1')), '... not in the owner\'s data directory');

  // ---- the real runner, moved to replica 1, which never saw it: accepted
  fwd.to(rs[1].port);
  const moved = await waitFor(async () => { const x = await revOf(rs[1].port); return x.link_up && x.owner === idOf[1] ? x : false; },
    15000, 'the runner to link to replica 1', 100);
  check(moved.fence === 2, `the real runner, redialing replica 1 (never saw it) with a token replica 0 minted, is accepted: the lease moved there (fence ${moved.fence})`);
  await waitFor(() => /in-band token accepted: sub=airlockd/.test(fs.readFileSync(rlog, 'utf8').split('connected to').pop()),
    10000, "the runner to verify replica 1's in-band token", 100);
  check(!/in-band token refused/.test(fs.readFileSync(rlog, 'utf8')), "the runner verified every replica's in-band tokens (none refused)");

  // ---- tokens across replicas: minted by replica 0's key, checked at
  // replica 2 (a sandbox without a pin: the first key is pinned); a key no
  // replica published is refused before any key is looked at
  r = await api(rs[2].port, 'POST', '/v1/sandboxes', admin, { id: 'rev3', kind: 'reverse' });
  check(r.status === 201, 'another reverse sandbox, owned by replica 2');
  const stranger = path.join(base, 'stranger');
  execFileSync(path.join(BIN, 'airlockd'), ['keygen', '--data', stranger], { stdio: 'pipe' });
  let u = await upgrade(rs[2].port, 'C'.repeat(43), mint(stranger, 'rev3'), 'rev3');
  const rev3 = (await api(rs[2].port, 'GET', '/v1/sandboxes', admin)).json.find((y) => y.id === 'rev3');
  check(u.status === 403 && !rev3.refused_links, `a token signed by a key no replica published: ${u.status}, refused for its token (not counted as a key refusal)`);
  u = await upgrade(rs[2].port, 'C'.repeat(43), mint(dirs[0], 'rev3'), 'rev3');
  check(u.status === 101, `a token minted by replica 0's key, at replica 2: ${u.status} (replica 0's published key verifies it)`);
  const still = await revOf(rs[1].port);
  check(still.owner === idOf[1] && still.link_up, 'the first sandbox is untouched meanwhile');

  for (const x of rs) {
    const e = await x.stop();
    check(e.code === 0, 'a replica stops cleanly');
  }

  // ---- a lone airlockd (SQLite) with a pin from before schema 10 in its
  // data directory
  const lone = path.join(base, 'lone');
  execFileSync(path.join(BIN, 'airlockd'), ['keygen', '--data', lone], { stdio: 'pipe' });
  const ladmin = addUser(lone, 'ada', 'admin');
  const la = await startAirlockd({ dir: lone });
  r = await api(la.port, 'POST', '/v1/sandboxes', ladmin, { id: 'rev2', kind: 'reverse' });
  check(r.status === 201, 'a lone airlockd with a reverse sandbox');
  const key = 'K'.repeat(43);
  const file = path.join(lone, 'runner-keys', 'rev2');
  fs.mkdirSync(path.dirname(file), { mode: 0o700, recursive: true });
  fs.writeFileSync(file, crypto.createHash('sha256').update(key).digest('hex'), { mode: 0o600 });
  const ltok = mint(lone, 'rev2');
  u = await upgrade(la.port, 'B'.repeat(43), ltok, 'rev2');
  check(u.status === 403, `another key than the one pinned in the data directory: ${u.status}`);
  u = await upgrade(la.port, key, ltok, 'rev2');
  check(u.status === 101, `the key pinned in the data directory: ${u.status}`);
  check(!fs.existsSync(file), 'the pin left the data directory ...');
  u = await upgrade(la.port, 'B'.repeat(43), ltok, 'rev2');
  check(u.status === 403, `... for the database: with no file left, another key is still refused (${u.status})`);
  check((await la.stop()).code === 0, 'the lone airlockd stops cleanly');
}, 120000);
