// An aca sandbox (issue 14): airlockd dials a platform's front (the
// stand-in, tests/tools/platform_front.mjs) with the platform's token in
// Authorization and its own runner:connect token in X-Airlock-Token; the
// session's runner is started by the image's own entrypoint
// (deploy/aca/entrypoint.sh) with the identifier of the first request.
// - terminals open; a checksummed 20 MB stream passes exactly once while
//   the front cuts the link at a fixed age (3 s), several times;
// - behind a front that cuts after 2 s of silence, pings every second keep
//   the link up while the terminal and its viewer are idle for 3x the cut;
// - the platform token (which this front forwards into the container, the
//   worst case) never reaches the runner's log, its children, airlockd's
//   data directory (recordings, database) or the API;
// - a wrong platform token is reported as the front's 403, a runner that
//   refuses airlockd's token as the runner's 403: two distinct link_error;
// - bad requests: an unknown platform, a ws:// or query-bearing url.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { run, check, tmpdir, BIN, SRC, sleep, keygen, waitFor, onCleanup } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, checksummedStream, screenBytes } from '../interop/airlockd.mjs';
import { startFront, runnerSession } from '../tools/platform_front.mjs';
import { runCli } from '../interop/cli.mjs';

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
const RUNNER = path.join(BIN, 'airlock-runner');
const ENTRY = path.join(SRC, 'deploy', 'aca', 'entrypoint.sh');

async function sandboxRow(port, key, id) {
  const r = await api(port, 'GET', '/v1/sandboxes', key);
  return r.json && r.json.find((x) => x.id === id);
}

// every file under dir (recursively) that holds needle
function filesHolding(dir, needle) {
  const hits = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && fs.readFileSync(p).includes(needle)) hits.push(p);
    }
  };
  walk(dir);
  return hits;
}

async function runPipes(port, key, sandbox, script, cwd = '') {
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox, argv: ['sh', '-c', script], mode: 'pipes', cwd });
  check(r.status === 201, `a terminal on ${sandbox}: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, key, { mode: 1 });
  await a.ch.waitExit(30000);
  return Buffer.concat(a.ch.out).toString();
}

await run('aca_sandbox', async () => {
  const base = tmpdir('aca');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const tokDir = path.join(base, 'platform-tokens'); // outside airlockd's data
  fs.mkdirSync(tokDir, { mode: 0o700 });
  const tokFile = (n) => path.join(tokDir, n);
  const cfg = path.join(base, 'airlockd.conf');
  fs.writeFileSync(cfg, [
    `platform.aged.token-file = ${tokFile('aged')}`,
    `platform.idle.token-command = cat ${tokFile('idle')}`,
    'platform.idle.ping-interval = 1',
    `platform.wrong.token-file = ${tokFile('wrong')}`,
    `platform.strange.token-file = ${tokFile('strange')}`,
    '',
  ].join('\n'));
  const d = await startAirlockd({ dir, args: ['--config', cfg] });
  const port = d.port;
  const jwks = path.join(dir, 'jwks.json');
  await waitFor(() => fs.existsSync(jwks), 10000, 'airlockd\'s JWKS');

  // three fronts: one cutting at a fixed age, one cutting idle links, one
  // whose runners trust another key than airlockd's
  const session = runnerSession(RUNNER, jwks, ['--verbose'], { fromRequest: true, entrypoint: ENTRY });
  const aged = await startFront({ startSession: session, maxAgeMs: 3000 });
  const idle = await startFront({ startSession: session, idleCutMs: 2000 });
  const otherKeys = path.join(base, 'other');
  fs.mkdirSync(otherKeys);
  keygen(otherKeys);
  const stranger = await startFront({
    startSession: runnerSession(RUNNER, path.join(otherKeys, 'jwks.json'), [], { fromRequest: true, entrypoint: ENTRY }),
  });
  for (const f of [aged, idle, stranger]) onCleanup(() => f.close()); // their runners too, pass or fail
  const tokens = { aged: await aged.mintToken(), idle: await idle.mintToken() };
  // platform "wrong" holds a token the idle front did not sign
  for (const [n, t] of [['aged', tokens.aged], ['idle', tokens.idle], ['wrong', tokens.aged],
    ['strange', await stranger.mintToken()]])
    fs.writeFileSync(tokFile(n), `${t}\n`, { mode: 0o600 });

  // ---- bad requests
  let r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'x', kind: 'aca', url: `http://127.0.0.1:${aged.port}`, platform: 'nope' });
  check(r.status === 400 && /no platform nope/.test(r.body), `an unknown platform: 400 (${r.status} ${r.body})`);
  r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'x', kind: 'aca', url: `ws://127.0.0.1:${aged.port}`, platform: 'aged' });
  check(r.status === 400 && /pool's endpoint/.test(r.body), `a ws:// endpoint: 400 (${r.body})`);
  r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'x', kind: 'aca', url: `http://127.0.0.1:${aged.port}/?identifier=mine`, platform: 'aged' });
  check(r.status === 400 && /query/.test(r.body), `an endpoint with a query: 400 (${r.body})`);
  r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'x', kind: 'aca', platform: 'aged' });
  check(r.status === 400 && /url/.test(r.body), `no endpoint: 400 (${r.body})`);
  r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'x', kind: 'static', url: 'ws://127.0.0.1:1', platform: 'aged' });
  check(r.status === 400 && /only an aca sandbox/.test(r.body), `a platform on a static sandbox: 400 (${r.body})`);
  r = await api(port, 'POST', '/v1/sandboxes', op, { id: 'x', kind: 'aca', url: `http://127.0.0.1:${aged.port}`, platform: 'aged' });
  check(r.status === 403, `an operator cannot add one: ${r.status}`);

  // ---- the sandboxes
  const add = async (id, f, platform) => {
    const res = await api(port, 'POST', '/v1/sandboxes', admin, { id, kind: 'aca', url: `http://127.0.0.1:${f.port}`, platform });
    check(res.status === 201, `aca sandbox ${id}: ${res.status} ${res.body}`);
    check(/^al-[0-9a-f]{32}$/.test(res.json.identifier), `a generated identifier: ${res.json.identifier}`);
    check(res.json.platform === platform && res.json.kind === 'aca', 'its platform and kind in the view');
    return res.json;
  };
  const sAged = await add('aged', aged, 'aged');
  const sIdle = await add('idle', idle, 'idle');
  const sWrong = await add('wrong', idle, 'wrong');
  await add('stranger', stranger, 'strange');
  check(sAged.identifier !== sIdle.identifier, 'identifiers differ');
  // the CLI adds one too, and says its identifier
  const cli = (args) => runCli(['--url', `http://127.0.0.1:${port}`, '--key', admin, ...args]);
  let c = await cli(['sandbox', 'add', 'bycli', '--kind', 'aca', '--platform', 'idle', '--url', `http://127.0.0.1:${idle.port}`]);
  check(c.code === 0 && /^added aca sandbox bycli \(platform idle, session identifier al-[0-9a-f]{32}\)$/m.test(c.out),
    `airlock sandbox add --kind aca: ${c.code} ${c.out}${c.err}`);
  c = await cli(['sandbox', 'add', 'bycli2', '--kind', 'aca', '--platform', 'nope', '--url', `http://127.0.0.1:${idle.port}`]);
  check(c.code !== 0 && /no platform nope/.test(c.err), `an unknown platform from the CLI: one line (${c.code} ${c.err})`);
  await waitFor(async () => (await sandboxRow(port, admin, 'bycli'))?.link_up, 20000, 'bycli\'s link up', 100);
  for (const id of ['aged', 'idle'])
    await waitFor(async () => (await sandboxRow(port, admin, id))?.link_up, 20000, `${id}'s link up`, 100);
  check(aged.sessions.has(sAged.identifier) && idle.sessions.has(sIdle.identifier),
    'each front allocated the session of the sandbox\'s identifier');

  // ---- the front's 403 and the runner's 403, told apart
  const wrongErr = await waitFor(async () => (await sandboxRow(port, admin, 'wrong'))?.link_error, 20000, 'the wrong token\'s error', 100);
  check(/platform's front refused the upgrade: HTTP 403/.test(wrongErr) && /platform\.wrong/.test(wrongErr),
    `a wrong platform token is the front's 403: ${wrongErr}`);
  check(!idle.sessions.has(sWrong.identifier), 'the front allocated nothing for a refused token');
  const strangerErr = await waitFor(async () => (await sandboxRow(port, admin, 'stranger'))?.link_error, 20000, 'the stranger runner\'s error', 100);
  check(/the runner refused the upgrade: HTTP 403/.test(strangerErr), `a runner refusing our token is the runner's 403: ${strangerErr}`);
  check(!(await sandboxRow(port, admin, 'wrong')).link_up && !(await sandboxRow(port, admin, 'stranger')).link_up, 'neither links');
  check((await sandboxRow(port, admin, 'aged')).link_error === null, 'a linked sandbox has no link_error');

  // ---- 20 MB checksummed across the front's max-age cuts
  const work = path.join(base, 'work');
  const { expected, argv } = checksummedStream(work, 20e6);
  const cutsBefore = aged.stats.ageCuts;
  r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'aged', argv, cwd: work });
  check(r.status === 201, `a terminal on the aca sandbox: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, op);
  await a.ch.waitExit(180000);
  const got = Buffer.concat(a.ch.out);
  const cuts = aged.stats.ageCuts - cutsBefore;
  check(cuts >= 2, `the front cut the link at its max age during the stream (${cuts} times)`);
  check(got.length === expected.length && sha(got) === sha(expected),
    `20 MB exactly once across ${cuts} cuts (${got.length} of ${expected.length} bytes)`);

  // ---- idle past the idle cut: pings keep the link
  const row0 = await sandboxRow(port, admin, 'idle');
  r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'idle', argv: ['sh', '-c', 'echo ready; exec sleep 60'] });
  check(r.status === 201, 'an idle terminal');
  const b = await attach(port, r.json.id, op);
  await b.ctl.wait(() => screenBytes(b.ch).includes('ready'), 'its first line (or a snapshot with it)', 15000);
  const idleCuts0 = idle.stats.idleCuts;
  await sleep(6500);
  const row1 = await sandboxRow(port, admin, 'idle');
  check(idle.stats.idleCuts === idleCuts0, `no idle cut in 6.5 s behind a 2 s idle cut (${idle.stats.idleCuts - idleCuts0})`);
  check(row1.link_up && row1.link_since === row0.link_since, 'the link stayed the same all along');
  check(!b.ctl.closeInfo, 'the viewer was never dropped');

  // ---- the platform token reaches nothing on the sandbox's side
  const env = await runPipes(port, op, 'idle',
    'env; for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; echo; done | tr "\\0" "\\n"');
  const parts = (t) => [t, t.split('.')[1], t.split('.')[2]];
  for (const [name, t] of Object.entries({ aged: tokens.aged, idle: tokens.idle })) {
    for (const p of parts(t)) check(!env.includes(p), `no part of the ${name} platform token in the children's environments or command lines`);
  }
  check(env.includes('PATH='), 'the children\'s environment was read');
  const logs = [...aged.sessions.values(), ...idle.sessions.values()];
  let n = 0;
  for (const s of logs) {
    const log = (await s).log();
    n += log.length;
    for (const t of [tokens.aged, tokens.idle])
      for (const p of parts(t)) check(!log.includes(p), 'no part of a platform token in a runner\'s log');
  }
  check(n > 0, `the runners' logs were read (${n} bytes)`);
  for (const t of [tokens.aged, tokens.idle]) {
    const hits = filesHolding(dir, t.split('.')[2]);
    check(hits.length === 0, `no platform token in airlockd's data directory (${hits.join(', ')})`);
  }
  r = await api(port, 'GET', '/v1/sandboxes', admin);
  check(!r.body.includes(tokens.aged.split('.')[2]), 'nor in the API');
  r = await api(port, 'GET', '/v1/audit?limit=1000', admin);
  check(r.status === 200 && !r.body.includes(tokens.aged.split('.')[2]), 'nor in the audit');
  // the recordings exist (the check above read them)
  check(filesHolding(dir, 'END-OF-STREAM').length > 0, 'the recordings were among the files read');

}, 300000);
