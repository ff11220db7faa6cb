// A local sandbox's agents' network: "network": "none" (POST /v1/sandboxes,
// or airlock sandbox add --network none) gives them a network namespace
// with loopback only; without one a sandbox follows airlockd's
// --sandbox-network (host by default). Their runner still links either way
// (it dials from its own namespace, which has the host's network), but a
// cut-off agent can reach neither airlockd on 127.0.0.1 nor anything else,
// while the same probe from an agent with the host's network reaches
// airlockd, so the test can tell the two apart.
//
// One airlockd (default: host) with two local sandboxes: "cut" (none, made
// with the CLI) and "open" (the default). Then the same data directory
// under airlockd --sandbox-network none, on the same port: "open" follows
// the new default (its runner, left from before with the host's network,
// is replaced), "cut" keeps its runner, and a new "wide" (network host)
// still reaches airlockd. Static and reverse sandboxes take no network
// (400): airlockd does not start their runners.
import fs from 'node:fs';
import path from 'node:path';
import { run, check, sleep } from '../interop/harness.mjs';
import { startAirlockd, api, attach, addLocalSandbox } from '../interop/airlockd.mjs';
import { cliServer, runCli as cli, waitLink, EXIT } from '../interop/cli.mjs';

const flat = (s) => s.trim().replace(/\n/g, ' | ');

// What an agent of sandbox id sees: its interfaces, and whether airlockd answers.
async function probe(port, key, id) {
  const script = `cat /proc/net/dev | grep -c ':'; exec 3<>/dev/tcp/127.0.0.1/${port} && echo REACHED || echo UNREACHABLE`;
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox: id, argv: ['bash', '-c', script], mode: 'pipes' });
  if (r.status !== 201) throw new Error(`terminal in ${id}: ${r.status} ${r.body}`);
  const a = await attach(port, r.json.id, key);
  await a.ch.waitExit(20000);
  return Buffer.concat(a.ch.out).toString();
}

function checkCut(out, what) {
  check(/^UNREACHABLE$/m.test(out) && !/^REACHED$/m.test(out) && /^1$/m.test(out),
    `${what}: the agent sees loopback only and cannot reach airlockd (${flat(out)})`);
}

function checkOpen(out, what) {
  check(/^REACHED$/m.test(out), `${what}: the agent reaches airlockd (${flat(out)})`);
}

function sandboxRow(list, id) {
  return list.json && list.json.find((x) => x.id === id);
}

function runnerPid(dir, id) {
  try { return Number(fs.readFileSync(path.join(dir, 'sandboxes', id, 'run', 'runner.pid'), 'utf8')); } catch { return 0; }
}

await run('sandbox_network', async () => {
  const s = await cliServer('net', { sandbox: null });
  const { admin, port, dir } = s;

  // ---- airlockd with the default (host): one sandbox cut, one not
  let r = await cli(['sandbox', 'add', 'cut', '--kind', 'local', '--network', 'none'], { env: s.env(admin) });
  check(r.code === 0 && /added local sandbox cut \(network none\)/.test(r.out), `airlock sandbox add --network none (${flat(r.out + r.err)})`);
  await waitLink(port, admin, 'cut');
  const open = await addLocalSandbox(port, admin, 'open');
  check(open.network === 'host' && open.network_default === true, 'a sandbox made without one shows the server\'s network, host');
  let l = await api(port, 'GET', '/v1/sandboxes', admin);
  const cut = sandboxRow(l, 'cut');
  check(cut.link_up && cut.network === 'none' && cut.network_default === false, 'GET /v1/sandboxes: cut has network none of its own, and its runner links');
  checkCut(await probe(port, admin, 'cut'), 'network none');
  checkOpen(await probe(port, admin, 'open'), 'the default (host), beside it');

  r = await cli(['sandbox', 'ls'], { env: s.env(admin) });
  check(r.code === 0 && /^cut\s+local\s+up\s.*\snone$/m.test(r.out) && /^open\s+local\s+up\s.*\shost\*$/m.test(r.out),
    `airlock sandbox ls shows each one's network, the server's starred (${flat(r.out)})`);
  const au = await api(port, 'GET', '/v1/audit', admin);
  const row = au.json && au.json.find((x) => x.action === 'sandbox_add' && x.target === 'cut');
  check(row && row.detail === '{"network":"none"}', `the audit log keeps the network asked for (${row && row.detail})`);

  // ---- refused: not a local sandbox, or not host/none
  r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'rev', kind: 'reverse', network: 'none' });
  check(r.status === 400 && /"network": only a local sandbox/.test(r.json.error), `a reverse sandbox with a network: 400 (${r.json && r.json.error})`);
  r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'st', kind: 'static', url: 'ws://127.0.0.1:9/', network: 'host' });
  check(r.status === 400 && /"network"/.test(r.json.error), 'a static sandbox with a network: 400');
  r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'odd', kind: 'local', network: 'off' });
  check(r.status === 400 && /"network": must be "host" or "none"/.test(r.json.error), 'network off: 400');
  l = await api(port, 'GET', '/v1/sandboxes', admin);
  check(!['rev', 'st', 'odd'].some((id) => sandboxRow(l, id)), 'none of them was made');
  r = await cli(['sandbox', 'add', 'rev2', '--kind', 'reverse', '--network', 'none'], { env: s.env(admin) });
  check(r.code !== 0 && /only a local sandbox/.test(r.err), `airlock sandbox add --kind reverse --network none fails, saying why (${flat(r.err)})`);
  r = await cli(['sandbox', 'add', 'rev3', '--kind', 'local', '--network', 'off'], { env: s.env(admin) });
  check(r.code === EXIT.USAGE, 'airlock sandbox add --network off: a usage error');

  // ---- the same data under --sandbox-network none, on the same port
  const cutPid = runnerPid(dir, 'cut');
  const openPid = runnerPid(dir, 'open');
  check(cutPid > 1 && openPid > 1, 'both runners have a pid file');
  await s.d.stop();
  const d2 = await startAirlockd({ dir, port, args: ['--sandbox-network', 'none'] });
  let replaced = false;
  for (const until = Date.now() + 20000; Date.now() < until && !replaced; await sleep(100)) {
    const p = runnerPid(dir, 'open');
    replaced = p > 1 && p !== openPid && sandboxRow(await api(port, 'GET', '/v1/sandboxes', admin), 'open')?.link_up;
  }
  check(replaced, 'open\'s runner, left with the host\'s network, is replaced and links again');
  check(/sandbox open: replacing runner pid .*its agents' network differs/.test(fs.readFileSync(d2.log, 'utf8')), 'airlockd says why it replaced it');
  l = await api(port, 'GET', '/v1/sandboxes', admin);
  check(sandboxRow(l, 'open').network === 'none' && sandboxRow(l, 'open').network_default === true, 'open now shows the server\'s none');
  checkCut(await probe(port, admin, 'open'), 'the default under --sandbox-network none');
  await waitLink(port, admin, 'cut');
  check(runnerPid(dir, 'cut') === cutPid, 'cut\'s runner, already cut off, is kept');
  checkCut(await probe(port, admin, 'cut'), 'network none, still');
  const wide = await addLocalSandbox(port, admin, 'wide', 10000, { network: 'host' });
  check(wide.network === 'host' && wide.network_default === false, 'a sandbox can still ask for host');
  checkOpen(await probe(port, admin, 'wide'), 'network host under --sandbox-network none');
  await d2.stop();
});
