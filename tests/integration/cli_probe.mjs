// `airlock probe`, the check a user runs first, against a real airlockd:
// the server's health, who the key is, each sandbox's link and RTT, the
// timings, as text and as --json; and each failure with its own exit code:
// a wrong or missing key (77), a server that is down (69), a URL whose
// path is not airlockd's (66).
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { run, check, closedPort } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { cliServer, runCli as cli, EXIT } from '../interop/cli.mjs';

await run('cli_probe', async () => {
  const { d, url, admin, viewer, env } = await cliServer('cliprobe');
  await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'rev1', kind: 'reverse' });
  await api(d.port, 'POST', '/v1/terminals', admin, { sandbox: 'box', argv: ['sleep', '60'] });

  let r = await cli(['--help'], { env: env(admin) });
  check(r.code === 0 && /probe \[--json\]/.test(r.out) && /--insecure/.test(r.out), 'airlock --help lists probe and --insecure');

  r = await cli(['probe'], { env: env(admin) });
  check(r.code === 0 && /^probe: ok$/m.test(r.out) && r.err === '', `probe: exit 0, "ok" (${r.code} ${r.err})`);
  check(new RegExp(`^server\\s+${url.replace(/[.]/g, '\\.')} \\(127\\.0\\.0\\.1 port ${d.port}, http\\)`, 'm').test(r.out),
    'probe shows the server address');
  check(/^health\s+ok in [0-9.]+ ms from 127\.0\.0\.1 \(server: airlockd\/\S+\)$/m.test(r.out),
    'probe shows the health check, its time, the address that answered and the server\'s version');
  // both sides' versions: the CLI's own, and airlockd's Server header, each
  // what that program's --version says
  const ver = (bin, args) => execFileSync(path.join(process.env.AL_BIN, bin), args).toString().trim();
  const vd = ver('airlockd', ['--version']), vc = ver('airlock', ['--version']);
  check(/^airlockd \S+$/.test(vd) && /^airlock \S+$/.test(vc) && vd.split(' ')[1] === vc.split(' ')[1],
    `airlockd --version and airlock --version agree (${vd} / ${vc})`);
  check(r.out.includes(`(server: airlockd/${vd.split(' ')[1]})`) && new RegExp(`^client\\s+${vc.replace(/[.+]/g, '\\$&')}$`, 'm').test(r.out),
    'probe prints both sides\' versions');
  check(/^key\s+accepted in [0-9.]+ ms: ada, role admin$/m.test(r.out), 'probe shows who the key is and its role');
  check(/^sandboxes\s+2 \(1 with the link up\)$/m.test(r.out), 'probe counts the sandboxes and the links up');
  check(/^\s+box\s+local\s+link up\s+since \S+\s+rtt (\d+\.\dms|-)$/m.test(r.out) &&
    /^\s+rev1\s+reverse\s+link down/m.test(r.out), 'probe lists each sandbox with its link state and RTT');
  check(/^terminals\s+1 \(1 running; GET \/v1\/terminals in [0-9.]+ ms\)$/m.test(r.out) &&
    /^api\s+GET \/v1\/sandboxes in [0-9.]+ ms$/m.test(r.out), 'probe shows the API calls\' round-trip times');

  r = await cli(['probe', '--json'], { env: env(viewer) });
  const j = JSON.parse(r.out);
  check(r.code === 0 && j.exit === 0 && j.error === null && j.server.healthy === true && j.server.status === 200 &&
    typeof j.server.ms === 'number' && j.server.peer === '127.0.0.1' && j.port === d.port && j.tls === false,
  'probe --json: the server part');
  check(j.key.accepted === true && j.key.user === 'vic' && j.key.role === 'viewer' && typeof j.key.ms === 'number',
    'probe --json: a viewer key is accepted, with its role');
  const box = j.sandboxes.find((s) => s.id === 'box'), rev = j.sandboxes.find((s) => s.id === 'rev1');
  check(box && box.link_up === true && box.kind === 'local' && (box.rtt_ms === null || box.rtt_ms > 0) &&
    rev && rev.link_up === false && rev.rtt_ms === null, 'probe --json: sandboxes with link state and RTT');
  check(j.client.version === vc.split(' ')[1] && j.server.version === `airlockd/${vd.split(' ')[1]}`,
    'probe --json: both sides\' versions');
  check(typeof j.api.sandboxes_ms === 'number' && j.terminals.total === 1 && j.terminals.running === 1,
    'probe --json: API timings and terminals');

  // ---- failures, each with its code; --json says the same
  r = await cli(['probe'], { env: env('alk_' + 'Z'.repeat(43)) });
  check(r.code === EXIT.AUTH && /key was refused \(HTTP 401\)/.test(r.err) && /^health\s+ok/m.test(r.out) &&
    /^probe: FAILED$/m.test(r.out), `a wrong key: exit ${EXIT.AUTH}, the server part still shown (${r.code})`);
  r = await cli(['probe', '--json'], { env: env('') });
  let k = JSON.parse(r.out);
  check(r.code === EXIT.AUTH && k.exit === EXIT.AUTH && k.key.given === false && /no API key/.test(k.error),
    `no key at all: exit ${EXIT.AUTH}, and it says so`);
  const dead = `http://127.0.0.1:${await closedPort()}`;
  r = await cli(['probe'], { env: env(admin, { AIRLOCK_URL: dead }) });
  check(r.code === EXIT.DOWN && /cannot reach the server/.test(r.err) && !/^health/m.test(r.out),
    `a server that is down: exit ${EXIT.DOWN} (${r.code}: ${r.err.trim()})`);
  r = await cli(['probe', '--json'], { env: env(admin, { AIRLOCK_URL: dead }) });
  k = JSON.parse(r.out);
  check(r.code === EXIT.DOWN && k.server.reachable === false && k.exit === EXIT.DOWN, 'probe --json of a server that is down');
  r = await cli(['probe'], { env: env(admin, { AIRLOCK_URL: `${url}/not-here` }) });
  check(r.code === EXIT.NOTFOUND && /healthz with HTTP 404/.test(r.err) && /URL's path/.test(r.err),
    `a URL whose path is not airlockd's: exit ${EXIT.NOTFOUND} (${r.code})`);
  r = await cli(['probe', '--bogus'], { env: env(admin) });
  check(r.code === EXIT.USAGE, 'probe with an unknown option: a usage error');
}, 120000);
