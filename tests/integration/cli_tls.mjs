// `--insecure` against `airlockd serve --tls-cert/--tls-key` with a
// self-signed certificate: without it every command refuses the server
// (exit 69, with a hint that names --insecure); with it the API over https
// and a terminal over wss work: probe, sandbox add, ls, and a pipe-mode
// `run` whose stdin, stdout, stderr and exit code come back exact.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { run, check, tmpdir } from '../interop/harness.mjs';
import { addUser } from '../interop/airlockd.mjs';
import { runCli as cli, EXIT, startTlsAirlockd, until, AIRLOCK, sq } from '../interop/cli.mjs';

await run('cli_tls', async () => {
  const base = tmpdir('clitls');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const d = await startTlsAirlockd({ dir });
  const env = (key) => ({ HOME: base, XDG_CONFIG_HOME: '', AIRLOCK_URL: `https://127.0.0.1:${d.port}`, AIRLOCK_API_KEY: key });

  let r = await cli(['probe'], { env: env(admin) });
  check(r.code === EXIT.DOWN && /--insecure/.test(r.err), `a self-signed certificate is refused by default: exit ${EXIT.DOWN}, and --insecure is named (${r.err.trim()})`);
  r = await cli(['ls'], { env: env(admin) });
  check(r.code === EXIT.DOWN && /--insecure/.test(r.err), 'the same for any API command (ls)');

  r = await cli(['--insecure', 'probe'], { env: env(admin) });
  check(r.code === 0 && /https, certificate not checked/.test(r.out) && /^key\s+accepted/m.test(r.out),
    `--insecure: probe passes over https and says the certificate was not checked (${r.code} ${r.err})`);
  r = await cli(['--insecure', 'sandbox', 'add', 'box', '--kind', 'local'], { env: env(admin) });
  check(r.code === 0, 'sandbox add over https');
  await until(async () => {
    const p = await cli(['--insecure', 'probe', '--json'], { env: env(admin) });
    return JSON.parse(p.out).sandboxes.some((s) => s.id === 'box' && s.link_up);
  }, 'the local sandbox to link (its runner dials back over wss)', 20000, 200);
  check(true, 'the sandbox links up (probe --json over https)');

  const inFile = path.join(base, 'in.bin'), outFile = path.join(base, 'out.bin'), errFile = path.join(base, 'err.txt');
  fs.writeFileSync(inFile, crypto.randomBytes(1 << 20));
  const prog = 'cat; echo over-wss >&2; exit 4';
  r = await cli([], { env: env(op), shell: `${sq(AIRLOCK)} --insecure run box -- sh -c ${sq(prog)} <${sq(inFile)} >${sq(outFile)} 2>${sq(errFile)}` });
  check(r.code === 4 && fs.readFileSync(outFile).equals(fs.readFileSync(inFile)) && fs.readFileSync(errFile, 'utf8') === 'over-wss\n',
    `a terminal over wss with --insecure: 1 MiB of stdin back exact, stderr apart, exit 4 (${r.code}; ${fs.readFileSync(errFile, 'utf8').slice(0, 200)})`);
  r = await cli([], { env: env(op), shell: `${sq(AIRLOCK)} run box -- true </dev/null` });
  check(r.code === EXIT.DOWN, 'without --insecure, run refuses the server too');
  await d.stop();
}, 120000);
