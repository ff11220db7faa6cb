// A throw-away PostgreSQL for the tests that run airlockd on it
// (tests/tools/pg-temp.sh: unix socket only, its own directory under /tmp,
// stopped and removed at clean-up, which checks that it is gone).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { check, onCleanup, SRC } from './harness.mjs';

// Start one; resolves its URL, with `password` in it when given (the
// server trusts local connections, so a password is never checked, only
// carried: a test can look for it where it must not appear).
export function startPostgres(password) {
  const script = path.join(SRC, 'tests', 'tools', 'pg-temp.sh');
  // its own directory under /tmp: the server's user must be able to reach it
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-pgdb-'));
  const r = spawnSync('bash', [script, 'start', dir, String(process.pid)],
    { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60000 });
  if (r.status !== 0) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`cannot start a throw-away PostgreSQL (tools/deps.sh installs it): ${r.stderr}`);
  }
  onCleanup(() => {
    execFileSync('bash', [script, 'stop', dir], { stdio: 'inherit', timeout: 60000 });
    check(!fs.existsSync(dir), 'the PostgreSQL server is stopped and its directory removed');
  });
  const url = r.stdout.toString().trim();
  check(url.startsWith('postgresql://postgres@/postgres?host='), `a throw-away PostgreSQL at ${url}`);
  return password ? url.replace('postgresql://postgres@', `postgresql://postgres:${password}@`) : url;
}
