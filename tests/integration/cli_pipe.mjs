// The `airlock` CLI against a real airlockd with a local sandbox: the
// configuration sources, the API commands (ls, kill, sandbox add/rm/ls),
// distinct exit codes for each kind of failure, and pipe mode: `airlock run
// box -- sh -c 'cat; ...; exit 7' <file >out 2>err` reproduces stdout,
// stderr and the exit code byte for byte with a 10 MB binary stdin.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { run, check, closedPort, sleep } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { cliServer, runCli as cli, waitLink, until, EXIT, AIRLOCK as airlock } from '../interop/cli.mjs';

await run('cli_pipe', async () => {
  const { base, home, d, url, admin, op, viewer, env } = await cliServer('clipipe', { sandbox: null });
  const as = (key) => ({ env: env(key) });
  const noEnv = { HOME: home, XDG_CONFIG_HOME: '', AIRLOCK_URL: '', AIRLOCK_API_KEY: '' };

  // ---- help, usage, configuration sources
  let r = await cli(['--help'], as(op));
  check(r.code === 0 && /exit codes/.test(r.out) && /77/.test(r.out) && /78/.test(r.out) && /69/.test(r.out),
    'airlock --help lists the exit codes');
  r = await cli(['frobnicate'], as(op));
  check(r.code === EXIT.USAGE && /unknown command/.test(r.err), `an unknown command is a usage error (${r.code})`);
  r = await cli(['ls'], { env: noEnv });
  check(r.code === EXIT.USAGE && /no server address/.test(r.err), 'no URL anywhere: a usage error that says where to put it');
  fs.mkdirSync(path.join(home, '.config', 'airlock'), { recursive: true });
  fs.writeFileSync(path.join(home, '.config', 'airlock', 'config'), `# test\nurl = ${url}\nkey=${viewer}\n`);
  r = await cli(['ls'], { env: noEnv });
  check(r.code === 0 && /SANDBOX/.test(r.out), 'url and key from ~/.config/airlock/config');
  r = await cli(['sandbox', 'add', 'box', '--kind', 'local'], { env: { ...noEnv, AIRLOCK_API_KEY: admin } });
  check(r.code === 0, 'the environment key wins over the file key (admin may add)');
  r = await cli(['--key', viewer, 'sandbox', 'add', 'box2', '--kind', 'local'], { env: { ...noEnv, AIRLOCK_API_KEY: admin } });
  check(r.code === EXIT.FORBIDDEN && /role may not/.test(r.err), `--key wins over the environment; a viewer may not add: 403 -> ${r.code}`);
  await waitLink(d.port, admin, 'box');

  // ---- errors a user understands, each with its code
  r = await cli(['ls'], as('alk_' + 'B'.repeat(43)));
  check(r.code === EXIT.AUTH && /API key was not accepted/.test(r.err), `a wrong key: exit ${EXIT.AUTH} (${r.code}: ${r.err.trim()})`);
  r = await cli(['kill', 'nope'], as(op));
  check(r.code === EXIT.NOTFOUND && /no such terminal/.test(r.err), `an unknown terminal: exit ${EXIT.NOTFOUND} (${r.code})`);
  r = await cli(['attach', 'nope'], as(op));
  check(r.code === EXIT.NOTFOUND, `attach of an unknown terminal: exit ${EXIT.NOTFOUND} (${r.code})`);
  const dead = await closedPort();
  r = await cli(['ls'], { env: { ...as(op).env, AIRLOCK_URL: `http://127.0.0.1:${dead}` } });
  check(r.code === EXIT.DOWN && /cannot reach the server/.test(r.err), `server down: exit ${EXIT.DOWN} (${r.code}: ${r.err.trim()})`);
  r = await cli(['sandbox', 'add', 'box', '--kind', 'local'], as(admin));
  check(r.code === EXIT.REFUSED, `adding an existing sandbox is refused: exit ${EXIT.REFUSED} (${r.code})`);
  r = await cli(['run', 'box', '--', 'true'], as(viewer));
  check(r.code === EXIT.FORBIDDEN, `a viewer key cannot run: exit ${EXIT.FORBIDDEN} (${r.code})`);

  // ---- sandbox add/ls/rm, ls --json
  r = await cli(['sandbox', 'add', 'rev9', '--kind', 'reverse'], as(admin));
  check(r.code === 0 && /added reverse sandbox rev9/.test(r.out), 'sandbox add (reverse)');
  r = await cli(['sandbox', 'ls'], as(viewer));
  check(r.code === 0 && /^box\s+local\s+up/m.test(r.out) && /^rev9\s+reverse\s+down/m.test(r.out), 'sandbox ls shows kinds and links');
  r = await cli(['sandbox', 'rm', 'rev9'], as(admin));
  check(r.code === 0, 'sandbox rm');

  // ---- pipe mode: the example of the issue, 10 MB of binary stdin
  const inFile = path.join(base, 'in.bin');
  fs.writeFileSync(inFile, crypto.randomBytes(10 * 1024 * 1024));
  const outFile = path.join(base, 'out'), errFile = path.join(base, 'err');
  const t0 = Date.now();
  r = await cli([], { ...as(op), timeout: 120000, shell: `'${airlock}' run box -- sh -c 'cat; printf "to stderr\\001\\n" >&2; exit 7' <'${inFile}' >'${outFile}' 2>'${errFile}'` });
  const same = crypto.createHash('sha256').update(fs.readFileSync(inFile)).digest('hex') ===
    crypto.createHash('sha256').update(fs.readFileSync(outFile)).digest('hex');
  check(r.code === 7, `pipe mode: the exit code 7 comes back (${r.code}; stderr ${fs.readFileSync(errFile, 'utf8').slice(0, 300)})`);
  check(same, `pipe mode: 10 MB of binary stdin come back byte for byte on stdout (${fs.statSync(outFile).size} bytes, ${Date.now() - t0} ms)`);
  check(fs.readFileSync(errFile, 'latin1') === 'to stderr\x01\n', 'pipe mode: stderr is kept separate, byte for byte');
  r = await cli([], { ...as(op), shell: `printf 'abc' | '${airlock}' run box -- sh -c 'wc -c; kill -TERM $$'` });
  check(r.code === 128 + 15 && r.out.trim() === '3', `killed by TERM: exit 143, stdin EOF forwarded (${r.code}, ${JSON.stringify(r.out)})`);
  r = await cli([], { ...as(op), shell: `'${airlock}' run box -- sh -c 'exit 0' </dev/null` });
  check(r.code === 0 && r.out === '' && r.err === '', 'an empty run prints nothing and exits 0');

  // ---- ls shows terminals; kill
  const created = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['sleep', '300'] });
  check(created.status === 201, 'a long-running terminal for ls and kill');
  const tid = created.json.id;
  await until(async () => (await api(d.port, 'GET', `/v1/terminals/${tid}`, op)).json.state === 'running',
    'the terminal to be running');
  r = await cli(['ls'], as(viewer));
  check(r.code === 0 && new RegExp(`^${tid}\\s+box\\s+running\\s+pty`, 'm').test(r.out) && /sleep 300/.test(r.out),
    'ls shows the terminal with sandbox, state, mode and command');
  r = await cli(['ls', '--json'], as(viewer));
  const j = JSON.parse(r.out);
  check(r.code === 0 && j.sandboxes.some((s) => s.id === 'box') && j.terminals.some((t) => t.id === tid), 'ls --json');
  r = await cli(['kill', tid, '--signal', 'KILL'], as(viewer));
  check(r.code === EXIT.FORBIDDEN, 'a viewer cannot kill');
  r = await cli(['kill', tid, '--signal', 'KILL'], as(op));
  check(r.code === 0 && /sent KILL/.test(r.out), 'kill --signal KILL');
  let st;
  for (let i = 0; i < 50; i++) {
    st = await api(d.port, 'GET', `/v1/terminals/${tid}`, op);
    if (st.json.state === 'exited') break;
    await sleep(100);
  }
  check(st.json.state === 'exited' && st.json.exit_signal === 9, `the terminal was killed by signal 9 (${JSON.stringify(st.json)})`);
  r = await cli(['attach', tid], as(op));
  check(r.code === 128 + 9 && /killed by signal 9/.test(r.err), `attaching an exited terminal reports its status and exits with it (${r.code})`);
  r = await cli(['kill', tid, '--signal', 'BOGUS'], as(op));
  check(r.code === EXIT.REFUSED || r.code === 65, `a bad signal name is refused (${r.code})`);
}, 170000);
