// A screen whose exact snapshot would exceed AL_MAX_SNAPSHOT (4 MiB) is
// still served (docs/snapshots.md, "When a snapshot would be too big";
// docs/protocol.md §8): a 1000 × 1000 PTY terminal with 400 rows of
// truecolour cells (about 8 MB of output). Against the runner alone, a
// SNAPSHOT_REQ gets a SNAPSHOT within the limit whose text is the screen's
// (the attributes dropped), again and again, and an exact one once the
// screen is cleared. Through airlockd, a late joiner, a later one and the
// writer itself each get that screen within a bounded time; keystrokes
// still reach the terminal; after the clear a late joiner sees the screen
// cell for cell and a fresh snapshot is exact again.
// SNAPSHOT_LIMIT_PART=runner or =relay runs one half only.
import path from 'node:path';
import xtermHeadless from '@xterm/headless';
import { run, check, tmpdir, keygen, mint, startRunner } from '../interop/harness.mjs';
import { Controller, enc } from '../interop/airlock.mjs';
import { addUser, startAirlockd, addLocalSandbox, api, attach, screenBytes } from '../interop/airlockd.mjs';

const { Terminal } = xtermHeadless;
const COLS = 1000, ROWS = 1000, FILLED = 400;
const MAX_SNAPSHOT = 4 * 1024 * 1024;
const SERVED_MS = 15000; // "within a bounded time"
const PART = process.env.SNAPSHOT_LIMIT_PART || 'both';

// The program: FILLED rows of COLS letters, each cell with its own
// truecolour foreground; then, after a line of input, a clear and one
// coloured line.
const FILL = "awk 'BEGIN{for(r=0;r<" + FILLED + ';r++){s="";for(c=0;c<' + COLS +
  ';c++)s=s sprintf("\\033[38;2;%d;%d;%dm%c",r%256,c%256,(r+c)%256,65+(r+c)%26);printf "%s\\r\\n",s}}\'';
const SCRIPT = `stty -echo; ${FILL}; printf 'FILL-DONE'; read x; printf '\\033[H\\033[2J\\033[3J'; ` +
  `printf '\\033[38;2;1;2;3mhello after clear\\033[0m CLEAR-DONE'; exec sleep 600`;
const rowText = (r) => Array.from({ length: COLS }, (_, c) => String.fromCharCode(65 + ((r + c) % 26))).join('');

// The screen bytes give in a fresh xterm: its first `upto` rows as text,
// the cursor, and the foreground of cell (0, 0) (mode:colour).
function render(bytes, upto = FILLED + 2) {
  const t = new Terminal({ cols: COLS, rows: ROWS, allowProposedApi: true, scrollback: 0 });
  return new Promise((resolve) => t.write(bytes, () => {
    const b = t.buffer.active, rows = [];
    for (let y = 0; y < upto; y++) rows.push(b.getLine(b.viewportY + y).translateToString(true));
    const c = b.getLine(b.viewportY).getCell(0);
    const res = { rows, cursor: [b.cursorX, b.cursorY], fg0: `${c.getFgColorMode()}:${c.getFgColor()}` };
    t.dispose();
    resolve(res);
  }));
}

function filledOk(scr) {
  for (let r = 0; r < FILLED; r++) if (scr.rows[r] !== rowText(r)) return `row ${r}: ${JSON.stringify(scr.rows[r].slice(0, 40))}`;
  if (scr.rows[FILLED] !== 'FILL-DONE') return `row ${FILLED}: ${JSON.stringify(scr.rows[FILLED])}`;
  if (scr.cursor[0] !== 9 || scr.cursor[1] !== FILLED) return `cursor ${scr.cursor}`;
  return '';
}

const truecolours = (buf) => (buf.toString('latin1').match(/\x1b\[38;2;/g) || []).length;
const truecolour = (buf) => truecolours(buf) > 0;

async function runnerPart() {
  const dir = tmpdir('snaplim');
  keygen(dir);
  const r = await startRunner({ dir });
  const ctl = new Controller();
  await ctl.connect(r.url, { Authorization: `Bearer ${mint(dir, r.id)}` });
  const ch = ctl.open(['sh', '-c', SCRIPT], { cols: COLS, rows: ROWS });
  await ch.waitOutput(/FILL-DONE/, 60000);
  check(ch.output().length > MAX_SNAPSHOT, `runner: the program printed ${ch.output().length} bytes`);
  for (let i = 1; i <= 3; i++) {
    const before = ch.snapshots, errs = ctl.errors.length;
    ctl.send(enc.snapshotReq(ch.id));
    await ch.wait(() => ch.snapshots > before || ctl.errors.length > errs, 'a SNAPSHOT or an ERROR', SERVED_MS);
    check(ch.snapshots > before, `runner: SNAPSHOT_REQ ${i} is answered with a SNAPSHOT ` +
      `(${ctl.errors.slice(errs).map((e) => `ERROR ${e.code} ${e.msg}`).join('; ') || 'no error'})`);
    const s = ch.snapshot;
    check(s.bytes.length <= MAX_SNAPSHOT && s.cols === COLS && s.rows === ROWS && s.offset === ch.output().length,
      `runner: snapshot ${i} is ${s.bytes.length} bytes (<= 4 MiB), ${s.cols}x${s.rows}, at offset ${s.offset}`);
    // (the program's pen, which the plain step keeps, is the last cell's colour)
    check(truecolours(s.bytes) <= 1, `runner: it is the plain step: the cells' attributes dropped (${truecolours(s.bytes)} truecolour SGR)`);
    const bad = filledOk(await render(s.bytes));
    check(!bad, `runner: it redraws every character and the cursor ${bad}`);
  }
  ch.write('\r');
  await ch.waitOutput(/CLEAR-DONE/, 20000);
  const before = ch.snapshots;
  ctl.send(enc.snapshotReq(ch.id));
  await ch.wait(() => ch.snapshots > before, 'a snapshot after the clear', SERVED_MS);
  const scr = await render(ch.snapshot.bytes, 2);
  check(truecolour(ch.snapshot.bytes) && scr.rows[0] === 'hello after clear CLEAR-DONE' && scr.fg0 === `${3 << 24}:${0x010203}`,
    `runner: after the clear the snapshot is exact again, colours included (${ch.snapshot.bytes.length} bytes)`);
}

async function relayPart() {
  const base = tmpdir('snaplim-relay');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const viewer = addUser(dir, 'vic', 'viewer');
  const d = await startAirlockd({ dir });
  await addLocalSandbox(d.port, admin);
  const r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', cols: COLS, rows: ROWS, argv: ['sh', '-c', SCRIPT] });
  check(r.status === 201, `relay: a ${COLS}x${ROWS} terminal (${r.status} ${r.body})`);
  const id = r.json.id;
  const w = await attach(d.port, id, op);
  // (in the snapshot, when the writer itself was resynced after the end)
  await w.ch.wait(() => /FILL-DONE/.test(screenBytes(w.ch).toString('latin1')), 'FILL-DONE on the writer\'s screen', 60000);
  // what the terminal printed, from the API: the writer itself may have
  // been resynced on a loaded machine (a client more than the log behind)
  const info = await api(d.port, 'GET', `/v1/terminals/${id}`, op);
  check(info.json.out_bytes > MAX_SNAPSHOT,
    `relay: the terminal printed ${info.json.out_bytes} bytes (the writer got ${w.ch.output().length}, ` +
    `${w.ch.resyncs.length} resyncs)`);

  // late joiners, one after the other, each get the screen
  for (const [who, key] of [['a late joiner', viewer], ['a later one', viewer], ['another later one', admin]]) {
    const t0 = Date.now();
    const j = await attach(d.port, id, key);
    await j.ch.wait(() => j.ch.snapshots > 0 || j.ctl.errors.length > 0, `${who}: a snapshot or an error`, SERVED_MS);
    check(j.ch.snapshots > 0 && j.ch.resyncs.length === 1,
      `relay: ${who} gets GAP and SNAPSHOT in ${Date.now() - t0} ms (${j.ch.snapshot?.bytes.length} bytes; ` +
      `errors: ${j.ctl.errors.map((e) => `${e.code} ${e.msg}`).join('; ') || 'none'})`);
    check(j.ch.snapshot.bytes.length <= MAX_SNAPSHOT, `relay: ${who}'s snapshot is within 4 MiB`);
    // a snapshot cached earlier (the writer's resync) is followed by the log
    // from its offset: the screen is whole once the joiner has it all
    await j.ch.wait(() => j.ch.next[1] >= info.json.out_bytes, `${who}: the output up to the end`, SERVED_MS);
    const bad = filledOk(await render(screenBytes(j.ch)));
    check(!bad, `relay: ${who} sees every character and the cursor ${bad}`);
  }

  // the writer asks for a snapshot of its own
  const before = w.ch.snapshots, errs = w.ctl.errors.length;
  w.ctl.send(enc.snapshotReq(1));
  await w.ch.wait(() => w.ch.snapshots > before || w.ctl.errors.length > errs, 'the writer: a snapshot or an error', SERVED_MS);
  check(w.ch.snapshots > before, 'relay: the writer\'s SNAPSHOT_REQ is answered with a SNAPSHOT');
  const bad = filledOk(await render(screenBytes(w.ch)));
  check(!bad, `relay: the writer's snapshot redraws the screen ${bad}`);

  // keystrokes reach the terminal; after the clear, a late joiner's screen
  // is the writer's, and a fresh snapshot is exact
  w.ch.write('\r');
  await w.ch.waitOutput(/CLEAR-DONE/, 20000);
  const j = await attach(d.port, id, viewer);
  await j.ch.wait(() => j.ch.snapshots > 0 && /CLEAR-DONE/.test(screenBytes(j.ch).toString('latin1')),
    'a late joiner after the clear: the screen', SERVED_MS);
  const want = await render(screenBytes(w.ch), 2), got = await render(screenBytes(j.ch), 2);
  check(got.rows[0] === 'hello after clear CLEAR-DONE' && got.rows[1] === '' && got.fg0 === want.fg0 &&
    want.fg0 === `${3 << 24}:${0x010203}` && got.cursor.join() === want.cursor.join(),
    `relay: a late joiner after the clear sees the writer's screen, colours included (${JSON.stringify(got.rows[0])})`);
  const n = j.ch.snapshots;
  j.ctl.send(enc.snapshotReq(1));
  await j.ch.wait(() => j.ch.snapshots > n, 'a fresh snapshot after the clear', SERVED_MS);
  check(truecolour(j.ch.snapshot.bytes) && /hello after clear/.test(j.ch.snapshot.bytes.toString('latin1')),
    `relay: a fresh snapshot after the clear is exact again (${j.ch.snapshot.bytes.length} bytes)`);
  await d.stop();
}

await run('snapshot_limit', async () => {
  if (PART !== 'relay') await runnerPart();
  if (PART !== 'runner') await relayPart();
}, 240000);
