// Leases and fencing (issue 17, second slice; docs/scale-out.md, "Leases"):
// three `airlockd serve --db URL` replicas on a throw-away PostgreSQL behind
// HAProxy, one static sandbox whose runner listens on 127.0.0.1, one
// reverse sandbox.
// - exactly one replica holds the static sandbox's lease (owner, fence 1 in
//   GET /v1/sandboxes through the front) and the runner accepts exactly one
//   controller link, which stays: none in 10 s more (no stealing);
// - a terminal's output is persisted by the owner; SIGSTOP of the owner past
//   its lease: another replica takes the sandbox within a bound with a
//   higher fence, dials the runner and resumes the terminal from its durable
//   offsets (its offsets grow again, the same lines go on); SIGCONT: the old
//   owner writes nothing more about the sandbox (a trigger in the database
//   logs every row written to sandboxes, terminals and audit with the
//   writer's application_name: none from the old owner after it woke), says
//   once that it gives the sandbox up, and the runner keeps the new link;
// - kill -9 of the owner: another replica takes the sandbox within a bound
//   with a higher fence and dials the runner again;
// - a terminal asked at a non-owner is forwarded to the owner, which opens
//   it on its one link;
// - a runner upgrade at a non-owner without a valid token for the sandbox
//   (none, another sandbox's, malformed, a client's API key) is 403 and
//   moves nothing; a reverse runner that dials a replica which is not the
//   owner moves the lease there (fence grown); the old owner learns it at
//   its next renew.
// Each replica has its own key and its own jwks.json: the replicas trust
// each other's tokens through the keys they publish in the database
// (scale-out.md, "Trust between replicas"). The runners' jwks.json lists
// every replica's key (the static runner is dialed by whichever owns it).
import fs from 'node:fs';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { run, check, tmpdir, waitFor, scaled, startRunner, addLog, onCleanup, sleep, rawHttp, mint, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';
import { startPostgres } from '../interop/pg.mjs';
import { startFront } from '../interop/front.mjs';

const BEAT_MS = 2000; // api_replica.c's API_REPLICA_BEAT_MS
const LEASE_MS = 3 * BEAT_MS; // relay.h's RL_LEASE_BEATS beats
const TAKEOVER_MS = 15000; // the bound: a lease's length, a beat, slack
const QUIET_MS = 10000; // no stealing meanwhile

const psql = (db, sql) => execFileSync('psql', ['-XAtq', '-d', db, '-c', sql], { timeout: 20000 }).toString().trim();

// Every row written to the tables the relay writes about a sandbox, with
// the writer's application_name (each replica's connection names it).
const TRIGGER = `
CREATE TABLE writes (n bigserial PRIMARY KEY, app text NOT NULL, tbl text NOT NULL, row_text text NOT NULL);
CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO writes (app, tbl, row_text)
    VALUES (current_setting('application_name'), TG_TABLE_NAME, row_to_json(NEW)::text);
  RETURN NEW;
END $$;
CREATE TRIGGER sandboxes_w AFTER INSERT OR UPDATE ON sandboxes FOR EACH ROW EXECUTE FUNCTION log_write();
CREATE TRIGGER terminals_w AFTER INSERT OR UPDATE ON terminals FOR EACH ROW EXECUTE FUNCTION log_write();
CREATE TRIGGER audit_w AFTER INSERT ON audit FOR EACH ROW EXECUTE FUNCTION log_write();`;

const count = (file, re) => (fs.readFileSync(file, 'utf8').match(re) || []).length;

await run('leases', async () => {
  const pg = startPostgres();
  const base = tmpdir('leases');
  const dirs = [0, 1, 2].map((i) => path.join(base, `data${i}`));
  const rdir = path.join(base, 'runner');
  fs.mkdirSync(rdir);
  // each replica its own key and jwks.json; every public key in the runners'
  for (const d of dirs) execFileSync(path.join(BIN, 'airlockd'), ['keygen', '--data', d], { stdio: 'pipe' });
  const jwks = { keys: dirs.flatMap((d) => JSON.parse(fs.readFileSync(path.join(d, 'jwks.json'), 'utf8')).keys) };
  fs.writeFileSync(path.join(rdir, 'jwks.json'), JSON.stringify(jwks));
  const admin = addUser(dirs[0], 'ada', 'admin', pg);
  const op = addUser(dirs[0], 'otto', 'operator', pg);

  const dbOf = (i) => `${pg}&application_name=replica${i}`;
  const rs = [];
  for (let i = 0; i < 3; i++) rs.push(await startAirlockd({ dir: dirs[i], db: dbOf(i) }));
  psql(pg, TRIGGER);
  const idOf = [];
  for (const r of rs) idOf.push((await api(r.port, 'GET', '/v1/replicas', admin)).json.find((x) => x.self).id);
  const front = await startFront(base, rs.map((r) => r.port));
  const byId = (id) => idOf.indexOf(id);

  // ---- one static sandbox: one owner, one link that stays
  const runner = await startRunner({ id: 'st1', dir: rdir, args: ['--verbose'] });
  const links = () => count(runner.log, /upgrade from [^ ]+ accepted/g);
  let r = await api(front.port, 'POST', '/v1/sandboxes', admin, { id: 'st1', kind: 'static', url: runner.url });
  check(r.status === 201 && idOf.includes(r.json.owner) && r.json.fence === 1,
    `a static sandbox added through the front is owned by the replica that added it (${r.json.owner}, fence 1)`);
  const sbOf = async (port) => (await api(port, 'GET', '/v1/sandboxes', admin)).json.find((x) => x.id === 'st1');
  await waitFor(async () => (await sbOf(front.port)).link_up, 10000, 'the runner to be linked', 100);
  let owner = byId((await sbOf(front.port)).owner);
  for (let i = 0; i < 3; i++) {
    const x = await sbOf(rs[i].port);
    check(x.owner === idOf[owner] && x.fence === 1, `replica ${i} shows the same owner (replica ${owner}) and fence`);
  }
  await sleep(QUIET_MS);
  let s = await sbOf(front.port);
  check(links() === 1 && s.link_up && s.owner === idOf[owner] && s.fence === 1,
    `after ${QUIET_MS / 1000} s the runner has accepted exactly one controller link (${links()}), still up, same owner and fence`);
  for (let i = 0; i < 3; i++)
    if (i !== owner)
      check(count(rs[i].log, /sandbox st1: (dial|link up)/g) === 0, `replica ${i}, not the owner, never dialed it`);

  // a terminal asked at a replica that does not own the sandbox: forwarded
  // to the owner (scale-out.md, "Actions at any replica"), which opens it
  // on its link; the other replica still never dials the runner
  const other = (owner + 1) % 3;
  r = await api(rs[other].port, 'POST', '/v1/terminals', op, { sandbox: 'st1', argv: ['true'] });
  check(r.status === 201 && links() === 1 && count(rs[other].log, /sandbox st1: (dial|link up)/g) === 0,
    `a terminal asked at a replica that is not the owner is opened by the owner (${r.status}), on its one link (${links()})`);

  // a terminal at the owner, printing numbered lines
  r = await api(rs[owner].port, 'POST', '/v1/terminals', op,
    { sandbox: 'st1', argv: ['sh', '-c', 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo "line $i"; sleep 0.05; done'] });
  check(r.status === 201, 'a terminal at the owner that prints a line every 50 ms');
  const tid = r.json.id;
  const offsets = () => Number(psql(pg, `SELECT out_offset FROM terminals WHERE id = '${tid}'`));
  await waitFor(() => offsets() > 0, 10000, 'the owner to persist output offsets', 100);
  check(true, `the owner persists the terminal's offsets (${offsets()} bytes)`);

  // ---- SIGSTOP the owner past its lease: another takes over
  const frozen = owner;
  const fence0 = (await sbOf(front.port)).fence;
  rs[frozen].p.kill('SIGSTOP');
  onCleanup(() => { try { rs[frozen].p.kill('SIGCONT'); } catch { /* gone */ } });
  const stoppedAt = Date.now();
  const off0 = offsets();
  const took = await waitFor(async () => {
    const x = await sbOf(rs[(frozen + 1) % 3].port);
    return x.owner !== idOf[frozen] && x.fence > fence0 && links() >= 2 ? x : false;
  }, TAKEOVER_MS, 'another replica to own the sandbox and link its runner', 200);
  const tookMs = Date.now() - stoppedAt;
  owner = byId(took.owner);
  check(owner >= 0 && owner !== frozen && took.fence === fence0 + 1,
    `owner frozen (SIGSTOP): replica ${owner} owns the sandbox after ${tookMs} ms with fence ${took.fence} (a lease is ${LEASE_MS} ms; bound ${scaled(TAKEOVER_MS)} ms)`);
  check(tookMs >= LEASE_MS - BEAT_MS, `... not before the lease could have expired (${tookMs} ms)`);
  check(links() === 2, `the runner accepted the new owner's link (${links()} links in all)`);
  await waitFor(() => offsets() > off0, 10000, 'the new owner to persist the terminal\'s offsets', 100);
  check(true, `the new owner resumed the terminal and persists its offsets (${off0} -> ${offsets()})`);
  r = await api(rs[owner].port, 'GET', `/v1/terminals/${tid}`, op);
  check(r.status === 200 && r.json.state === 'running', 'the terminal is running under the new owner');

  // ---- SIGCONT: the old owner writes nothing more for the sandbox
  const mark = Number(psql(pg, 'SELECT coalesce(max(n), 0) FROM writes'));
  const logFrom = fs.statSync(rs[frozen].log).size;
  rs[frozen].p.kill('SIGCONT');
  const gaveUp = await waitFor(() => fs.readFileSync(rs[frozen].log, 'utf8').slice(logFrom)
    .includes('sandbox st1: another replica owns it now'), 3 * BEAT_MS + 2000, 'the old owner to give the sandbox up', 100);
  check(gaveUp, 'the old owner, woken, says it gives the sandbox up');
  await sleep(3 * BEAT_MS); // its beats, its ticks, its link's end
  const stale = psql(pg, `SELECT tbl || ' ' || row_text FROM writes WHERE n > ${mark} AND app = 'replica${frozen}'` +
    ` AND (row_text LIKE '%st1%' OR row_text LIKE '%${tid}%')`);
  check(stale === '', `the old owner wrote no row about the sandbox or its terminal after it woke${stale ? `: ${stale}` : ''}`);
  const fresh = Number(psql(pg, `SELECT count(*) FROM writes WHERE n > ${mark} AND app = 'replica${owner}' AND row_text LIKE '%${tid}%'`));
  check(fresh > 0, `the new owner went on writing the terminal's offsets meanwhile (${fresh} rows)`);
  const said = count(rs[frozen].log, /sandbox st1: another replica owns it now/g);
  check(said === 1, `the old owner logged the loss once (${said})`);
  s = await sbOf(front.port);
  check(s.owner === idOf[owner] && s.fence === took.fence && s.link_up && links() === 2,
    `the new owner keeps the sandbox and the runner its link (${links()} links in all)`);
  const rows = psql(pg, `SELECT count(*) FROM audit WHERE target = 'st1' AND action = 'link_up'`);
  check(Number(rows) === 2, `two link_up rows in the audit, one per owner (${rows})`);

  // ---- kill -9 the owner: another takes over and dials the runner
  const killed = owner;
  rs[killed].p.kill('SIGKILL');
  await rs[killed].exited;
  const killedAt = Date.now();
  const took2 = await waitFor(async () => {
    const x = await sbOf(front.port);
    return x.owner !== idOf[killed] && x.fence > took.fence && links() >= 3 ? x : false;
  }, TAKEOVER_MS, 'another replica to own the sandbox after kill -9', 200);
  owner = byId(took2.owner);
  check(owner >= 0 && owner !== killed && took2.fence === took.fence + 1 && links() === 3,
    `owner killed (kill -9): replica ${owner} owns the sandbox after ${Date.now() - killedAt} ms, fence ${took2.fence}, the runner linked to it (${links()} links)`);
  const off1 = offsets();
  await waitFor(() => offsets() > off1, 10000, 'the terminal to go on', 100);
  check(true, 'the terminal goes on under the third owner');

  // ---- a reverse runner dialing a replica that is not the owner
  const alive = [0, 1, 2].filter((i) => i !== killed);
  const ownerR = alive[0];
  const dialed = alive[1];
  r = await api(rs[ownerR].port, 'POST', '/v1/sandboxes', admin, { id: 'rev1', kind: 'reverse' });
  check(r.status === 201 && r.json.owner === idOf[ownerR] && r.json.fence === 1, `a reverse sandbox owned by replica ${ownerR}`);
  // an attacker's dial at a non-owner moves nothing: no token, a token for
  // another sandbox, a malformed one; nor a client's key as a token
  const upgrade = (port, tok) => rawHttp(port, 'GET /v1/runners/connect?identifier=rev1 HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
    'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: airlock.v1\r\n' +
    `X-Airlock-Runner-Key: ${'A'.repeat(43)}\r\n` + (tok ? `Authorization: Bearer ${tok}\r\n` : '') + '\r\n');
  for (const [tok, what] of [[null, 'no token'], [mint(dirs[dialed], 'st1'), "st1's token"], ['x.y.z', 'a malformed token'], [admin, "an admin's API key"]]) {
    const u = await upgrade(rs[dialed].port, tok);
    const x = (await api(rs[dialed].port, 'GET', '/v1/sandboxes', admin)).json.find((y) => y.id === 'rev1');
    check(u.status === 403 && x.owner === idOf[ownerR] && x.fence === 1,
      `a runner upgrade at a non-owner with ${what}: 403, the owner and fence unchanged`);
  }
  r = await api(rs[ownerR].port, 'POST', '/v1/sandboxes/rev1/enroll', admin, {});
  check(r.status === 200 && r.json.token, 'its enrollment token, minted by the owner');
  fs.writeFileSync(path.join(rdir, 'token'), r.json.token, { mode: 0o600 });
  const rlog = path.join(base, 'reverse-runner.log');
  const out = fs.openSync(rlog, 'a');
  addLog(rlog);
  const rev = spawn(path.join(BIN, 'airlock-runner'), ['--connect', `ws://127.0.0.1:${rs[dialed].port}/v1/runners/connect?identifier=rev1`,
    '--identifier', 'rev1', '--jwks', path.join(rdir, 'jwks.json'), '--token-file', path.join(rdir, 'token'), '--verbose'],
  { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const revExit = new Promise((res) => rev.on('exit', (code, sig) => res({ code, sig })));
  onCleanup(async () => { if (rev.exitCode === null && rev.signalCode === null) { rev.kill('SIGTERM'); await revExit; } });
  const revOf = async (port) => (await api(port, 'GET', '/v1/sandboxes', admin)).json.find((x) => x.id === 'rev1');
  const moved = await waitFor(async () => {
    const x = await revOf(rs[dialed].port);
    return x.owner === idOf[dialed] && x.link_up ? x : false;
  }, 10000, 'the lease to move to the replica the runner dialed', 100);
  check(moved.fence === 2, `a reverse runner dialing replica ${dialed}, not the owner: the lease moved there (fence ${moved.fence})`);
  await waitFor(async () => fs.readFileSync(rs[ownerR].log, 'utf8').includes('sandbox rev1: another replica owns it now'),
    3 * BEAT_MS, 'the old owner to learn it at its next renew', 100);
  check(true, 'the old owner learnt it at its next renew');
  await sleep(2 * BEAT_MS);
  const back = await revOf(front.port);
  check(back.owner === idOf[dialed] && back.fence === 2 && back.link_up, 'the lease stays where the runner is linked');

  for (const i of alive) {
    const e = await rs[i].stop();
    check(e.code === 0, `replica ${i} stops cleanly`);
  }
  const free = psql(pg, "SELECT count(*) FROM sandboxes WHERE owner IS NOT NULL");
  check(Number(free) === 0, 'stopped cleanly, the replicas released every lease');
}, 180000);
