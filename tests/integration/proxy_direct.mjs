// The credential proxy's direct path, end to end (docs/proxy.md): airlockd
// with an `anthropic` upstream (tests/tools/fake_anthropic.mjs, its key in
// a 0600 secret file) and an `other` one, serving the proxy on
// --proxy-listen with --proxy-path direct (so that its local sandbox's
// terminals get the direct path, not their runner's listener).
//
// - A terminal opened with "proxy": ["anthropic"] runs curl against
//   $ANTHROPIC_BASE_URL/v1/messages with $ANTHROPIC_AUTH_TOKEN: the fake
//   gets the real key and never the credential, and the SSE stream reaches
//   the agent event by event (the first long before the fake has finished).
// - Inside, nothing holds the real key: the terminal's environment, the
//   /proc/*/environ and cmdline it can read, the files under /etc, /opt,
//   /tmp, $HOME and its workspace. Another terminal of the same sandbox
//   cannot read the first one's environment (its own pid namespace).
// - The credential is not in the database, the API's view, the audit log
//   or airlockd's log; /metrics counts the calls per upstream.
// - Refusals: an unknown upstream 404, a path outside the upstream's 403,
//   no credential, a forged one, the real key itself, a credential of
//   another terminal's upstream 401 (an attacker holding terminal A's
//   credential gets nothing from an upstream A was not given).
// - Revocation: POST .../proxy/revoke, a terminal that exits, one that is
//   closed: its credential is 401 from then on.
// - A secret file others may read stops airlockd at start, naming the
//   upstream and never the secret; so does --proxy-listen without upstreams.
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import crypto from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { run, check, tmpdir, onCleanup, waitFor, reportedPort, BIN, SRC, scaled } from '../interop/harness.mjs';
import { startAirlockd, addUser, addLocalSandbox, api, attach } from '../interop/airlockd.mjs';

const GAP_MS = 400; // between the fake's events
const REAL_KEY = `sk-ant-airlocktest-${crypto.randomBytes(16).toString('hex')}`;
const OTHER_KEY = `sk-other-airlocktest-${crypto.randomBytes(16).toString('hex')}`;
const flat = (s) => String(s).trim().replace(/\n/g, ' | ').slice(0, 600);

// The fake upstream: resolves { port, stats() }.
async function startFake() {
  const p = spawn('node', [path.join(SRC, 'tests/tools/fake_anthropic.mjs'), '--key', REAL_KEY,
    '--gap-ms', String(GAP_MS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  onCleanup(() => { p.kill('SIGKILL'); });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  const port = await waitFor(() => Number((/listening (\d+)/.exec(out) || [])[1] || 0), 10000, 'the fake upstream');
  const stats = async () => JSON.parse((await call(port, 'GET', '/__stats')).body);
  return { port, stats };
}

// One HTTP call; resolves { status, headers, body, firstMs, endMs } where
// firstMs is when the first body byte came, endMs the end (since the start).
function call(port, method, target, { headers = {}, body = '' } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    let firstMs = -1;
    const req = http.request({ host: '127.0.0.1', port, method, path: target, agent: false,
      headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => { if (firstMs < 0) firstMs = Date.now() - t0; chunks.push(c); });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
        body: Buffer.concat(chunks).toString(), firstMs, endMs: Date.now() - t0 }));
      res.on('error', reject);
    });
    req.setTimeout(scaled(20000), () => req.destroy(new Error(`${method} ${target}: timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

const bearer = (c) => ({ authorization: `Bearer ${c}` });
const MESSAGES = JSON.stringify({ model: 'fake', max_tokens: 16, stream: true,
  messages: [{ role: 'user', content: 'hi' }] });

// A terminal's output once it has printed `re` (pipes mode: stdout).
async function outputOf(port, key, id, re, ms = 30000) {
  const a = await attach(port, id, key, { read: true });
  await a.ch.waitOutput(re, scaled(ms));
  const out = a.ch.output().toString();
  a.ctl.ws.terminate();
  return out;
}

async function terminal(port, key, body) {
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox: 'box', mode: 'pipes', ...body });
  if (r.status !== 201) throw new Error(`POST /v1/terminals: ${r.status} ${r.body}`);
  return r.json;
}

async function waitState(port, key, id, states, ms = 20000) {
  let t = null;
  await waitFor(async () => {
    t = (await api(port, 'GET', `/v1/terminals/${id}`, key)).json;
    return t && states.includes(t.state);
  }, scaled(ms), `terminal ${id} ${states.join('/')}`, 100);
  return t;
}

// What an agent runs: its variables, whether anything it can read holds
// the real key (grep's own pattern, airlock[t]est, does not match itself),
// then the streamed call through the proxy, each line timed.
const AGENT = [
  'echo "TOKEN=$ANTHROPIC_AUTH_TOKEN"',
  'echo "BASE=$ANTHROPIC_BASE_URL"',
  'echo "PROXY_URL=$AIRLOCK_PROXY_URL"',
  'echo "ENV=$(env | grep -c "airlock[t]est")"',
  'echo "PROC=$(cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" "\\n" | grep -c "airlock[t]est")"',
  'echo "FILES=$(grep -rIl "airlock[t]est" /etc /opt /tmp "$HOME" . 2>/dev/null | wc -l)"',
  'curl -sS -N -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN"' +
    ` -H "content-type: application/json" -H "anthropic-version: 2023-06-01" -d '${MESSAGES}'` +
    ' | while IFS= read -r l; do [ -n "$l" ] && echo "$(date +%s%3N) $l"; done',
  'echo CURL-DONE',
  'exec sleep 600',
].join('; ');

await run('proxy_direct', async () => {
  const base = tmpdir('proxyd');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'oli', 'operator');
  const fake = await startFake();

  const secret = path.join(base, 'anthropic.key');
  fs.writeFileSync(secret, `${REAL_KEY}\n`, { mode: 0o600 });
  const otherSecret = path.join(base, 'other.key');
  fs.writeFileSync(otherSecret, `${OTHER_KEY}\n`, { mode: 0o600 });
  const conf = path.join(base, 'airlockd.conf');
  const upstreams = [
    `upstream.anthropic.url = http://127.0.0.1:${fake.port}`,
    'upstream.anthropic.kind = anthropic',
    'upstream.anthropic.header = x-api-key',
    `upstream.anthropic.secret-file = ${secret}`,
    'upstream.anthropic.paths = /v1/',
    `upstream.other.url = http://127.0.0.1:${fake.port}`,
    `upstream.other.secret-file = ${otherSecret}`,
  ];
  fs.writeFileSync(conf, `${upstreams.join('\n')}\n`);

  // ---- refused at start: a secret file others may read; a listener without upstreams
  fs.chmodSync(otherSecret, 0o644);
  const bad = spawnSync(path.join(BIN, 'airlockd'), ['serve', '--data', path.join(base, 'bad'),
    '--listen', '127.0.0.1:0', '--config', conf, '--proxy-listen', '127.0.0.1:0'],
  { timeout: scaled(20000), encoding: 'utf8' });
  const said = `${bad.stdout}${bad.stderr}`;
  check(bad.status !== 0 && /upstream other/.test(said) && /0644|mode/.test(said),
    `a 0644 secret file stops airlockd, naming the upstream (${flat(said)})`);
  check(!said.includes(OTHER_KEY) && !said.includes('airlocktest'), 'and never the secret');
  fs.chmodSync(otherSecret, 0o600);
  const empty = path.join(base, 'empty.conf');
  fs.writeFileSync(empty, '# nothing\n');
  const bad2 = spawnSync(path.join(BIN, 'airlockd'), ['serve', '--data', path.join(base, 'bad2'),
    '--listen', '127.0.0.1:0', '--config', empty, '--proxy-listen', '127.0.0.1:0'],
  { timeout: scaled(20000), encoding: 'utf8' });
  check(bad2.status !== 0 && /--proxy-listen: no upstream/.test(bad2.stderr),
    `--proxy-listen without upstreams: refused (${flat(bad2.stderr)})`);

  // ---- airlockd with both upstreams and the direct path
  const d = await startAirlockd({ dir, args: ['--config', conf, '--proxy-listen', '127.0.0.1:0', '--proxy-path', 'direct'] });
  const port = d.port;
  const pport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { what: 'the proxy to listen' });
  await addLocalSandbox(port, admin, 'box');

  // ---- what a create with "proxy" refuses
  let r0 = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['true'], proxy: ['nope'] });
  check(r0.status === 400 && r0.json.error === '"proxy"[0]: no upstream "nope" in airlockd\'s configuration (it has: anthropic, other)',
    `an upstream airlockd does not have: 400 naming it and those it has (${r0.body})`);
  r0 = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['true'], proxy: ['anthropic'], env: { ANTHROPIC_BASE_URL: 'http://elsewhere' } });
  check(r0.status === 400 && /"env"."ANTHROPIC_BASE_URL": set by the credential proxy/.test(r0.json.error),
    `an env that would override the proxy's variables: 400 (${r0.body})`);
  await api(port, 'POST', '/v1/sandboxes', admin, { id: 'cut', kind: 'local', network: 'none' });
  r0 = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'cut', argv: ['true'], proxy: ['anthropic'] });
  check(r0.status === 400 && /have no network, so they cannot reach the proxy's direct path \(--proxy-path direct\); with --proxy-path runner/.test(r0.json.error),
    `a sandbox whose agents cannot reach the direct path (--proxy-path direct): 400 naming the path that serves them (${r0.body})`);
  await api(port, 'DELETE', '/v1/sandboxes/cut', admin);

  // ---- the agent's call, streamed
  const ta = await terminal(port, op, { argv: ['bash', '-c', AGENT], proxy: ['anthropic'] });
  check(ta.proxy && ta.proxy.upstreams.join() === 'anthropic' && ta.proxy.revoked === false,
    `the create's answer shows the upstreams (${JSON.stringify(ta.proxy)})`);
  const outA = await outputOf(port, op, ta.id, /CURL-DONE/);
  const tokenA = (/^TOKEN=(alp_[A-Za-z0-9_-]{43})$/m.exec(outA) || [])[1];
  check(tokenA, `the agent has a credential in ANTHROPIC_AUTH_TOKEN (${flat(outA.slice(0, 300))})`);
  check(new RegExp(`^BASE=http://127\\.0\\.0\\.1:${pport}/v1/proxy/anthropic$`, 'm').test(outA),
    'ANTHROPIC_BASE_URL is the proxy\'s direct path for the upstream');
  check(new RegExp(`^PROXY_URL=http://127\\.0\\.0\\.1:${pport}/v1/proxy$`, 'm').test(outA), 'AIRLOCK_PROXY_URL is the proxy\'s root');
  check(/^ENV=0$/m.test(outA) && /^PROC=0$/m.test(outA) && /^FILES=0$/m.test(outA),
    `nothing the agent can read holds the real key (${flat(outA.match(/^(ENV|PROC|FILES)=.*$/mg))})`);
  const lines = outA.split('\n').map((l) => /^(\d{13}) (.*)$/.exec(l)).filter(Boolean);
  const at = (re) => { const m = lines.find((x) => re.test(x[2])); return m ? Number(m[1]) : NaN; };
  const first = at(/^event: message_start$/), last = at(/^event: message_stop$/);
  const text = lines.map((x) => x[2]).filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6))).filter((e) => e.type === 'content_block_delta').map((e) => e.delta.text).join('');
  check(text === 'the answer is forty-two', `the answer came through (${JSON.stringify(text)})`);
  check(last - first >= 4 * GAP_MS, `the first event reached the agent ${last - first} ms before the last: streamed, not buffered`);
  let st = await fake.stats();
  const msgs = st.requests.filter((r) => r.url === '/v1/messages');
  check(msgs.length === 1 && msgs[0].headers['x-api-key'] === REAL_KEY && !msgs[0].headers.authorization,
    'the fake got the real key in x-api-key and no Authorization');
  check(st.credential_seen === false, 'the fake never saw a proxy credential');

  // ---- refusals, with A's live credential from outside (as an attacker holding it)
  let r = await call(pport, 'POST', '/v1/proxy/anthropic/v2/messages', { headers: bearer(tokenA), body: MESSAGES });
  check(r.status === 403 && JSON.parse(r.body).error.type === 'airlock_proxy', `a path outside the upstream's: 403 (${r.status} ${r.body})`);
  r = await call(pport, 'POST', '/v1/proxy/nope/v1/messages', { headers: bearer(tokenA), body: MESSAGES });
  check(r.status === 404, `an unknown upstream: 404 (${r.status})`);
  r = await call(pport, 'POST', '/v1/proxy/anthropic/v1/messages', { body: MESSAGES });
  check(r.status === 401, `no credential: 401 (${r.status})`);
  const forged = `alp_${crypto.randomBytes(32).toString('base64url')}`;
  r = await call(pport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(forged), body: MESSAGES });
  check(r.status === 401 && /unknown, revoked or foreign/.test(r.body), `a forged credential: 401 (${r.status} ${r.body})`);
  r = await call(pport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: { 'x-api-key': REAL_KEY }, body: MESSAGES });
  check(r.status === 401, `the real key is no credential here: 401 (${r.status})`);
  r = await call(pport, 'GET', '/v1/proxy/other/__stats', { headers: bearer(tokenA) });
  check(r.status === 401, `A's credential for an upstream A was not given: 401 (${r.status})`);

  // ---- a second terminal (another upstream), and a third that looks for it
  const tb = await terminal(port, op, { argv: ['sh', '-c', 'echo "TOKEN=$AIRLOCK_PROXY_TOKEN"; echo "A=${ANTHROPIC_AUTH_TOKEN:-none}"; exec sleep 600'], proxy: ['other'] });
  const outB = await outputOf(port, op, tb.id, /^A=/m);
  const tokenB = (/^TOKEN=(alp_[A-Za-z0-9_-]{43})$/m.exec(outB) || [])[1];
  check(tokenB && tokenB !== tokenA && /^A=none$/m.test(outB), 'an http upstream gives AIRLOCK_PROXY_TOKEN only, a credential of its own');
  r = await call(pport, 'GET', '/v1/proxy/other/__stats', { headers: bearer(tokenB) });
  check(r.status === 200 && JSON.parse(r.body).requests, `B's credential opens its upstream (${r.status})`);
  r = await call(pport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tokenB), body: MESSAGES });
  check(r.status === 401, `B's credential for A's upstream: 401 (${r.status})`);
  const spy = await terminal(port, op, { argv: ['sh', '-c', 'echo "SEEN=$(cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | grep -c "^[A-Z_]*=alp[_]")"; echo "PIDS=$(ls -d /proc/[0-9]* | wc -l)"; echo SPY-DONE'] });
  const outS = await outputOf(port, op, spy.id, /SPY-DONE/);
  check(/^SEEN=0$/m.test(outS), `another terminal of the sandbox reads no credential in any environment (${flat(outS)})`);

  // ---- nothing kept or shown holds a credential or the key
  const view = await api(port, 'GET', `/v1/terminals/${ta.id}`, op);
  check(view.json.proxy && view.json.proxy.upstreams[0] === 'anthropic' && !view.body.includes('alp_'),
    `GET /v1/terminals/ID shows the upstreams, not the credential (${flat(view.body)})`);
  const list = await api(port, 'GET', '/v1/terminals', op);
  check(!list.body.includes(tokenA) && !list.body.includes(tokenB), 'the list shows no credential');
  const files = ['airlock.db', 'airlock.db-wal'].map((f) => path.join(dir, f)).filter((f) => fs.existsSync(f));
  for (const f of files) {
    const b = fs.readFileSync(f);
    check(!b.includes(tokenA) && !b.includes(tokenB) && !b.includes(REAL_KEY), `${path.basename(f)} holds neither a credential nor the key`);
  }
  const log = fs.readFileSync(d.log, 'utf8');
  check(!log.includes(tokenA) && !log.includes(REAL_KEY) && !log.includes(OTHER_KEY), 'airlockd\'s log holds neither');
  const audit = await api(port, 'GET', '/v1/audit?action=proxy_call', admin);
  const calls = (audit.json || []).filter((x) => x.action === 'proxy_call');
  check(calls.some((x) => x.target === ta.id && /"status":200/.test(x.detail) && /"path":"\/v1\/messages"/.test(x.detail)),
    `one audit row per call: A's streamed call (${calls.length} rows)`);
  check(!calls.some((x) => x.target === ''), 'no row of its own for a call with no valid credential');
  const refused = (await api(port, 'GET', '/v1/audit?action=proxy_refused', admin)).json || [];
  check(refused.some((x) => x.action === 'proxy_refused' && /"why":"HTTP 401"/.test(x.detail) && /"count":\d+/.test(x.detail)),
    `those are counted, one row per source and status (${refused.length} rows)`);
  check(!audit.body.includes('alp_') && !audit.body.includes(REAL_KEY), 'the audit rows hold neither');
  const m = await api(port, 'GET', '/metrics', admin);
  const n2xx = Number((/airlock_proxy_requests_total\{upstream="anthropic",class="2xx"\} (\d+)/.exec(m.body) || [])[1]);
  const n4xx = Number((/airlock_proxy_requests_total\{upstream="anthropic",class="4xx"\} (\d+)/.exec(m.body) || [])[1]);
  check(n2xx === 1 && n4xx >= 4 && /airlock_proxy_latency_seconds_count\{upstream="anthropic"\} \d+/.test(m.body),
    `/metrics counts the calls per upstream (2xx ${n2xx}, 4xx ${n4xx})`);

  // ---- revocation: by the API, at exit, at close
  r = await api(port, 'POST', `/v1/terminals/${ta.id}/proxy/revoke`, op);
  check(r.status === 200 && r.json.revoked === true, `POST .../proxy/revoke: 200 (${r.status} ${r.body})`);
  r = await call(pport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tokenA), body: MESSAGES });
  check(r.status === 401, `A's credential after its revocation: 401 (${r.status})`);
  check((await api(port, 'GET', `/v1/terminals/${ta.id}`, op)).json.proxy.revoked === true, 'its view says revoked');

  const te = await terminal(port, op, { argv: ['sh', '-c', 'echo "TOKEN=$ANTHROPIC_AUTH_TOKEN"'], proxy: ['anthropic'] });
  const outE = await outputOf(port, op, te.id, /^TOKEN=alp_/m);
  const tokenE = (/^TOKEN=(alp_[A-Za-z0-9_-]{43})$/m.exec(outE) || [])[1];
  await waitState(port, op, te.id, ['exited', 'closed']);
  r = await call(pport, 'POST', '/v1/proxy/anthropic/v1/messages', { headers: bearer(tokenE), body: MESSAGES });
  check(tokenE && r.status === 401, `a credential after its terminal exited: 401 (${r.status})`);

  r = await api(port, 'DELETE', `/v1/terminals/${tb.id}`, op);
  check(r.status === 202, `DELETE B: 202 (${r.status})`);
  r = await call(pport, 'GET', '/v1/proxy/other/__stats', { headers: bearer(tokenB) });
  check(r.status === 401, `B's credential once B is closed: 401 (${r.status})`);
  st = await fake.stats();
  check(st.credential_seen === false && st.requests.filter((x) => x.url === '/v1/messages').length === 1,
    'in all, the fake got the one call that was allowed, and never a credential');
  await api(port, 'DELETE', `/v1/terminals/${ta.id}`, op);
});
