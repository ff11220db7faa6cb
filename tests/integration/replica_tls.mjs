// Replicas that serve TLS reach each other over TLS (issue 17; docs/
// scale-out.md, "Clients on any replica" and "Actions at any replica"):
// three `airlockd serve --db URL --tls-cert/--tls-key` replicas on a
// throw-away PostgreSQL, each advertised as wss://; one static sandbox
// owned by replica 0.
// - a client attached at replica 1 over wss:// is relayed to the owner
//   over wss:// (the owner's certificate checked against SSL_CERT_FILE):
//   its output and exit arrive;
// - a terminal opened at replica 1 over https:// is forwarded to the owner
//   over https:// and runs there;
// - replica 2 trusts another certificate authority only: it neither relays
//   an attach (404) nor forwards an action (502, saying why) to an owner
//   whose certificate it cannot check, so its token never goes to a server
//   that could be anyone.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, waitFor, startRunner } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';
import { startPostgres } from '../interop/pg.mjs';
import { replicaDirs } from '../interop/replicas.mjs';
import { startTlsAirlockd, httpsApi, selfSigned } from '../interop/cli.mjs';

await run('replica_tls', async () => {
  const pg = startPostgres();
  const base = tmpdir('replica-tls');
  const { dirs, rdir, admin, op } = replicaDirs(base, 3, pg);
  // one certificate for the three (a name every replica is reached at)
  const cert = path.join(base, 'cert.pem'), key = path.join(base, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
    '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const other = selfSigned(path.join(base, 'data2')); // the CA replica 2 trusts instead
  const rs = [];
  for (let i = 0; i < 3; i++)
    rs.push(await startTlsAirlockd({ dir: dirs[i], args: ['--db', `${pg}&application_name=replica${i}`], tls: { cert, key },
      env: { ...process.env, SSL_CERT_FILE: i < 2 ? cert : other.cert } }));
  const idOf = [];
  for (const r of rs) {
    const me = (await httpsApi(r.port, 'GET', '/v1/replicas', admin)).json.find((x) => x.self);
    check(me.address.startsWith('wss://127.0.0.1:'), `a replica advertised as ${me.address}`);
    idOf.push(me.id);
  }
  const runner = await startRunner({ id: 'st1', dir: rdir });
  let r = await httpsApi(rs[0].port, 'POST', '/v1/sandboxes', admin, { id: 'st1', kind: 'static', url: runner.url });
  check(r.status === 201 && r.json.owner === idOf[0], 'a static sandbox owned by replica 0');
  await waitFor(async () => (await httpsApi(rs[0].port, 'GET', '/v1/sandboxes', admin)).json.find((x) => x.id === 'st1').link_up,
    10000, 'the runner to be linked', 100);

  // ---- an action at replica 1, forwarded over https://
  r = await httpsApi(rs[1].port, 'POST', '/v1/terminals', op,
    { sandbox: 'st1', argv: ['sh', '-c', 'read go; echo "through tls $go"; exit 7'] });
  check(r.status === 201, `a terminal opened at replica 1, forwarded to the owner over https: ${r.status} ${r.body.trim().slice(0, 100)}`);
  const tid = r.json.id;
  check(/forwarded to the sandbox's owner/.test(fs.readFileSync(rs[1].log, 'utf8')), 'replica 1 says it forwarded it');

  // ---- an attach at replica 1, relayed over wss://
  const ctl = new Controller();
  const ch = ctl.adoptChannel(1, { outNext: 0, mode: 0 });
  await ctl.connect(`wss://127.0.0.1:${rs[1].port}/v1/terminals/${tid}/attach`, { Authorization: `Bearer ${op}` },
    { ca: fs.readFileSync(cert) });
  await ctl.wait(() => ch.role !== undefined, 'a ROLE through replica 1', 10000);
  ch.write('yes\n');
  await ch.waitExit(15000);
  check(/through tls yes/.test(ch.output().toString()) && ch.exit.code === 7,
    `a client at replica 1 over wss, relayed to the owner over wss: its output and exit ${JSON.stringify(ch.exit)}`);
  check(/relayed to its owner .* at wss:\/\//.test(fs.readFileSync(rs[1].log, 'utf8')), 'replica 1 says it relayed the attach to a wss:// address');
  ctl.ws.close();

  // ---- a replica that cannot check the owner's certificate sends it nothing
  r = await httpsApi(rs[2].port, 'POST', '/v1/terminals', op, { sandbox: 'st1', argv: ['true'] });
  check(r.status === 502 && /could not be reached/.test(r.json.error),
    `an action at replica 2, which does not trust the owner's certificate: ${r.status} ${r.body.trim().slice(0, 160)}`);
  r = await httpsApi(rs[0].port, 'POST', '/v1/terminals', op, { sandbox: 'st1', argv: ['sh', '-c', 'exec sleep 60'] });
  const t2 = r.json.id;
  const c2 = new Controller();
  c2.adoptChannel(1, { outNext: 0, mode: 0 });
  let refused = null;
  try {
    await c2.connect(`wss://127.0.0.1:${rs[2].port}/v1/terminals/${t2}/attach`, { Authorization: `Bearer ${op}` },
      { ca: fs.readFileSync(cert) });
  } catch (e) { refused = e; }
  if (!refused) await c2.wait(() => c2.closeInfo, 'the attach at replica 2 to end', 15000);
  check(refused !== null || (c2.closeInfo && c2.closeInfo.code !== 1000),
    `an attach at replica 2 is not relayed to an owner it cannot check (${refused ? refused.message : JSON.stringify(c2.closeInfo)})`);
  check(/certificate|verify/i.test(fs.readFileSync(rs[2].log, 'utf8')), 'replica 2 says the certificate was not verified');

  for (const x of rs) check((await x.stop()).code === 0, 'a replica stops cleanly');
}, 120000);
