// The abuse matrix, airlockd's API (issue 15): every route of the router's
// table (routes[] in src/control/api_route.c, read from the source, so a
// new route without a row here fails this test) with each role's
// credential: none, a runner's runner:connect token used as a client key,
// a viewer, the operator who created the terminal, another operator, an
// admin. Each cell is the status docs/api.md gives; a refused change is
// also checked not to have happened (the sandbox still there, the
// terminal still running). Then: a token for sandbox A used for sandbox B
// (airlockd's runner link and the runners' upgrades), path traversal on
// every file-serving route (towards files a traversal would really serve:
// .json next to the web directory, the data directory's jwks.json and
// signing key), and SQL metacharacters in every string field, stored and
// read back verbatim, with nothing else changed. After each row, airlockd's
// health (tests/interop/abuse.mjs).
//
// | row | targets | how | expected |
// |---|---|---|---|
// | every route × every role | airlockd | the route's request as none / runner token / viewer / creator / other operator / admin | the matrix below (W(...)): 401, 403, 200/201/202/101; refused changes not done |
// | a runner token for A used for B | airlockd, runner | rev1's enrollment token on rev2's link and back; stat1's token at stat2's runner | 403, the audience named; A's own: 101 |
// | path traversal | airlockd | 18 variants (`..`, encoded, double-encoded, backslash, NUL, overlong UTF-8) on /, /app, /vendor, a recording | 404 (a NUL: closed), nothing outside served |
// | SQL metacharacters | airlockd on SQLite, and on PostgreSQL | 8 payloads in a sandbox url, a terminal's argv/cwd/env/term, the sign-in key, an API key, a sandbox id, a signal, a terminal id, a user name | stored and read back verbatim, or refused 400/401/404 by the field's rule; nothing else changed |
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, keygen, mint, startRunner, rawHttp, sleep, waitFor, scaled, SRC, BIN } from '../interop/harness.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';
import { Target, runMatrix, upgradeRequest } from '../interop/abuse.mjs';
import { startPostgres } from '../interop/pg.mjs';

const LINK_MS = 10000;     // a static sandbox's link comes up within this
const RUN_MS = 15000;      // a new terminal reaches "running" within this
const SECRET = 'TOP-SECRET-NOT-TO-BE-SERVED';

// The router's table, from the source: [{ method, path }]
function routesOfSource() {
  const src = fs.readFileSync(path.join(SRC, 'src/control/api_route.c'), 'utf8');
  const table = /static const struct route routes\[\] = \{([\s\S]*?)\n\};/.exec(src);
  if (!table) throw new Error('routes[] not found in api_route.c');
  const out = [];
  for (const m of table[1].matchAll(/\{\s*M_(\w+),\s*"([^"]+)"/g)) out.push({ method: m[1], path: m[2] });
  return out;
}

// ---- SQL metacharacters in every string field, on one backend: stored and
// read back verbatim, or refused by the field's rule; nothing else changed
const META = [`'; DROP TABLE terminals; --`, `" OR "1"="1`, `') OR ('a'='a`, `%_\\'\\"`, `Robert'); DELETE FROM users;--`,
  `1; UPDATE users SET role='admin' WHERE name='vic'; --`, `$1 $$ E'\\x27' /* */ -- #`, `ünïcödé '' ""`];
const utf8Json = (res) => JSON.parse(Buffer.from(res.body, 'latin1').toString('utf8'));

async function sqlMatrix({ backend, port, A, keys, dir, dbArgs, sandbox, term, daemon }) {
  const snapshot = async () => {
    const s = (await api(port, 'GET', '/v1/sandboxes', A)).json.map((x) => `${x.id}|${x.kind}|${x.url}`).sort();
    const t = utf8Json(await api(port, 'GET', '/v1/terminals', A)).map((x) => `${x.id}|${x.sandbox}|${JSON.stringify(x.argv)}|${x.cwd}|${x.creator}`).sort();
    const u = execFileSync(path.join(BIN, 'airlockd'), ['user', 'ls', '--data', dir, ...dbArgs]).toString();
    return { s, t, u };
  };
  const before = await snapshot();
  const made = { s: [], t: [] };
  const sqlRows = [];
  META.forEach((m, i) => {
    const url = `ws://127.0.0.1:9/?q=${m.replace(/ /g, '+')}`;
    sqlRows.push({ name: `sandbox url ${JSON.stringify(url)}`, targets: ['airlockd'], send: async () => {
      const g = await api(port, 'POST', '/v1/sandboxes', A, { id: `sql${i}`, kind: 'static', url });
      const back = (await api(port, 'GET', '/v1/sandboxes', A)).json.find((x) => x.id === `sql${i}`);
      if (g.status === 201) made.s.push(`sql${i}|static|${url}`);
      return { status: g.status, same: back && back.url === url };
    }, // a url is printable ASCII (docs/api.md): anything else is 400, nothing stored
    expect: (g) => (/^[\x21-\x7e]+$/.test(url) ? g.status === 201 && g.same : g.status === 400 && g.same === undefined),
    show: (g) => `${g.status}, read back verbatim: ${g.same}` });
    sqlRows.push({ name: `terminal argv and cwd ${JSON.stringify(m)}`, targets: ['airlockd'], send: async () => {
      const argv = ['printf', '%s\\n', m, `x${m}x`];
      const cwd = `/tmp/${m}`;
      const g = await api(port, 'POST', '/v1/terminals', keys.operator, { sandbox, argv, cwd, env: { SQLX: m }, term: `xterm${m.replace(/[^\x21-\x7e]/g, '')}`.slice(0, 64) });
      // (rawHttp reads a body as latin1: its bytes are UTF-8)
      const back = g.status === 201 ? utf8Json(await api(port, 'GET', `/v1/terminals/${g.json.id}`, keys.viewer)) : null;
      if (g.status === 201) made.t.push(`${g.json.id}|${sandbox}|${JSON.stringify(argv)}|${cwd}|otto`);
      return { status: g.status, same: !!back && JSON.stringify(back.argv) === JSON.stringify(argv) && back.cwd === cwd, body: g.body };
    }, expect: (g) => g.status === 201 && g.same, show: (g) => `${g.status}, read back verbatim: ${g.same} ${g.status !== 201 ? g.body : ''}` });
    sqlRows.push({ name: `sign-in key ${JSON.stringify(m)}`, targets: ['airlockd'],
      send: () => api(port, 'POST', '/v1/session', undefined, { key: m }),
      expect: (g) => g.status === 401 || g.status === 400, show: (g) => `${g.status}` });
    sqlRows.push({ name: `API key ${JSON.stringify(m)}`, targets: ['airlockd'],
      send: () => api(port, 'GET', '/v1/sandboxes', `alk_${encodeURIComponent(m)}`),
      expect: (g) => g.status === 401, show: (g) => `${g.status}` });
    sqlRows.push({ name: `sandbox id ${JSON.stringify(m)}`, targets: ['airlockd'],
      send: () => api(port, 'POST', '/v1/sandboxes', A, { id: m, kind: 'reverse' }),
      expect: (g) => g.status === 400, show: (g) => `${g.status} ${g.body.trim()}` });
    sqlRows.push({ name: `kill signal ${JSON.stringify(m)}`, targets: ['airlockd'],
      send: () => api(port, 'POST', `/v1/terminals/${term}/kill`, keys.operator, { signal: m }),
      expect: (g) => g.status === 400, show: (g) => `${g.status}` });
    sqlRows.push({ name: `terminal id in the path ${JSON.stringify(m)}`, targets: ['airlockd'],
      send: () => api(port, 'GET', `/v1/terminals/${encodeURIComponent(m)}`, A),
      expect: (g) => g.status === 404, show: (g) => `${g.status}` });
    sqlRows.push({ name: `user name ${JSON.stringify(m)} (airlockd user add)`, targets: ['airlockd'], send: async () => {
      try { execFileSync(path.join(BIN, 'airlockd'), ['user', 'add', m, '--role', 'viewer', '--data', dir, ...dbArgs], { stdio: 'pipe' }); return { status: 0 }; } catch (e) { return { status: e.status }; }
    }, expect: (g) => g.status === 2 || g.status === 1, show: (g) => `exit ${g.status}` });
  });
  await runMatrix(`sql (${backend})`, sqlRows, { airlockd: daemon });
  const after = await snapshot();
  check(JSON.stringify(after.s) === JSON.stringify([...before.s, ...made.s].sort()),
    `${backend}: the sandboxes are those before and the ones added, each as sent`);
  check(JSON.stringify(after.t) === JSON.stringify([...before.t, ...made.t].sort()),
    `${backend}: the terminals are those before and the ones added, each as sent`);
  check(after.u === before.u, `${backend}: the users are unchanged (${before.u.trim().split('\n').length} lines of airlockd user ls)`);
  check((await api(port, 'GET', '/v1/audit', keys.viewer)).status === 403, `${backend}: vic is still a viewer`);
}

await run('abuse_api', async () => {
  const base = tmpdir('abuse-api');
  const dir = path.join(base, 'data');
  keygen(dir);
  const key = {
    admin: addUser(dir, 'ada', 'admin'),
    operator: addUser(dir, 'otto', 'operator'),
    operator2: addUser(dir, 'olga', 'operator'),
    viewer: addUser(dir, 'vic', 'viewer'),
  };
  // the web page, and files a traversal would serve if it got out (types
  // the file routes serve: .json, .js)
  const web = path.join(base, 'web');
  fs.mkdirSync(path.join(web, 'vendor'), { recursive: true });
  fs.writeFileSync(path.join(web, 'index.html'), '<!doctype html><title>airlock</title>');
  fs.writeFileSync(path.join(web, 'app.js'), 'export const app = 1;');
  fs.writeFileSync(path.join(web, 'vendor', 'xterm.css'), '.xterm {}');
  fs.writeFileSync(path.join(base, 'secret.json'), JSON.stringify({ SECRET }));
  fs.writeFileSync(path.join(base, 'secret.js'), `// ${SECRET}`);

  const r1 = await startRunner({ id: 'stat1', dir });
  const r2 = await startRunner({ id: 'stat2', dir });
  const d = await startAirlockd({ dir, args: ['--web', web] });
  key.runner = mint(dir, 'stat1', 'runner:connect', 3600); // a runner's token, as a client would misuse it
  key.none = null;
  const ROLES = ['none', 'runner', 'viewer', 'operator', 'operator2', 'admin'];
  const A = key.admin;

  const urlOf = (r) => `ws://127.0.0.1:${r.port}/?identifier=${r.id}&api-version=2024-02-02-preview`;
  for (const r of [r1, r2]) {
    const a = await api(d.port, 'POST', '/v1/sandboxes', A, { id: r.id, kind: 'static', url: urlOf(r) });
    check(a.status === 201, `a static sandbox ${r.id}`);
  }
  for (const id of ['rev1', 'rev2']) check((await api(d.port, 'POST', '/v1/sandboxes', A, { id, kind: 'reverse' })).status === 201, `a reverse sandbox ${id}`);
  // a running terminal of otto's, made once the link is up
  const newTerm = async (by = key.operator, argv = ['sh', '-c', 'echo hello; exec sleep 600']) => {
    for (const until = Date.now() + LINK_MS; Date.now() < until; await sleep(100)) {
      const t = await api(d.port, 'POST', '/v1/terminals', by, { sandbox: 'stat1', argv });
      if (t.status === 201) return t.json.id;
    }
    throw new Error('no terminal on stat1');
  };
  const stateOf = async (id) => (await api(d.port, 'GET', `/v1/terminals/${id}`, A)).json?.state;
  // running within RUN_MS (scaled: the sanitizer build under a loaded CI
  // once needed more than 5 s); how long it took is part of the verdict
  const running = async (id) => {
    const t0 = Date.now();
    while (Date.now() - t0 < scaled(RUN_MS) && (await stateOf(id)) !== 'running') await sleep(100);
    running.ms = Date.now() - t0;
    return (await stateOf(id)) === 'running';
  };
  const T0 = await newTerm();
  check(await running(T0), `otto's terminal ${T0} runs (after ${running.ms} ms)`);
  const sandboxIds = async () => ((await api(d.port, 'GET', '/v1/sandboxes', A)).json || []).map((s) => s.id).sort();

  const daemon = new Target({ name: 'airlockd', pid: d.p.pid, port: d.port, log: d.log,
    probe: async () => (await api(d.port, 'GET', '/v1/sandboxes', A)).status === 200 });
  await daemon.baseline();

  // One request as `role`: { method, target, body } -> { status, body }
  const call = (role, { method, target, body, upgrade }) => {
    if (upgrade) {
      return rawHttp(d.port, upgradeRequest(target, { Authorization: key[role] ? `Bearer ${key[role]}` : null }))
        .catch((e) => ({ status: `no answer (${e.message})` }));
    }
    return api(d.port, method, target, key[role], body);
  };

  // ---- the route matrix: per route, how to call it as a role, and the
  // status each role gets: [none, runner token, viewer, operator (creator),
  // another operator, admin]. after(role, got, req): the refused change did
  // not happen (or the allowed one did).
  const W = (...s) => Object.fromEntries(ROLES.map((r, i) => [r, s[i]]));
  const ALL200 = W(200, 200, 200, 200, 200, 200);
  const USER = W(401, 401, 200, 200, 200, 200);
  const matrix = {
    'ANY /healthz': { req: () => ({ method: 'GET', target: '/healthz' }), want: ALL200 },
    'GET /': { req: () => ({ method: 'GET', target: '/' }), want: ALL200 },
    'GET /app/{file}': { req: () => ({ method: 'GET', target: '/app/app.js' }), want: ALL200 },
    'GET /vendor/{file}': { req: () => ({ method: 'GET', target: '/vendor/xterm.css' }), want: ALL200 },
    'GET /metrics': { req: () => ({ method: 'GET', target: '/metrics' }), want: USER },
    // sign-in: the key is the body's, not the header's (none: a made-up key)
    'POST /v1/session': { req: (role) => ({ method: 'POST', target: '/v1/session', body: { key: key[role] || `alk_${'Q'.repeat(43)}` }, noAuth: true }),
      want: W(401, 401, 200, 200, 200, 200) },
    'GET /v1/session': { req: () => ({ method: 'GET', target: '/v1/session' }), want: USER },
    'DELETE /v1/session': { req: () => ({ method: 'DELETE', target: '/v1/session' }), want: USER },
    'GET /v1/sandboxes': { req: () => ({ method: 'GET', target: '/v1/sandboxes' }), want: USER },
    'POST /v1/sandboxes': { req: (role) => ({ method: 'POST', target: '/v1/sandboxes', body: { id: `new-${role}`, kind: 'reverse' } }),
      want: W(401, 401, 403, 403, 403, 201),
      after: async (role, g) => (await sandboxIds()).includes(`new-${role}`) === (g.status === 201) },
    'DELETE /v1/sandboxes/{id}': { prep: async (role) => api(d.port, 'POST', '/v1/sandboxes', A, { id: `del-${role}`, kind: 'reverse' }),
      req: (role) => ({ method: 'DELETE', target: `/v1/sandboxes/del-${role}` }),
      want: W(401, 401, 403, 403, 403, 200),
      after: async (role, g) => (await sandboxIds()).includes(`del-${role}`) === (g.status !== 200) },
    'POST /v1/sandboxes/{id}/enroll': { req: () => ({ method: 'POST', target: '/v1/sandboxes/rev1/enroll', body: {} }),
      want: W(401, 401, 403, 403, 403, 200), after: async (role, g) => g.status !== 200 || /^ey/.test(g.json.token) },
    'ANY /v1/sandboxes/{id}*': { req: () => ({ method: 'GET', target: '/v1/sandboxes/rev1/anything' }),
      want: W(401, 401, 403, 403, 403, 405) },
    'GET /v1/terminals': { req: () => ({ method: 'GET', target: '/v1/terminals' }), want: USER },
    'POST /v1/terminals': { req: () => ({ method: 'POST', target: '/v1/terminals', body: { sandbox: 'stat1', argv: ['sleep', '600'] } }),
      want: W(401, 401, 403, 201, 201, 201) },
    'GET /v1/terminals/{id}': { req: () => ({ method: 'GET', target: `/v1/terminals/${T0}` }), want: USER },
    'POST /v1/terminals/{id}/kill': { prep: async (role) => { prepT[role] = await newTerm(); await running(prepT[role]); },
      req: (role) => ({ method: 'POST', target: `/v1/terminals/${prepT[role]}/kill`, body: { signal: 'KILL' } }),
      want: W(401, 401, 403, 202, 202, 202),
      after: async (role, g) => g.status === 202 || (await stateOf(prepT[role])) === 'running' },
    'DELETE /v1/terminals/{id}': { prep: async (role) => { prepT[role] = await newTerm(); await running(prepT[role]); },
      req: (role) => ({ method: 'DELETE', target: `/v1/terminals/${prepT[role]}` }),
      want: W(401, 401, 403, 202, 202, 202),
      after: async (role, g) => g.status === 202 || (await stateOf(prepT[role])) === 'running' },
    'GET /v1/terminals/{id}/recording': { req: () => ({ method: 'GET', target: `/v1/terminals/${T0}/recording` }),
      want: W(401, 401, 403, 200, 403, 200), after: async (role, g) => g.status !== 200 || /hello/.test(g.body) },
    'POST /v1/terminals/{id}/proxy/revoke': { req: () => ({ method: 'POST', target: `/v1/terminals/${T0}/proxy/revoke` }),
      want: W(401, 401, 403, 200, 200, 200) },
    'ANY /v1/terminals/{id}*': { req: () => ({ method: 'GET', target: `/v1/terminals/${T0}/anything` }),
      want: W(401, 401, 403, 405, 405, 405) },
    'UPGRADE /v1/terminals/{id}/attach': { req: () => ({ upgrade: true, target: `/v1/terminals/${T0}/attach?mode=read` }),
      want: W(401, 401, 101, 101, 101, 101) },
    'GET /v1/proxy/upstreams': { req: () => ({ method: 'GET', target: '/v1/proxy/upstreams' }), want: W(401, 401, 403, 200, 200, 200) },
    'GET /v1/audit': { req: () => ({ method: 'GET', target: '/v1/audit' }), want: W(401, 401, 403, 403, 403, 200) },
    'GET /v1/replicas': { req: () => ({ method: 'GET', target: '/v1/replicas' }), want: W(401, 401, 403, 403, 403, 200),
      after: async (role, g) => g.status !== 200 || JSON.parse(g.body).some((x) => x.self && x.alive) },
    // a user's key is no runner's token, whoever holds it
    'UPGRADE /v1/runners/connect': { req: () => ({ upgrade: true, target: '/v1/runners/connect?identifier=rev2' }),
      want: W(403, 403, 403, 403, 403, 403) },
  };
  const prepT = {};

  const routes = routesOfSource();
  check(routes.length >= 20, `${routes.length} routes read from routes[] in src/control/api_route.c`);
  const names = routes.map((r) => `${r.method} ${r.path}`);
  const missing = names.filter((n) => !matrix[n]);
  check(missing.length === 0, `every route of the router has a row in the matrix (missing: ${missing.join(', ') || 'none'})`);
  const stale = Object.keys(matrix).filter((n) => !names.includes(n));
  check(stale.length === 0, `every row of the matrix is a route of the router (stale: ${stale.join(', ') || 'none'})`);

  const rows = [];
  for (const n of names) {
    const m = matrix[n];
    for (const role of ROLES) {
      rows.push({ name: `${n} as ${role}`, targets: ['airlockd'],
        send: async () => {
          if (m.prep) await m.prep(role);
          const q = m.req(role);
          const g = await call(q.noAuth ? 'none' : role, q);
          g.ok = !m.after || await m.after(role, g, q);
          return g;
        },
        expect: (g) => g.status === m.want[role] && g.ok,
        show: (g) => `want ${m.want[role]}, got ${g.status}${g.ok ? '' : ' AND the change was not as the status says'}` });
    }
  }
  await runMatrix('routes', rows, { airlockd: daemon });

  // ---- a runner token for sandbox A used for sandbox B
  const enroll = async (id) => (await api(d.port, 'POST', `/v1/sandboxes/${id}/enroll`, A, {})).json.token;
  const tokA = await enroll('rev1');
  const tokB = await enroll('rev2');
  const link = (id, tok, k) => rawHttp(d.port, upgradeRequest(`/v1/runners/connect?identifier=${id}`,
    { Authorization: `Bearer ${tok}`, 'X-Airlock-Runner-Key': k.repeat(43) }));
  const r1tok = mint(dir, 'stat1', 'runner:connect', 600);
  const runnerUp = (r, tok) => rawHttp(r.port, upgradeRequest(`/?identifier=${r.id}&api-version=2024-02-02-preview`, { Authorization: `Bearer ${tok}` }));
  const r2log = fs.statSync(r2.log).size;
  // stat2's health: a probe session (runner:probe) leaves airlockd's link alone
  const probeTok = mint(dir, 'stat2', 'runner:probe', 600);
  const runner2 = new Target({ name: 'runner stat2', pid: r2.proc.pid, port: r2.port, log: r2.log,
    probe: async () => (await runnerUp(r2, probeTok)).status === 101 });
  await runner2.baseline();
  await runMatrix('cross-sandbox', [
    { name: "rev1's token on rev2's link", targets: ['airlockd'], send: () => link('rev2', tokA, 'C'),
      expect: (g) => g.status === 403, show: (g) => `${g.status} ${g.body.trim()}` },
    { name: "rev2's token on rev1's link", targets: ['airlockd'], send: () => link('rev1', tokB, 'D'),
      expect: (g) => g.status === 403, show: (g) => `${g.status} ${g.body.trim()}` },
    { name: "rev1's token on its own link (control)", targets: ['airlockd'], send: () => link('rev1', tokA, 'E'),
      expect: (g) => g.status === 101, show: (g) => `${g.status}` },
    { name: "stat1's token at stat2's runner", targets: ['runner stat2'], send: () => runnerUp(r2, r1tok),
      expect: (g) => g.status === 403 && /wrong audience|aud "stat1" is not this verifier/.test(fs.readFileSync(r2.log, 'utf8').slice(r2log)),
      show: (g) => `${g.status} ${g.body.trim()}` },
  ], { airlockd: daemon, 'runner stat2': runner2 });
  // airlockd's reason: the token's audience is the other sandbox (audit
  // rows are written every 5 s)
  const crossWhy = async () => ((await api(d.port, 'GET', '/v1/audit', A)).json || [])
    .filter((e) => e.action === 'runner_refused').map((e) => JSON.parse(e.detail).why);
  const whys = await waitFor(async () => {
    const w = await crossWhy();
    return w.some((x) => /aud "rev1" is not this verifier/.test(x)) && w.some((x) => /aud "rev2" is not this verifier/.test(x)) && w;
  }, 15000, 'the cross-sandbox audit rows').catch(() => crossWhy());
  check(whys.some((x) => /aud "rev1" is not this verifier/.test(x)) && whys.some((x) => /aud "rev2" is not this verifier/.test(x)),
    'airlockd refused each for its audience (audit rows: aud "rev1"/"rev2" is not this verifier)');

  // ---- path traversal on every file-serving route, as an admin (so that
  // the credential is never what refuses): each variant names a file a
  // route would serve if the name got out of its directory
  const dataRel = path.relative(web, dir); // ../data
  const variants = [
    '../secret.json', '..%2fsecret.json', '%2e%2e/secret.json', '%2e%2e%2fsecret.json', '.%2e/secret.json',
    '..%252fsecret.json', '....//secret.json', '..\\secret.json', '..%5csecret.json', '%2fsecret.json',
    `${dataRel}/jwks.json`, `..%2f${path.basename(dir)}%2fjwks.json`, '../secret.js', 'app.js%00.json',
    '..%00/secret.json', '%c0%ae%c0%ae/secret.json', `${'../'.repeat(12)}etc/passwd`, '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
  ];
  const fileRoutes = [
    { name: 'GET /', at: (v) => `/${v}` },
    { name: 'GET /app/{file}', at: (v) => `/app/${v}` },
    { name: 'GET /vendor/{file}', at: (v) => `/vendor/${v}` },
    { name: 'GET /vendor/{file} (two up)', at: (v) => `/vendor/../${v}` },
    { name: 'GET /v1/terminals/{id}/recording', at: (v) => `/v1/terminals/${v}/recording` },
    { name: 'GET /v1/terminals/{id}/recording (after the id)', at: (v) => `/v1/terminals/${T0}/recording/${v}` },
  ];
  const leaked = (body) => body.includes(SECRET) || /PRIVATE KEY|"keys"\s*:|root:x:0:0/.test(body);
  const travRows = [];
  for (const fr of fileRoutes) {
    for (const v of variants) {
      travRows.push({ name: `${fr.name} with ${v}`, targets: ['airlockd'],
        send: () => rawHttp(d.port, `GET ${fr.at(v)} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${A}\r\n\r\n`)
          .catch((e) => ({ status: `no answer (${e.message})`, body: '' })),
        // a NUL in the path: libwebsockets closes the connection unanswered
        expect: (g) => ([400, 404, 405].includes(g.status) || (v.includes('%00') && /closed without answer/.test(g.status))) &&
          !leaked(g.body || ''),
        show: (g) => `${g.status}${leaked(g.body) ? ' LEAKED' : ''}` });
    }
  }
  // the control rows: the same routes serve their own files
  travRows.push({ name: 'GET /app/app.js (control)', targets: ['airlockd'], send: () => api(d.port, 'GET', '/app/app.js'),
    expect: (g) => g.status === 200 && /app = 1/.test(g.body), show: (g) => `${g.status}` });
  travRows.push({ name: `GET /v1/terminals/${T0}/recording (control)`, targets: ['airlockd'],
    send: () => api(d.port, 'GET', `/v1/terminals/${T0}/recording`, A),
    expect: (g) => g.status === 200 && /hello/.test(g.body), show: (g) => `${g.status}` });
  await runMatrix('traversal', travRows, { airlockd: daemon });

  await sqlMatrix({ backend: 'SQLite', port: d.port, A, keys: key, dir, dbArgs: [], sandbox: 'stat1', term: T0, daemon });

  // ---- the same on PostgreSQL: an airlockd of its own, its own runner
  const db = startPostgres();
  const pdir = path.join(base, 'pgdata');
  keygen(pdir);
  const pkey = { admin: addUser(pdir, 'ada', 'admin', db), operator: addUser(pdir, 'otto', 'operator', db), viewer: addUser(pdir, 'vic', 'viewer', db) };
  const r3 = await startRunner({ id: 'stat3', dir: pdir });
  const pd = await startAirlockd({ dir: pdir, db });
  check((await api(pd.port, 'POST', '/v1/sandboxes', pkey.admin, { id: 'stat3', kind: 'static', url: urlOf(r3) })).status === 201,
    'PostgreSQL: a static sandbox stat3');
  let pterm = null;
  for (let i = 0; i < 100 && !pterm; i++) {
    const t = await api(pd.port, 'POST', '/v1/terminals', pkey.operator, { sandbox: 'stat3', argv: ['sleep', '600'] });
    if (t.status === 201) pterm = t.json.id; else await sleep(100);
  }
  const pdaemon = new Target({ name: 'airlockd (PostgreSQL)', pid: pd.p.pid, port: pd.port, log: pd.log,
    probe: async () => (await api(pd.port, 'GET', '/v1/sandboxes', pkey.admin)).status === 200 });
  await pdaemon.baseline();
  await sqlMatrix({ backend: 'PostgreSQL', port: pd.port, A: pkey.admin, keys: pkey, dir: pdir, dbArgs: ['--db', db],
    sandbox: 'stat3', term: pterm, daemon: pdaemon });
  await daemon.healthy('the whole API matrix');
}, 240000);
