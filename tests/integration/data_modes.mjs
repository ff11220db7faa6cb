// The data directory's modes and owners, as docs/security.md ("Data
// directory") states them: under an airlockd running as root with a local
// sandbox, a terminal and its recording, every entry outside the workspace
// matches one row of the table below, and no file but the public keys (and
// the runner's binary) can be read by another user. The sandbox user owns
// only its own directories, its public keys and its token.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, addLocalSandbox } from '../interop/airlockd.mjs';

const SANDBOX_USER = 'airlock-sandbox';

// [path pattern (relative to DATA), mode, owner]: the first row that
// matches an entry is its rule
const RULES = [
  [/^$/, 0o711, 'root'], // searchable, never listable
  [/^(sandboxes|runner)$/, 0o711, 'root'],
  [/^runner\/airlock-runner$/, 0o755, 'root'],
  [/^runner\/airlock-proxy-fwd$/, 0o755, 'root'], // the proxy's forwarder, for agents with no network
  [/^jwks\.json$/, 0o644, 'root'], // public keys
  [/^sandboxes\/[^/]+(\/run)?$/, 0o700, SANDBOX_USER],
  [/^sandboxes\/[^/]+\/run\/jwks\.json$/, 0o644, SANDBOX_USER],
  [/^sandboxes\/[^/]+\/run\/token$/, 0o600, SANDBOX_USER],
  [/^sandboxes\/[^/]+\/work$/, 0o755, SANDBOX_USER], // the workspace: the agent's
  [/^sandboxes\/[^/]+\/run\/runner\.pid$/, 0o600, 'root'],
  [/./, 'dir', 0o700, 'root'], // every other directory
  [/./, 'file', 0o600, 'root'], // every other file
];

function ruleFor(rel, isDir) {
  for (const r of RULES) {
    if (r.length === 4) {
      if (r[0].test(rel) && r[1] === (isDir ? 'dir' : 'file')) return { mode: r[2], owner: r[3] };
    } else if (r[0].test(rel)) {
      return { mode: r[1], owner: r[2] };
    }
  }
  return null;
}

await run('data_modes', async () => {
  check(process.getuid() === 0, 'this test runs as root (as CI does)');
  const dir = path.join(tmpdir('modes'), 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const d = await startAirlockd({ dir });
  await addLocalSandbox(d.port, admin);
  const r = await api(d.port, 'POST', '/v1/terminals', admin, { sandbox: 'box', argv: ['sh', '-c', 'echo hello'], mode: 'pipes' });
  const a = await attach(d.port, r.json.id, admin);
  await a.ch.waitExit(20000);
  const uidOf = (name) => Number(execFileSync('id', ['-u', name]).toString().trim());
  const uids = { root: 0, [SANDBOX_USER]: uidOf(SANDBOX_USER) };

  const bad = [];
  let seen = 0;
  const stack = [''];
  while (stack.length && seen < 10000) {
    const rel = stack.pop();
    const p = path.join(dir, rel);
    const st = fs.lstatSync(p);
    seen++;
    const want = ruleFor(rel, st.isDirectory());
    const mode = st.mode & 0o7777;
    if (st.isSymbolicLink()) bad.push(`${rel}: a symbolic link`);
    else if (!want || mode !== want.mode || st.uid !== uids[want.owner]) {
      bad.push(`${rel || '.'}: ${mode.toString(8)} uid ${st.uid}, want ${want ? `${want.mode.toString(8)} ${want.owner}` : 'no such entry'}`);
    }
    // the workspace is the agent's to fill
    if (st.isDirectory() && !/^sandboxes\/[^/]+\/work$/.test(rel)) {
      for (const n of fs.readdirSync(p)) stack.push(rel ? `${rel}/${n}` : n);
    }
  }
  check(seen >= 15, `the data directory was walked (${seen} entries: database, keys, recording, sandbox, runner)`);
  check(bad.length === 0, `every entry has its mode and owner${bad.length ? `: ${bad.join('; ')}` : ''}`);
  await d.stop();
});
