// A runner that cannot make a snapshot never leaves airlockd's clients
// waiting (issue 11, divergence 1, the relay's half; docs/protocol.md §9,
// "Snapshot outcomes"; relay_output_snapshot_failed in
// src/control/relay_output.c). The runner is a fake: a host written with
// the independent JS implementation (tests/interop/airlock.mjs, Host),
// linked as a static sandbox (airlockd dials it), whose terminal prints
// what the test writes and whose SNAPSHOT_REQs the test answers:
//   1. ERROR STATE: both clients waiting for that one request get ERROR
//      STATE saying why (the runner's words), a GAP to the live output, no
//      SNAPSHOT, then live DATA;
//   2. ERROR TOO_BIG (what older runners said): the next client makes
//      airlockd ask again, and gets the same outcome;
//   3. no answer: the next client makes airlockd ask again, and gets the
//      outcome once RL_SNAP_TIMEOUT_US (20 s) has passed, not before;
//   4. a SNAPSHOT: the next client makes airlockd ask again, and is served
//      it (a failed request left nothing behind).
import path from 'node:path';
import { WebSocketServer } from 'ws';
import { run, check, tmpdir, sleep, onCleanup, waitFor } from '../interop/harness.mjs';
import { Host, E, STDOUT } from '../interop/airlock.mjs';
import { addUser, startAirlockd, api, attach } from '../interop/airlockd.mjs';

const SNAP_TIMEOUT_MS = 20000; // RL_SNAP_TIMEOUT_US (src/control/relay.h)
const PROMPT_MS = 5000; // an outcome the runner's ERROR decides comes within this
const COLS = 100, ROWS = 30;
const RUNNER_SAYS = 'no screen model for this channel';
const OUTCOME_RE = /^no screen snapshot \(/; // protocol.md §9: the message begins so

// The outcome a client got: its ERRORs on the terminal's channel, its
// stdout GAPs, its SNAPSHOTs, where its stdout stands.
function outcome(j) {
  const errs = j.ctl.errors.filter((e) => e.channel === 1);
  return { errs, msgs: errs.map((e) => `${e.code} ${e.msg}`).join('; ') || 'none',
    gaps: j.ch.gaps || 0, snapshots: j.ch.snapshots, next: j.ch.next[STDOUT] };
}

// A client attached to terminal id got a failed-snapshot outcome: ERROR
// STATE whose message says why (matches why), a GAP to at least `end` (the
// runner's stdout end then), no snapshot; then the live output.
async function failedOutcome(j, who, why, end, ms) {
  await j.ch.wait(() => j.ctl.errors.some((e) => e.channel === 1) && j.ch.next[STDOUT] >= end, `${who}: an outcome`, ms);
  const o = outcome(j);
  check(o.errs.length === 1 && o.errs[0].code === E.STATE && OUTCOME_RE.test(o.errs[0].msg) && why.test(o.errs[0].msg),
    `${who}: ERROR STATE saying why (${o.msgs})`);
  check(o.gaps === 1 && o.next === end && o.snapshots === 0, `${who}: then a GAP to the live output at ${end} (${o.gaps} GAP, now at ${o.next}), no SNAPSHOT`);
}

await run('relay_snapfail', async () => {
  const base = tmpdir('snapfail');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const viewer = addUser(dir, 'vic', 'viewer');

  // the fake runner: what each SNAPSHOT_REQ gets is the test's `answer`
  let answer = () => {};
  const host = new Host({ name: 'fake-runner', onSnapshotReq: (ch, h) => answer(ch, h) });
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.on('listening', r));
  const dials = [];
  wss.on('connection', (ws, req) => { dials.push(req.headers); host.adopt(ws); });
  onCleanup(async () => {
    for (const ws of wss.clients) ws.terminate();
    await new Promise((r) => wss.close(r));
  });

  const d = await startAirlockd({ dir });
  const url = `ws://127.0.0.1:${wss.address().port}/?identifier=fake&api-version=2024-02-02-preview`;
  let r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'fake', kind: 'static', url });
  check(r.status === 201, `a static sandbox whose runner is the fake (${r.status} ${r.body})`);
  await host.wait(() => host.ready, 'airlockd to dial the fake runner', 10000);
  check(/^Bearer /.test(dials[0].authorization || ''), 'airlockd dialed it with a bearer token');
  await waitFor(async () => (await api(d.port, 'GET', '/v1/sandboxes', admin)).json?.find((s) => s.id === 'fake')?.link_up,
    10000, 'the link to be up');

  r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'fake', cols: COLS, rows: ROWS, argv: ['agent'] });
  check(r.status === 201, `a PTY terminal on it (${r.status} ${r.body})`);
  const id = r.json.id;
  await host.wait(() => host.channels.size === 1, 'the OPEN');
  const [ch] = host.channels.keys();
  const term = host.channels.get(ch);
  check(term.mode === 0 && term.cols === COLS && term.rows === ROWS, `the runner got OPEN of a ${COLS}x${ROWS} PTY`);
  // the writer, there before any output: it needs no snapshot
  const w = await attach(d.port, id, op);
  await w.ch.wait(() => w.ch.role !== undefined, 'the writer\'s ROLE');
  host.write(ch, 'hello from the fake runner\r\n');
  await w.ch.waitOutput(/hello from the fake runner/);
  check(host.snapReqs.length === 0, 'the first client, there from the start, gets the output and needs no snapshot');
  host.write(ch, '\x1b[1mbefore the late joiners\x1b[0m\r\n');
  await w.ch.waitOutput(/before the late joiners/);

  // 1. ERROR STATE, two clients waiting for the one request
  answer = () => {}; // held until both wait
  const a1 = await attach(d.port, id, viewer);
  await host.wait(() => host.snapReqs.length === 1, 'SNAPSHOT_REQ for the first late joiner');
  const a2 = await attach(d.port, id, admin);
  await a2.ch.wait(() => a2.ch.roles > 0 && a2.ch.viewers.length === 3, 'the second late joiner attached');
  await sleep(200); // the behaviour under test: a second client adds no request while one is out
  check(host.snapReqs.length === 1, `two late joiners, one SNAPSHOT_REQ to the runner (${host.snapReqs.length})`);
  const end1 = term.out.length;
  host.error(ch, E.STATE, RUNNER_SAYS);
  for (const [who, j] of [['late joiner 1', a1], ['late joiner 2', a2]]) {
    await failedOutcome(j, `ERROR STATE, ${who}`, /the runner says: no screen model for this channel/, end1, PROMPT_MS);
  }
  host.write(ch, 'LIVE-1\r\n');
  for (const j of [a1, a2, w]) await j.ch.waitOutput(/LIVE-1/);
  check(true, 'then both get the live output (and the writer still does)');

  // 2. ERROR TOO_BIG: asked again for the next client
  answer = (c, h) => h.error(c, E.TOO_BIG, 'snapshot over 4 MiB');
  const b = await attach(d.port, id, viewer);
  await failedOutcome(b, 'ERROR TOO_BIG, the next client', /the runner says: snapshot over 4 MiB/, term.out.length, PROMPT_MS);
  check(host.snapReqs.length === 2, `airlockd asked the runner again for it (${host.snapReqs.length} SNAPSHOT_REQs)`);
  host.write(ch, 'LIVE-2\r\n');
  await b.ch.waitOutput(/LIVE-2/);
  check(true, 'then it gets the live output');

  // 3. no answer at all: the outcome after RL_SNAP_TIMEOUT_US
  answer = () => {};
  const t0 = Date.now();
  const c = await attach(d.port, id, viewer);
  await host.wait(() => host.snapReqs.length === 3, 'SNAPSHOT_REQ for the next client');
  check(true, 'airlockd asked the runner again for the next client');
  const asked = host.snapReqs[2].at;
  await failedOutcome(c, 'no answer', /did not answer in time/, term.out.length, SNAP_TIMEOUT_MS + 10000);
  const waited = Date.now() - asked;
  check(waited >= SNAP_TIMEOUT_MS - 500, `the outcome came ${waited} ms after the request, once RL_SNAP_TIMEOUT_US had passed (attached ${Date.now() - t0} ms ago)`);
  host.write(ch, 'LIVE-3\r\n');
  await c.ch.waitOutput(/LIVE-3/);
  check(true, 'then it gets the live output');

  // 4. a SNAPSHOT: asked again, and served
  answer = (cc, h) => h.snapshot(cc, '\x1b[H\x1b[2JTHE-SCREEN');
  const e = await attach(d.port, id, viewer);
  await e.ch.wait(() => e.ch.snapshots > 0 || e.ctl.errors.length > 0, 'a snapshot', PROMPT_MS);
  const o = outcome(e);
  check(host.snapReqs.length === 4 && o.snapshots === 1 && e.ch.resyncs.length === 1 && o.errs.length === 0 &&
    /THE-SCREEN/.test(e.ch.snapshot.bytes.toString()) && e.ch.snapshot.offset === term.out.length,
  `after those failures the next client makes airlockd ask again and is served the SNAPSHOT (${host.snapReqs.length} requests; errors: ${o.msgs})`);
  host.write(ch, 'LIVE-4\r\n');
  for (const j of [w, a1, a2, b, c, e]) await j.ch.waitOutput(/LIVE-4/);
  check(true, 'every client, whatever its snapshot\'s outcome, has the live output');
});
