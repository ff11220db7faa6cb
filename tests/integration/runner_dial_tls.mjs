// A runner dialing wss:// (libwebsockets' own WebSocket client: lws 4.1.6
// starts no RAW client with TLS, so wsc.c carries ws:// dials only): with
// AIRLOCK_INSECURE_TLS it reaches a controller behind a self-signed
// certificate and a terminal's output arrives whole; without it, the
// certificate is refused and nothing links.
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { WebSocketServer } from 'ws';
import { run, check, tmpdir, keygen, mint, BIN, addLog, sleep } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';

await run('runner_dial_tls', async () => {
  const dir = tmpdir('dialtls');
  keygen(dir);
  const tokfile = path.join(dir, 'token');
  fs.writeFileSync(tokfile, mint(dir, 'sbx-t', 'runner:connect', 600) + '\n');
  const key = path.join(dir, 'key.pem'), cert = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
    '-days', '1', '-subj', '/CN=127.0.0.1'], { stdio: 'ignore' });
  const server = https.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) });
  const wss = new WebSocketServer({ server });
  const ctl = new Controller();
  let upgrades = 0;
  wss.on('connection', (ws) => { upgrades++; ctl.adopt(ws); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `wss://127.0.0.1:${server.address().port}/v1/runners/connect`;
  const base = { ...process.env };
  delete base.AIRLOCK_INSECURE_TLS;
  const start = (env, tag) => {
    const log = path.join(dir, `runner-${tag}.log`);
    addLog(log);
    const out = fs.openSync(log, 'a');
    const p = spawn(path.join(BIN, 'airlock-runner'), ['--connect', url, '--identifier', 'sbx-t',
      '--jwks', path.join(dir, 'jwks.json'), '--token-file', tokfile, '--verbose'],
    { stdio: ['ignore', out, out], env: { ...base, ...env } });
    fs.closeSync(out);
    return { p, log, exited: new Promise((r) => p.on('exit', r)) };
  };
  const strict = start({}, 'strict');
  let insecure;
  try {
    await sleep(1500);
    check(upgrades === 0 && /connection to wss:.* failed/.test(fs.readFileSync(strict.log, 'utf8')),
      'without AIRLOCK_INSECURE_TLS the self-signed certificate is refused');
    strict.p.kill('SIGTERM');
    await strict.exited;
    insecure = start({ AIRLOCK_INSECURE_TLS: '1' }, 'insecure');
    await ctl.wait(() => ctl.ready, 'the runner to dial in over TLS', 10000);
    const term = ctl.open(['sh', '-c', 'head -c 1000000 /dev/zero | tr "\\0" x; echo; echo done-tls; exit 5']);
    await term.waitExit(20000);
    const got = term.output().toString();
    check(/done-tls/.test(got) && (got.match(/x/g) || []).length === 1000000 && term.exit.code === 5,
      'with AIRLOCK_INSECURE_TLS it links, and a terminal\'s 1 MB arrives whole over wss://');
    insecure.p.kill('SIGTERM');
    const st = await insecure.exited;
    check(st === 0 && !/Sanitizer/.test(fs.readFileSync(insecure.log, 'utf8')), `the runner stopped cleanly (exit ${st})`);
  } finally {
    for (const r of [strict, insecure]) if (r && r.p.exitCode === null && r.p.signalCode === null) { r.p.kill('SIGTERM'); await r.exited; }
    wss.close();
    server.close();
  }
}, 60000);
