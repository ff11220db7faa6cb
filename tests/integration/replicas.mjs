// Replicas on one PostgreSQL behind a real front (issue 17, first slice;
// docs/scale-out.md, "Replicas"): a throw-away PostgreSQL, three
// `airlockd serve --db URL` replicas (each its own data directory, so its
// own signing key), and HAProxy started here on 127.0.0.1 in front of them
// (round robin, health check on /healthz). Through the front, GET
// /v1/replicas lists all three alive and answers from different replicas
// (its `self`); viewers and operators get 403. A user removed from the
// shared database is refused by every replica at its very next request,
// and a web session signed out at one replica is refused by the other two
// at once: nothing is cached per replica. A replica stopped cleanly is
// listed gone at once; one killed with SIGKILL is listed gone within three
// heartbeats and some slack (never before its last beat is stale), the
// front keeps answering from the other two meanwhile, and started again it
// registers anew under a new id. No sandbox exists: nothing here makes
// replicas dial runners.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync, execFileSync } from 'node:child_process';
import { run, check, tmpdir, rawHttp, waitFor, scaled, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';
import { startPostgres } from '../interop/pg.mjs';
import { startFront } from '../interop/front.mjs';

const BEAT_MS = 2000; // api_replica.c's API_REPLICA_BEAT_MS
const STALE_MS = 3 * BEAT_MS; // ... and gone after 3 intervals
const SLACK_MS = 2500; // a beat's own lag, the list's request, a loaded machine
// An HTTP request with the headers given; { status, head, body, json }.
async function req(port, method, target, headers = {}, body) {
  const data = body === undefined ? '' : JSON.stringify(body);
  const hs = { Host: '127.0.0.1', ...headers,
    ...(body !== undefined ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {}) };
  const r = await rawHttp(port, `${method} ${target} HTTP/1.1\r\n` +
    Object.entries(hs).map(([k, v]) => `${k}: ${v}\r\n`).join('') + `\r\n${data}`, 15000);
  let json = null;
  try { json = JSON.parse(r.body); } catch { /* not JSON */ }
  return { ...r, json };
}

const replicas = async (port, key) => {
  const r = await api(port, 'GET', '/v1/replicas', key);
  if (r.status !== 200) throw new Error(`GET /v1/replicas: ${r.status} ${r.body}`);
  return r.json;
};
const selfOf = (list) => list.find((x) => x.self);

await run('replicas', async () => {
  const db = startPostgres();
  const base = tmpdir('replicas');
  const dirs = [0, 1, 2].map((i) => path.join(base, `data${i}`));
  const admin = addUser(dirs[0], 'ada', 'admin', db);
  const op = addUser(dirs[0], 'otto', 'operator', db);
  const viewer = addUser(dirs[0], 'vic', 'viewer', db);
  const eve = addUser(dirs[0], 'eve', 'operator', db);

  // ---- three replicas on one database, each its own data directory
  const rs = [];
  for (const dir of dirs) rs.push(await startAirlockd({ dir, db }));
  const keys = dirs.map((d) => fs.readFileSync(path.join(d, 'signing-key.pem'), 'utf8'));
  check(new Set(keys).size === 3, 'each replica made its own signing key in its own data directory');
  const ids = [];
  for (const r of rs) {
    const me = selfOf(await replicas(r.port, admin));
    check(me && /^r-[0-9a-f]{24}$/.test(me.id) && me.address === `ws://127.0.0.1:${r.port}` && me.alive &&
      me.stopped_at === null && me.beat_at >= me.started_at,
    `replica on port ${r.port} answers as ${me && me.id}, reached at its listen address`);
    ids.push(me.id);
  }
  check(new Set(ids).size === 3, 'three replicas, three ids');

  // ---- the front
  const front = await startFront(base, rs.map((r) => r.port));
  let list = await replicas(front.port, admin);
  check(list.length === 3 && list.every((x) => x.alive && ids.includes(x.id)),
    'through the front: all three replicas listed alive');
  check(list.filter((x) => x.self).length === 1, 'exactly one of them says it is the one answering');
  const seen = new Set();
  await waitFor(async () => {
    seen.add(selfOf(await replicas(front.port, admin)).id);
    return seen.size === 3;
  }, 10000, 'requests through the front to land on each replica', 0);
  check(seen.size === 3, 'requests through the front land on different replicas (round robin)');
  for (const [key, who] of [[op, 'an operator'], [viewer, 'a viewer']]) {
    const r = await api(front.port, 'GET', '/v1/replicas', key);
    check(r.status === 403 && r.json && r.json.error === 'replicas are listed for admins',
      `${who} may not list replicas (403)`);
  }
  check((await api(front.port, 'GET', '/v1/replicas')).status === 401, 'nor may anyone without a key (401)');

  // beats go on: each replica's beat_at moves, by the database's clock
  const first = Object.fromEntries(list.map((x) => [x.id, x.beat_at]));
  await waitFor(async () => (await replicas(rs[0].port, admin)).every((x) => x.beat_at > first[x.id]),
    BEAT_MS * 3, 'every replica to beat again', 100);
  check(true, 'every replica renewed its heartbeat');

  // ---- revocation reaches every replica at once: no cache per replica
  for (const r of rs)
    check((await api(r.port, 'GET', '/v1/sandboxes', eve)).status === 200, `eve's key works on port ${r.port}`);
  execFileSync(path.join(BIN, 'airlockd'), ['user', 'rm', 'eve', '--db', db], { stdio: 'pipe' });
  for (const r of rs)
    check((await api(r.port, 'GET', '/v1/sandboxes', eve)).status === 401,
      `user eve removed: her key is refused (401) at once on port ${r.port}`);
  check((await api(front.port, 'GET', '/v1/sandboxes', eve)).status === 401, '... and through the front');

  const login = await req(rs[0].port, 'POST', '/v1/session', {}, { key: op });
  const cookie = /airlock_session=([^;]+)/.exec(login.head);
  check(login.status === 200 && cookie && login.json.csrf, 'a web session signed in at replica 0');
  const sess = { Cookie: `airlock_session=${cookie[1]}`, 'X-Airlock-CSRF': login.json.csrf };
  for (const r of rs.slice(1))
    check((await req(r.port, 'GET', '/v1/session', sess)).status === 200, `the session works at port ${r.port}`);
  const out = await req(rs[0].port, 'DELETE', '/v1/session', { ...sess, Origin: `http://127.0.0.1:${rs[0].port}`, Host: `127.0.0.1:${rs[0].port}` });
  check(out.status === 200 && out.json.signed_out === true, 'signed out at replica 0');
  for (const r of rs.slice(1))
    check((await req(r.port, 'GET', '/v1/session', sess)).status === 401,
      `the signed-out session is refused (401) at once at port ${r.port}`);

  // ---- a clean stop: listed gone at once
  const st = await rs[2].stop();
  check(st.code === 0, `a replica stops cleanly on SIGTERM (exit ${st.code}, signal ${st.sig})`);
  list = await replicas(rs[0].port, admin);
  const stopped = list.find((x) => x.id === ids[2]);
  check(stopped && !stopped.alive && stopped.stopped_at >= stopped.started_at,
    'a replica stopped with SIGTERM is listed not alive, with stopped_at, at once');
  rs[2] = await startAirlockd({ dir: dirs[2], db });
  const again2 = selfOf(await replicas(rs[2].port, admin));
  check(again2.id !== ids[2] && again2.alive, `started again, it registers anew (${again2.id})`);
  ids[2] = again2.id;

  // ---- kill -9: gone within 3 heartbeats and slack, the front serves on
  const victim = ids[1];
  rs[1].p.kill('SIGKILL');
  await rs[1].exited;
  const killedAt = Date.now();
  list = await replicas(rs[0].port, admin);
  check(list.find((x) => x.id === victim).alive, 'just after kill -9 the replica is still alive (its beat is fresh)');
  let answered = 0;
  const selves = new Set();
  const gone = await waitFor(async () => {
    const r = await api(front.port, 'GET', '/v1/replicas', admin);
    if (r.status !== 200) throw new Error(`the front answered ${r.status} ${r.body} with one replica killed`);
    answered++;
    selves.add(selfOf(r.json).id);
    const v = r.json.find((x) => x.id === victim);
    return v && !v.alive ? Date.now() - killedAt : 0;
  }, STALE_MS + SLACK_MS, 'the killed replica to be listed not alive', 100);
  check(gone <= scaled(STALE_MS + SLACK_MS), `the killed replica is listed not alive ${gone} ms after kill -9 (at most ${STALE_MS} + ${SLACK_MS})`);
  // its last beat came at most one interval (and a late timer) before the kill
  check(gone >= STALE_MS - BEAT_MS - 2000, `... and not before its last beat was stale (${gone} ms)`);
  check(answered > 10 && !selves.has(victim) && selves.size === 2,
    `the front answered all ${answered} requests meanwhile, from the two others`);

  // ---- started again: a new id, the old row kept as gone
  rs[1] = await startAirlockd({ dir: dirs[1], db });
  const again = selfOf(await replicas(rs[1].port, admin));
  check(again.id !== victim && again.alive && again.address === `ws://127.0.0.1:${rs[1].port}`,
    `the killed replica started again registers anew (${again.id})`);
  list = await replicas(front.port, admin);
  check(list.filter((x) => x.alive).length === 3 && list.some((x) => x.id === victim && !x.alive),
    'through the front: three alive, the killed incarnation listed gone');
  const back = new Set();
  await waitFor(async () => {
    back.add(selfOf(await replicas(front.port, admin)).id);
    return back.has(again.id);
  }, 10000, 'the front to send requests to the restarted replica', 50);
  check(true, 'the front sends requests to the restarted replica again');

  for (const r of rs) {
    const e = await r.stop();
    check(e.code === 0, `replica on port ${r.port} stops cleanly (exit ${e.code}, signal ${e.sig})`);
  }
  const cli = spawnSync(path.join(BIN, 'airlockd'), ['user', 'ls', '--db', db]);
  check(cli.status === 0 && /^ada +admin /m.test(cli.stdout), 'the database outlives the replicas');
}, 60000);
