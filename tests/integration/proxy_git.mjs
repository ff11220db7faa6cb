// `git clone` and `git push` through the credential proxy's path through
// the runner (the local sandbox's default: its runner's listener, each
// connection a proxy channel of the link; docs/proxy.md, issue 13),
// against a real Git smart-HTTP server:
// `git http-backend` behind lighttpd's CGI on 127.0.0.1, which demands
// `Authorization: Basic base64(x-access-token:TOKEN)` with the real token
// (mod_auth, a plain user file). airlockd holds the token in a 0600
// secret file as upstream `gh` (kind git, header basic); a local sandbox
// holds no Git credential at all.
//
// - A terminal opened with "proxy": ["gh"] runs `git clone URL/repo.git`
//   with the URL a user would type (the server's): git's own configuration
//   from GIT_CONFIG_COUNT rewrites it to the proxy (url.<proxy>.insteadOf)
//   and sends the terminal's credential to the proxy only
//   (http.<proxy>.extraHeader). The clone has the seeded commit and its 30
//   annotated tags (the fetch request is over 1 KiB, so git gzips it:
//   Content-Encoding passes through). It commits a file and a 2 MiB random
//   one and runs `git push`: over git's 1 MiB post buffer, the pack goes as
//   a chunked POST; the bare repository then holds the commit, the file
//   and the big blob byte for byte.
// - The server (lighttpd's access log) saw the real token on every proxied
//   request, the pack whole, and never the terminal's credential; a
//   repository outside the upstream's `paths` is 403 from the proxy and
//   never reaches the server. airlockd audits each call, and neither its
//   log nor its audit rows hold the token or the credential.
// - Nothing in the sandbox holds the token: the agent's environment, the
//   /proc environ and cmdline it can read, the clone's .git/config (which
//   keeps the URL typed, not the credential), any file of the workspace.
// - Without "proxy", the same clone fails: the server answers 401.
// - A push over the upstream's max-body (upstream `ghsmall`, the same
//   server with max-body 1 MiB): the chunked pack is refused with 413 once
//   1 MiB is in; git, still sending, reads the answer (the proxy drains
//   what comes after it) and fails at once saying "413"; the server got no
//   push, the audit row names the setting to raise.
// - A local sandbox with "network": "none", whose agents cannot reach the
//   server at all, clones and pushes the same way: through the proxy's
//   forwarder in each agent's jail and its runner's unix socket.
//
// lighttpd cannot bind port 0: the test picks a free port, and when the
// port is taken between the pick and lighttpd's bind (lighttpd exits with
// EADDRINUSE), another one, a bounded number of times; lighttpd counts as
// up once /proc shows its own process listening on that port.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, execFileSync } from 'node:child_process';
import { run, check, tmpdir, onCleanup, addLog, waitFor, reportedPort, closedPort, scaled } from '../interop/harness.mjs';
import { startAirlockd, addUser, addLocalSandbox, api, attach } from '../interop/airlockd.mjs';

const LIGHTTPD = '/usr/sbin/lighttpd';
const BACKEND = '/usr/lib/git-core/git-http-backend';
const PORT_TRIES = 5; // ports tried for lighttpd
const TAGS = 30; // annotated tags: the clone's want list is over git's 1 KiB gzip threshold
const BIG = 2 * 1024 * 1024; // over git's http.postBuffer (1 MiB): the push is chunked
const USER = 'x-access-token';
const REAL_TOKEN = `ghp_airlocktest${crypto.randomBytes(16).toString('hex')}`;
const BASIC = Buffer.from(`${USER}:${REAL_TOKEN}`).toString('base64');
const flat = (s) => String(s).trim().replace(/\s+/g, ' ').slice(0, 800);

// git on the host, with no configuration but what it is given
const GIT_ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GIT_')));
Object.assign(GIT_ENV, { GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0',
  GIT_AUTHOR_NAME: 'Seed', GIT_AUTHOR_EMAIL: 'seed@example.invalid',
  GIT_COMMITTER_NAME: 'Seed', GIT_COMMITTER_EMAIL: 'seed@example.invalid' });
const git = (args, cwd) => execFileSync('git', args, { cwd, env: GIT_ENV, stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim();

// The bare repositories the server exports (repo.git seeded, other.git
// outside the upstream's paths) under root; returns the seed's commit.
function seedRepos(root, scratch) {
  fs.mkdirSync(root, { recursive: true });
  for (const name of ['repo.git', 'other.git']) {
    git(['init', '-q', '--bare', '--initial-branch=main', path.join(root, name)]);
    git(['--git-dir', path.join(root, name), 'config', 'http.receivepack', 'true']);
  }
  git(['init', '-q', '--initial-branch=main', scratch]);
  fs.writeFileSync(path.join(scratch, 'README'), 'seeded on the host\n');
  git(['add', 'README'], scratch);
  git(['commit', '-q', '-m', 'seed'], scratch);
  for (let i = 1; i <= TAGS; i++) git(['tag', '-a', `v${i}`, '-m', `tag ${i}`], scratch);
  git(['push', '-q', '--tags', path.join(root, 'repo.git'), 'main'], scratch);
  git(['push', '-q', path.join(root, 'other.git'), 'main'], scratch);
  return git(['rev-parse', 'HEAD'], scratch);
}

function lighttpdConf(base, root, port) {
  const q = (s) => JSON.stringify(s); // lighttpd's strings take JSON's escapes for these paths
  return [
    `server.document-root = ${q(path.join(base, 'www'))}`,
    'server.bind = "127.0.0.1"',
    `server.port = ${port}`,
    `server.upload-dirs = ( ${q(path.join(base, 'lighttpd-tmp'))} )`,
    'server.modules = ( "mod_access", "mod_alias", "mod_auth", "mod_authn_file", "mod_setenv", "mod_cgi", "mod_accesslog" )',
    `accesslog.filename = ${q(path.join(base, 'access.log'))}`,
    // status | request line | what authenticated it | its body's coding | bytes in | who sent it
    'accesslog.format = "%s | %r | %{Authorization}i | ce=%{Content-Encoding}i | in=%I | %{User-Agent}i"',
    'auth.backend = "plain"',
    `auth.backend.plain.userfile = ${q(path.join(base, 'git-users'))}`,
    `auth.require = ( "/git/" => ( "method" => "basic", "realm" => "git", "require" => "user=${USER}" ) )`,
    `alias.url = ( "/git" => ${q(BACKEND)} )`,
    '$HTTP["url"] =~ "^/git/" {',
    '  cgi.assign = ( "" => "" )',
    `  setenv.add-environment = ( "GIT_PROJECT_ROOT" => ${q(root)}, "GIT_HTTP_EXPORT_ALL" => "1" )`,
    '}',
    '',
  ].join('\n');
}

// Whether process pid itself holds a socket listening on 127.0.0.1:port.
function listensOn(pid, port) {
  let inodes;
  try {
    inodes = new Set(fs.readdirSync(`/proc/${pid}/fd`).map((fd) => {
      try { return (/^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`)) || [])[1]; } catch { return undefined; }
    }).filter(Boolean));
  } catch { return false; }
  const want = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  return fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1).some((l) => {
    const f = l.trim().split(/\s+/);
    return f[1] === want && f[3] === '0A' && inodes.has(f[9]); // 0A: LISTEN
  });
}

// Start lighttpd on a free port (see the top); resolves { port, stop }.
async function startLighttpd(base, root) {
  fs.mkdirSync(path.join(base, 'www'));
  fs.mkdirSync(path.join(base, 'lighttpd-tmp'));
  fs.writeFileSync(path.join(base, 'git-users'), `${USER}:${REAL_TOKEN}\n`, { mode: 0o600 });
  for (let attempt = 1; attempt <= PORT_TRIES; attempt++) {
    const port = await closedPort();
    const conf = path.join(base, `lighttpd-${port}.conf`);
    fs.writeFileSync(conf, lighttpdConf(base, root, port));
    const log = path.join(base, `lighttpd-${port}.log`);
    const out = fs.openSync(log, 'a');
    addLog(log);
    const p = spawn(LIGHTTPD, ['-D', '-f', conf], { stdio: ['ignore', out, out] });
    fs.closeSync(out);
    const exited = new Promise((res) => p.on('exit', (code, sig) => res({ code, sig })));
    const stop = async () => {
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGTERM');
        const t = setTimeout(() => p.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
      }
    };
    onCleanup(stop);
    const state = await waitFor(() => {
      if (p.exitCode !== null || p.signalCode !== null) return 'exited';
      return listensOn(p.pid, port) ? 'up' : '';
    }, 10000, `lighttpd to listen on port ${port}`, 50);
    if (state === 'up') return { port, stop };
    await exited;
    const said = fs.readFileSync(log, 'utf8');
    if (!/Address already in use/.test(said)) throw new Error(`lighttpd exited at start: ${flat(said)}`);
    console.log(`# port ${port} was taken before lighttpd could bind it (attempt ${attempt})`);
  }
  throw new Error(`lighttpd found no free port in ${PORT_TRIES} attempts`);
}

// A terminal's output once it has printed `re` (pipes mode).
async function outputOf(port, key, id, re, ms) {
  const a = await attach(port, id, key, { read: true });
  await a.ch.waitOutput(re, scaled(ms)).catch(() => {});
  const out = a.ch.output().toString();
  a.ctl.ws.terminate();
  return out;
}

// Every file under dir (bounded), for what the workspace holds.
function filesUnder(dir, out = [], depth = 0) {
  if (depth > 16 || out.length > 10000) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) filesUnder(p, out, depth + 1);
    else if (e.isFile()) out.push(p);
  }
  return out;
}

await run('proxy_git', async () => {
  check(fs.existsSync(LIGHTTPD) && fs.existsSync(BACKEND), `lighttpd and git http-backend are installed (tools/deps.sh)`);
  const base = tmpdir('proxyg');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'oli', 'operator');

  const root = path.join(base, 'srv');
  const seed = seedRepos(root, path.join(base, 'seed'));
  const lt = await startLighttpd(base, root);
  const gitUrl = `http://127.0.0.1:${lt.port}/git`;

  const secret = path.join(base, 'gh.token');
  fs.writeFileSync(secret, `${REAL_TOKEN}\n`, { mode: 0o600 });
  const conf = path.join(base, 'airlockd.conf');
  fs.writeFileSync(conf, [
    'proxy-listen = 127.0.0.1:0',
    `upstream.gh.url = ${gitUrl}`,
    'upstream.gh.kind = git',
    'upstream.gh.header = basic',
    `upstream.gh.user = ${USER}`,
    `upstream.gh.secret-file = ${secret}`,
    'upstream.gh.methods = GET,POST',
    'upstream.gh.paths = /repo.git/',
    `upstream.ghsmall.url = ${gitUrl}`,
    'upstream.ghsmall.kind = git',
    'upstream.ghsmall.header = basic',
    `upstream.ghsmall.user = ${USER}`,
    `upstream.ghsmall.secret-file = ${secret}`,
    'upstream.ghsmall.paths = /repo.git/',
    'upstream.ghsmall.max-body = 1048576',
  ].join('\n') + '\n');
  const d = await startAirlockd({ dir, args: ['--config', conf] });
  const port = d.port;
  const pport = await reportedPort(d.log, /credential proxy serving on port (\d+)/, d.p, { what: 'the proxy to listen' });
  await addLocalSandbox(port, admin, 'box');
  const work = path.join(dir, 'sandboxes', 'box', 'work');
  const big = crypto.randomBytes(BIG);
  fs.writeFileSync(path.join(work, 'big.bin'), big, { mode: 0o644 });
  const bigId = execFileSync('git', ['hash-object', '--stdin'], { input: big, env: GIT_ENV }).toString().trim();

  // ---- without the proxy: the server wants the token, and the sandbox has none
  const noProxy = [
    'cd /workspace',
    `echo "CODE=$(curl -s -o /dev/null -w "%{http_code}" "${gitUrl}/repo.git/info/refs?service=git-upload-pack")"`,
    `git clone -q "${gitUrl}/repo.git" noproxy 2>&1; echo "NOPROXY-EXIT=$?"`,
    'echo "GITVARS=$(env | grep -c "^GIT_CONFIG")"',
    'echo NOPROXY-DONE',
  ].join('\n');
  let r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'box', mode: 'pipes', argv: ['bash', '-c', noProxy],
    env: { GIT_TERMINAL_PROMPT: '0' } });
  check(r.status === 201, `a terminal without proxy (${r.status}${r.status === 201 ? '' : ` ${r.body}`})`);
  const outN = await outputOf(port, op, r.json.id, /NOPROXY-DONE/, 30000);
  check(/^CODE=401$/m.test(outN), `without the proxy the server answers 401 (${flat(outN.split('\n').filter((l) => /^(CODE|fatal)/.test(l)).join('; '))})`);
  check(/^NOPROXY-EXIT=(?!0$)\d+$/m.test(outN) && /^GITVARS=0$/m.test(outN),
    'and git clone fails: the sandbox holds no Git credential or configuration of the proxy');
  check(!fs.existsSync(path.join(work, 'noproxy', 'README')), 'nothing was cloned');

  // ---- with the proxy: clone, commit, push
  const agent = [
    'cd /workspace',
    'echo "TOKEN=$AIRLOCK_PROXY_TOKEN"',
    'echo "COUNT=$GIT_CONFIG_COUNT"',
    'echo "KEY0=$GIT_CONFIG_KEY_0"',
    'echo "VALUE0=$GIT_CONFIG_VALUE_0"',
    'echo "KEY1=$GIT_CONFIG_KEY_1"',
    'echo "VALUE1_IS_CRED=$([ "$GIT_CONFIG_VALUE_1" = "Authorization: Bearer $AIRLOCK_PROXY_TOKEN" ] && echo yes)"',
    `git clone -q "${gitUrl}/repo.git" clone 2>&1; echo "CLONE-EXIT=$?"`,
    'cd clone || exit 1',
    'echo "HEAD=$(git rev-parse HEAD)"',
    'echo "TAGS=$(git tag | wc -l)"',
    'echo "written in the sandbox" > agent.txt',
    'cp /workspace/big.bin big.bin',
    'git add agent.txt big.bin',
    'git -c user.name=Agent -c user.email=agent@example.invalid commit -q -m "pushed from the sandbox" 2>&1',
    'GIT_TRACE_CURL=/workspace/push.trace GIT_TRACE_CURL_NO_DATA=1 git push -q origin main 2>&1; echo "PUSH-EXIT=$?"',
    'echo "PUSHED=$(git rev-parse HEAD)"',
    `git clone -q "${gitUrl}/other.git" /workspace/other 2>&1; echo "OTHER-EXIT=$?"`,
    'echo "ENV=$(env | grep -c "airlock[t]est")"',
    'cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline > /workspace/seen.bin 2>/dev/null',
    'echo "PROC=$(tr "\\0" "\\n" < /workspace/seen.bin | grep -c "airlock[t]est")"',
    'echo AGENT-DONE',
  ].join('\n');
  r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'box', mode: 'pipes', argv: ['bash', '-c', agent],
    env: { GIT_TERMINAL_PROMPT: '0' }, proxy: ['gh'] });
  check(r.status === 201 && r.json.proxy && r.json.proxy.upstreams.join() === 'gh',
    `a terminal with proxy [gh] (${r.status}${r.status === 201 ? '' : ` ${r.body}`})`);
  const tid = r.json.id;
  const out = await outputOf(port, op, tid, /AGENT-DONE/, 120000);
  const cred = (/^TOKEN=(alp_[A-Za-z0-9_-]{43})$/m.exec(out) || [])[1];
  // what the agent printed, but its credential, for the messages of failed checks
  const seen = (ok) => (ok ? '' : ` (${flat(cred ? out.split(cred).join('CRED') : out)})`);
  check(cred, `the terminal has a credential of its own${seen(cred)}`);
  // the runner's listener, not airlockd's direct path
  const rport = Number((/^KEY0=url\.http:\/\/127\.0\.0\.1:(\d+)\/v1\/proxy\/gh\/\.insteadOf$/m.exec(out) || [])[1] || 0);
  check(rport > 0 && rport !== pport, `git's proxy is the sandbox's runner listener (port ${rport}, not ${pport})`);
  const proxyBase = `http://127.0.0.1:${rport}/v1/proxy/gh/`;
  check(/^COUNT=2$/m.test(out) && out.includes(`\nKEY0=url.${proxyBase}.insteadOf\n`) &&
    out.includes(`\nVALUE0=${gitUrl}/\n`) && out.includes(`\nKEY1=http.${proxyBase}.extraHeader\n`) &&
    /^VALUE1_IS_CRED=yes$/m.test(out),
  `git's configuration: the server's URL rewritten to the proxy's, the credential sent to the proxy only (${flat(out.match(/^(COUNT|KEY0|VALUE0|KEY1)=.*$/mg))})`);
  const cloned = /^CLONE-EXIT=0$/m.test(out) && new RegExp(`^HEAD=${seed}$`, 'm').test(out);
  check(cloned, `git clone of the URL typed went through the proxy and has the seeded commit${seen(cloned)}`);
  check(new RegExp(`^TAGS=${TAGS}$`, 'm').test(out), `and its ${TAGS} annotated tags`);
  check(/^PUSH-EXIT=0$/m.test(out), `git push went through${seen(/^PUSH-EXIT=0$/m.test(out))}`);
  const pushed = (/^PUSHED=([0-9a-f]{40})$/m.exec(out) || [])[1];
  const bare = path.join(root, 'repo.git');
  check(pushed && git(['--git-dir', bare, 'rev-parse', 'main']) === pushed, `the bare repository's main is the sandbox's commit ${pushed}`);
  check(git(['--git-dir', bare, 'log', '-1', '--format=%s %P', 'main']) === `pushed from the sandbox ${seed}`,
    'with its message, on top of the seed');
  check(git(['--git-dir', bare, 'cat-file', 'blob', 'main:agent.txt']) === 'written in the sandbox', 'the file it wrote landed');
  check(git(['--git-dir', bare, 'rev-parse', 'main:big.bin']) === bigId, `and the ${BIG}-byte random file, byte for byte`);
  const trace = fs.readFileSync(path.join(work, 'push.trace'), 'latin1');
  check(/=> Send header: POST \/v1\/proxy\/gh\/repo\.git\/git-receive-pack HTTP\/1\.1/.test(trace) &&
    /=> Send header: Transfer-Encoding: chunked/i.test(trace),
  'git sent the pack to the proxy as a chunked POST (its trace)');
  const other = (out.match(/^.*other\.git.*$/mg) || []).join('; ');
  check(/^OTHER-EXIT=(?!0$)\d+$/m.test(out) && /returned error: 403/.test(other), `a repository outside the upstream's paths: 403 from the proxy (${flat(other)})`);

  // ---- nothing in the sandbox holds the token
  check(/^ENV=0$/m.test(out) && /^PROC=0$/m.test(out), `no token in the agent's environment or the /proc it reads (${flat(out.match(/^(ENV|PROC)=.*$/mg))})`);
  const gitConfig = fs.readFileSync(path.join(work, 'clone', '.git', 'config'), 'utf8');
  check(gitConfig.includes(`url = ${gitUrl}/repo.git`) && !/extraheader|insteadof/i.test(gitConfig),
    `the clone's .git/config keeps the URL typed and no proxy setting (${flat(gitConfig)})`);
  check(!gitConfig.includes(cred) && !gitConfig.includes(REAL_TOKEN) && !gitConfig.includes(BASIC), 'nor the credential or the token');
  const leaks = filesUnder(work).filter((f) => { const b = fs.readFileSync(f); return b.includes(REAL_TOKEN) || b.includes(BASIC); });
  check(leaks.length === 0, `no file of the workspace holds the token, plain or in its Basic form (${leaks.join(' ')})`);

  // ---- an agent with no network ("network": "none": a network namespace of
  // its own, loopback only) cannot reach the server, yet clones and pushes
  // the same way, through the proxy's forwarder in its jail and its
  // runner's unix socket (docs/proxy.md, "Agents with no network")
  await addLocalSandbox(port, admin, 'cut', 10000, { network: 'none' });
  await waitFor(() => /sandbox cut: its runner serves the credential proxy at/.test(fs.readFileSync(d.log, 'utf8')),
    scaled(10000), 'the cut sandbox\'s PROXY_AT');
  const cutScript = [
    'cd /workspace',
    `curl -s -m 5 -o /dev/null "${gitUrl}/repo.git/info/refs?service=git-upload-pack" && echo SERVER=reached || echo SERVER=unreached`,
    `git clone -q "${gitUrl}/repo.git" clone 2>&1; echo "CUT-CLONE=$?"`,
    'cd clone || exit 1',
    'echo "CUT-HEAD=$(git rev-parse HEAD)"',
    'echo "from a sandbox with no network" > cut.txt',
    'git add cut.txt',
    'git -c user.name=Agent -c user.email=agent@example.invalid commit -q -m "pushed with no network" 2>&1',
    'git push -q origin main 2>&1; echo "CUT-PUSH=$?"',
    'echo "CUT-PUSHED=$(git rev-parse HEAD)"',
    'echo "CUT-ENV=$(env | grep -c "airlock[t]est")"',
    'echo CUT-DONE',
  ].join('\n');
  r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'cut', mode: 'pipes', argv: ['bash', '-c', cutScript],
    env: { GIT_TERMINAL_PROMPT: '0' }, proxy: ['gh'] });
  check(r.status === 201, `a terminal with proxy [gh] in a sandbox with no network (${r.status}${r.status === 201 ? '' : ` ${r.body}`})`);
  const outC = await outputOf(port, op, r.json.id, /CUT-DONE/, 120000);
  check(/^SERVER=unreached$/m.test(outC), `no network: the agent cannot reach the Git server itself (${flat(outC.split('\n').filter((l) => /^SERVER/.test(l)).join())})`);
  check(/^CUT-CLONE=0$/m.test(outC) && new RegExp(`^CUT-HEAD=${pushed}$`, 'm').test(outC),
    `no network: git clone went through the proxy and has the last push (${flat(outC)})`);
  const cutPushed = (/^CUT-PUSHED=([0-9a-f]{40})$/m.exec(outC) || [])[1];
  check(/^CUT-PUSH=0$/m.test(outC) && cutPushed && git(['--git-dir', bare, 'rev-parse', 'main']) === cutPushed &&
    git(['--git-dir', bare, 'cat-file', 'blob', 'main:cut.txt']) === 'from a sandbox with no network',
  'no network: git push landed its commit in the bare repository');
  check(/^CUT-ENV=0$/m.test(outC), 'no network: no token in the agent\'s environment');

  // ---- a push over max-body: 413, said at once, nothing pushed
  const headBefore = git(['--git-dir', bare, 'rev-parse', 'main']);
  const small = [
    'cd /workspace',
    `git clone -q "${gitUrl}/repo.git" small 2>&1; echo "SMALL-CLONE=$?"`,
    'cd small || exit 1',
    '{ cat /workspace/big.bin; echo another; } > big2.bin',
    'git add big2.bin',
    'git -c user.name=Agent -c user.email=agent@example.invalid commit -q -m "too big" 2>&1',
    'T0=$(date +%s%3N)',
    'git push origin main 2>&1; echo "SMALL-PUSH=$?"',
    'echo "SMALL-MS=$(( $(date +%s%3N) - T0 ))"',
    'echo SMALL-DONE',
  ].join('\n');
  r = await api(port, 'POST', '/v1/terminals', op, { sandbox: 'box', mode: 'pipes', argv: ['bash', '-c', small],
    env: { GIT_TERMINAL_PROMPT: '0' }, proxy: ['ghsmall'] });
  check(r.status === 201, `a terminal with proxy [ghsmall] (${r.status})`);
  const outS = await outputOf(port, op, r.json.id, /SMALL-DONE/, 60000);
  const pushMs = Number((/^SMALL-MS=(\d+)$/m.exec(outS) || [])[1]);
  check(/^SMALL-CLONE=0$/m.test(outS) && /^SMALL-PUSH=(?!0$)\d+$/m.test(outS),
    `a push over max-body fails (${flat(outS.split('\n').filter((l) => /^(SMALL|error|fatal)/.test(l)).join('; '))})`);
  check(/413/.test(outS) && !/reset by peer|Broken pipe/i.test(outS), 'git says 413, not a reset connection');
  check(pushMs < scaled(10000), `at once (${pushMs} ms)`);
  check(git(['--git-dir', bare, 'rev-parse', 'main']) === headBefore, 'and the server\'s main is unchanged');
  const audit2 = await api(port, 'GET', '/v1/audit?action=proxy_call', admin);
  check((audit2.json || []).some((x) => x.target === r.json.id && /"status":413/.test(x.detail)),
    'the refusal is audited as 413');

  // ---- what the server saw (lighttpd writes its access log out when it stops)
  await lt.stop();
  const lines = fs.readFileSync(path.join(base, 'access.log'), 'utf8').split('\n').filter(Boolean);
  const rows = lines.map((l) => l.split(' | ')).map(([status, req, auth, ce, bytes, ua]) => ({ status, req, auth, ce, bytesIn: Number(bytes.slice(3)), ua }));
  const proxied = rows.filter((x) => x.auth !== '-');
  const real = `Basic ${BASIC}`;
  check(proxied.length >= 4 && proxied.every((x) => x.auth === real && x.status === '200' && /^git\//.test(x.ua)),
    `every request that came with credentials came from git with the real token, and got 200 (${proxied.length} of ${rows.length})`);
  const has = (re, pred = () => true) => proxied.some((x) => re.test(x.req) && pred(x));
  check(has(/^GET \/git\/repo\.git\/info\/refs\?service=git-upload-pack /) && has(/^POST \/git\/repo\.git\/git-upload-pack /),
    'the clone: info/refs and upload-pack');
  check(has(/^POST \/git\/repo\.git\/git-upload-pack /, (x) => x.ce === 'ce=gzip'), 'its fetch request came gzipped (Content-Encoding passed on)');
  check(has(/^GET \/git\/repo\.git\/info\/refs\?service=git-receive-pack /) && has(/^POST \/git\/repo\.git\/git-receive-pack /, (x) => x.bytesIn > BIG),
    `the push: info/refs and receive-pack, the pack whole (over ${BIG} bytes in)`);
  check(!lines.some((l) => l.includes('alp_') || /bearer/i.test(l) || l.includes(cred)), 'the server never saw the terminal\'s credential');
  check(!rows.some((x) => /other\.git/.test(x.req)), 'nor any request for the repository the proxy refused');
  const unauth = rows.filter((x) => x.auth === '-');
  check(unauth.length >= 2 && unauth.every((x) => x.status === '401'), `the requests without the proxy got 401 (${unauth.length})`);

  // ---- airlockd's side: audited per call, no token anywhere
  const audit = await api(port, 'GET', '/v1/audit?action=proxy_call', admin);
  const calls = (audit.json || []).filter((x) => x.action === 'proxy_call' && x.target === tid);
  check(calls.some((x) => /"method":"POST"/.test(x.detail) && /"path":"\/repo\.git\/git-receive-pack"/.test(x.detail) && /"status":200/.test(x.detail)),
    `the push is one audit row of the terminal (${calls.length} rows)`);
  check(calls.some((x) => /"path":"\/other\.git\//.test(x.detail) && /"status":403/.test(x.detail)), 'and the refused clone another');
  check(!audit.body.includes(REAL_TOKEN) && !audit.body.includes(cred), 'the audit rows hold neither the token nor the credential');
  const log = fs.readFileSync(d.log, 'utf8');
  check(!log.includes(REAL_TOKEN) && !log.includes(BASIC) && !log.includes(cred), 'nor does airlockd\'s log');

}, 300000);
