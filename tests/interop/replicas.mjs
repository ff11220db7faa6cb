// Shared set-up of the tests with several airlockd replicas on one
// throw-away PostgreSQL (issue 17: recording_failover, proxy_replicas):
// each replica its own data directory and key, trusting the others through
// the keys each publishes in the database (scale-out.md, "Trust between
// replicas"); a static runner's directory whose jwks.json lists every
// replica's public key (a static runner verifies whichever replica dials
// it); an admin and an operator key.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { BIN } from './harness.mjs';
import { addUser } from './airlockd.mjs';

// { dirs, rdir, admin, op } for n replicas under base, users in pg.
export function replicaDirs(base, n, pg) {
  const dirs = [...Array(n).keys()].map((i) => path.join(base, `data${i}`));
  const rdir = path.join(base, 'runner');
  fs.mkdirSync(rdir);
  for (const d of dirs) execFileSync(path.join(BIN, 'airlockd'), ['keygen', '--data', d], { stdio: 'pipe' });
  const jwks = { keys: dirs.flatMap((d) => JSON.parse(fs.readFileSync(path.join(d, 'jwks.json'), 'utf8')).keys) };
  fs.writeFileSync(path.join(rdir, 'jwks.json'), JSON.stringify(jwks));
  return { dirs, rdir, admin: addUser(dirs[0], 'ada', 'admin', pg), op: addUser(dirs[0], 'otto', 'operator', pg) };
}
