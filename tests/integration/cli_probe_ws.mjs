// `airlock probe ws://…` (issue 14): a measurement of the WebSocket path to
// a runner, against a real airlock-runner directly and through the
// platform stand-in (tests/tools/platform_front.mjs: routes by identifier,
// demands its own token, cuts idle connections after 3 s and every
// connection at 8 s, forwards or strips Authorization).
// - Directly: every figure of --json is there and plausible (the refusals
//   403, 101 with airlock.v1, RTT, throughput both ways, the largest
//   frame, the headers the runner saw with the token redacted).
// - A probe token is no controller's: its session cannot open a terminal
//   (ERROR, close 4000), and it never replaces the runner's link.
// - Through the stand-in: the idle cut and the maximum age found within
//   ±10 %, pings keep a connection alive past the idle cut, the platform's
//   token reported as forwarded (and not, when the front strips it), the
//   platform's own 403 without its token.
// - Bad inputs end with one clear line, each bounded in time: a closed
//   port, a server that is not a WebSocket, one that never answers, TLS to
//   a plain port, a refused token.
import net from 'node:net';
import http from 'node:http';
import path from 'node:path';
import { run, check, tmpdir, keygen, mint, startRunner, closedPort, BIN, scaled } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';
import { runCli } from '../interop/cli.mjs';
import { startFront, runnerSession } from '../tools/platform_front.mjs';

const API = 'api-version=2024-02-02-preview';

async function probe(args, timeout = 90000) {
  const t0 = Date.now();
  const r = await runCli(['probe', ...args, '--json'], { timeout });
  let j = null;
  try { j = JSON.parse(r.out); } catch { /* checked by the caller */ }
  return { ...r, j, ms: Date.now() - t0 };
}

await run('cli_probe_ws', async () => {
  const dir = tmpdir('probews');
  keygen(dir);
  const id = 'sbx-probe';
  const runner = await startRunner({ id, dir });
  const url = `ws://127.0.0.1:${runner.port}/?identifier=${id}&${API}`;
  const tok = mint(dir, id, 'runner:probe', 600);
  const other = mint(dir, 'someone-else', 'runner:probe', 600);

  // ---- the runner's link (a controller) stays up throughout
  const ctl = await new Controller().connect(url, { Authorization: `Bearer ${mint(dir, id, 'runner:connect', 600)}` });

  // ---- directly: every figure
  let r = await probe([url, '--token', tok, '--wrong-token', other, '--idle-max', '2', '--age-max', '2',
    '--ping-interval-ms', '500', '--pings', '30', '--bytes', '2097152']);
  const j = r.j;
  check(r.code === 0 && j && j.exit === 0 && j.error === null, `probe ws://: exit 0 (${r.code} ${r.err})`);
  check(j.upgrade_without_token === 403 && j.upgrade_with_bad_token === 403 && j.upgrade_with_wrong_audience === 403 &&
    j.upgrade_with_token === 101 && j.subprotocol === 'airlock.v1',
  `the refusals are 403, the token's upgrade 101 with airlock.v1 (${JSON.stringify([j.upgrade_without_token,
    j.upgrade_with_bad_token, j.upgrade_with_wrong_audience, j.upgrade_with_token, j.subprotocol])})`);
  check(['dns', 'tcp', 'upgrade'].every((k) => typeof j.phases_ms[k] === 'number' && j.phases_ms[k] >= 0) &&
    j.phases_ms.tls === null, `the phases in ms, no TLS on ws:// (${JSON.stringify(j.phases_ms)})`);
  check(j.rtt_ms.n === 30 && j.rtt_ms.p50 > 0 && j.rtt_ms.p99 >= j.rtt_ms.p50 && j.rtt_ms.p99 < 1000,
    `RTT p50 ${j.rtt_ms.p50} ms, p99 ${j.rtt_ms.p99} ms over 30 pings`);
  check(j.throughput_mbps.up > 1 && j.throughput_mbps.down > 1 && j.throughput_mbps.bytes === 2097152,
    `throughput up ${j.throughput_mbps.up} and down ${j.throughput_mbps.down} Mbit/s over 2 MiB`);
  check(j.max_message_bytes === 65546, `the largest frame (65546 bytes) carried whole (${j.max_message_bytes})`);
  check(j.idle_cut_s === null && j.max_age_s === null && j.idle_with_pings_ok === true,
    'a direct path cuts nothing within 2 s, idle or pinged');
  check(j.headers_seen.includes('host') && j.headers_seen.includes('authorization') &&
    j.headers.authorization === `Bearer (${tok.length})` && j.authorization_forwarded === null,
  `the headers the runner saw, the token's value redacted to its length (${j.headers.authorization})`);
  check(!r.out.includes(tok.split('.')[2]) && !r.out.includes(tok.split('.')[1]), 'no part of the token in the report');
  r = await probe([url, '--token', tok, '--idle-max', '0', '--age-max', '0']);
  check(r.code === 0 && r.j.idle_cut_s === null && r.j.idle_with_pings_ok === null && r.j.max_age_s === null,
    '--idle-max 0 --age-max 0 skip those measurements');
  const text = await runCli(['probe', url, '--token', tok, '--idle-max', '1', '--age-max', '1']);
  check(text.code === 0 && /^upgrade\s+without a token 403, with a damaged token 403, with --wrong-token -, with the token 101$/m.test(text.out) &&
    /^rtt\s+p50 [0-9.]+ ms, p99 [0-9.]+ ms over 20 pings$/m.test(text.out) && /^probe: ok$/m.test(text.out),
  'the same as a table');

  // ---- a probe token is no controller's, and takes nothing over
  check(ctl.ready && ctl.closeInfo === null, 'the runner\'s controller link was never replaced by a probe session');
  const intruder = await new Controller().connect(url, { Authorization: `Bearer ${tok}` });
  intruder.open(['sh', '-c', 'echo PWNED']);
  await intruder.wait(() => intruder.closeInfo, 'the probe session to close', 5000);
  check(intruder.closeInfo.code === 4000 && intruder.errors.some((e) => e.code === 1),
    `a probe session that asks to OPEN a terminal: ERROR PROTOCOL, close 4000 (${JSON.stringify(intruder.closeInfo)})`);
  check(ctl.ready && ctl.closeInfo === null, 'and the controller\'s link is still up');
  const ch = ctl.open(['sh', '-c', 'echo still-mine']);
  await ch.waitOutput(/still-mine/, 10000);
  check(true, 'the controller still runs terminals');

  // ---- a stranger holding a probe token cannot exhaust the runner: at most
  // 4 probe sessions at once, the 5th refused 503 at the upgrade, and the
  // controller's link untouched
  const probes = [];
  for (let i = 0; i < 4; i++) probes.push(await new Controller().connect(url, { Authorization: `Bearer ${tok}` }));
  let fifth = null;
  try { await new Controller().connect(url, { Authorization: `Bearer ${tok}` }); } catch (e) { fifth = e.status; }
  check(fifth === 503, `a 5th probe session at once is refused 503 (${fifth})`);
  check(ctl.ready && ctl.closeInfo === null, 'and the controller\'s link is still up');
  for (const p of probes) p.ws.close();
  await Promise.all(probes.map((p) => p.wait(() => p.closeInfo, 'probe close', 5000)));
  const again = await new Controller().connect(url, { Authorization: `Bearer ${tok}` });
  check(again.ready, 'once they close, a probe session is accepted again');
  again.ws.close();

  // ---- through the platform stand-in
  const front = await startFront({
    startSession: runnerSession(path.join(BIN, 'airlock-runner'), path.join(dir, 'jwks.json'), ['--token-header', 'X-Airlock-Token']),
    idleCutMs: 3000, maxAgeMs: 8000,
  });
  const ptok = await front.mintToken();
  const fid = 'sess-4fa8c1e0d2';
  const furl = `ws://127.0.0.1:${front.port}/?identifier=${fid}&${API}`;
  const ftok = mint(dir, fid, 'runner:probe', 600);
  r = await probe([furl, '--header', `Authorization: Bearer ${ptok}`, '--token-header', 'X-Airlock-Token', '--token', ftok,
    '--idle-max', '6', '--age-max', '12', '--ping-interval-ms', '1000', '--bytes', '1048576'], 120000);
  const f = r.j;
  check(r.code === 0 && f && f.upgrade_with_token === 101, `through the front: exit 0, 101 (${r.code} ${r.err})`);
  check(typeof f.idle_cut_s === 'number' && f.idle_cut_s >= 2.7 && f.idle_cut_s <= 3.3,
    `the front's idle cut of 3 s found: ${f.idle_cut_s} s (${f.idle_close})`);
  check(typeof f.max_age_s === 'number' && f.max_age_s >= 7.2 && f.max_age_s <= 8.8,
    `the front's maximum age of 8 s found: ${f.max_age_s} s (${f.age_close})`);
  check(f.idle_with_pings_ok === true, 'pings every second kept a connection alive past the idle cut');
  check(f.authorization_forwarded === true && f.headers.authorization === `Bearer (${ptok.length})` &&
    f.headers['x-airlock-token'] === `Bearer (${ftok.length})` && f.headers_seen.includes('x-forwarded-for') &&
    f.headers_seen.includes('x-request-id'),
  `the front forwards Authorization (reported, redacted) and adds its own headers (${f.headers_seen.join(' ')})`);
  check(f.upgrade_without_token === 403 && f.upgrade_with_bad_token === 403, 'the refusals through the front');
  const warn = await runCli(['probe', furl, '--header', `Authorization: Bearer ${ptok}`, '--token-header', 'X-Airlock-Token',
    '--token', ftok, '--idle-max', '0', '--age-max', '0']);
  check(warn.code === 0 && /^WARNING\s+the path forwards the Authorization header into the sandbox/m.test(warn.out),
    'the table warns that the platform\'s token reaches the sandbox');
  // without the platform's token: the platform's 403, the token never checked
  r = await probe([furl, '--token-header', 'X-Airlock-Token', '--token', ftok, '--idle-max', '0', '--age-max', '0']);
  check(r.code === 77 && r.j.upgrade_with_token === 403 && /403/.test(r.err),
    `without the platform's token: 403 from the front, exit 77 (${r.code}: ${r.err.trim()})`);
  await front.close();

  const strip = await startFront({
    startSession: runnerSession(path.join(BIN, 'airlock-runner'), path.join(dir, 'jwks.json'), ['--token-header', 'X-Airlock-Token']),
    forwardAuth: false,
  });
  const sid = 'sess-9c2b7e11aa';
  r = await probe([`ws://127.0.0.1:${strip.port}/?identifier=${sid}&${API}`, '--header', `Authorization: Bearer ${await strip.mintToken()}`,
    '--token-header', 'X-Airlock-Token', '--token', mint(dir, sid, 'runner:probe', 600), '--idle-max', '0', '--age-max', '0']);
  check(r.code === 0 && r.j.authorization_forwarded === false && !r.j.headers_seen.includes('authorization'),
    'a front that strips Authorization: reported as not forwarded');
  await strip.close();

  // ---- bad inputs: one clear line each, bounded
  const bounded = (x, s) => x.ms < scaled(s * 1000);
  r = await probe([`ws://127.0.0.1:${await closedPort()}/?identifier=x&${API}`, '--token', tok]);
  check(r.code === 69 && /cannot connect to 127\.0\.0\.1 port \d+: Connection refused/.test(r.err) && bounded(r, 15),
    `a closed port: exit 69, "${r.err.trim()}" in ${r.ms} ms`);
  const plain = http.createServer((q, s) => { s.writeHead(200, { 'content-type': 'text/html' }); s.end('<html>hello</html>'); });
  await new Promise((res) => plain.listen(0, '127.0.0.1', res));
  r = await probe([`ws://127.0.0.1:${plain.address().port}/?identifier=x&${API}`, '--token', tok]);
  check(r.code === 76 && /answered 200: is this a runner's WebSocket path\?/.test(r.err) && bounded(r, 30),
    `not a WebSocket server: exit 76, "${r.err.trim()}" in ${r.ms} ms`);
  r = await probe([`wss://127.0.0.1:${plain.address().port}/?identifier=x&${API}`, '--token', tok]);
  check(r.code === 69 && /TLS handshake failed/.test(r.err) && bounded(r, 30),
    `TLS to a plain port: exit 69, "${r.err.trim()}" in ${r.ms} ms`);
  plain.close();
  const silent = net.createServer((s) => { s.on('error', () => {}); setTimeout(() => s.destroy(), 60000).unref(); });
  await new Promise((res) => silent.listen(0, '127.0.0.1', res));
  r = await probe([`ws://127.0.0.1:${silent.address().port}/?identifier=x&${API}`, '--token', tok], 120000);
  check(r.code === 69 && /never answered the upgrade/.test(r.err) && bounded(r, 60),
    `a server that never answers: exit 69, "${r.err.trim()}" in ${r.ms} ms`);
  silent.close();
  r = await probe([url, '--token', other, '--idle-max', '0', '--age-max', '0']);
  check(r.code === 77 && /answered 403/.test(r.err), `another runner's token: exit 77 (${r.err.trim()})`);
  const help = await runCli(['probe', '--help']);
  const members = ['phases_ms', 'upgrade_without_token', 'upgrade_with_bad_token', 'upgrade_with_wrong_audience',
    'upgrade_with_token', 'subprotocol', 'rtt_ms', 'max_message_bytes', 'throughput_mbps', 'idle_cut_s', 'idle_close',
    'idle_with_pings_ok', 'max_age_s', 'age_close', 'headers_seen', 'authorization_forwarded'];
  check(help.code === 0 && members.every((m) => help.out.includes(m)) && /--idle-max S/.test(help.out),
    `airlock probe --help explains every figure (${members.filter((m) => !help.out.includes(m)).join(' ') || 'all there'})`);
  r = await runCli(['probe', url, '--pings', '0']);
  check(r.code === 64 && /--pings takes 1 to 10000/.test(r.err), `a bad option value: exit 64 (${r.err.trim()})`);
  r = await runCli(['probe', url, '--header', 'no colon']);
  check(r.code === 64 && /'Name: value'/.test(r.err), 'a bad --header: exit 64');
  ctl.ws.close();
}, 300000);
