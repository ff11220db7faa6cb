// airlockd end to end: local (bubblewrap), static and reverse sandboxes
// each run a command to a client with its exit code; one writer and two
// viewers on one terminal (viewers' keystrokes never reach the PTY, all see
// the same bytes, presence is shown to everyone and in the API, take-over);
// a late joiner on a full-screen program gets the writer's screen cell for
// cell; API permissions on the new routes.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { run, check, tmpdir, BIN, startRunner, sleep, onCleanup, addLog, pollUntil } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, screenBytes, screenOf, diffScreens } from '../interop/airlockd.mjs';

async function waitLink(port, key, id, ms = 20000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const r = await api(port, 'GET', '/v1/sandboxes', key);
    const s = r.json && r.json.find((x) => x.id === id);
    if (s && s.link_up) return s;
    await sleep(100);
  }
  throw new Error(`sandbox ${id}: link never came up`);
}

async function runToExit(port, key, sandbox, argv, extra = {}) {
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox, argv, ...extra });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, key, { mode: extra.mode === 'pipes' ? 1 : 0 });
  await a.ch.waitExit(20000);
  // output printed before the attach arrives in the late joiner's snapshot
  const seen = Buffer.concat([a.ch.snapshot ? a.ch.snapshot.bytes : Buffer.alloc(0), ...a.ch.out]);
  return { id: r.json.id, ch: a.ch, out: extra.mode === 'pipes' ? Buffer.concat(a.ch.out).toString() : seen.toString(), err: Buffer.concat(a.ch.err || []).toString() };
}

// Stream offset where a client's data starts (its snapshot, or 0).
const startOf = (ch) => (ch.snapshot ? ch.snapshot.offset : 0);

await run('airlockd_relay', async () => {
  const base = tmpdir('relay');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const op2 = addUser(dir, 'olga', 'operator');
  const viewer = addUser(dir, 'vic', 'viewer');
  const d = await startAirlockd({ dir });

  // ---- permissions on the new routes
  let r = await api(d.port, 'POST', '/v1/sandboxes', op, { id: 'box', kind: 'local' });
  check(r.status === 403, 'an operator may not add a sandbox: 403');
  r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'box', kind: 'local' });
  check(r.status === 201 && r.json.kind === 'local', 'an admin adds a local sandbox: 201');
  r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'box', kind: 'local' });
  check(r.status === 409, 'the same id again: 409');
  r = await api(d.port, 'POST', '/v1/sandboxes', admin, '{"id": "x", "kind": "local"');
  check(r.status === 400 && /JSON|json/.test(r.json.error), 'a broken JSON body: 400 with a reason');
  const link = await waitLink(d.port, admin, 'box');
  check(link.link_up, 'the local runner dialed back: link up in the API');
  r = await api(d.port, 'POST', '/v1/terminals', viewer, { sandbox: 'box', argv: ['true'] });
  check(r.status === 403, 'a viewer key cannot create a terminal: 403');
  r = await api(d.port, 'POST', '/v1/terminals', undefined, { sandbox: 'box', argv: ['true'] });
  check(r.status === 401, 'no key: 401');

  // ---- RESUME (protocol §7): a client that held the terminal and got
  // nothing yet (an idle terminal behind a cut) comes back at offset 0 and
  // gets the bytes themselves; a fresh client at 0 starts from the screen
  {
    const t = await api(d.port, 'POST', '/v1/terminals', op,
      { sandbox: 'box', argv: ['sh', '-c', 'stty raw -echo; printf "resume-me\\n"; exec sleep 300'] });
    check(t.status === 201, 'a terminal that prints one line');
    const first = await attach(d.port, t.json.id, op, { read: true });
    await first.ch.wait(() => /resume-me/.test(screenBytes(first.ch).toString()), 'the line', 10000);
    const back = await attach(d.port, t.json.id, op, { read: true, resume: true });
    await back.ch.waitOutput(/resume-me/, 10000);
    check(back.ch.snapshots === 0 && back.ch.output().toString() === 'resume-me\n',
      `ATTACH at 0 with RESUME: the bytes from 0, no snapshot (${back.ch.snapshots} snapshots, ${JSON.stringify(back.ch.output().toString())})`);
    const fresh = await attach(d.port, t.json.id, op, { read: true });
    await fresh.ch.wait(() => fresh.ch.snapshots === 1, 'a snapshot', 10000);
    check(/resume-me/.test(fresh.ch.snapshot.bytes.toString()) && fresh.ch.output().length === 0,
      'ATTACH at 0 without RESUME: the screen as a snapshot');
    for (const c of [first, back, fresh]) c.ctl.ws.close();
    check((await api(d.port, 'DELETE', `/v1/terminals/${t.json.id}`, op)).status < 300, 'the terminal is deleted');
  }
  r = await api(d.port, 'POST', '/v1/terminals', 'alk_' + 'B'.repeat(43), { sandbox: 'box', argv: ['true'] });
  check(r.status === 401, 'a wrong key: 401');
  r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'nope', argv: ['true'] });
  check(r.status === 404, 'an unknown sandbox: 404');

  // ---- local sandbox, pipe mode, exit code; isolation under bubblewrap
  let t = await runToExit(d.port, op, 'box', ['sh', '-c', 'printf out; printf err >&2; exit 7'], { mode: 'pipes' });
  check(t.ch.exit.code === 7 && t.out === 'out' && t.err === 'err', 'local: stdout, stderr and exit code 7 arrive through airlockd');
  t = await runToExit(d.port, op, 'box', ['sh', '-c', `hostname; test -e '${dir}/signing-key.pem' && echo KEY-VISIBLE || echo key-hidden; test -w /workspace && echo ws-ok`], { mode: 'pipes' });
  check(/^box\n/.test(t.out), 'local: the runner has its own UTS namespace (hostname is the sandbox id)');
  check(/key-hidden/.test(t.out) && !/KEY-VISIBLE/.test(t.out), 'local: the signing key is not visible inside the sandbox');
  check(/ws-ok/.test(t.out), 'local: the workspace is writable');
  r = await api(d.port, 'GET', `/v1/terminals/${t.id}`, viewer);
  check(r.status === 200 && r.json.state === 'exited' && r.json.exit_code === 0, 'GET /v1/terminals/ID shows state and exit code');
  r = await api(d.port, 'DELETE', `/v1/terminals/${t.id}`, viewer);
  check(r.status === 403, 'a viewer cannot close a terminal: 403');

  // ---- static sandbox: airlockd dials a listening runner
  const stat = await startRunner({ id: 'stat1', dir });
  r = await api(d.port, 'POST', '/v1/sandboxes', admin,
    { id: 'stat1', kind: 'static', url: `ws://127.0.0.1:${stat.port}/?identifier=stat1&api-version=2024-02-02-preview` });
  check(r.status === 201, 'an admin registers a static runner URL');
  await waitLink(d.port, admin, 'stat1');
  t = await runToExit(d.port, op, 'stat1', ['sh', '-c', 'echo static-ok; exit 3']);
  check(t.ch.exit.code === 3 && /static-ok/.test(t.out), 'static: a PTY command runs end to end with exit code 3');

  // ---- reverse sandbox: enroll, the runner dials /v1/runners/connect
  r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'rev1', kind: 'reverse' });
  check(r.status === 201, 'an admin adds a reverse sandbox');
  r = await api(d.port, 'POST', '/v1/sandboxes/rev1/enroll', op);
  check(r.status === 403, 'an operator cannot enroll: 403');
  r = await api(d.port, 'POST', '/v1/sandboxes/rev1/enroll', admin);
  check(r.status === 200 && r.json.token && /--connect/.test(r.json.command), 'enroll gives a token and the runner command line');
  const rdir = tmpdir('rev');
  fs.writeFileSync(path.join(rdir, 'jwks.json'), JSON.stringify(r.json.jwks));
  fs.writeFileSync(path.join(rdir, 'token'), r.json.token, { mode: 0o600 });
  const rlog = path.join(rdir, 'runner.log');
  addLog(rlog);
  const rout = fs.openSync(rlog, 'a');
  const rp = spawn(path.join(BIN, 'airlock-runner'), ['--connect', r.json.url, '--identifier', 'rev1',
    '--jwks', path.join(rdir, 'jwks.json'), '--token-file', path.join(rdir, 'token')], { stdio: ['ignore', rout, rout] });
  fs.closeSync(rout);
  const rexit = new Promise((res) => rp.on('exit', res));
  onCleanup(async () => { rp.kill('SIGTERM'); await rexit; });
  await waitLink(d.port, admin, 'rev1');
  t = await runToExit(d.port, op, 'rev1', ['sh', '-c', 'echo reverse-ok; exit 5'], { mode: 'pipes' });
  check(t.ch.exit.code === 5 && t.out === 'reverse-ok\n', 'reverse: a command runs end to end with exit code 5');
  const bad = await new Promise((res) => {
    import('ws').then(({ WebSocket }) => {
      const ws = new WebSocket(`ws://127.0.0.1:${d.port}/v1/runners/connect?identifier=rev1`, ['airlock.v1'], { headers: { Authorization: 'Bearer x.y.z' } });
      ws.on('unexpected-response', (q, s) => res(s.statusCode));
      ws.on('open', () => res(101));
      ws.on('error', () => res(-1));
    });
  });
  check(bad === 403, 'a runner with a bad token is refused with 403');
  // a client's text message, or one over the frame limit, closes it with our codes
  const closeOf = (send) => new Promise((res) => {
    import('ws').then(({ WebSocket }) => {
      const ws = new WebSocket(`ws://127.0.0.1:${d.port}/v1/terminals/${t.id}/attach`, ['airlock.v1'], { headers: { Authorization: `Bearer ${viewer}` } });
      ws.on('open', () => send(ws));
      ws.on('close', (code) => res(code));
      ws.on('error', () => res(-1));
    });
  });
  check(await closeOf((ws) => ws.send('hello')) === 4000, 'a text message from a client: close 4000');
  check(await closeOf((ws) => ws.send(Buffer.alloc(65536 + 10 + 1))) === 4004, 'a message over the frame limit: close 4004');

  // ---- one writer, two viewers
  r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['sh'], cols: 80, rows: 24, env: { PS1: '$ ' } });
  const sh = r.json.id;
  const w = await attach(d.port, sh, op);
  await w.ctl.wait(() => w.ch.role === 1, 'writer role');
  check(w.ch.role === 1, 'the first interactive attacher is the writer');
  const v1 = await attach(d.port, sh, viewer);
  const v2 = await attach(d.port, sh, op2, { read: true });
  await v1.ctl.wait(() => v1.ch.role === 2 && v2.ch.role === 2, 'viewer roles');
  check(v1.ch.role === 2 && v2.ch.role === 2, 'a viewer-role key and a read-only attach are viewers');
  await w.ctl.wait(() => (w.ch.viewers || []).length === 3, 'presence of 3');
  const names = (c) => (c.ch.viewers || []).map((x) => `${x.name}:${x.role}`).sort().join(',');
  check(names(w) === 'olga:2,otto:1,vic:2' && names(v1) === names(w) && names(v2) === names(w),
    `everyone attached sees who is watching (${names(w)})`);
  r = await api(d.port, 'GET', `/v1/terminals/${sh}`, viewer);
  check(r.json.viewers.length === 3 && r.json.writer === 'otto', 'the API shows the viewers and the writer');
  v1.ch.write('echo VIEWER-ONE-TYPED\r');
  v2.ch.write('echo VIEWER-TWO-TYPED\r');
  // a viewer forging input past its (zero) credit is refused, not obeyed
  v2.ctl.send(Buffer.concat([Buffer.from([0x12, 0, 0, 0, 0, 1, 0, 0, 0, 8 + 6]), Buffer.alloc(8), Buffer.from('FORGE\r')]));
  await v2.ctl.wait(() => v2.ctl.closeInfo, 'forged input refused', 5000);
  check(v2.ctl.closeInfo.code === 4000, `a forged DATA from a viewer closes its connection (${v2.ctl.closeInfo.code})`);
  w.ch.write('echo writer-$((6*7))\r');
  await w.ch.waitOutput(/writer-42/, 10000);
  await v1.ch.waitOutput(/writer-42/, 10000);
  await sleep(500); // the behaviour under test: in this time the viewers' bytes must not arrive
  const all = (c) => Buffer.concat(c.ch.out).toString('latin1');
  check(!/VIEWER-ONE|VIEWER-TWO|FORGE/.test(all(w) + all(v1)), "viewers' typed bytes never reach the PTY");
  const from = Math.max(startOf(w.ch), startOf(v1.ch));
  const sliceFrom = (c) => Buffer.concat(c.ch.out).subarray(from - startOf(c.ch));
  check(sliceFrom(w).equals(sliceFrom(v1)) && sliceFrom(w).length > 0, 'the viewer sees exactly the bytes the writer sees');

  // take-over: a read-only attach and a viewer role are refused; an operator takes over
  v1.ch.takeover();
  await v1.ctl.wait(() => v1.ctl.errors.some((e) => e.code === 11), 'forbidden takeover', 5000);
  check(v1.ch.role === 2, 'a viewer-role key cannot take over (FORBIDDEN)');
  const o2 = await attach(d.port, sh, op2);
  await o2.ctl.wait(() => o2.ch.role === 2, 'second operator is a viewer');
  o2.ch.takeover();
  await o2.ctl.wait(() => o2.ch.role === 1, 'takeover');
  await w.ctl.wait(() => w.ch.role === 2, 'old writer demoted');
  check(o2.ch.role === 1 && w.ch.role === 2, 'an operator takes over: the old writer becomes a viewer');
  o2.ch.write('echo taken-$((2+3))\r');
  await w.ch.waitOutput(/taken-5/, 10000);
  w.ch.write('echo OLD-WRITER\r');
  await sleep(700); // the behaviour under test: in this time the keystrokes must not arrive
  check(!/OLD-WRITER/.test(all(o2)), "the demoted writer's keystrokes do not reach the PTY");

  // ---- late joiner on a full-screen program
  fs.mkdirSync(path.join(dir, 'sandboxes', 'box', 'work'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'sandboxes', 'box', 'work', 'notes.txt'),
    Array.from({ length: 60 }, (_, i) => `line ${i} \u00e9t\u00e9 ${'#'.repeat(i % 30)}`).join('\n'));
  o2.ch.write('vi -u NONE -c "syntax on" -c "set number" notes.txt\r');
  await o2.ch.waitOutput(/line 1/, 10000);
  o2.ch.write('10Gdd');
  // vi has drawn the deletion once "line 9 " is gone from the writer's screen
  await pollUntil(async () => (await screenOf(screenBytes(o2.ch), 80, 24)).text,
    (text) => /line 1/.test(text) && !/line 9 /.test(text), 5000, 100);
  const late = await attach(d.port, sh, viewer);
  await late.ctl.wait(() => late.ch.snapshot, 'snapshot for the late joiner', 10000);
  check(late.ch.snapshot && late.ch.snapshot.offset > 0, 'the late joiner gets a snapshot first');
  late.ch.snapshotOutLen = 0;
  // the snapshot and what follows it settle to the writer's screen
  let sw, sl, diffs = [];
  await pollUntil(async () => {
    sw = await screenOf(screenBytes(o2.ch), 80, 24);
    sl = await screenOf(screenBytes(late.ch), 80, 24);
    diffs = diffScreens(sw, sl);
    return diffs.length;
  }, (n) => n === 0, 5000, 100);
  check(/line 1/.test(sw.text) && diffs.length === 0,
    `the late joiner's screen equals the writer's cell for cell${diffs.length ? `: ${diffs.slice(0, 5).join('; ')}` : ''}`);
  o2.ch.write('\x1b');
  await sleep(300); // vi takes an ESC followed at once by ':' as one key (Alt-:)
  o2.ch.write(':q!\r');
  await sleep(300);
  o2.ch.write('exit\r');
  await o2.ch.waitExit(10000);
  check(o2.ch.exit.code === 0, `the shell exits: every client gets the exit status (${JSON.stringify(o2.ch.exit)})`);
  await late.ch.waitExit(10000);

  // the recording holds the writer's output (no input: the sandbox does not
  // record it) and is served to its creator, not to a viewer
  r = await api(d.port, 'GET', `/v1/terminals/${sh}/recording`, viewer);
  check(r.status === 403, 'a viewer may not read the recording: 403');
  r = await api(d.port, 'GET', `/v1/terminals/${sh}/recording`, op);
  check(r.status === 200 && /"version":3/.test(r.body) && /writer-42/.test(r.body) && /"x"/.test(r.body),
    'GET .../recording serves the asciicast with output and exit to its creator');
  check(!/,"i",/.test(r.body) && /"m","writer: otto"/.test(r.body), 'no input events; the writer is marked');
  check(!/VIEWER-ONE|FORGE/.test(r.body), 'viewer input is not in the recording');

  r = await api(d.port, 'GET', '/v1/audit', admin);
  const actions = new Set(r.json.map((e) => e.action));
  check(['attach', 'takeover', 'terminal_create', 'link_up', 'sandbox_add', 'token_mint'].every((x) => actions.has(x)),
    `the audit log has attach, takeover, creation, link and mint events (${[...actions].join(',')})`);
  r = await api(d.port, 'GET', '/metrics', viewer);
  check(r.status === 200 && /airlock_terminals \d+/.test(r.body) && /airlock_links_up 3/.test(r.body), 'GET /metrics in Prometheus text');
  // one version everywhere: --version, /metrics, /healthz, the Server header
  const ver = execFileSync(path.join(process.env.AL_BIN, 'airlockd'), ['--version']).toString().trim().split(' ')[1];
  check(r.body.includes(`airlock_build_info{version="${ver}"} 1`), `/metrics: airlock_build_info{version="${ver}"}`);
  const hz = await api(d.port, 'GET', '/healthz');
  check(hz.status === 200 && hz.body === `ok airlockd ${ver}\n` && new RegExp(`^server: airlockd/${ver.replace(/[.+]/g, '\\$&')}$`, 'im').test(hz.head),
    `/healthz says its version in the body and the Server header (${JSON.stringify(hz.body)})`);
  const logText = fs.readFileSync(d.log, 'utf8');
  check(![admin, op, op2, viewer].some((k) => logText.includes(k.slice(4))), 'no API key appears in the log');
  const st = await d.stop();
  check(st.code === 0, 'airlockd stops cleanly on SIGTERM');
}, 240000);
