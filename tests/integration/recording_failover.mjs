// A recording goes on across a fail-over, exactly once, and a stale owner
// cannot spoil it (issue 17, point 4; docs/scale-out.md, "Recordings"):
// three `airlockd serve --db URL --recordings DIR` replicas on a
// throw-away PostgreSQL share one recordings directory; one static
// sandbox.
// - a terminal streams 16 MB of checksummed bytes, paced; SIGSTOP of the
//   owner mid-stream: another replica takes the sandbox over, resumes
//   the terminal from its durable offsets and the recording from its
//   durable size;
// - SIGCONT of the old owner while the stream goes on: it gives the
//   sandbox up and closes its recording, flushing what it had buffered;
//   that must not reach the file the new owner writes (it was replaced by
//   a copy of its durable prefix when taken over);
// - kill -9 of the new owner mid-stream: within TAKEOVER_MS a third owner
//   (either other replica) has the sandbox, and the stream and the
//   recording go on from the durable marks;
// - a read-only client attached through HAProxy in front of both (which
//   cuts a replica's connections once its health checks fail) comes back
//   through the front, is refused while no replica owns the sandbox, then
//   resumes at each new owner: it has the 16 MB exactly once, no gap;
// - at the end the recording, read through each replica alive, holds the
//   stream exactly once: its output events are the 16 MB, in order, no byte
//   lost or repeated, and its exit event is there.
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, waitFor, startRunner, onCleanup, sleep } from '../interop/harness.mjs';
import { startAirlockd, api } from '../interop/airlockd.mjs';
import { startPostgres } from '../interop/pg.mjs';
import { replicaDirs } from '../interop/replicas.mjs';
import { pacedStream, sha, go, faultyClient } from '../interop/faults.mjs';
import { startFront } from '../interop/front.mjs';

const TAKEOVER_MS = 15000; // a lease (6 s), a beat, slack
const SIZE = 16e6;

// The output events of an asciicast v2 recording, joined; and its exit.
function castOutput(text) {
  const lines = text.split('\n').filter((l) => l.length);
  const header = JSON.parse(lines[0]);
  const parts = [];
  let exit = null, bad = 0;
  for (const l of lines.slice(1)) {
    let e;
    try { e = JSON.parse(l); } catch { bad++; continue; }
    if (e[1] === 'o') parts.push(Buffer.from(e[2], 'utf8'));
    else if (e[1] === 'x') exit = e[2];
  }
  return { header, out: Buffer.concat(parts), exit, bad, events: lines.length - 1 };
}

await run('recording_failover', async () => {
  const pg = startPostgres();
  const base = tmpdir('recfail');
  const { dirs, rdir, admin, op } = replicaDirs(base, 3, pg);
  const recs = path.join(base, 'shared-recordings');
  const rs = [];
  for (let i = 0; i < 3; i++) rs.push(await startAirlockd({ dir: dirs[i], db: pg, args: ['--recordings', recs] }));
  const idOf = [];
  for (const r of rs) idOf.push((await api(r.port, 'GET', '/v1/replicas', admin)).json.find((x) => x.self).id);

  const front = await startFront(base, rs.map((x) => x.port));
  const runner = await startRunner({ id: 'st1', dir: rdir });
  let r = await api(rs[0].port, 'POST', '/v1/sandboxes', admin, { id: 'st1', kind: 'static', url: runner.url });
  check(r.status === 201 && r.json.owner === idOf[0], 'a static sandbox owned by replica 0');
  const sbOf = async (port) => (await api(port, 'GET', '/v1/sandboxes', admin)).json.find((x) => x.id === 'st1');
  await waitFor(async () => (await sbOf(rs[0].port)).link_up, 10000, 'the runner to be linked', 100);

  const s = pacedStream(base, 'stream', SIZE, 7, 40);
  r = await api(rs[0].port, 'POST', '/v1/terminals', op, { sandbox: 'st1', argv: s.argv });
  check(r.status === 201, 'a terminal that streams 16 MB, paced');
  const tid = r.json.id;
  const file = path.join(recs, `${tid}.cast`);
  await waitFor(() => fs.existsSync(file), 10000, 'its recording in the shared directory', 100);
  check(!fs.existsSync(path.join(dirs[0], 'recordings', `${tid}.cast`)), 'the recording is in the shared directory, not the data directory');
  // a client through the front, that comes back whenever it is cut
  // (the front may send it to the replica that is not the owner, which
  // relays it; a few tries in case one lands while a replica is busy)
  let cl = null;
  for (let i = 0; i < 6 && !cl; i++) cl = await faultyClient({ port: front.port, op }, tid, { read: true }).catch(() => null);
  check(cl !== null, 'a client attached through the front');
  // its ATTACHED before the output starts (else it is a late joiner, whose
  // start is a snapshot: through a replica that is not the owner the
  // ATTACH takes one more hop)
  await cl.ch.wait(() => cl.ch.roles >= 1, 'its ROLE (after ATTACHED)', 10000);
  go(s.go);
  const recBytes = async (port) => (await api(port, 'GET', `/v1/terminals/${tid}`, op)).json.recording_bytes;
  await waitFor(async () => (await recBytes(rs[0].port)) > 1e6, 20000, 'a first MB in the recording', 100);

  // ---- SIGSTOP the owner mid-stream: another replica takes over
  const inode0 = fs.statSync(file).ino;
  console.log(`before the freeze: the client holds ${cl.ch.next[1]} bytes, ${cl.ch.gaps || 0} gaps, at ${Date.now()}`);
  rs[0].p.kill('SIGSTOP');
  onCleanup(() => { try { rs[0].p.kill('SIGCONT'); } catch { /* gone */ } });
  let t0 = Date.now();
  let second = -1;
  await waitFor(async () => {
    for (const i of [1, 2]) {
      const x = await sbOf(rs[i].port);
      if (x.owner === idOf[i] && x.link_up) second = i;
    }
    return second > 0;
  }, TAKEOVER_MS, 'another replica to own the sandbox and link its runner', 200);
  check(true, `owner frozen: replica ${second} owns the sandbox after ${Date.now() - t0} ms`);
  const durable = await recBytes(rs[second].port);
  await waitFor(async () => (await recBytes(rs[second].port)) > durable, 10000, `the recording to grow under replica ${second}`, 100);
  check(fs.statSync(file).ino !== inode0,
    'the new owner goes on in a copy of the durable prefix (another file under the same name)');

  // ---- SIGCONT: the old owner gives the sandbox up and closes its recording
  const logFrom = fs.statSync(rs[0].log).size;
  rs[0].p.kill('SIGCONT');
  await waitFor(() => fs.readFileSync(rs[0].log, 'utf8').slice(logFrom).includes('sandbox st1: another replica owns it now'),
    10000, 'the old owner to give the sandbox up', 100);
  check(true, 'the old owner, woken, gives the sandbox up');

  // ---- kill -9 of the new owner mid-stream: a third owner goes on
  const before = await recBytes(rs[second].port);
  check(before < SIZE, `the stream is still going (${before} bytes recorded of ${SIZE})`);
  const inode1 = fs.statSync(file).ino;
  rs[second].p.kill('SIGKILL');
  await rs[second].exited;
  t0 = Date.now();
  let third = -1;
  await waitFor(async () => {
    for (const i of [0, 1, 2]) {
      if (i === second) continue;
      const x = await sbOf(rs[i].port);
      if (x.owner === idOf[i] && x.link_up) third = i;
    }
    return third >= 0;
  }, TAKEOVER_MS, 'a replica to own the sandbox after the kill', 200);
  const took = Date.now() - t0;
  check(took < TAKEOVER_MS, `owner killed (kill -9): replica ${third} owns the sandbox after ${took} ms (bound ${TAKEOVER_MS} ms)`);
  const durable2 = await recBytes(rs[third].port);
  await waitFor(async () => (await recBytes(rs[third].port)) > durable2, 10000, `the recording to grow under replica ${third}`, 100);
  check(fs.statSync(file).ino !== inode1, `replica ${third} goes on in a copy of the durable prefix`);
  const alive = [0, 1, 2].filter((i) => i !== second);

  // ---- the end: the recording holds the stream exactly once
  await waitFor(async () => (await api(rs[third].port, 'GET', `/v1/terminals/${tid}`, op)).json.state === 'exited',
    60000, 'the terminal to end', 200);
  await cl.ch.waitExit(30000);
  const got = cl.ch.output();
  check(got.length === s.data.length && sha(got) === sha(s.data) && !cl.ch.gaps,
    `the client through the front has the stream exactly once, no gap (${got.length} bytes, ${cl.reconnects} reconnects, ${cl.refusals || 0} refused at a replica not yet the owner, ${cl.ch.gaps || 0} gaps${(cl.ch.gapList || []).map((g) => ` [${g.from}, ${g.to}) at ${g.at} holding ${g.next}`).join('')}${cl.ch.snapshot ? `, a snapshot at ${cl.ch.snapshot.offset}` : ''})`);
  await sleep(500);
  for (const i of alive) {
    r = await api(rs[i].port, 'GET', `/v1/terminals/${tid}/recording`, admin);
    check(r.status === 200, `the recording read through replica ${i}: ${r.status}`);
    const c = castOutput(r.body);
    let diff = -1;
    if (sha(c.out) !== sha(s.data)) {
      const n = Math.min(c.out.length, s.data.length);
      for (diff = 0; diff < n && c.out[diff] === s.data[diff]; diff++);
    }
    check(c.bad === 0 && c.out.length === s.data.length && diff < 0 && String(c.exit) === '0',
      `through replica ${i}: ${c.events} events, the output exactly the stream (${c.out.length} of ${s.data.length} bytes${
        diff >= 0 ? `, first difference at ${diff}` : ''}${c.bad ? `, ${c.bad} unreadable lines` : ''}), exit ${c.exit}`);
  }
  const leftovers = fs.readdirSync(recs).filter((f) => f !== `${tid}.cast`);
  check(leftovers.length === 0, `nothing else in the recordings directory (${leftovers.join(', ')})`);
  for (const i of alive) await rs[i].stop();
}, 180000);
