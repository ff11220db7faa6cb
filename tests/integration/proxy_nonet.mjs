// The credential proxy for agents with no network (docs/proxy.md, "Agents
// with no network"), from the attacker's side. A local sandbox "cut" has
// "network": "none": each agent is in a network namespace of its own,
// loopback only, and reaches the proxy through the forwarder its jail
// starts with (airlock-proxy-fwd on 127.0.0.1:PORT, PORT the runner's
// listener's) and the runner's proxy socket bound at /airlock/proxy.sock.
// A second sandbox "other" holds a live terminal with a credential of its
// own. An agent of "cut" with "proxy": ["anthropic"]:
// - gets its answer from the stand-in Messages API through the forwarder,
//   each event as the stand-in sends it (GAP_MS apart), and through the
//   socket itself;
// - reaches nothing else: not airlockd's API port, not airlockd's direct
//   proxy port, not the upstream, on the host's 127.0.0.1; no address
//   outside; its /proc/net/dev shows loopback only;
// - spends nothing with the credential of the other sandbox: 401 through
//   the forwarder and through the socket, as through any runner;
// - finds the real key in no file it can read, no /proc/*/environ or
//   cmdline (the forwarder's included);
// - kills the forwarder: its own calls through 127.0.0.1:PORT are cut
//   (the socket still answers), and nothing else happens: its terminal
//   runs on and ends with its own exit status (42).
// A PTY terminal of "cut" with the proxy that kills itself with SIGTERM
// ends with signal 15, as without a forwarder; after each terminal has
// ended no forwarder of it is left on the host (found by its credential
// in /proc/*/environ).
// A restarted airlockd adopts the sandbox's runner and serves on.
// An airlockd with no airlock-proxy-fwd next to its runner refuses such a
// terminal (400, with the reason); a runner refuses --proxy-listen for
// agents with no network without a forwarder and a socket, and a
// forwarder where agents have the network.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { run, check, tmpdir, onCleanup, waitFor, reportedPort, SRC, BIN, scaled } from '../interop/harness.mjs';
import { startAirlockd, addUser, addLocalSandbox, api, attach, stopLocalRunners } from '../interop/airlockd.mjs';

const REAL_KEY = `sk-ant-airlocktest-${crypto.randomBytes(16).toString('hex')}`;
const ANSWER = 'the forwarder carried it';
const GAP_MS = 300; // the stand-in's pause between events: a stream buffered whole would show none
const flat = (s) => String(s).trim().replace(/\s+/g, ' ').slice(0, 1200);

// host processes whose environment holds s (as root: every process's)
function procsWith(s) {
  const found = [];
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (fs.readFileSync(`/proc/${p}/environ`).includes(s)) found.push(Number(p));
    } catch { /* gone, or not ours to read */ }
  }
  return found;
}

// ... of which the forwarders (their command line)
function forwardersWith(s) {
  return procsWith(s).filter((p) => {
    try { return fs.readFileSync(`/proc/${p}/cmdline`).toString().startsWith('/airlock/airlock-proxy-fwd\0'); } catch { return false; }
  });
}

async function stateOf(port, key, id) {
  let t = null;
  await waitFor(async () => {
    t = (await api(port, 'GET', `/v1/terminals/${id}`, key)).json;
    return t && t.state !== 'running' && t.state !== 'opening';
  }, scaled(20000), `terminal ${id} to end`, 200);
  return t;
}

await run('proxy_nonet', async () => {
  const base = tmpdir('proxyn');
  const fp = spawn('node', [path.join(SRC, 'tests/tools/fake_anthropic.mjs'), '--key', REAL_KEY, '--answer', ANSWER, '--gap-ms', String(GAP_MS)],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  onCleanup(() => { fp.kill('SIGKILL'); });
  let fout = '';
  fp.stdout.on('data', (d) => { fout += d; });
  const fport = await waitFor(() => Number((/listening (\d+)/.exec(fout) || [])[1] || 0), 10000, 'the fake upstream');
  const secret = path.join(base, 'anthropic.key');
  fs.writeFileSync(secret, `${REAL_KEY}\n`, { mode: 0o600 });
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'oli', 'operator');
  const conf = path.join(base, 'airlockd.conf');
  fs.writeFileSync(conf, [
    'proxy-listen = 127.0.0.1:0',
    `upstream.anthropic.url = http://127.0.0.1:${fport}`,
    'upstream.anthropic.kind = anthropic',
    'upstream.anthropic.header = x-api-key',
    `upstream.anthropic.secret-file = ${secret}`,
    'upstream.anthropic.paths = /v1/',
  ].join('\n') + '\n');
  const d = await startAirlockd({ dir, args: ['--config', conf] });
  onCleanup(() => stopLocalRunners(dir));
  const port = d.port;
  const pport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { what: 'the proxy to listen' });
  await addLocalSandbox(port, admin, 'cut', 10000, { network: 'none' });
  await addLocalSandbox(port, admin, 'other', 10000, { network: 'none' });
  for (const id of ['cut', 'other']) {
    await waitFor(() => new RegExp(`sandbox ${id}: its runner serves the credential proxy at`).test(fs.readFileSync(d.log, 'utf8')),
      scaled(10000), `${id}'s PROXY_AT`);
  }

  // ---- a live credential of the other sandbox
  let r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'other', mode: 'pipes',
    argv: ['sh', '-c', 'echo "TOKEN=$AIRLOCK_PROXY_TOKEN"; sleep 120'], proxy: ['anthropic'] });
  check(r.status === 201, `a terminal with the proxy in sandbox other (${r.status})`);
  const otherId = r.json.id;
  const ao = await attach(port, otherId, op, { read: true });
  await ao.ch.waitOutput(/TOKEN=alp_\S+/, scaled(20000));
  const foreign = /TOKEN=(alp_[A-Za-z0-9_-]{43})/.exec(ao.ch.output().toString())[1];
  ao.ctl.ws.terminate();

  // ---- the agent of "cut"
  const msg = '{"model":"claude-test","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}';
  const code = (args) => `curl -s -m 10 -o /dev/null -w "%{http_code}" ${args} -H "content-type: application/json" -d '${msg}'`;
  const tcpProbe = (host, p) => `timeout 3 bash -c 'exec 3<>/dev/tcp/${host}/${p}' 2>/dev/null && echo "OPEN ${host}:${p}" || echo "CUT ${host}:${p}"`;
  const script = [
    'echo "BASE=$ANTHROPIC_BASE_URL"',
    `curl -sN -m 20 "$ANTHROPIC_BASE_URL/v1/messages" -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN" -H "content-type: application/json" -d '${msg}' | ` +
      'while IFS= read -r l; do case "$l" in event:*) echo "EV $(date +%s%3N) $l";; *forwarder*) echo "ANSWER=1";; esac; done',
    `echo "SOCKET=${'$'}(${code('--unix-socket /airlock/proxy.sock -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN" http://x/v1/proxy/anthropic/v1/messages')})"`,
    `echo "FOREIGN-TCP=${'$'}(${code('-H "Authorization: Bearer $FOREIGN" "$ANTHROPIC_BASE_URL/v1/messages"')})"`,
    `echo "FOREIGN-SOCKET=${'$'}(${code('--unix-socket /airlock/proxy.sock -H "Authorization: Bearer $FOREIGN" http://x/v1/proxy/anthropic/v1/messages')})"`,
    tcpProbe('127.0.0.1', port), tcpProbe('127.0.0.1', pport), tcpProbe('127.0.0.1', fport),
    tcpProbe('192.0.2.1', 80), tcpProbe('10.0.0.1', 443),
    'echo "IFACES=$(grep -c ":" /proc/net/dev)"',
    'echo "PROCKEYS=$(cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" "\\n" | grep -c "airlock[t]est")"',
    'echo "FILEKEYS=$(grep -rls "airlock[t]est" /workspace /tmp /airlock /etc /opt 2>/dev/null | wc -l)"',
    'FWD=""; for p in /proc/[0-9]*; do case "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" in /airlock/airlock-proxy-fwd*) FWD="$FWD ${p#/proc/}";; esac; done',
    'echo "FWD=$FWD"',
    'kill -9 $FWD; sleep 0.5',
    `echo "AFTER-KILL-TCP=${'$'}(${code('-H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN" "$ANTHROPIC_BASE_URL/v1/messages"')})"`,
    `echo "AFTER-KILL-SOCKET=${'$'}(${code('--unix-socket /airlock/proxy.sock -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN" http://x/v1/proxy/anthropic/v1/messages')})"`,
    'echo "TOKEN=$AIRLOCK_PROXY_TOKEN"',
    'echo AGENT-DONE',
    'exit 42',
  ].join('\n');
  r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'cut', mode: 'pipes', argv: ['bash', '-c', script],
    env: { FOREIGN: foreign }, proxy: ['anthropic'] });
  check(r.status === 201, `a terminal with the proxy in sandbox cut, which has no network (${r.status} ${r.status === 201 ? '' : r.body})`);
  const tid = r.json.id;
  const a = await attach(port, tid, op, { read: true });
  await a.ch.waitOutput(/AGENT-DONE/, scaled(90000)).catch(() => {});
  const out = a.ch.output().toString();
  a.ctl.ws.terminate();
  const line = (k) => (new RegExp(`^${k}=(.*)$`, 'm').exec(out) || [])[1];
  const bport = Number((/^BASE=http:\/\/127\.0\.0\.1:(\d+)\/v1\/proxy\/anthropic$/m.exec(out) || [])[1] || 0);
  check(bport > 0 && bport !== pport, `the base URL is the runner's listener's port, served in the jail's own loopback (${flat(out.slice(0, 200))})`);
  check(Number(line('ANSWER')) >= 1, `a streamed call through the forwarder got the upstream's answer (${flat(out)})`);
  const evs = [...out.matchAll(/^EV (\d+) event: (\S+)$/mg)].map((m) => Number(m[1]));
  check(evs.length >= 3 && evs[evs.length - 1] - evs[0] >= (evs.length - 1) * GAP_MS * 0.8,
    `its events arrived as the upstream sent them, ${GAP_MS} ms apart, not buffered whole (${evs.map((t) => t - evs[0]).join(', ')} ms)`);
  check(line('SOCKET') === '200', `and one through the socket itself (${line('SOCKET')})`);
  check(line('FOREIGN-TCP') === '401' && line('FOREIGN-SOCKET') === '401',
    `the other sandbox's live credential is 401 through the forwarder and the socket (${line('FOREIGN-TCP')}, ${line('FOREIGN-SOCKET')})`);
  for (const [what, host, p] of [['airlockd\'s API', '127.0.0.1', port], ['airlockd\'s direct proxy', '127.0.0.1', pport],
    ['the upstream', '127.0.0.1', fport], ['an outside address', '192.0.2.1', 80], ['another outside address', '10.0.0.1', 443]]) {
    check(out.includes(`\nCUT ${host}:${p}\n`) && !out.includes(`OPEN ${host}:${p}`), `no network: ${what} (${host}:${p}) is out of reach`);
  }
  check(line('IFACES') === '1', `loopback is its only interface (${line('IFACES')})`);
  check(line('PROCKEYS') === '0' && line('FILEKEYS') === '0',
    `the real key is in no environ, cmdline or file the agent can read (${line('PROCKEYS')}, ${line('FILEKEYS')})`);
  check(/^FWD= \d+$/m.test(out), `the agent sees its forwarder, one process (${line('FWD')})`);
  check(line('AFTER-KILL-TCP') === '000' && line('AFTER-KILL-SOCKET') === '200',
    `killing it cuts the agent's own calls through it, the socket still answers (${line('AFTER-KILL-TCP')}, ${line('AFTER-KILL-SOCKET')})`);
  const t = await stateOf(port, op, tid);
  check(t.exit_code === 42 && t.exit_signal === 0, `the terminal ends with the agent's own status (${t.state} ${t.exit_code} ${t.exit_signal})`);
  const cred = line('TOKEN');
  check(/^alp_/.test(cred || ''), 'the agent\'s credential');
  await waitFor(() => procsWith(cred).length === 0, scaled(5000), 'no process left with the credential');
  check(procsWith(cred).length === 0, 'no forwarder of it is left on the host');

  // ---- a PTY agent killed by a signal: the terminal says so, as without a forwarder
  r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'cut', argv: ['sh', '-c', 'echo "TOKEN=$AIRLOCK_PROXY_TOKEN"; sleep 3; kill -TERM $$'],
    proxy: ['anthropic'] });
  check(r.status === 201, `a PTY terminal with the proxy in sandbox cut (${r.status})`);
  const ap = await attach(port, r.json.id, op, { read: true });
  await ap.ch.waitOutput(/TOKEN=alp_\S+/, scaled(20000));
  const cred2 = /TOKEN=(alp_[A-Za-z0-9_-]{43})/.exec(ap.ch.seen().toString())[1];
  ap.ctl.ws.terminate();
  const running = forwardersWith(cred2).length;
  check(running === 1, `while it runs, its one forwarder runs (${running})`);
  const t2 = await stateOf(port, op, r.json.id);
  check(t2.exit_signal === 15, `SIGTERM: the terminal ends with signal 15 (${t2.state} ${t2.exit_code} ${t2.exit_signal})`);
  await waitFor(() => procsWith(cred2).length === 0, scaled(5000), 'no process left with the credential');
  check(procsWith(cred2).length === 0 && forwardersWith(cred2).length === 0, 'and then neither it nor any process of the terminal is left');

  const log = fs.readFileSync(d.log, 'utf8');
  check(!log.includes(REAL_KEY) && !log.includes(cred), 'airlockd\'s log holds neither the key nor the credential');
  await api(port, 'DELETE', `/v1/terminals/${otherId}`, op);

  // ---- airlockd restarts: the runner (its forwarder setting as this
  // airlockd would give it) is adopted, not replaced, and serves on
  const pidFile = path.join(dir, 'sandboxes', 'cut', 'run', 'runner.pid');
  const pidBefore = Number(fs.readFileSync(pidFile, 'utf8'));
  await d.stop();
  const logFrom = fs.readFileSync(d.log, 'utf8').length;
  const d1 = await startAirlockd({ dir, args: ['--config', conf] });
  await waitFor(async () => {
    const l = await api(d1.port, 'GET', '/v1/sandboxes', admin);
    const sb = l.json && l.json.find((x) => x.id === 'cut');
    return sb && sb.link_up;
  }, scaled(15000), 'the cut sandbox to link again', 100);
  const log1 = fs.readFileSync(d1.log, 'utf8').slice(d1.log === d.log ? logFrom : 0);
  check(Number(fs.readFileSync(pidFile, 'utf8')) === pidBefore && !/sandbox cut: replacing runner/.test(log1),
    `after a restart of airlockd the runner is adopted (pid ${pidBefore})`);
  await waitFor(() => /sandbox cut: its runner serves the credential proxy at/.test(fs.readFileSync(d1.log, 'utf8').slice(d1.log === d.log ? logFrom : 0)),
    scaled(10000), 'the adopted runner\'s PROXY_AT');
  r = await api(d1.port, 'POST', '/v1/terminals', op, { sandbox: 'cut', mode: 'pipes', proxy: ['anthropic'],
    argv: ['bash', '-c', `echo "ANSWER=$(curl -sN -m 20 "$ANTHROPIC_BASE_URL/v1/messages" -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN" -H "content-type: application/json" -d '${msg}' | grep -c forwarder)"; echo DONE`] });
  check(r.status === 201, `a terminal with the proxy after the restart (${r.status})`);
  const a1 = await attach(d1.port, r.json.id, op, { read: true });
  await a1.ch.waitOutput(/DONE/, scaled(30000)).catch(() => {});
  const out1 = a1.ch.output().toString();
  a1.ctl.ws.terminate();
  check(/^ANSWER=[1-9]/m.test(out1), `and its call through the forwarder is answered (${flat(out1)})`);
  await d1.stop();
  stopLocalRunners(dir);

  // ---- an airlockd with no forwarder next to its runner: the sandbox with
  // no network runs, its runner serves no proxy, and a terminal asking for
  // one is refused with the reason (never handed a URL its agents cannot reach)
  const bin2 = path.join(base, 'bin');
  fs.mkdirSync(bin2);
  for (const f of ['airlockd', 'airlock-runner']) fs.copyFileSync(path.join(BIN, f), path.join(bin2, f));
  for (const f of ['airlockd', 'airlock-runner']) fs.chmodSync(path.join(bin2, f), 0o755);
  const dir2 = path.join(base, 'data2');
  const admin2 = addUser(dir2, 'ada', 'admin');
  const d2 = await startAirlockd({ dir: dir2, args: ['--config', conf], exe: path.join(bin2, 'airlockd') });
  onCleanup(() => stopLocalRunners(dir2));
  await addLocalSandbox(d2.port, admin2, 'cut', 10000, { network: 'none' });
  r = await api(d2.port, 'POST', '/v1/terminals', admin2, { sandbox: 'cut', argv: ['true'], proxy: ['anthropic'] });
  check(r.status === 400 && /have no network, and its runner serves them no proxy .*airlock-proxy-fwd/.test(r.json.error),
    `no forwarder: 400 with the reason (${r.body})`);
  check(/sandbox cut: its agents have no network and there is no proxy forwarder/.test(fs.readFileSync(d2.log, 'utf8')),
    'and airlockd\'s log says so when it starts the runner');
  await d2.stop();

  // ---- the runner's own checks of its options
  const runner = path.join(BIN, 'airlock-runner');
  const common = ['--connect', 'wss://127.0.0.1:1/x', '--identifier', 'x', '--jwks', '/dev/null', '--token-file', '/dev/null',
    '--agent-sandbox', 'bwrap', '--agent-network', 'none'];
  let rr = spawnSync(runner, [...common, '--proxy-listen', '127.0.0.1:0'], { encoding: 'utf8', timeout: scaled(10000) });
  check(rr.status !== 0 && /--proxy-listen with --agent-network none needs --agent-proxy-fwd and --proxy-socket/.test(rr.stderr),
    `a runner whose agents have no network refuses a listener they cannot reach (${flat(rr.stderr)})`);
  rr = spawnSync(runner, [...common.slice(0, -2), '--proxy-listen', '127.0.0.1:0', '--agent-proxy-fwd', '/x'], { encoding: 'utf8', timeout: scaled(10000) });
  check(rr.status !== 0 && /--agent-proxy-fwd goes with --agent-sandbox bwrap, --agent-network none and --proxy-listen/.test(rr.stderr),
    `and a forwarder where agents have the network (${flat(rr.stderr)})`);
}, 240000);
