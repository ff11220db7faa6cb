// The credential proxy's path through the runner, end to end (docs/proxy.md,
// "The path through the runner"; docs/protocol.md §5a): airlockd with an
// `anthropic` upstream (tests/tools/fake_anthropic.mjs) and local sandboxes,
// whose runners it starts with --proxy-listen; each agent connection to a
// runner's listener is one proxy channel of the sandbox's link.
//
// - A terminal gets ANTHROPIC_BASE_URL at its runner's listener (not
//   airlockd's direct path); curl in it gets the answer, the SSE stream
//   event by event (the first long before the fake has finished), and a
//   1 MiB chunked upload whole. Nothing the agent can read holds the key;
//   the fake got the real key and never a credential; the call is audited.
// - The attacker: a credential of a terminal of ANOTHER sandbox, spent
//   through this sandbox's runner listener, is 401 (and nothing reaches the
//   upstream); through its own sandbox's listener it works.
// - Revocation: a terminal that exited: its credential is 401 on both paths
//   (the runner's listener and airlockd's direct one).
// - 100 streaming requests at once through one runner's listener all
//   complete; the runner's and airlockd's peak RSS stay bounded.
// - The agent floods its runner's listener (300 connections held open with
//   half a request): 256 become channels, the other 44 get the runner's 503
//   at once, a terminal of the same sandbox still echoes, memory stays
//   bounded, and once the agent lets go a call works again.
// - The link drops mid-answer (airlockd killed): the agent's connection is
//   closed at once (its call fails, it does not hang); a new connection
//   gets the runner's canned 503 at once; once airlockd is back and the
//   runner has relinked, the same terminal's calls work again.
// - A runner alone (no controller yet): 503 at once; --proxy-listen on a
//   non-loopback address is refused at start.
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import net from 'node:net';
import crypto from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { run, check, tmpdir, onCleanup, waitFor, reportedPort, keygen, startRunner, BIN, SRC, scaled, sleep } from '../interop/harness.mjs';
import { startAirlockd, addUser, addLocalSandbox, api, attach } from '../interop/airlockd.mjs';

const GAP_MS = 400;
const REAL_KEY = `sk-ant-airlocktest-${crypto.randomBytes(16).toString('hex')}`;
const flat = (s) => String(s).trim().replace(/\n/g, ' | ').slice(0, 600);
const MANY = 100;

async function startFake(gap = GAP_MS) {
  const p = spawn('node', [path.join(SRC, 'tests/tools/fake_anthropic.mjs'), '--key', REAL_KEY,
    '--gap-ms', String(gap)], { stdio: ['ignore', 'pipe', 'inherit'] });
  onCleanup(() => { p.kill('SIGKILL'); });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  const port = await waitFor(() => Number((/listening (\d+)/.exec(out) || [])[1] || 0), 10000, 'the fake upstream');
  const stats = async () => JSON.parse((await call(port, 'GET', '/__stats')).body);
  return { port, stats };
}

// One HTTP call; resolves { status, body, firstMs, endMs, error }.
function call(port, method, target, { headers = {}, body = '', ms = 30000, onFirst = null } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    let firstMs = -1;
    const chunks = [];
    const req = http.request({ host: '127.0.0.1', port, method, path: target, agent: false,
      headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.on('data', (c) => {
        if (firstMs < 0) { firstMs = Date.now() - t0; if (onFirst) onFirst(); }
        chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString(), firstMs, endMs: Date.now() - t0 }));
      res.on('error', (e) => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString(), error: e.message, endMs: Date.now() - t0 }));
      res.on('aborted', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString(), error: 'aborted', endMs: Date.now() - t0 }));
    });
    req.setTimeout(scaled(ms), () => req.destroy(new Error('timed out')));
    req.on('error', (e) => resolve({ status: 0, body: Buffer.concat(chunks).toString(), error: e.message, endMs: Date.now() - t0 }));
    req.end(body);
  });
}

const bearer = (c) => ({ authorization: `Bearer ${c}` });
const MESSAGES = JSON.stringify({ model: 'fake', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'hi' }] });
const textOf = (sse) => sse.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)))
  .filter((e) => e.type === 'content_block_delta').map((e) => e.delta.text).join('');

async function outputOf(port, key, id, re, ms = 30000) {
  const a = await attach(port, id, key, { read: true });
  await a.ch.waitOutput(re, scaled(ms));
  const out = a.ch.output().toString();
  a.ctl.ws.terminate();
  return out;
}

async function terminal(port, key, body) {
  const r = await api(port, 'POST', '/v1/terminals', key, { mode: 'pipes', ...body });
  if (r.status !== 201) throw new Error(`POST /v1/terminals: ${r.status} ${r.body}`);
  return r.json;
}

// A terminal that prints its credential and base URL, then waits.
async function agentVars(port, key, sandbox) {
  const t = await terminal(port, key, { sandbox, proxy: ['anthropic'],
    argv: ['sh', '-c', 'echo "TOKEN=$ANTHROPIC_AUTH_TOKEN"; echo "BASE=$ANTHROPIC_BASE_URL"; echo VARS-DONE; exec sleep 600'] });
  const out = await outputOf(port, key, t.id, /VARS-DONE/);
  return { id: t.id, token: (/^TOKEN=(alp_[A-Za-z0-9_-]{43})$/m.exec(out) || [])[1],
    base: (/^BASE=(.*)$/m.exec(out) || [])[1], out };
}

// The pid and peak RSS (kB) of the runner of sandbox id (read from /proc).
function runnerOf(id) {
  for (const d of fs.readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    let cmd;
    try { cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0'); } catch { continue; }
    const i = cmd.indexOf('--identifier');
    if (/airlock-runner$/.test(cmd[0]) && i > 0 && cmd[i + 1] === id) return Number(d);
  }
  return 0;
}
const hwmKb = (pid) => Number((/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8')) || [])[1]);

// What an agent runs: whether anything it can read holds the key, a
// streamed call with each line timed, and a 1 MiB chunked upload.
const PAD = 'x'.repeat(1 << 20);
const AGENT = [
  'echo "BASE=$ANTHROPIC_BASE_URL"',
  'echo "ENV=$(env | grep -c "airlock[t]est")"',
  'echo "PROC=$(cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" "\\n" | grep -c "airlock[t]est")"',
  'echo "FILES=$(grep -rIl "airlock[t]est" /etc /opt /tmp "$HOME" . 2>/dev/null | wc -l)"',
  'curl -sS -N -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN"' +
    ` -H "content-type: application/json" -d '${MESSAGES}'` +
    ' | while IFS= read -r l; do [ -n "$l" ] && echo "$(date +%s%3N) $l"; done',
  'echo "UPLOAD=$(curl -sS -o /dev/null -w "%{http_code}" -X POST "$ANTHROPIC_BASE_URL/v1/messages"' +
    ' -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN" -H "content-type: application/json"' +
    ' -H "Transfer-Encoding: chunked" --data-binary @big.json)"',
  'echo CURL-DONE',
  'exec sleep 600',
].join('; ');

await run('proxy_channel', async () => {
  const base = tmpdir('proxyc');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'oli', 'operator');
  const fake = await startFake();
  const secret = path.join(base, 'anthropic.key');
  fs.writeFileSync(secret, `${REAL_KEY}\n`, { mode: 0o600 });
  const conf = path.join(base, 'airlockd.conf');
  fs.writeFileSync(conf, [
    `upstream.anthropic.url = http://127.0.0.1:${fake.port}`,
    'upstream.anthropic.kind = anthropic',
    'upstream.anthropic.header = x-api-key',
    `upstream.anthropic.secret-file = ${secret}`,
    'upstream.anthropic.paths = /v1/',
    `upstream.anthropic.concurrent = ${MANY + 10}`,
    'upstream.anthropic.requests-per-minute = 60000',
  ].join('\n') + '\n');

  // ---- a runner alone: 503 at once; a non-loopback listener refused
  const rdir = path.join(base, 'runner');
  fs.mkdirSync(rdir, { recursive: true });
  keygen(rdir);
  const badr = spawnSync(path.join(BIN, 'airlock-runner'), ['--listen', '127.0.0.1:0', '--identifier', 'x',
    '--jwks', path.join(rdir, 'jwks.json'), '--proxy-listen', '0.0.0.0:0'], { timeout: scaled(10000), encoding: 'utf8' });
  check(badr.status !== 0 && /--proxy-listen 0\.0\.0\.0:0: give ADDR:PORT with a loopback address/.test(badr.stderr),
    `--proxy-listen on a non-loopback address: refused at start (${flat(badr.stderr)})`);
  const sock = path.join(rdir, 'proxy.sock');
  const alone = await startRunner({ dir: rdir, id: 'alone', args: ['--proxy-listen', '127.0.0.1:0', '--proxy-socket', sock] });
  const aport = await reportedPort(alone.log, /credential proxy listener on http:\/\/127\.0\.0\.1:(\d+)/, alone.proc, { what: 'the runner\'s proxy listener' });
  let r = await call(aport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer('alp_x'), body: MESSAGES, ms: 5000 });
  let j = (() => { try { return JSON.parse(r.body); } catch { return {}; } })();
  check(r.status === 503 && r.endMs < 2000 && j.error && j.error.type === 'airlock_proxy' && j.error.status === 503,
    `no link: the runner's listener answers 503 with the proxy's JSON at once (${r.status} in ${r.endMs} ms: ${flat(r.body)})`);
  const us = await new Promise((resolve) => {
    const req = http.request({ socketPath: sock, method: 'GET', path: '/v1/proxy/anthropic/v1/models', agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', (e) => resolve({ status: 0, body: e.message }));
    req.end();
  });
  check(us.status === 503 && /airlock_proxy/.test(us.body) && (fs.statSync(sock).mode & 0o777) === 0o666,
    `and on its unix socket (mode 0666) the same (${us.status} ${flat(us.body)}; mode ${(fs.statSync(sock).mode & 0o777).toString(8)})`);

  // ---- airlockd with the direct path too, two local sandboxes
  const d = await startAirlockd({ dir, args: ['--config', conf, '--proxy-listen', '127.0.0.1:0'] });
  const port = d.port;
  const dport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { what: 'the direct path' });
  await addLocalSandbox(port, admin, 'box');
  await addLocalSandbox(port, admin, 'box2');
  await waitFor(() => /sandbox box2: its runner serves the credential proxy at/.test(fs.readFileSync(d.log, 'utf8')), scaled(10000), 'PROXY_AT of box2');

  // ---- an agent through its runner
  const ta = await terminal(port, op, { sandbox: 'box', argv: ['bash', '-c', AGENT], proxy: ['anthropic'] });
  const big = path.join(dir, 'sandboxes', 'box', 'work', 'big.json');
  fs.writeFileSync(big, JSON.stringify({ model: 'fake', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }], pad: PAD }));
  const outA = await outputOf(port, op, ta.id, /CURL-DONE/, 60000);
  const rbase = (/^BASE=(http:\/\/127\.0\.0\.1:(\d+))\/v1\/proxy\/anthropic$/m.exec(outA) || []);
  const rport = Number(rbase[2] || 0);
  check(rport && rport !== dport, `ANTHROPIC_BASE_URL is the runner's listener, not airlockd's direct path (${flat(outA.slice(0, 200))})`);
  check(/^ENV=0$/m.test(outA) && /^PROC=0$/m.test(outA) && /^FILES=0$/m.test(outA),
    `nothing the agent can read holds the real key (${flat(outA.match(/^(ENV|PROC|FILES)=.*$/mg))})`);
  const lines = outA.split('\n').map((l) => /^(\d{13}) (.*)$/.exec(l)).filter(Boolean);
  const at = (re) => { const m = lines.find((x) => re.test(x[2])); return m ? Number(m[1]) : NaN; };
  const first = at(/^event: message_start$/), last = at(/^event: message_stop$/);
  const text = textOf(lines.map((x) => x[2]).join('\n'));
  check(text === 'the answer is forty-two', `the answer came through the runner (${JSON.stringify(text)})`);
  check(last - first >= 4 * GAP_MS, `the first event reached the agent ${last - first} ms before the last: streamed`);
  check(/^UPLOAD=200$/m.test(outA), `a 1 MiB chunked upload: 200 (${flat(outA.match(/^UPLOAD=.*$/m))})`);
  let st = await fake.stats();
  const up = st.requests.filter((x) => x.url === '/v1/messages');
  check(up.length === 2 && up.every((x) => x.headers['x-api-key'] === REAL_KEY) && st.credential_seen === false,
    'the fake got the real key on both calls, never a credential');
  check(up.some((x) => x.bytes > (1 << 20)), `the upload reached it whole (${up.map((x) => x.bytes).join(', ')} bytes)`);
  const audit = await api(port, 'GET', '/v1/audit?action=proxy_call', admin);
  check((audit.json || []).filter((x) => x.action === 'proxy_call' && x.target === ta.id && /"status":200/.test(x.detail)).length === 2,
    'each call through the runner is one audit row of the terminal');

  // ---- the attacker: box2's credential through box's runner
  const t2 = await agentVars(port, op, 'box2');
  const r2port = Number((/^http:\/\/127\.0\.0\.1:(\d+)\//.exec(t2.base || '') || [])[1] || 0);
  check(t2.token && r2port && r2port !== rport, `box2's terminal has its own runner's listener (${t2.base})`);
  const before = (await fake.stats()).requests.length;
  r = await call(rport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(t2.token), body: MESSAGES });
  check(r.status === 401 && /unknown, revoked or foreign/.test(r.body),
    `a credential of another sandbox's terminal through this runner: 401 (${r.status} ${flat(r.body)})`);
  check((await fake.stats()).requests.length === before, 'and nothing reached the upstream');
  r = await call(r2port, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(t2.token), body: MESSAGES });
  check(r.status === 200 && textOf(r.body) === 'the answer is forty-two', `through its own sandbox's runner it works (${r.status})`);

  // ---- revocation on both paths
  const te = await terminal(port, op, { sandbox: 'box', proxy: ['anthropic'], argv: ['sh', '-c', 'echo "TOKEN=$ANTHROPIC_AUTH_TOKEN"'] });
  const outE = await outputOf(port, op, te.id, /^TOKEN=alp_/m);
  const tokenE = (/^TOKEN=(alp_[A-Za-z0-9_-]{43})$/m.exec(outE) || [])[1];
  await waitFor(async () => ['exited', 'closed'].includes((await api(port, 'GET', `/v1/terminals/${te.id}`, op)).json.state),
    scaled(20000), 'the terminal to exit', 100);
  r = await call(rport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tokenE), body: MESSAGES });
  const rd = await call(dport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tokenE), body: MESSAGES });
  check(tokenE && r.status === 401 && rd.status === 401,
    `a credential after its terminal exited: 401 through the runner (${r.status}) and direct (${rd.status})`);

  // ---- 100 streaming requests at once through one runner
  const tv = await agentVars(port, op, 'box');
  const rpid = runnerOf('box');
  check(rpid > 0, `box's runner found (pid ${rpid})`);
  const t0 = Date.now();
  const all = await Promise.all(Array.from({ length: MANY }, () =>
    call(rport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tv.token), body: MESSAGES, ms: 60000 })));
  const good = all.filter((x) => x.status === 200 && textOf(x.body) === 'the answer is forty-two').length;
  const rHwm = hwmKb(rpid), dHwm = hwmKb(d.p.pid);
  check(good === MANY, `${MANY} streaming requests at once through one runner: ${good} complete in ${Date.now() - t0} ms` +
    ` (${flat(all.filter((x) => x.status !== 200).slice(0, 3).map((x) => `${x.status} ${x.error} ${x.body}`))})`);
  check(rHwm < 64 * 1024 && dHwm < 256 * 1024, `peak RSS bounded: runner ${rHwm} kB, airlockd ${dHwm} kB`);

  // ---- the agent floods its runner's listener: FLOOD connections held
  // open, each with half a request. AL_MAX_PROXY_CHANNELS (256) become
  // channels; the others get the runner's 503 at once; a terminal of the
  // same sandbox still answers promptly; memory stays bounded; once the
  // agent lets go, calls work again.
  const FLOOD = 300, CHANNELS = 256;
  const echo = await terminal(port, op, { sandbox: 'box', mode: 'pty', argv: ['sh', '-c', 'stty -echo; exec cat'] });
  const ea = await attach(port, echo.id, op);
  const held = [], refused = [];
  await Promise.all(Array.from({ length: FLOOD }, () => new Promise((res) => {
    const sock = net.connect(rport, '127.0.0.1', () => {
      sock.write('POST /v1/proxy/anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n');
      held.push(sock);
      res();
    });
    let got = '';
    sock.on('data', (b) => { got += b; if (/^HTTP\/1\.1 503/.test(got) && /too many proxy connections/.test(got)) refused.push(sock); });
    sock.on('error', () => res());
  })));
  await waitFor(() => refused.length >= FLOOD - CHANNELS, 20000, 'the connections past the limit refused', 50).catch(() => 0);
  check(refused.length === FLOOD - CHANNELS,
    `${FLOOD} connections held by the agent: ${refused.length} answered 503 "too many proxy connections at once" (${FLOOD - CHANNELS} expected)`);
  const tEcho = Date.now();
  ea.ch.write(Buffer.from('still-here\n'));
  await ea.ch.waitOutput(/still-here/, 10000);
  const echoMs = Date.now() - tEcho;
  check(echoMs < scaled(1000), `a terminal of the same sandbox still echoes during the flood (${echoMs} ms)`);
  const fr = hwmKb(rpid), fd = hwmKb(d.p.pid);
  check(fr < 64 * 1024 && fd < 256 * 1024, `peak RSS bounded during the flood: runner ${fr} kB, airlockd ${fd} kB`);
  for (const sock of held) sock.destroy();
  r = await waitFor(async () => {
    const x = await call(rport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tv.token), body: MESSAGES, ms: 10000 });
    return x.status === 200 ? x : null;
  }, 15000, 'a call once the flood is gone', 200).catch(() => ({ status: 0 }));
  check(r.status === 200 && textOf(r.body) === 'the answer is forty-two', `once the agent lets go, a call works again (${r.status})`);
  ea.ctl.ws.terminate();

  // ---- the link drops mid-answer: the call is cut, not left hanging
  let streaming;
  const started = new Promise((res) => { streaming = res; });
  const slow = call(rport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tv.token), body: MESSAGES, ms: 20000, onFirst: () => streaming() });
  await Promise.race([started, sleep(scaled(10000))]); // the answer is under way
  await sleep(GAP_MS);
  const killedAt = Date.now();
  d.p.kill('SIGKILL');
  await d.exited;
  const cut = await slow;
  check(cut.status === 200 && (cut.error || !/message_stop/.test(cut.body)) && Date.now() - killedAt < scaled(3000),
    `the link dropped mid-answer: the agent's call ends at once, cut (${cut.error || 'no error'}, ${Date.now() - killedAt} ms)`);
  r = await call(rport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tv.token), body: MESSAGES, ms: 5000 });
  check(r.status === 503 && r.endMs < 2000 && /airlock_proxy/.test(r.body),
    `a new call while the link is down: 503 at once (${r.status} in ${r.endMs} ms)`);

  // ---- airlockd back: the runner relinks, new calls work again
  const d2 = await startAirlockd({ dir, args: ['--config', conf, '--proxy-listen', '127.0.0.1:0'] });
  check(d2.port === port, `airlockd restarted on its port ${port}`);
  const back = await waitFor(async () => {
    const x = await call(rport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tv.token), body: MESSAGES, ms: 10000 });
    return x.status === 200 ? x : null;
  }, scaled(30000), 'a call through the runner once its link is back', 500);
  check(textOf(back.body) === 'the answer is forty-two', 'once the runner has relinked, the same terminal\'s calls work again');
  const conn = await new Promise((res) => { const s = net.connect(rport, '127.0.0.1', () => { s.destroy(); res(true); }); s.on('error', () => res(false)); });
  check(conn, 'the runner listens on the same port all along');
}, 300000);
