// The real Claude Code CLI through the credential proxy (docs/proxy.md),
// on both of its paths: through the sandbox's runner (its listener, each
// connection a proxy channel of the link: the default for a local
// sandbox) and airlockd's direct path (--proxy-path direct), one airlockd
// each: npm @anthropic-ai/claude-code, pinned in package.json,
// ships its native binary as a platform package; the agent's jail mounts
// only /usr, /etc, /opt and the workspace, so the test puts the binary in
// the sandbox's workspace (DATA/sandboxes/box/work, /workspace inside).
// A third airlockd runs it in a local sandbox with "network": "none": its
// agents are in a network namespace of their own, and reach the proxy
// through the forwarder in their jail (airlock-proxy-fwd, on the runner's
// listener's port in their own loopback) and the runner's unix socket;
// there the agent also checks that the fake upstream itself is out of its
// reach.
// A terminal opened with "proxy": ["anthropic"] runs
//   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 /workspace/claude -p "..."
// with no key in its environment: it finds ANTHROPIC_BASE_URL and
// ANTHROPIC_AUTH_TOKEN (the base at the path's listener), its calls go
// through airlockd, and the answer of
// tests/tools/fake_anthropic.mjs is in the terminal's output and recording.
// The fake got the real key (x-api-key) on every call and never the
// terminal's credential.
//
// The binary: node_modules/@anthropic-ai/claude-code-linux-ARCH/claude
// (tools/deps.sh runs npm ci), or the file AL_CLAUDE_BIN names. Missing,
// the test fails: it is not skipped.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';
import { run, check, tmpdir, onCleanup, waitFor, reportedPort, SRC, scaled } from '../interop/harness.mjs';
import { startAirlockd, addUser, addLocalSandbox, api, attach, stopLocalRunners } from '../interop/airlockd.mjs';

const REAL_KEY = `sk-ant-airlocktest-${crypto.randomBytes(16).toString('hex')}`;
const ANSWER = 'the proxy answered from airlockd';
const flat = (s) => String(s).trim().replace(/\s+/g, ' ').slice(0, 800);

function claudeBinary() {
  if (process.env.AL_CLAUDE_BIN) return process.env.AL_CLAUDE_BIN;
  const arch = os.arch() === 'arm64' ? 'arm64' : 'x64';
  return path.join(SRC, 'node_modules', '@anthropic-ai', `claude-code-linux-${arch}`, 'claude');
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

await run('proxy_claude', async () => {
  const bin = claudeBinary();
  check(fs.existsSync(bin), `the Claude Code binary is at ${bin} (tools/deps.sh installs it with npm ci)`);

  const base = tmpdir('proxyc');
  const fp = spawn('node', [path.join(SRC, 'tests/tools/fake_anthropic.mjs'), '--key', REAL_KEY, '--answer', ANSWER],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  onCleanup(() => { fp.kill('SIGKILL'); });
  let fout = '';
  fp.stdout.on('data', (d) => { fout += d; });
  const fport = await waitFor(() => Number((/listening (\d+)/.exec(fout) || [])[1] || 0), 10000, 'the fake upstream');
  const secret = path.join(base, 'anthropic.key');
  fs.writeFileSync(secret, `${REAL_KEY}\n`, { mode: 0o600 });

  for (const way of ['runner', 'direct', 'none']) {
    const dir = path.join(base, `data-${way}`);
    const admin = addUser(dir, 'ada', 'admin');
    const op = addUser(dir, 'oli', 'operator');
    const conf = path.join(base, `airlockd-${way}.conf`);
    fs.writeFileSync(conf, [
      'proxy-listen = 127.0.0.1:0',
      `proxy-path = ${way === 'direct' ? 'direct' : 'runner'}`,
      `upstream.anthropic.url = http://127.0.0.1:${fport}`,
      'upstream.anthropic.kind = anthropic',
      'upstream.anthropic.header = x-api-key',
      `upstream.anthropic.secret-file = ${secret}`,
      'upstream.anthropic.paths = /v1/',
    ].join('\n') + '\n');
    const before = JSON.parse(await get(fport, '/__stats')).requests.length;
    const d = await startAirlockd({ dir, args: ['--config', conf] });
    const port = d.port;
    const pport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { what: 'the proxy to listen' });
    await addLocalSandbox(port, admin, 'box', 10000, way === 'none' ? { network: 'none' } : {});
    if (way !== 'direct') {
      await waitFor(() => /sandbox box: its runner serves the credential proxy at/.test(fs.readFileSync(d.log, 'utf8')),
        scaled(10000), 'the runner\'s PROXY_AT');
    }

    // the binary into the workspace (a hard link when it can be one)
    const work = path.join(dir, 'sandboxes', 'box', 'work');
    const dst = path.join(work, 'claude');
    try { fs.linkSync(bin, dst); } catch { fs.copyFileSync(bin, dst); }
    fs.chmodSync(dst, 0o755);

    const script = 'echo "BASE=$ANTHROPIC_BASE_URL"; echo "KEYS=$(env | grep -c "airlock[t]est")"; ' +
      `curl -s -m 5 -o /dev/null http://127.0.0.1:${fport}/__stats && echo UPSTREAM=reached || echo UPSTREAM=unreached; ` +
      '/workspace/claude -p "Which proxy answered?" </dev/null; echo "CLAUDE-EXIT=$?"';
    const r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'box', mode: 'pipes', argv: ['sh', '-c', script],
      env: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' }, proxy: ['anthropic'] });
    check(r.status === 201, `${way}: a terminal with proxy [anthropic] (${r.status} ${r.body})`);
    const a = await attach(port, r.json.id, op, { read: true });
    await a.ch.waitOutput(/CLAUDE-EXIT=\d+/, scaled(120000)).catch(() => {});
    const out = a.ch.output().toString();
    a.ctl.ws.terminate();
    const bport = Number((/^BASE=http:\/\/127\.0\.0\.1:(\d+)\/v1\/proxy\/anthropic$/m.exec(out) || [])[1] || 0);
    check(way === 'direct' ? bport === pport : bport > 0 && bport !== pport,
      `${way}: ANTHROPIC_BASE_URL is ${way === 'direct' ? 'airlockd\'s direct path' : 'the runner\'s listener'} (${flat(out.slice(0, 120))})`);
    check(new RegExp(`^UPSTREAM=${way === 'none' ? 'unreached' : 'reached'}$`, 'm').test(out),
      `${way}: the agent ${way === 'none' ? 'cannot reach' : 'reaches'} the upstream itself`);
    check(/^KEYS=0$/m.test(out), `${way}: no real key in the agent's environment`);
    check(out.includes(ANSWER) && /CLAUDE-EXIT=0/.test(out), `${way}: claude -p printed the fake's answer and exited 0 (${flat(out)})`);

    const st = JSON.parse(await get(fport, '/__stats'));
    const calls = st.requests.slice(before).filter((x) => x.url.startsWith('/v1/messages'));
    check(calls.length >= 1 && calls.every((x) => x.headers['x-api-key'] === REAL_KEY && !x.headers.authorization),
      `${way}: every call Claude Code made reached the fake with the real key only (${calls.length} calls)`);
    check(st.credential_seen === false, `${way}: the fake never saw the terminal's credential`);
    check(calls.some((x) => /^claude-cli\//.test(x.headers['user-agent'] || '')), `${way}: and they came from Claude Code`);

    await waitFor(async () => (await api(port, 'GET', `/v1/terminals/${r.json.id}`, op)).json.state !== 'running', scaled(20000), 'the exit', 200);
    const rec = await api(port, 'GET', `/v1/terminals/${r.json.id}/recording`, admin);
    check(rec.status === 200, `${way}: the recording (${rec.status})`);
    const recText = fs.readFileSync(path.join(dir, 'recordings', `${r.json.id}.cast`), 'utf8');
    check(recText.includes(ANSWER), `${way}: the answer is in the terminal's recording`);
    check(!recText.includes(REAL_KEY), `${way}: and the real key is not`);
    fs.rmSync(dst, { force: true });
    await d.stop();
    stopLocalRunners(dir);
  }
}, 400000);
