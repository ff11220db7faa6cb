// Privilege separation of the signing key (docs/security.md): the
// process of `airlockd serve` that parses HTTP, WebSocket and JSON never
// holds the private key. Observed from outside, as root would:
//   - the signer is a separate process, a child of the serving one;
//   - the serving process has no fd on signing-key.pem; the signer has
//     only stdio and its socket;
//   - after it has had tokens of every shape minted (a local runner linked
//     with one, an enrollment; a web session, which is not signed), the serving process's whole
//     readable memory (/proc/PID/maps + /proc/PID/mem) holds neither the
//     raw 32-byte Ed25519 seed read from the PEM file, nor the PKCS#8 DER,
//     nor the PEM's base64 text; the same scan finds the seed in the
//     signer's memory (the control that shows the scan can see a key);
//   - every mint is audited with the signer's jti and kid;
//   - a signer killed with SIGKILL is replaced, and minting goes on;
//   - SIGTERM stops both processes.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, sleep } from '../interop/harness.mjs';
import { addUser, startAirlockd, addLocalSandbox, api } from '../interop/airlockd.mjs';

const REGION_MAX = 1 << 30; // larger mappings are sanitizer shadow (reserved, never a key)
const CHUNK = 4 << 20;

function children(pid) {
  const out = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const st = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push({ pid: Number(e), cmd: fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0') });
    } catch { /* gone */ }
  }
  return out;
}

function fdTargets(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try { return [fd, fs.readlinkSync(`/proc/${pid}/fd/${fd}`)]; } catch { return [fd, '']; }
  });
}

// Which needles occur anywhere in the readable memory of pid.
function scanMemory(pid, needles) {
  const found = needles.map(() => false);
  const maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8').trim().split('\n');
  const mem = fs.openSync(`/proc/${pid}/mem`, 'r');
  const keep = Math.max(...needles.map((n) => n.length)) - 1;
  let scanned = 0;
  try {
    for (const line of maps) {
      const [range, perms] = line.split(/\s+/);
      if (perms[0] !== 'r') continue;
      const [lo, hi] = range.split('-').map((h) => parseInt(h, 16));
      if (hi - lo > REGION_MAX) continue;
      let tail = Buffer.alloc(0);
      for (let at = lo; at < hi; at += CHUNK) {
        const n = Math.min(CHUNK, hi - at);
        const buf = Buffer.alloc(n);
        let got = 0;
        try { got = fs.readSync(mem, buf, 0, n, at); } catch { tail = Buffer.alloc(0); continue; }
        const hay = Buffer.concat([tail, buf.subarray(0, got)]);
        needles.forEach((nd, i) => { if (!found[i] && hay.indexOf(nd) >= 0) found[i] = true; });
        tail = hay.subarray(Math.max(0, hay.length - keep));
        scanned += got;
      }
    }
  } finally {
    fs.closeSync(mem);
  }
  return { found, scanned };
}

const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };

await run('airlockd_signer', async () => {
  const base = tmpdir('signer');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const d = await startAirlockd({ dir, args: ['--no-bwrap'] });
  const serving = d.p.pid;

  // ---- two processes
  const kids = children(serving).filter((c) => c.cmd[1] === 'signer');
  check(kids.length === 1 && kids[0].pid !== serving, `one signer process, a child of the serving one (pid ${kids[0] && kids[0].pid})`);
  const signer = kids[0].pid;
  check(kids[0].cmd.includes('--fd') && kids[0].cmd.includes('3'), 'it got its socket as fd 3');

  // ---- the key, as the files hold it
  const keyFile = path.join(dir, 'signing-key.pem');
  const pem = fs.readFileSync(keyFile, 'utf8');
  const priv = crypto.createPrivateKey(pem);
  const seed = Buffer.from(priv.export({ format: 'jwk' }).d, 'base64url');
  const der = priv.export({ format: 'der', type: 'pkcs8' });
  const pemBody = Buffer.from(pem.split('\n').filter((l) => l && !l.startsWith('-----')).join(''));
  check(seed.length === 32 && der.length === 48, 'the 32-byte seed and the PKCS#8 DER read from signing-key.pem');

  // ---- everything still works: tokens of every shape are minted
  const sb = await addLocalSandbox(d.port, admin);
  check(sb.link_up, 'a local runner links up with a runner:connect token the signer minted');
  let r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'rev1', kind: 'reverse' });
  check(r.status === 201, 'a reverse sandbox');
  r = await api(d.port, 'POST', '/v1/sandboxes/rev1/enroll', admin, { ttl: 600 });
  check(r.status === 200 && r.json.token, 'an enrollment token (shape enroll)');
  const claims = JSON.parse(Buffer.from(r.json.token.split('.')[1], 'base64url'));
  const enrollKid = JSON.parse(Buffer.from(r.json.token.split('.')[0], 'base64url')).kid;
  check(claims.aud === 'rev1' && claims.sub === 'ada' && claims.scope === 'runner:connect' && claims.exp - claims.iat === 600,
    'its claims are the ones asked for');
  r = await api(d.port, 'POST', '/v1/session', undefined, { key: admin });
  check(r.status === 200 && /set-cookie: airlock_session=als_/i.test(r.head), 'a web session: a random secret, nothing signed');
  r = await api(d.port, 'POST', '/v1/sandboxes/rev1/enroll', admin, { ttl: 7200 });
  check(r.status === 400 && /signer refused/.test(r.body), `a lifetime over the enroll row's bound is refused by the signer (${r.status})`);

  // ---- the audit, written by the serving process with the signer's answer
  r = await api(d.port, 'GET', '/v1/audit', admin);
  const mints = r.json.filter((e) => e.action === 'token_mint');
  const enroll = mints.find((e) => e.target === 'rev1');
  const detail = enroll && JSON.parse(enroll.detail);
  check(detail && detail.jti === claims.jti && detail.kid === enrollKid && detail.kid.length === 43,
    'the enrollment is audited with the jti and kid of the token handed out');
  check(mints.some((e) => e.target === 'box' && JSON.parse(e.detail).jti), 'the runner tokens are audited with their jti');

  // ---- no fd on the key; the signer holds only stdio and its socket
  const sfd = fdTargets(serving);
  check(!sfd.some(([, t]) => t.endsWith('signing-key.pem')), `the serving process has no fd on signing-key.pem (${sfd.length} fds)`);
  const gfd = fdTargets(signer);
  check(gfd.map(([fd]) => fd).sort().join(',') === '0,1,2,3' && /^socket:/.test(gfd.find(([fd]) => fd === '3')[1]),
    `the signer has fds 0-2 and its socket only (${gfd.map(([fd, t]) => `${fd}=${t}`).join(' ')})`);
  const log = fs.readFileSync(d.log, 'utf8');
  check(/airlockd-signer\[signer\] info minted enroll aud=rev1 sub=ada ttl=600 jti=/.test(log), 'the signer logs each mint');
  check(/refused shape=2 aud=rev1 sub=ada ttl=7200/.test(log), 'and each refusal');

  // ---- memory: the serving process holds no key; the signer does
  if (process.getuid() === 0) {
    const needles = [seed, der, pemBody];
    const s = scanMemory(serving, needles);
    check(s.scanned > 1 << 20, `scanned ${(s.scanned / 1048576).toFixed(1)} MiB of the serving process's memory`);
    check(!s.found[0], 'the raw Ed25519 seed is nowhere in the serving process\'s memory');
    check(!s.found[1] && !s.found[2], 'nor the PKCS#8 DER, nor the PEM text');
    const g = scanMemory(signer, needles);
    check(g.found[0], `control: the same scan finds the seed in the signer's memory (${(g.scanned / 1048576).toFixed(1)} MiB)`);
  } else {
    console.log('# not root: /proc/PID/mem of the signer (not dumpable) is out of reach; memory checks skipped');
  }

  // ---- the signer dies: it is replaced, minting goes on
  await sleep(1100); // restarts happen at most once per SIGNER_RESTART_MIN_MS
  process.kill(signer, 'SIGKILL');
  await sleep(100);
  r = await api(d.port, 'POST', '/v1/sandboxes/rev1/enroll', admin, { ttl: 60 });
  check(r.status === 200 && r.json.token, 'after SIGKILL of the signer the next mint succeeds');
  const again = children(serving).filter((c) => c.cmd[1] === 'signer');
  check(again.length === 1 && again[0].pid !== signer && !alive(signer), `a new signer (pid ${again[0] && again[0].pid}) and the old one reaped`);
  const log2 = fs.readFileSync(d.log, 'utf8');
  check(/signer pid \d+ failed: [^\n]+; killing it/.test(log2) && /signer restarted \(pid \d+\)/.test(log2),
    'the log says the signer failed and was restarted');

  const ex = await d.stop();
  check(ex.code === 0, `SIGTERM stops airlockd cleanly (${JSON.stringify(ex)})`);
  await sleep(100);
  check(!alive(again[0].pid), 'and its signer with it');
});
