// airlockd on PostgreSQL, end to end: a throw-away server
// (tests/tools/pg-temp.sh: unix socket only, stopped and removed at the
// end), `airlockd user add|ls --db URL`, `airlockd serve --db URL` (the data
// directory keeps the signing key and the recordings, and no airlock.db), a
// local sandbox whose terminal's output and exit code reach a client; then
// kill -9 airlockd in the middle of a checksummed 5 MB stream and start it
// again on the same database: the client resumes with every byte exactly
// once, and so does the recording. The recording's durable point stored
// with the offsets (its size, time and exit, schema 8) matches the file;
// with the time taken away (a row from before schema 8) the restart reads
// the recording whole and resumes it as well. The URL's password appears
// in no log, no error and nothing the runner can see.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { run, check, tmpdir, sleep, pollUntil, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, checksummedStream } from '../interop/airlockd.mjs';
import { startPostgres } from '../interop/pg.mjs';

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
const PASSWORD = 'pw-Secret-7q';
const STREAM_BYTES = 5e6;

// SQL behind airlockd's back (psql comes with the server's packages).
const psql = (db, sql) => execFileSync('psql', ['-XAtq', '-d', db, '-c', sql], { timeout: 20000 }).toString().trim();

// The recording's point as the row has it, and as the file says at that
// size: the sum of the intervals (µs) and whether an exit lies within.
function recPoint(db, dir, id) {
  const [bytes, time, exited] = psql(db, `SELECT rec_bytes, rec_time_us, rec_exited FROM terminals WHERE id = '${id}'`).split('|');
  const buf = fs.readFileSync(path.join(dir, 'recordings', `${id}.cast`)).subarray(0, Number(bytes));
  let us = 0;
  let x = false;
  for (const l of buf.toString('utf8').split('\n').slice(1)) {
    if (!l) continue;
    const ev = JSON.parse(l);
    us += Math.round(ev[0] * 1e6);
    if (ev[1] === 'x') x = true;
  }
  return { bytes: Number(bytes), time: time === '' ? null : Number(time), exited: exited === 't', fileTime: us, fileExited: x };
}

async function waitLink(port, key, id, ms = 20000) {
  for (const until = Date.now() + ms; Date.now() < until; await sleep(100)) {
    const r = await api(port, 'GET', '/v1/sandboxes', key);
    const s = r.json && r.json.find((x) => x.id === id);
    if (s && s.link_up) return s;
  }
  throw new Error(`sandbox ${id}: link never came up`);
}

await run('airlockd_pg', async () => {
  const db = startPostgres(PASSWORD);
  const base = tmpdir('pg');
  const dir = path.join(base, 'data');

  // ---- users, through the CLI, in PostgreSQL
  const admin = addUser(dir, 'ada', 'admin', db);
  const op = addUser(dir, 'otto', 'operator', db);
  check(/^alk_/.test(admin) && /^alk_/.test(op), 'airlockd user add --db URL prints the new keys');
  const ls = execFileSync(path.join(BIN, 'airlockd'), ['user', 'ls', '--db', db]).toString();
  check(/^ada +admin /m.test(ls) && /^otto +operator /m.test(ls), 'airlockd user ls --db URL lists them');
  const dup = spawnSync(path.join(BIN, 'airlockd'), ['user', 'add', 'ada', '--role', 'viewer', '--db', db]);
  check(dup.status === 1 && /user ada already exists/.test(dup.stderr) && !dup.stderr.includes(PASSWORD),
    'a duplicate user: exit 1, one clear line, no password');
  const bad = spawnSync(path.join(BIN, 'airlockd'),
    ['user', 'ls', '--db', db.replace(/\/postgres\?/, '/nosuchdb?')]);
  check(bad.status === 1 && /nosuchdb/.test(bad.stderr) && !bad.stderr.includes(PASSWORD),
    `an unknown database: exit 1 (${bad.stderr.toString().trim()})`);

  // ---- serve on PostgreSQL: output and exit code end to end
  let d = await startAirlockd({ dir, db });
  const port = d.port;
  check(fs.existsSync(path.join(dir, 'signing-key.pem')), 'the data directory holds the signing key');
  let r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'box', kind: 'local' });
  check(r.status === 201, 'an admin (whose key is in PostgreSQL) adds a local sandbox');
  await waitLink(port, admin, 'box');
  r = await api(port, 'POST', '/v1/terminals', op,
    { sandbox: 'box', argv: ['sh', '-c', 'printf out; printf err >&2; exit 7'], mode: 'pipes' });
  check(r.status === 201, 'a terminal in pipe mode');
  let a = await attach(port, r.json.id, op, { mode: 1 });
  await a.ch.waitExit(20000);
  check(a.ch.exit.code === 7 && Buffer.concat(a.ch.out).toString() === 'out' &&
    Buffer.concat(a.ch.err || []).toString() === 'err', 'stdout, stderr and exit code 7 reach the client');
  const tid = r.json.id;
  r = await pollUntil(() => api(port, 'GET', `/v1/terminals/${tid}`, op), (x) => x.json && x.json.state === 'exited', 10000);
  check(r.json.state === 'exited' && r.json.exit_code === 7, 'the terminal is stored as exited with code 7');

  // ---- kill -9 in the middle of a stream, restart on the same database
  const work = path.join(dir, 'sandboxes', 'box', 'work');
  const { expected, argv } = checksummedStream(work, STREAM_BYTES);
  r = await api(port, 'POST', '/v1/terminals', op,
    { sandbox: 'box', argv });
  check(r.status === 201, 'a terminal that prints 5 MB');
  const id = r.json.id;
  a = await attach(port, id, op);
  await a.ctl.wait(() => a.ch.next[1] >= 1.5e6, '1.5 MB received', 60000);
  d.p.kill('SIGKILL');
  await d.exited;
  const cut = a.ch.next[1];
  check(cut < expected.length, `airlockd killed with -9 after ${cut} bytes of ${expected.length}`);
  await a.ctl.wait(() => a.ctl.closeInfo, 'the client sees the drop', 10000);
  let p = recPoint(db, dir, id);
  check(p.bytes > 0 && p.time !== null && p.time === p.fileTime && !p.exited && !p.fileExited,
    `the row has the recording's durable point: ${p.bytes} bytes, time ${p.time} us = the sum of its intervals, no exit`);
  // as a row from before schema 8: the restart must read the recording whole
  psql(db, `UPDATE terminals SET rec_time_us = NULL WHERE id = '${id}'`);

  d = await startAirlockd({ dir, port, db });
  for (let i = 0; ; i++) {
    try { await a.ctl.connect(a.url, a.headers); break; } catch (e) { if (i > 50) throw e; await sleep(200); }
  }
  await a.ch.waitExit(120000);
  const got = Buffer.concat(a.ch.out);
  check(!a.ch.gaps, 'no gap was reported to the client');
  check(got.length === expected.length && sha(got) === sha(expected),
    `the client has the stream exactly once (${got.length} bytes, sha256 ${sha(got).slice(0, 12)}…)`);
  check(a.ch.exit.code === 0, 'and its exit code 0');
  r = await pollUntil(() => api(port, 'GET', `/v1/terminals/${id}`, op), (x) => x.json && x.json.state === 'exited', 10000);
  check(r.json.state === 'exited' && r.json.exit_code === 0 && r.json.out_bytes === expected.length,
    'after the restart PostgreSQL has the terminal exited with code 0 and its whole offset');
  let out = '';
  let exits = 0;
  for (const l of fs.readFileSync(path.join(dir, 'recordings', `${id}.cast`), 'utf8').split('\n').slice(1)) {
    if (!l) continue;
    const ev = JSON.parse(l);
    if (ev[1] === 'o') out += ev[2];
    if (ev[1] === 'x') exits++;
  }
  const rec = Buffer.from(out, 'utf8');
  check(exits === 1 && rec.length === expected.length && sha(rec) === sha(expected),
    `the recording (in the data directory) holds the stream exactly once (${rec.length} bytes)`);

  // ---- nothing went to SQLite, the password went nowhere
  check(!fs.existsSync(path.join(dir, 'airlock.db')), 'no airlock.db in the data directory');
  const pid = Number(fs.readFileSync(path.join(dir, 'sandboxes', 'box', 'run', 'runner.pid'), 'utf8'));
  for (const f of ['environ', 'cmdline']) {
    check(!fs.readFileSync(`/proc/${pid}/${f}`).includes(PASSWORD), `the runner's ${f} holds no database password`);
  }
  const st = await d.stop();
  check(st.code === 0, 'airlockd stops cleanly');
  p = recPoint(db, dir, id);
  const size = fs.statSync(path.join(dir, 'recordings', `${id}.cast`)).size;
  check(p.time !== null && p.time === p.fileTime && p.exited && p.fileExited && p.bytes === size,
    `the row's recording point is stored again, up to the exit event (${p.bytes} bytes of ${size}, time ${p.time} us = the sum of the intervals)`);
  for (const log of fs.readdirSync(base).filter((n) => n.startsWith('airlockd-'))) {
    check(!fs.readFileSync(path.join(base, log), 'utf8').includes(PASSWORD), `${log} holds no database password`);
  }
}, 240000);
