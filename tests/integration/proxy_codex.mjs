// The real Codex CLI through the credential proxy (docs/proxy.md,
// "Example: Codex"), on the path a local sandbox's terminal gets by default:
// its runner's listener and the runner's channel to airlockd; the
// hand-made upgrade below goes to airlockd's direct path with the same
// credential. npm @openai/codex, pinned in
// package.json, ships its native binary as a platform package
// (@openai/codex-linux-ARCH); the test hard-links it into the sandbox's
// workspace, as proxy_claude.mjs does for Claude Code. A terminal opened
// with "proxy": ["openai"] (an upstream of kind openai in front of
// tests/tools/fake_openai.mjs) runs
//   codex exec -c openai_base_url="$OPENAI_BASE_URL" "..."
// with no key in its environment: Codex 0.169 takes its key from
// CODEX_API_KEY (the terminal's credential, like OPENAI_API_KEY) and its
// base URL from its configuration only, hence the -c.
//
// What it shows:
// (a) Codex tries a WebSocket to /v1/responses first: the audit has a GET
//     /v1/responses answered 426 by the proxy, and the fake got no upgrade;
// (b) the 426 makes it fall back to HTTPS at once: one WebSocket attempt
//     (a 501 makes it retry five times, seconds of back-off, first), then
//     its POST /v1/responses;
// (c) the fake's answer is in the terminal's output and recording;
// (d) the fake got the real key on every call, never the credential.
//
// The binary: node_modules/@openai/codex-linux-ARCH/vendor/TRIPLE/bin/codex
// (tools/deps.sh runs npm ci), or the file AL_CODEX_BIN names. Missing,
// the test fails: it is not skipped.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';
import { run, check, tmpdir, onCleanup, waitFor, reportedPort, SRC, scaled } from '../interop/harness.mjs';
import { startAirlockd, addUser, addLocalSandbox, api, attach } from '../interop/airlockd.mjs';

const REAL_KEY = `sk-proj-airlocktest-${crypto.randomBytes(16).toString('hex')}`;
const ANSWER = 'codex heard the proxy';
const flat = (s) => String(s).trim().replace(/\s+/g, ' ').slice(0, 1200);

function codexBinary() {
  if (process.env.AL_CODEX_BIN) return process.env.AL_CODEX_BIN;
  const [pkg, triple] = os.arch() === 'arm64' ? ['linux-arm64', 'aarch64-unknown-linux-musl']
    : ['linux-x64', 'x86_64-unknown-linux-musl'];
  return path.join(SRC, 'node_modules', '@openai', `codex-${pkg}`, 'vendor', triple, 'bin', 'codex');
}

function get(port, target) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: target, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString()));
    }).on('error', reject);
  });
}

// A raw WebSocket upgrade to the proxy, as a client library sends it:
// resolves the status line and the whole answer (the proxy closes).
function upgrade(port, target, cred) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: target, agent: false, headers: {
      connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13',
      'sec-websocket-key': crypto.randomBytes(16).toString('base64'), authorization: `Bearer ${cred}` } });
    const t0 = Date.now();
    req.setTimeout(scaled(10000), () => req.destroy(new Error('upgrade: no answer')));
    req.on('upgrade', () => resolve({ status: 101, ms: Date.now() - t0 }));
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
        body: Buffer.concat(chunks).toString(), ms: Date.now() - t0 }));
    });
    req.on('error', reject);
    req.end();
  });
}

await run('proxy_codex', async () => {
  const bin = codexBinary();
  check(fs.existsSync(bin), `the Codex binary is at ${bin} (tools/deps.sh installs it with npm ci)`);

  const base = tmpdir('proxyx');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'oli', 'operator');

  const fp = spawn('node', [path.join(SRC, 'tests/tools/fake_openai.mjs'), '--key', REAL_KEY, '--answer', ANSWER],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  onCleanup(() => { fp.kill('SIGKILL'); });
  let fout = '';
  fp.stdout.on('data', (d) => { fout += d; });
  const fport = await waitFor(() => Number((/listening (\d+)/.exec(fout) || [])[1] || 0), 10000, 'the fake upstream');

  const secret = path.join(base, 'openai.key');
  fs.writeFileSync(secret, `${REAL_KEY}\n`, { mode: 0o600 });
  const conf = path.join(base, 'airlockd.conf');
  fs.writeFileSync(conf, [
    'proxy-listen = 127.0.0.1:0',
    `upstream.openai.url = http://127.0.0.1:${fport}/v1`,
    'upstream.openai.kind = openai',
    'upstream.openai.header = bearer',
    `upstream.openai.secret-file = ${secret}`,
  ].join('\n') + '\n');
  const d = await startAirlockd({ dir, args: ['--config', conf] });
  const port = d.port;
  const pport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { what: 'the proxy to listen' });
  await addLocalSandbox(port, admin, 'box');

  const work = path.join(dir, 'sandboxes', 'box', 'work');
  const dst = path.join(work, 'codex');
  try { fs.linkSync(bin, dst); } catch { fs.copyFileSync(bin, dst); }
  fs.chmodSync(dst, 0o755);

  // Codex keeps its state in CODEX_HOME (it must exist); its update check
  // and analytics are off, so that it calls nothing but the proxy.
  const script = [
    'echo "KEYS=$(env | grep -c "airlock[t]est")"',
    'echo "CRED=$OPENAI_API_KEY"',
    'echo "SAME=$([ "$CODEX_API_KEY" = "$OPENAI_API_KEY" ] && echo yes)"',
    'echo "BASE=$OPENAI_BASE_URL"',
    'mkdir -p /workspace/.codex-home',
    'echo "START=$(date +%s%3N)"',
    'CODEX_HOME=/workspace/.codex-home /workspace/codex exec --skip-git-repo-check' +
      ' -c openai_base_url="\\"$OPENAI_BASE_URL\\"" -c check_for_update_on_startup=false' +
      ' -c analytics.enabled=false "Which proxy answered?" </dev/null',
    'echo "CODEX-EXIT=$?"',
  ].join('; ');
  const r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'box', mode: 'pipes', argv: ['sh', '-c', script],
    proxy: ['openai'] });
  check(r.status === 201, `a terminal with proxy [openai] (${r.status} ${r.body})`);
  const a = await attach(port, r.json.id, op, { read: true });
  await a.ch.waitOutput(/CODEX-EXIT=\d+/, scaled(120000)).catch(() => {});
  const out = a.ch.output().toString();
  const cred = (/^CRED=(alp_[A-Za-z0-9_-]{43})$/m.exec(out) || [])[1];
  check(cred && /^SAME=yes$/m.test(out), `the agent has a credential in OPENAI_API_KEY and CODEX_API_KEY (${flat(out.slice(0, 300))})`);
  const baseOf = /^BASE=http:\/\/127\.0\.0\.1:(\d+)\/v1\/proxy\/openai$/m.exec(out);
  check(baseOf && Number(baseOf[1]) !== pport,
    `OPENAI_BASE_URL is the sandbox runner's proxy listener (the path through the runner), not airlockd's direct path (${baseOf && baseOf[0]})`);
  check(/^KEYS=0$/m.test(out), 'no real key in the agent\'s environment');
  check(out.includes(ANSWER) && /CODEX-EXIT=0/.test(out), `codex exec printed the fake's answer and exited 0 (${flat(out)})`);
  check(!/Reconnecting\.\.\. [2-5]\/5/.test(out), `Codex did not retry: it fell back at once (${flat((out.match(/^.*Reconnecting.*$/mg) || []).join('; '))})`);

  const st = JSON.parse(await get(fport, '/__stats'));
  const posts = st.requests.filter((x) => x.method === 'POST' && x.url === '/v1/responses');
  check(posts.length >= 1 && st.requests.every((x) => x.headers.authorization === `Bearer ${REAL_KEY}`),
    `every call Codex made reached the fake with the real key (${st.requests.map((x) => `${x.method} ${x.url}`).join(', ')})`);
  check(st.credential_seen === false, 'the fake never saw the terminal\'s credential');
  check(posts.every((x) => /^codex_exec\//.test(x.headers['user-agent'] || '')), 'and they came from Codex');
  check(st.upgrades.length === 0, `no WebSocket upgrade reached the fake (${st.upgrades.length})`);

  // (a) and (b) from the audit: Codex's upgrade(s), then its POST. A
  // refused upgrade is answered before the credential is looked at, so it
  // is counted with the calls refused without a valid credential
  // (proxy_refused: one row per source and status, the target the path as
  // sent, the count and the first and last times in its detail).
  const audit = await api(port, 'GET', '/v1/audit?action=proxy_call', admin);
  const calls = (audit.json || []).filter((x) => x.action === 'proxy_call')
    .map((x) => ({ at: x.at, target: x.target, ...JSON.parse(x.detail) })).sort((x, y) => x.at - y.at);
  const counted = await api(port, 'GET', '/v1/audit?action=proxy_refused', admin);
  const ws = (counted.json || []).filter((x) => x.action === 'proxy_refused' && x.target === '/v1/proxy/openai/responses')
    .map((x) => ({ target: x.target, ...JSON.parse(x.detail) }));
  const tries = ws.reduce((n, x) => n + x.count, 0);
  const post = calls.find((x) => x.method === 'POST' && x.path === '/responses' && x.target === r.json.id);
  check(tries >= 1 && ws.every((x) => x.why === 'HTTP 426'),
    `Codex tried the WebSocket first: ${tries} GET /v1/responses, each answered 426 by the proxy (${flat(JSON.stringify(ws))})`);
  check(!calls.some((x) => x.path === '/v1/proxy/openai/responses'), 'and those are not rows of their own');
  check(tries === 1 && post && post.status === 200 && post.at >= ws[0].first_at,
    `and fell back to HTTPS at once: one attempt, then POST /v1/responses 200, ${post ? post.at - ws[0].first_at : '?'} ms later (${flat(JSON.stringify(calls))})`);
  check(!counted.body.includes(REAL_KEY) && !counted.body.includes(cred), 'the counted refusals hold neither');
  check(!audit.body.includes(REAL_KEY) && !audit.body.includes(cred), 'the audit holds neither the key nor the credential');

  // the same refusal by hand: at once, JSON, nothing forwarded
  const u = await upgrade(pport, '/v1/proxy/openai/responses', cred);
  check(u.status === 426 && u.ms < scaled(3000) && JSON.parse(u.body).error.status === 426 && /HTTPS/.test(u.body),
    `a WebSocket upgrade is answered 426 at once (${u.status}, ${u.ms} ms, ${flat(u.body)})`);
  check(JSON.parse(await get(fport, '/__stats')).upgrades.length === 0, 'and nothing of it reached the fake');

  await waitFor(async () => (await api(port, 'GET', `/v1/terminals/${r.json.id}`, op)).json.state !== 'running', scaled(20000), 'the exit', 200);
  const recText = fs.readFileSync(path.join(dir, 'recordings', `${r.json.id}.cast`), 'utf8');
  check(recText.includes(ANSWER), 'the answer is in the terminal\'s recording');
  check(!recText.includes(REAL_KEY), 'and the real key is not');
  const codexHome = path.join(work, '.codex-home');
  const leaked = fs.existsSync(codexHome) ? fs.readdirSync(codexHome, { recursive: true })
    .map((f) => path.join(codexHome, f)).filter((f) => fs.statSync(f).isFile() && fs.readFileSync(f).includes(REAL_KEY)) : [];
  check(leaked.length === 0, `nothing Codex kept holds the real key (${leaked.join(', ')})`);
  fs.rmSync(dst, { force: true });
}, 300000);
