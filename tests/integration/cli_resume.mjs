// `airlock attach` when the network fails under it, driven through tmux:
// a TCP proxy cuts the connection twice while a checksummed stream prints;
// the status line appears, the session resumes, and the stream arrives
// exactly once (stdout goes to a file to be checked), and a line typed
// after the reconnect reaches the program once. Then the server is killed:
// the CLI gives up after --retry-for, exits 69, and the pane's modes are
// what they were before.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { run, check, sleep, onCleanup } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { startProxy } from '../interop/proxy.mjs';
import { cliServer, startTmux } from '../interop/cli.mjs';

const LINES = 60000;

await run('cli_resume', async () => {
  const { base, d, op, env } = await cliServer('cliresume');
  const proxy = await startProxy(d.port);
  onCleanup(() => proxy.close());
  const t = startTmux(base, { cols: 100, rows: 30, env: env(op, { AIRLOCK_URL: `http://127.0.0.1:${proxy.port}` }) });
  await t.waitFor(/local\$\s*$/m, 'the local prompt');
  const sttyBefore = await t.stty('before');

  // the program waits for Enter, prints LINES numbered lines in bursts,
  // then reads one more line and echoes it
  const prog = 'stty -echo; read go; awk -v n=' + LINES + ' \'BEGIN { for (i = 1; i <= n; i++) { printf "line %08d\\n", i; ' +
    'if (i % 1000 == 0) { fflush(); system("sleep 0.1") } } }\'; read typed; echo "got:$typed"; exit 5';
  let r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['sh', '-c', prog] });
  const id = r.json.id;
  const out = path.join(base, 'out.bin');
  t.type(`clear; airlock attach ${id} > ${out}; echo "cli-rc=$?"`);
  await sleep(1500);
  t.keys('Enter'); // go
  const cuts = [];
  for (const at of [150000, 450000]) {
    const until = Date.now() + 30000;
    while (Date.now() < until && (!fs.existsSync(out) || fs.statSync(out).size < at)) await sleep(20);
    cuts.push(proxy.cut());
    const seen = cuts.length;
    await t.waitFor(new RegExp(`(connection lost[^]*){${seen}}`), `status line number ${seen}`, 10000);
    await t.waitFor(new RegExp(`(reconnected[^]*){${seen}}`), `reconnect notice number ${seen}`, 20000);
  }
  check(cuts.every((n) => n >= 1), `the proxy cut the connection twice mid-stream (${cuts})`);
  check(true, 'the CLI says the connection was lost, reconnects and says so');
  const until = Date.now() + 60000;
  while (Date.now() < until && !fs.readFileSync(out, 'latin1').includes(`line ${String(LINES).padStart(8, '0')}`)) await sleep(100);
  t.type('typed-once');
  await t.waitFor(/cli-rc=5/, 'the program to exit with 5', 20000);
  const got = fs.readFileSync(out, 'latin1').replace(/\r/g, '');
  const expect = Array.from({ length: LINES }, (_, i) => `line ${String(i + 1).padStart(8, '0')}\n`).join('');
  const start = got.indexOf('line 00000001');
  const stream = got.slice(start, start + expect.length);
  const sum = (s) => crypto.createHash('sha256').update(s).digest('hex');
  check(start >= 0 && sum(stream) === sum(expect),
    `the ${expect.length}-byte stream printed across two cuts arrives exactly once, in order (sha256 ${sum(stream).slice(0, 16)})`);
  check((got.match(/got:typed-once/g) || []).length === 1, 'a line typed after the reconnects reaches the program exactly once');
  check(await (async () => { const s = t.screen(); return /exited with status 5/.test(s); })(), 'the exit status is shown');

  // ---- the server dies under an attached CLI
  r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['sh'], env: { PS1: 'rem$ ' } });
  t.type(`clear; airlock attach --retry-for 3 ${r.json.id}; echo "cli-rc=$?"`);
  await t.waitFor(/rem\$/, 'the remote prompt');
  d.p.kill('SIGKILL');
  await t.waitFor(/connection lost/, 'the status line after the server died', 10000);
  await t.waitFor(/giving up/, 'giving up', 20000);
  await t.waitFor(/cli-rc=69/, 'exit code 69', 10000);
  check(true, 'when the server is gone for good the CLI gives up and exits 69 (server down)');
  check(await t.stty('after') === sttyBefore, 'after the server was killed, stty -a is what it was');
}, 170000);
