// The credential proxy's direct path on any replica (issue 17, points 3
// and 5; docs/scale-out.md, "The credential proxy on any replica"): two
// `airlockd serve --db URL` replicas on a throw-away PostgreSQL, each with
// the upstream `anthropic` (tests/tools/fake_anthropic.mjs) and its own
// --proxy-listen; a static sandbox owned by replica 0.
// - an agent's credential works at both replicas' direct paths (behind a
//   front its calls land on any replica): the upstream gets the real key,
//   never the credential; before this, the replica that does not own the
//   sandbox answered 503 (its terminal "not confirmed");
// - a forged credential and none are 401 at both;
// - revoked at one replica (POST /v1/terminals/ID/proxy/revoke), it is 401
//   at the other at once: no replica keeps a cache that outlives it;
// - the owner frozen (SIGSTOP) past its lease: the other replica does not
//   serve the credential while no replica holds the sandbox's lease with
//   its runner linked (503, or it serves it as the new owner once it has
//   taken the sandbox over and its runner confirmed the terminal).
import http from 'node:http';
import { run, check, tmpdir, waitFor, startRunner, onCleanup, reportedPort } from '../interop/harness.mjs';
import { startAirlockd, api, attach } from '../interop/airlockd.mjs';
import { startPostgres } from '../interop/pg.mjs';
import { replicaDirs } from '../interop/replicas.mjs';
import { newKey, startFakeAnthropic, upstreamConfig } from '../interop/upstream.mjs';

const MESSAGES = JSON.stringify({ model: 'fake', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'hi' }] });

// POST the Messages call through a replica's direct path; { status, body }.
function call(port, cred) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/proxy/anthropic/v1/messages', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(MESSAGES),
        ...(cred ? { authorization: `Bearer ${cred}` } : {}) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.setTimeout(20000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(MESSAGES);
  });
}

await run('proxy_replicas', async () => {
  const pg = startPostgres();
  const base = tmpdir('proxyrep');
  const key = newKey();
  const fake = await startFakeAnthropic({ key });
  const conf = upstreamConfig('proxyrep-conf', { fakePort: fake.port, key });
  const { dirs, rdir, admin, op } = replicaDirs(base, 2, pg);
  const rs = [];
  const pports = [];
  for (let i = 0; i < 2; i++) {
    rs.push(await startAirlockd({ dir: dirs[i], db: pg, args: ['--config', conf] }));
    pports.push(await reportedPort(rs[i].log, /credential proxy serving on port (\d+)/, rs[i].p, { what: 'the proxy to listen' }));
  }
  const idOf = [];
  for (const r of rs) idOf.push((await api(r.port, 'GET', '/v1/replicas', admin)).json.find((x) => x.self).id);

  const runner = await startRunner({ id: 'st1', dir: rdir });
  let r = await api(rs[0].port, 'POST', '/v1/sandboxes', admin, { id: 'st1', kind: 'static', url: runner.url });
  check(r.status === 201 && r.json.owner === idOf[0], 'a static sandbox owned by replica 0');
  const sbOf = async (port) => (await api(port, 'GET', '/v1/sandboxes', admin)).json.find((x) => x.id === 'st1');
  await waitFor(async () => (await sbOf(rs[0].port)).link_up, 10000, 'the runner to be linked', 100);

  r = await api(rs[0].port, 'POST', '/v1/terminals', op, { sandbox: 'st1', mode: 'pipes', proxy: ['anthropic'],
    argv: ['sh', '-c', 'echo "TOKEN=$ANTHROPIC_AUTH_TOKEN"; exec sleep 600'] });
  check(r.status === 201, `a terminal with the proxy (${r.status})`);
  const tid = r.json.id;
  const a = await attach(rs[0].port, tid, op, { read: true });
  await a.ch.waitOutput(/TOKEN=\S+/, 20000);
  const cred = /TOKEN=(\S+)/.exec(a.ch.seen().toString())[1];
  a.ctl.ws.terminate();
  check(cred.startsWith('alp_') && cred !== key, 'the agent holds a credential, not the key');

  // ---- the credential at both replicas
  for (const i of [0, 1]) {
    const before = (await fake.stats()).requests.length;
    const c = await call(pports[i], cred);
    const st = await fake.stats();
    const last = st.requests[st.requests.length - 1];
    check(c.status === 200 && /message_stop/.test(c.body) && st.requests.length === before + 1 &&
      last.headers['x-api-key'] === key && !st.credential_seen,
      `through replica ${i}'s direct path (${i === 0 ? 'the owner' : 'not the owner'}): ${c.status}, the upstream answered with the real key and never saw the credential`);
  }
  for (const i of [0, 1]) {
    const forged = await call(pports[i], `alp_${'A'.repeat(43)}`);
    const none = await call(pports[i], null);
    check(forged.status === 401 && none.status === 401, `replica ${i}: a forged credential and none are 401 (${forged.status}, ${none.status})`);
  }

  // ---- the owner frozen past its lease: not served by a replica without it
  rs[0].p.kill('SIGSTOP');
  onCleanup(() => { try { rs[0].p.kill('SIGCONT'); } catch { /* gone */ } });
  const frozenAt = Date.now();
  const seen = new Set();
  await waitFor(async () => {
    const c = await call(pports[1], cred);
    const x = await sbOf(rs[1].port);
    const owner = x.owner === idOf[1] ? 'new owner' : 'old owner';
    seen.add(`${c.status} ${owner}`);
    return c.status === 200 && x.owner === idOf[1];
  }, 20000, 'replica 1 to take the sandbox over and serve the credential', 200);
  // while the old lease lasts the terminal still runs (its runner does not
  // need airlockd): 200; once no replica holds it, or before the new
  // owner's runner confirmed the terminal: 503; never anything else
  const wrong = [...seen].filter((x) => !/^(200|503) /.test(x));
  check(wrong.length === 0 && seen.has('200 new owner'),
    `while the owner was frozen (${Date.now() - frozenAt} ms until replica 1 served it as the owner) replica 1 answered: ${[...seen].join(', ')}`);
  rs[0].p.kill('SIGCONT');

  // ---- revoked at one replica: 401 at the other at once
  r = await api(rs[1].port, 'POST', `/v1/terminals/${tid}/proxy/revoke`, op, {});
  check(r.status === 200 || r.status === 204, `revoked at replica 1, the owner now (${r.status} ${r.body})`);
  await waitFor(async () => (await rawOk(rs[0].port)), 10000, 'replica 0 back', 100);
  const after = await call(pports[0], cred);
  check(after.status === 401, `the revoked credential at replica 0, the old owner: 401 (${after.status})`);
  const after1 = await call(pports[1], cred);
  check(after1.status === 401, `and at replica 1: 401 (${after1.status})`);
  for (const d of rs) await d.stop();
}, 120000);

async function rawOk(port) {
  try { return (await api(port, 'GET', '/healthz', null)).status === 200; } catch { return false; }
}
