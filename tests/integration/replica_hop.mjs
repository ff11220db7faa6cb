// Clients on any replica (issue 17, third slice; docs/scale-out.md, "Clients
// on any replica"): three `airlockd serve --db URL` replicas on a throw-away
// PostgreSQL behind HAProxy, two static sandboxes, owned by replicas 0 and 1.
// - a client attached through a front (HAProxy over replicas 0 and 2) to a
//   terminal of the sandbox replica 1 owns is relayed to the owner: it gets
//   a checksummed 20 MB stream exactly once, through a cut of its
//   connection and a reconnect through the front, with no gap and the exit
//   code;
// - input typed by a writer at replica 1, then by one at replica 2 after a
//   take-over, arrives once each, in order; the presence (VIEWERS) the
//   owner sends names both users, and a viewer relayed is a viewer;
// - through the front (round robin) a client attaches whatever replica it
//   lands on;
// - posing as a replica at the owner fails: a hop token signed by a key no
//   replica published, one for another replica, a runner's token, an
//   API key's look-alike: 401; a hop token for a user removed: 401; a hop
//   token used twice: 401;
// - actions at any replica: a terminal opened, signalled and closed at a
//   replica that does not own the sandbox is forwarded to the owner and
//   answered with the owner's status; through the front every open works;
//   a forwarding token (replica:api) is good once, for its replica, for the
//   action routes only, with the user's role from the database, and a
//   forwarded action is never forwarded again;
// - the owner frozen (SIGSTOP): the replicas relaying clients to it cut
//   them ("owner changed"), two of one sandbox at one replica and one at
//   another, while a client relayed to an owner still alive stays.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, waitFor, startRunner, mint, rawHttp, sleep, onCleanup, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, checksummedStream, screenBytes } from '../interop/airlockd.mjs';
import { startPostgres } from '../interop/pg.mjs';
import { startFront } from '../interop/front.mjs';

const STREAM_BYTES = 20e6;
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

await run('replica_hop', async () => {
  const pg = startPostgres();
  const base = tmpdir('replica-hop');
  const dirs = [0, 1, 2].map((i) => path.join(base, `data${i}`));
  const rdir = path.join(base, 'runner');
  const work = path.join(base, 'work');
  fs.mkdirSync(rdir);
  for (const d of dirs) execFileSync(path.join(BIN, 'airlockd'), ['keygen', '--data', d], { stdio: 'pipe' });
  const jwks = { keys: dirs.flatMap((d) => JSON.parse(fs.readFileSync(path.join(d, 'jwks.json'), 'utf8')).keys) };
  fs.writeFileSync(path.join(rdir, 'jwks.json'), JSON.stringify(jwks)); // the static runner's
  const admin = addUser(dirs[0], 'ada', 'admin', pg);
  const op = addUser(dirs[0], 'otto', 'operator', pg);
  const op2 = addUser(dirs[0], 'olga', 'operator', pg);
  const viewer = addUser(dirs[0], 'vic', 'viewer', pg);
  const viewer2 = addUser(dirs[0], 'vic2', 'viewer', pg);
  const rs = [];
  for (let i = 0; i < 3; i++) rs.push(await startAirlockd({ dir: dirs[i], db: `${pg}&application_name=replica${i}` }));
  const idOf = [];
  for (const r of rs) idOf.push((await api(r.port, 'GET', '/v1/replicas', admin)).json.find((x) => x.self).id);
  const front = await startFront(base, rs.map((r) => r.port));

  const runner = await startRunner({ id: 'st1', dir: rdir });
  let r = await api(rs[0].port, 'POST', '/v1/sandboxes', admin, { id: 'st1', kind: 'static', url: runner.url });
  check(r.status === 201 && r.json.owner === idOf[0], 'a static sandbox owned by replica 0');
  const rdir2 = path.join(base, 'runner2');
  fs.mkdirSync(rdir2);
  fs.copyFileSync(path.join(rdir, 'jwks.json'), path.join(rdir2, 'jwks.json'));
  const runner2 = await startRunner({ id: 'st2', dir: rdir2 });
  r = await api(rs[1].port, 'POST', '/v1/sandboxes', admin, { id: 'st2', kind: 'static', url: runner2.url });
  check(r.status === 201 && r.json.owner === idOf[1], 'a second static sandbox, owned by replica 1');
  const linked = async (id) => (await api(rs[0].port, 'GET', '/v1/sandboxes', admin)).json.find((x) => x.id === id).link_up;
  await waitFor(async () => (await linked('st1')) && (await linked('st2')), 10000, 'both runners to be linked', 100);

  // ---- 20 MB through the front to replicas that are not the owner, a cut,
  // the rest through the front again (HAProxy over replicas 0 and 2 only)
  const frontB = await startFront(base, [rs[0].port, rs[2].port]);
  const { expected, argv } = checksummedStream(work, STREAM_BYTES);
  r = await api(rs[1].port, 'POST', '/v1/terminals', op, { sandbox: 'st2', argv, cwd: work });
  check(r.status === 201, `a terminal of st2 at its owner that prints ${STREAM_BYTES / 1e6} MB`);
  const tid = r.json.id;
  const a = await attach(frontB.port, tid, op);
  check(true, 'a client attached through a front whose replicas do not own the sandbox');
  await a.ctl.wait(() => a.ch.next[1] >= 5e6, '5 MB received through the front', 60000);
  const cut = a.ch.next[1];
  a.ctl.ws.terminate();
  await a.ctl.wait(() => a.ctl.closeInfo, 'the cut', 10000);
  await a.ctl.connect(`ws://127.0.0.1:${frontB.port}/v1/terminals/${tid}/attach`, a.headers);
  check(true, `cut after ${cut} bytes; reconnected through the front`);
  await a.ch.waitExit(180000);
  const got = Buffer.concat(a.ch.out);
  check(!a.ch.gaps && a.ch.resyncs.length === 0, 'no gap and no resync');
  check(got.length === expected.length && sha(got) === sha(expected),
    `the client has the stream exactly once (${got.length} bytes, sha256 ${sha(got).slice(0, 12)}…)`);
  check(a.ch.exit && a.ch.exit.code === 0, 'and its exit code 0');
  const relayed = [0, 2].filter((i) => /attach of \S+ by otto relayed to its owner/.test(fs.readFileSync(rs[i].log, 'utf8')));
  check(relayed.length >= 1, `the front's replicas relayed the attach to the owner (replicas ${relayed.join(' and ')})`);

  // ---- input across replicas, roles and presence from the owner
  r = await api(rs[0].port, 'POST', '/v1/terminals', op,
    { sandbox: 'st1', argv: ['sh', '-c', 'stty -echo; echo ready; while read l; do echo "got $l"; done'] });
  const t2 = r.json.id;
  const w1 = await attach(rs[1].port, t2, op);
  await w1.ctl.wait(() => w1.ch.role === 1 || w1.ch.role === 'writer', 'the first writer\'s role', 10000);
  // echo off: what is typed shows once, as "got"; "ready" may come in the
  // attach's snapshot (the terminal printed it first) or as output
  await w1.ctl.wait(() => screenBytes(w1.ch).toString('latin1').includes('ready'), 'ready on the screen', 10000);
  w1.ch.write('one\n');
  await w1.ch.waitOutput(/got one/, 10000);
  const w2 = await attach(rs[2].port, t2, op2);
  const v = await attach(rs[1].port, t2, viewer);
  await v.ctl.wait(() => v.ch.viewers.length >= 3, 'three attached in VIEWERS', 10000);
  const names = v.ch.viewers.map((x) => x.name).sort();
  check(names.includes('otto') && names.includes('olga') && names.includes('vic'),
    `the owner's VIEWERS names the users attached through replicas 1 and 2 (${names.join(', ')})`);
  check(v.ch.role !== 1 && v.ch.role !== 'writer', `a viewer relayed is a viewer (role ${v.ch.role})`);
  w2.ch.takeover();
  await w2.ctl.wait(() => w2.ch.role === 1 || w2.ch.role === 'writer', 'the take-over', 10000);
  w2.ch.write('two\n');
  await w2.ch.waitOutput(/got two/, 10000);
  w1.ch.write('lost\n'); // a viewer now: must not reach the terminal
  w2.ch.write('three\n');
  await w1.ch.waitOutput(/got three/, 10000); // w1 has held the terminal from its start
  const out = w1.ch.output().toString();
  check(/^(ready\r?\n)?got one\r?\ngot two\r?\ngot three\r?\n$/.test(out),
    `input typed at replica 1, then at replica 2 after a take-over, arrives once each, in order; the demoted writer's does not (${JSON.stringify(out)})`);

  // ---- a relayed client whose user is removed: closed by the replica that
  // authenticated it, and so gone at the owner too
  execFileSync(path.join(BIN, 'airlockd'), ['user', 'rm', 'vic', '--db', pg], { stdio: 'pipe' });
  check(true, 'the viewer\'s user is removed');
  await v.ctl.wait(() => v.ctl.closeInfo, 'the removed user\'s relayed connection to close', 20000);
  await w1.ctl.wait(() => !w1.ch.viewers.some((x) => x.name === 'vic'), 'the owner to drop the viewer', 10000);
  check(v.ctl.closeInfo.code === 4401 || v.ctl.closeInfo.code >= 4000,
    `its relayed connection is closed (${v.ctl.closeInfo.code} ${v.ctl.closeInfo.reason}), and the owner's VIEWERS no longer lists it`);

  // ---- through the front: whichever replica it lands on
  for (let i = 0; i < 3; i++) {
    const f = await attach(front.port, t2, op);
    await f.ctl.wait(() => f.ch.role !== undefined, 'a ROLE through the front', 10000);
    f.ctl.ws.close();
  }
  check(true, 'three clients attached through the front (round robin) get their ROLE');

  // ---- posing as a replica at the owner
  const upgrade = (port, tok) => rawHttp(port, `GET /v1/terminals/${t2}/attach HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
    'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: airlock.v1\r\n' +
    `Authorization: Bearer ${tok}\r\n\r\n`);
  const stranger = path.join(base, 'stranger');
  execFileSync(path.join(BIN, 'airlockd'), ['keygen', '--data', stranger], { stdio: 'pipe' });
  const hop = (dir, aud, sub, scope = 'replica:attach') => mint(dir, aud, scope, 60, sub);
  let u = await upgrade(rs[0].port, hop(dirs[1], idOf[0], 'otto'));
  check(u.status === 101, `a hop token of replica 1 for otto, at the owner: ${u.status} (the path the relay takes)`);
  for (const [tok, what] of [
    [hop(stranger, idOf[0], 'ada'), 'signed by a key no replica published'],
    [hop(dirs[1], idOf[2], 'ada'), 'for another replica'],
    [hop(dirs[1], idOf[0], 'ada', 'runner:connect'), 'with a runner\'s scope'],
    [mint(dirs[0], 'st1'), 'a runner:connect token'],
    [hop(dirs[1], idOf[0], 'nobody'), 'for a user who does not exist'],
    ['alk_' + 'x'.repeat(43), 'an API key look-alike'],
  ]) {
    u = await upgrade(rs[0].port, tok);
    check(u.status === 401, `a bearer ${what}, at the owner: ${u.status}`);
  }
  u = await upgrade(rs[1].port, hop(dirs[1], idOf[0], 'otto'));
  check(u.status === 401, `a hop token at a replica it is not for (replica 1): ${u.status}`);

  u = await upgrade(rs[0].port, hop(dirs[1], idOf[0], 'otto'));
  check(u.status === 101, `a fresh hop token at the owner: ${u.status}`);
  const once = hop(dirs[1], idOf[0], 'otto');
  u = await upgrade(rs[0].port, once);
  const again = await upgrade(rs[0].port, once);
  check(u.status === 101 && again.status === 401, `a hop token is good once: ${u.status}, then ${again.status}`);

  // ---- actions at any replica: forwarded to the sandbox's owner
  const state = async (id) => (await api(rs[0].port, 'GET', `/v1/terminals/${id}`, op)).json.state;
  const sleeper = { sandbox: 'st1', argv: ['sh', '-c', 'echo up; exec sleep 300'] };
  const opened = [];
  for (const i of [1, 2]) {
    r = await api(rs[i].port, 'POST', '/v1/terminals', op, sleeper);
    check(r.status === 201 && r.json.sandbox === 'st1',
      `a terminal opened at replica ${i}, which does not own the sandbox: ${r.status} ${r.body.trim().slice(0, 120)}`);
    opened.push(r.json.id);
  }
  for (const i of [1, 2])
    check(/forwarded to the sandbox's owner/.test(fs.readFileSync(rs[i].log, 'utf8')), `replica ${i} says it forwarded the action`);
  await waitFor(async () => (await state(opened[0])) === 'running', 10000, 'the forwarded terminal to run', 100);
  const fa = await attach(rs[2].port, opened[0], op);
  await fa.ctl.wait(() => screenBytes(fa.ch).toString('latin1').includes('up'), 'its output, attached at replica 2', 10000);
  check(true, 'a terminal opened at replica 1 runs at the owner and is attached at replica 2');
  r = await api(rs[2].port, 'POST', `/v1/terminals/${opened[0]}/kill`, op, { signal: 'TERM' });
  check(r.status === 202, `a signal sent at replica 2 (not the owner): ${r.status} ${r.body.trim()}`);
  await fa.ch.waitExit(10000);
  check(fa.ch.exit && fa.ch.exit.signo === 15, `the terminal ends by that signal (${JSON.stringify(fa.ch.exit)})`);
  r = await api(rs[1].port, 'DELETE', `/v1/terminals/${opened[1]}`, op);
  check(r.status === 202, `a close at replica 1 (not the owner): ${r.status} ${r.body.trim()}`);
  await waitFor(async () => ['exited', 'closed', undefined].includes(await state(opened[1])), 10000, 'the closed terminal to end', 100);
  r = await api(rs[1].port, 'POST', '/v1/terminals', viewer2, sleeper);
  check(r.status === 403, `a viewer's open at a non-owner is refused there: ${r.status}`);
  r = await api(rs[1].port, 'POST', '/v1/terminals', op, { sandbox: 'st1', argv: 'not a list' });
  check(r.status === 400, `a bad request forwarded gets the owner's 400 and its reason: ${r.status} ${r.body.trim().slice(0, 100)}`);
  let through = 0;
  for (let i = 0; i < 3; i++) through += (await api(front.port, 'POST', '/v1/terminals', op, sleeper)).status === 201;
  check(through === 3, `three terminals opened through the front (round robin): ${through} of 3 were 201`);

  // ---- posing as a replica for an action
  const fwd = (dir, aud, sub) => mint(dir, aud, 'replica:api', 30, sub);
  const post = (port, tok) => api(port, 'POST', '/v1/terminals', tok, sleeper);
  const tok = fwd(dirs[1], idOf[0], 'otto');
  r = await post(rs[0].port, tok);
  const replay = await post(rs[0].port, tok);
  check(r.status === 201 && replay.status === 401,
    `a forwarding token of replica 1 at the owner opens a terminal once: ${r.status}, replayed ${replay.status}`);
  // replayed once past its exp, while the verifier's leeway (30 s) still
  // takes it: the owner must still remember it
  const short = mint(dirs[1], idOf[0], 'replica:api', 1, 'otto');
  r = await post(rs[0].port, short);
  await sleep(2500);
  const late = await post(rs[0].port, short);
  check(r.status === 201 && late.status === 401,
    `a forwarding token replayed past its exp, within the leeway: ${r.status}, then ${late.status}`);
  for (const [t, what] of [
    [fwd(stranger, idOf[0], 'otto'), 'signed by a key no replica published'],
    [fwd(dirs[1], idOf[2], 'otto'), 'for another replica'],
    [hop(dirs[1], idOf[0], 'otto'), 'with the attach\'s scope'],
    [fwd(dirs[1], idOf[0], 'nobody'), 'for a user who does not exist'],
  ]) {
    r = await post(rs[0].port, t);
    check(r.status === 401, `an action with a token ${what}, at the owner: ${r.status}`);
  }
  r = await api(rs[0].port, 'GET', '/v1/audit', fwd(dirs[1], idOf[0], 'ada'));
  check(r.status === 401, `a forwarding token opens no other route (GET /v1/audit as an admin): ${r.status}`);
  r = await api(rs[0].port, 'POST', '/v1/sandboxes', fwd(dirs[1], idOf[0], 'ada'), { id: 'x1', kind: 'reverse' });
  check(r.status === 401, `nor POST /v1/sandboxes: ${r.status}`);
  u = await upgrade(rs[0].port, fwd(dirs[1], idOf[0], 'otto'));
  check(u.status === 401, `nor an attach: ${u.status}`);
  r = await post(rs[1].port, fwd(dirs[2], idOf[1], 'otto'));
  check(r.status === 409, `a forwarded action at a replica that does not own the sandbox is not forwarded again: ${r.status} ${r.body.trim().slice(0, 100)}`);
  r = await api(rs[0].port, 'POST', '/v1/terminals', fwd(dirs[1], idOf[0], 'vic2'), sleeper);
  check(r.status === 403, `a forwarding token for a viewer gets the viewer's role at the owner: ${r.status}`);

  // ---- the owner frozen: the replicas that relay clients to it cut them
  // (at each beat: one read of each sandbox, one listing of the replicas),
  // and a client relayed to another owner stays
  r = await api(rs[0].port, 'POST', '/v1/terminals', op, sleeper);
  check(r.status === 201, `a terminal of st1 at its owner, replica 0: ${r.status}`);
  const t3 = r.json.id;
  r = await api(rs[1].port, 'POST', '/v1/terminals', op, { ...sleeper, sandbox: 'st2' });
  check(r.status === 201, `a terminal of st2 at its owner, replica 1: ${r.status}`);
  const t4 = r.json.id;
  const toOwner0 = [await attach(rs[2].port, t3, op), await attach(rs[2].port, t3, op2), await attach(rs[1].port, t3, op)];
  const toOwner1 = await attach(rs[2].port, t4, op);
  for (const c of [...toOwner0, toOwner1]) await c.ctl.wait(() => c.ch.role !== undefined, 'a relayed client\'s ROLE', 10000);
  rs[0].p.kill('SIGSTOP');
  onCleanup(() => { try { rs[0].p.kill('SIGCONT'); } catch { /* gone */ } });
  const frozen = Date.now();
  await waitFor(() => toOwner0.every((c) => c.ctl.closeInfo), 15000, 'the clients relayed to the frozen owner to be cut', 100);
  const cutMs = Date.now() - frozen;
  const reasons = toOwner0.map((c) => `${c.ctl.closeInfo.code} ${c.ctl.closeInfo.reason}`);
  check(toOwner0.every((c) => /owner changed/.test(c.ctl.closeInfo.reason)),
    `owner frozen: its three relayed clients (two at replica 2 on one sandbox, one at replica 1) are cut after ${cutMs} ms (${reasons.join('; ')})`);
  await sleep(2500); // another beat of replica 2
  check(!toOwner1.ctl.closeInfo, 'a client of replica 2 relayed to replica 1, whose owner is alive, stays');
  rs[0].p.kill('SIGCONT');

  for (const x of rs) check((await x.stop()).code === 0, 'a replica stops cleanly');
}, 300000);

