// Fair shares and recording privacy in airlockd (docs/security.md):
//  - attach slots: one viewer key attaching 64 times gets its per-user share
//    (RL_MAX_CLIENTS_PER_USER) and a clear 429; others fill the rest up to
//    the reserved slots; the admin and the terminal's creator still attach;
//  - a snapshot flood from one client (2000 SNAPSHOT_REQs) gets its rate's
//    share, the last one still answered with the current screen, and
//    airlockd and the runner stay cool;
//  - recordings keep no keystrokes unless the sandbox has record_input (the
//    writer's identity is kept either way); only admins and the terminal's
//    creator may read a recording;
//  - a terminal above the screen model's cell limit (VT_MAX_CELLS): the
//    runner refuses its OPEN, airlockd audits open_failed with the runner's
//    message and marks the terminal lost; nothing is left attachable, and
//    the sandbox's other terminals are unaffected.
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, rawHttp, sleep } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, addLocalSandbox, screenBytes } from '../interop/airlockd.mjs';
import { enc } from '../interop/airlock.mjs';

const MAX_CLIENTS = 64, PER_USER = 8, RESERVED = 8; // relay.h
const SNAP_BURST = 4, SNAP_INTERVAL_MS = 250;
const FLOOD = 2000;
const VT_MAX_CELLS = 1 << 20; // src/runner/vt.h: cols x rows of one screen model

// CPU seconds (user + system) of every process in a process group.
function groupCpu(pgrp) {
  let sum = 0;
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const f = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
      if (Number(rest[2]) === pgrp) sum += (Number(rest[11]) + Number(rest[12])) / 100;
    } catch { /* gone */ }
  }
  return sum;
}

// CPU seconds (user + system) of one process.
function cpuOf(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(rest[11]) + Number(rest[12])) / 100;
}

// An attach upgrade by hand, to read the refusal's status and body.
async function tryAttach(port, id, key) {
  return rawHttp(port, `GET /v1/terminals/${id}/attach?mode=read HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
    'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: airlock.v1\r\n' +
    `Authorization: Bearer ${key}\r\n\r\n`);
}

async function waitState(port, key, id, pred, what, ms = 15000) {
  for (const until = Date.now() + ms; Date.now() < until; await sleep(100)) {
    const r = await api(port, 'GET', `/v1/terminals/${id}`, key);
    if (r.json && pred(r.json)) return r.json;
  }
  throw new Error(`terminal ${id}: ${what} not reached`);
}

// Type a "password" with the tty's echo off, as a password prompt does.
async function typeSecret(port, sandbox, creatorKey, secret) {
  // ECHO-OFF once the tty's echo is off: typed from then on, the bytes are
  // not echoed (the tty holds them until the read)
  const argv = ['sh', '-c', 'stty -echo; echo ECHO-OFF; read x; stty echo; echo "got $(printf %s "$x" | tr a-z A-Z)"; exec sleep 300'];
  const r = await api(port, 'POST', '/v1/terminals', creatorKey, { sandbox, argv });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, creatorKey);
  await a.ch.wait(() => a.ch.role === 1, 'writer role');
  // on the screen: output or, when the shell printed it before the attach,
  // the snapshot a fresh client starts from
  await a.ch.wait(() => /ECHO-OFF/.test(screenBytes(a.ch).toString('latin1')), 'ECHO-OFF on the screen', 10000);
  a.ch.write(`${secret}\r`);
  await a.ch.waitOutput(new RegExp(`got ${secret.toUpperCase()}`), 10000);
  a.ctl.ws.close();
  await sleep(500); // a sync interval or two
  const d = await api(port, 'DELETE', `/v1/terminals/${r.json.id}`, creatorKey);
  if (d.status !== 202) throw new Error(`close: ${d.status}`);
  await waitState(port, creatorKey, r.json.id, (t) => t.state === 'closed', 'closed');
  return r.json;
}

function events(cast) {
  return cast.trim().split('\n').slice(1).map((l) => JSON.parse(l));
}

await run('airlockd_fair', async () => {
  const base = tmpdir('fair');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const creator = addUser(dir, 'otto', 'operator');
  const other = addUser(dir, 'olga', 'operator');
  const viewer = addUser(dir, 'vic', 'viewer');
  const crowd = [];
  for (let i = 1; i <= (MAX_CLIENTS - RESERVED) / PER_USER - 1; i++) crowd.push(addUser(dir, `v${i}`, 'viewer'));
  const d = await startAirlockd({ dir });
  await addLocalSandbox(d.port, admin, 'box');
  let r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'rec', kind: 'local', record_input: true });
  check(r.status === 201 && r.json.record_input === true, 'a sandbox made with record_input: true says so');
  r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'bad', kind: 'local', record_input: 'yes' });
  check(r.status === 400 && /record_input/.test(r.json.error), 'record_input must be a boolean: 400');
  await addLocalSandbox(d.port, admin, 'box2');
  r = await api(d.port, 'GET', '/v1/sandboxes', admin);
  check(r.json.find((s) => s.id === 'box').record_input === false, 'record_input is off by default');
  for (const until = Date.now() + 10000; Date.now() < until; await sleep(100)) {
    r = await api(d.port, 'GET', '/v1/sandboxes', admin);
    if (r.json.find((s) => s.id === 'rec').link_up) break;
  }

  // ---- recordings: no keystrokes unless the sandbox records input ----------
  const plain = await typeSecret(d.port, 'box', creator, 'hunter-two');
  check(plain.creator === 'otto' && plain.record_input === false, 'the terminal shows its creator and record_input false');
  r = await api(d.port, 'GET', `/v1/terminals/${plain.id}/recording`, creator);
  check(r.status === 200, 'the creator reads the recording');
  let ev = events(r.body);
  check(!ev.some((e) => e[1] === 'i'), `record_input off: no "i" events (${ev.length} events)`);
  check(!r.body.includes('hunter-two'), 'record_input off: the typed secret is nowhere in the recording');
  check(ev.some((e) => e[1] === 'm' && e[2] === 'writer: otto'), 'the writer\'s identity is kept (marker "writer: otto")');
  check(ev.some((e) => e[1] === 'o' && /got HUNTER-TWO/.test(e[2])), 'the output is recorded');
  const withIn = await typeSecret(d.port, 'rec', creator, 'hunter-three');
  check(withIn.record_input === true, 'a terminal on the record_input sandbox records input');
  r = await api(d.port, 'GET', `/v1/terminals/${withIn.id}/recording`, admin);
  check(r.status === 200, 'an admin reads the recording');
  ev = events(r.body);
  check(ev.filter((e) => e[1] === 'i').map((e) => e[2]).join('').includes('hunter-three'),
    'record_input on: the keystrokes are kept as "i" events');

  // ---- who may read a recording --------------------------------------------
  r = await api(d.port, 'GET', `/v1/terminals/${plain.id}/recording`, viewer);
  check(r.status === 403 && /admins and the terminal's creator/.test(r.json.error), `a viewer: 403 (${r.json && r.json.error})`);
  r = await api(d.port, 'GET', `/v1/terminals/${plain.id}/recording`, other);
  check(r.status === 403, 'an operator who is not the creator: 403');
  r = await api(d.port, 'GET', `/v1/terminals/${plain.id}/recording`, admin);
  check(r.status === 200, 'an admin: 200');

  // ---- a terminal above the screen model's cell limit ------------------------
  const big = { cols: 1025, rows: 1024 }; // just above VT_MAX_CELLS, well within the screen budget
  check(big.cols * big.rows > VT_MAX_CELLS, `${big.cols}x${big.rows} is above ${VT_MAX_CELLS} cells`);
  r = await api(d.port, 'POST', '/v1/terminals', creator, { sandbox: 'box', argv: ['sh', '-c', 'echo never-ran; exec sleep 300'], ...big });
  check(r.status === 201 && r.json.state === 'opening' && r.json.cols === big.cols,
    `the API takes the request (the runner decides): ${r.status} ${r.json && r.json.state}`);
  const bigId = r.json.id;
  const lost = await waitState(d.port, creator, bigId, (t) => t.state !== 'opening', 'the runner\'s answer');
  check(lost.state === 'lost' && lost.exit_code === 127 && lost.ended_at > 0,
    `the terminal is marked lost, exit code 127 (${lost.state}, ${lost.exit_code})`);
  r = await api(d.port, 'GET', '/v1/audit', admin);
  const refused = (r.json || []).filter((e) => e.action === 'open_failed' && e.target === bigId);
  const why = refused.length === 1 ? JSON.parse(refused[0].detail).error : '';
  check(refused.length === 1 && refused[0].actor === 'system',
    `one open_failed audit row for the terminal (${refused.length})`);
  check(why === `${big.cols}x${big.rows} is ${big.cols * big.rows} cells, above the screen model's limit of ${VT_MAX_CELLS}`,
    `the row holds the runner's message: "${why}"`);
  let res = await tryAttach(d.port, bigId, creator);
  check(res.status === 404, `an attach to it finds no live terminal (${res.status} ${res.body})`);
  r = await api(d.port, 'POST', '/v1/terminals', creator, { sandbox: 'box', argv: ['sh', '-c', 'echo fine-$((6*7)); exec sleep 300'], cols: 1024, rows: 1024 });
  check(r.status === 201, 'a terminal at the limit (1024x1024) is made');
  const atLimit = await waitState(d.port, creator, r.json.id, (t) => t.state === 'running' && t.out_bytes > 0, 'the terminal at the limit running');
  check(atLimit.cols === 1024 && atLimit.rows === 1024, 'and runs at 1024x1024: the refusal is the limit\'s, not the sandbox\'s');
  r = await api(d.port, 'DELETE', `/v1/terminals/${r.json.id}`, creator);
  check(r.status === 202, 'closed again (its screen budget back)');

  // ---- attach slots ---------------------------------------------------------
  const script = 'i=0; while [ $i -lt 40 ]; do printf "\\033[3%dm%070d\\033[0m\\r\\n" $((i%8)) $i; i=$((i+1)); done; printf MARK-END; exec sleep 300';
  r = await api(d.port, 'POST', '/v1/terminals', creator, { sandbox: 'box2', argv: ['sh', '-c', script], cols: 100, rows: 40 });
  check(r.status === 201, 'a terminal for the slot and flood tests');
  const tid = r.json.id;
  await waitState(d.port, creator, tid, (t) => t.out_bytes > 3000, 'output');
  let got = 0, refusal = null;
  for (let i = 0; i < MAX_CLIENTS; i++) { // one viewer key, 64 attempts
    try { await attach(d.port, tid, viewer, { read: true }); got++; } catch (e) { refusal = e; break; }
  }
  check(got === PER_USER && refusal && refusal.status === 429, `one viewer key gets ${got} of ${MAX_CLIENTS} slots, then 429`);
  res = await tryAttach(d.port, tid, viewer);
  check(res.status === 429 && /the most for one user/.test(res.body), `the refusal says why: ${res.body}`);
  for (const k of crowd) for (let i = 0; i < PER_USER; i++) await attach(d.port, tid, k, { read: true });
  res = await tryAttach(d.port, tid, other);
  check(res.status === 429 && /kept for admins and its creator/.test(res.body),
    `with ${MAX_CLIENTS - RESERVED} attached, another user is refused: ${res.body}`);
  const adm = await attach(d.port, tid, admin, { read: true });
  await adm.ch.wait(() => adm.ch.snapshot, 'the admin\'s snapshot');
  check(/MARK-END/.test(adm.ch.snapshot.bytes.toString('latin1')), 'the admin still attaches, and sees the screen');
  const own = await attach(d.port, tid, creator, { read: true });
  await own.ch.wait(() => own.ch.snapshot, 'the creator\'s snapshot');
  check(true, 'the terminal\'s creator still attaches');
  r = await api(d.port, 'GET', `/v1/terminals/${tid}`, admin);
  check(r.json.viewers.length === MAX_CLIENTS - RESERVED + 2, `the API lists ${r.json.viewers.length} attached`);

  // ---- a snapshot flood through airlockd -------------------------------------
  const pid = Number(fs.readFileSync(path.join(dir, 'sandboxes', 'box2', 'run', 'runner.pid'), 'utf8'));
  await sleep(SNAP_BURST * SNAP_INTERVAL_MS + 100);
  const ch = adm.ch, before = ch.snapshots;
  const cpuR0 = groupCpu(pid), cpuD0 = cpuOf(d.p.pid), t0 = Date.now();
  for (let i = 0; i < FLOOD; i++) {
    adm.ctl.send(enc.snapshotReq(1));
    if (i % 100 === 99) await sleep(10); // bounded: 2000 requests in about 0.2 s
  }
  const sentMs = Date.now() - t0;
  await sleep(2 * SNAP_INTERVAL_MS); // the deferred one comes within an interval
  await ch.wait(() => ch.snapshots > before, 'the flood answered', 10000);
  const wall = (Date.now() - t0) / 1000;
  const made = ch.snapshots - before, most = SNAP_BURST + Math.ceil((wall * 1000) / SNAP_INTERVAL_MS) + 1;
  check(made >= 1 && made <= most, `${FLOOD} SNAPSHOT_REQs in ${sentMs} ms gave the client ${made} snapshots (at most ${most})`);
  const cpuR = groupCpu(pid) - cpuR0, cpuD = cpuOf(d.p.pid) - cpuD0;
  check(cpuR / wall < 0.3 && cpuD / wall < 0.5,
    `during the flood: runner ${(100 * cpuR / wall).toFixed(1)} %, airlockd ${(100 * cpuD / wall).toFixed(1)} % of a core`);
  check(/MARK-END/.test(ch.snapshot.bytes.toString('latin1')) && ch.snapshot.cols === 100,
    'the last snapshot is the current screen');
  check(adm.ctl.ready && !adm.ctl.closeInfo, 'the flooding client is still connected');
}, 200000);
