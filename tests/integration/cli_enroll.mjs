// `airlock sandbox enroll ID` end to end: an admin enrolls a reverse
// sandbox, the runner is started in a temporary directory with exactly
// the command line the CLI printed (and the jwks.json and token files
// --out wrote), its link comes up, and a command runs through it with
// `airlock run`. Who may enroll what is checked too.
import fs from 'node:fs';
import path from 'node:path';
import { run, check } from '../interop/harness.mjs';
import { cliServer, runCli as cli, EXIT, startCommand, until, AIRLOCK, sq } from '../interop/cli.mjs';

await run('cli_enroll', async () => {
  const { base, admin, op, env } = await cliServer('clienroll');
  let r = await cli(['sandbox', 'add', 'rev1', '--kind', 'reverse'], { env: env(admin) });
  check(r.code === 0, 'a reverse sandbox is added');

  r = await cli(['sandbox', 'enroll', 'rev1'], { env: env(op) });
  check(r.code === EXIT.FORBIDDEN, `an operator may not enroll: exit ${EXIT.FORBIDDEN} (${r.code})`);
  r = await cli(['sandbox', 'enroll', 'box'], { env: env(admin) });
  check(r.code === EXIT.REFUSED && /only reverse sandboxes enroll/.test(r.err), `a local sandbox does not enroll: exit ${EXIT.REFUSED} (${r.code})`);
  r = await cli(['sandbox', 'enroll', 'nope'], { env: env(admin) });
  check(r.code === EXIT.NOTFOUND, `an unknown sandbox: exit ${EXIT.NOTFOUND} (${r.code})`);
  r = await cli(['sandbox', 'enroll'], { env: env(admin) });
  check(r.code === EXIT.USAGE, 'enroll without an id: a usage error');

  r = await cli(['sandbox', 'enroll', 'rev1', '--ttl', '600', '--json'], { env: env(admin) });
  const j = JSON.parse(r.out);
  check(r.code === 0 && j.expires_in === 600 && /^airlock-runner --connect /.test(j.command) && j.token.split('.').length === 3 &&
    Array.isArray(j.jwks.keys), 'enroll --json: the token, its lifetime (--ttl), the command and the public keys');

  const dir = path.join(base, 'runner-dir');
  r = await cli(['sandbox', 'enroll', 'rev1', '--out', dir], { env: env(admin) });
  check(r.code === 0 && /^enrolled sandbox rev1: a runner token valid for 3600 s$/m.test(r.out), `enroll prints what it did (${r.err})`);
  const line = /^ {2}(airlock-runner .*)$/m.exec(r.out)?.[1];
  const token = /^token: (\S+)$/m.exec(r.out)?.[1];
  check(line && /--identifier rev1/.test(line) && /--jwks jwks\.json --token-file token/.test(line), `enroll prints the runner's command line: ${line}`);
  check(token && fs.readFileSync(path.join(dir, 'token'), 'utf8') === `${token}\n` &&
    (fs.statSync(path.join(dir, 'token')).mode & 0o777) === 0o600, 'enroll prints the token; --out wrote it to DIR/token, mode 0600');
  const keys = JSON.parse(fs.readFileSync(path.join(dir, 'jwks.json'), 'utf8'));
  check(Array.isArray(keys.keys) && keys.keys.length >= 1 && keys.keys.every((k) => !('d' in k)),
    '--out wrote the public keys to DIR/jwks.json (no private part)');

  // the runner, started as a person would paste it, in that directory
  startCommand(line, { cwd: dir, log: path.join(base, 'runner.log') });
  const probe = await until(async () => {
    const p = await cli(['probe', '--json'], { env: env(admin) });
    const s = JSON.parse(p.out).sandboxes.find((x) => x.id === 'rev1');
    return s && s.link_up ? s : null;
  }, 'the enrolled runner\'s link to come up', 20000, 200);
  check(probe.link_up, 'the enrolled runner dials in: probe shows its link up');
  r = await cli(['sandbox', 'ls'], { env: env(admin) });
  check(/^rev1\s+reverse\s+up/m.test(r.out), 'sandbox ls shows it up');

  const prog = 'echo "via $(cat)"; echo to-stderr >&2; exit 6';
  r = await cli([], { env: env(op), shell: `echo reverse | ${sq(AIRLOCK)} run rev1 -- sh -c ${sq(prog)}` });
  check(r.code === 6 && r.out === 'via reverse\n' && r.err === 'to-stderr\n',
    `a command runs through the enrolled runner: stdin, stdout, stderr, exit 6 (${r.code} ${JSON.stringify(r.out)} ${JSON.stringify(r.err)})`);
}, 120000);
