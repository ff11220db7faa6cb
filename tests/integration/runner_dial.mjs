// Dialing out, the same protocol: airlock-runner --connect reaches a
// controller (here a Node ws server), re-reads its token file on every
// attempt, reconnects with backoff when the link drops, and resumes its
// terminals; --max-age makes it reconnect proactively.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { WebSocketServer } from 'ws';
import { run, check, tmpdir, keygen, mint, BIN } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';

await run('runner_dial', async () => {
  const dir = tmpdir('dial');
  keygen(dir);
  const tokfile = path.join(dir, 'token');
  fs.writeFileSync(tokfile, mint(dir, 'sbx-d', 'runner:connect', 600) + '\n');

  // the controller side: a ws server; each connection gets a Controller
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.on('listening', r));
  const port = wss.address().port;
  const seen = [];
  const ctl = new Controller();
  wss.on('connection', (ws, req) => {
    seen.push({ url: req.url, auth: req.headers.authorization, proto: req.headers['sec-websocket-protocol'] });
    ctl.adopt(ws);
  });

  const log = path.join(dir, 'runner.log');
  const out = fs.openSync(log, 'a');
  const p = spawn(path.join(BIN, 'airlock-runner'), ['--connect', `ws://127.0.0.1:${port}/v1/runners/connect`,
    '--identifier', 'sbx-d', '--jwks', path.join(dir, 'jwks.json'), '--token-file', tokfile, '--max-age', '3'],
  { stdio: ['ignore', out, out] });
  try {
    await ctl.wait(() => ctl.ready, 'runner dialed in', 10000);
    check(/identifier=sbx-d/.test(seen[0].url), `the runner names itself in the URL (${seen[0].url})`);
    check(seen[0].auth === `Bearer ${fs.readFileSync(tokfile, 'utf8').trim()}`, 'it sends the token file as Bearer');
    check(seen[0].proto === 'airlock.v1', 'subprotocol airlock.v1');
    const t = ctl.open(['sh', '-c', 'for i in $(seq 1 60); do echo line $i; sleep 0.1; done; exit 4']);
    // drop the link from the server side; the runner must come back by itself
    await t.waitOutput(/line 5\r\n/);
    fs.writeFileSync(tokfile, mint(dir, 'sbx-d', 'runner:connect', 600, 'second') + '\n');
    ctl.ws.terminate();
    await ctl.wait(() => seen.length >= 2 && ctl.ready, 'redial', 15000);
    check(seen[1].auth.endsWith(fs.readFileSync(tokfile, 'utf8').trim()), 'the token file is re-read on each attempt');
    await t.waitExit(30000);
    check(t.exit.code === 4, 'the terminal finished across the reconnects with its exit code');
    const lines = t.output().toString().split('\r\n').filter((l) => l);
    check(lines.length === 60 && lines.every((l, i) => l === `line ${i + 1}`), 'every line once, in order');
    check(seen.length >= 3, `--max-age 3 reconnected proactively (${seen.length} connections in all)`);
    check(/maximum age/.test(fs.readFileSync(log, 'utf8')), 'the runner logged the max-age reconnect');
  } finally {
    p.kill('SIGTERM');
    await new Promise((r) => p.on('exit', r));
    wss.close();
  }
}, 90000);
