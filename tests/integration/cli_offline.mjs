// Keystrokes typed while the connection is down are kept and delivered
// exactly once after the resume, driven through tmux. A gate in front of
// airlockd cuts the connection and keeps it cut; the remote program (raw
// mode, no echo) writes every byte it reads to a file in the sandbox's
// workspace, which the test reads to compare byte for byte.
//  1. typed while down: arrives once, after what was typed before;
//  2. more than CLI_HELD_INPUT_MAX typed while down: the status line says
//     the buffer is full, and exactly the first CLI_HELD_INPUT_MAX bytes
//     arrive, once;
//  3. Enter ~ . still detaches while the connection is down, and what was
//     held then is never sent.
import fs from 'node:fs';
import path from 'node:path';
import { run, check, sleep } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { cliServer, startTmux, startGate, until } from '../interop/cli.mjs';

const HELD_MAX = 16 << 10; // CLI_HELD_INPUT_MAX, src/cli/cli_attach.h

await run('cli_offline', async () => {
  const { base, dir, d, op, env } = await cliServer('clioffline');
  const gate = await startGate(d.port);
  const t = startTmux(base, { env: env(op, { AIRLOCK_URL: `http://127.0.0.1:${gate.port}` }) });
  await t.waitFor(/local\$\s*$/m, 'the local prompt');
  const before = await t.stty('before');

  const prog = 'stty raw -echo; echo READY; exec cat > typed.bin';
  const r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['sh', '-c', prog] });
  const file = path.join(dir, 'sandboxes', 'box', 'work', 'typed.bin');
  const typed = () => (fs.existsSync(file) ? fs.readFileSync(file, 'latin1') : '');
  t.type(`clear; airlock attach --retry-for 60 ${r.json.id}; echo "cli-rc=$?"`);
  await t.waitFor(/READY/, 'the program');
  t.literal('before-');
  await until(() => typed() === 'before-', 'the bytes typed while connected');
  let expect = 'before-';

  // ---- 1. typed while down, delivered once after the resume
  const lost = (n) => new RegExp(`(connection lost[^]*){${n}}`);
  const back = (n) => new RegExp(`(reconnected to[^]*){${n}}`);
  check(gate.down() >= 1, 'the gate cuts the connection');
  await t.waitFor(lost(1), 'the status line', 10000);
  const a = 'typed-while-down:' + 'abcdefghij'.repeat(5);
  t.literal(a);
  await sleep(1000); // nothing may arrive: no condition to wait for, a fixed time
  check(typed() === expect, 'nothing reaches the program while the connection is down');
  gate.up();
  await t.waitFor(back(1), 'the reconnect', 20000);
  expect += a;
  await until(() => typed().length >= expect.length, 'the held keystrokes', 10000);
  await sleep(1000); // a repeat would arrive now
  check(typed() === expect, `keystrokes typed while disconnected arrive exactly once after the resume (${typed().length} bytes)`);

  // ---- 2. more than the buffer holds
  gate.down();
  await t.waitFor(lost(2), 'the second status line', 10000);
  const pattern = (n) => Array.from({ length: n }, (_, i) => String.fromCharCode(97 + (i % 26))).join('');
  const big = pattern(HELD_MAX + 4000);
  for (let i = 0; i < big.length; i += 4000) t.literal(big.slice(i, i + 4000));
  await t.waitFor(/input buffer full/, 'the buffer-full status line', 15000);
  check(true, `typing more than ${HELD_MAX} bytes while down: the status line says the input buffer is full`);
  gate.up();
  await t.waitFor(back(2), 'the second reconnect', 20000);
  expect += big.slice(0, HELD_MAX);
  await until(() => typed().length >= expect.length, 'the held keystrokes', 10000);
  await sleep(1000);
  check(typed() === expect, `exactly the first ${HELD_MAX} bytes arrive, once (${typed().length - expect.length + HELD_MAX} of ${big.length})`);

  // ---- 3. detach while down; held input is never sent
  gate.down();
  await t.waitFor(lost(3), 'the third status line', 10000);
  t.literal('never-sent');
  t.keys('Enter');
  t.literal('~.');
  await t.waitFor(/detached from/, 'the detach while down', 10000);
  await t.waitFor(/cli-rc=0/, 'the CLI to exit 0', 10000);
  check(true, 'Enter ~ . detaches while the connection is down');
  gate.up();
  await sleep(1000);
  check(typed() === expect, 'what was held at the detach never reaches the program');
  check(await t.stty('after') === before, 'the pane\'s modes are what they were');
  const st = await api(d.port, 'GET', `/v1/terminals/${r.json.id}`, op);
  check(st.json.state === 'running', 'the program keeps running');
}, 170000);
