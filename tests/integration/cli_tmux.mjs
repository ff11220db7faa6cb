// `airlock attach` driven through tmux as a person would: attach, type a
// command, see its output; resize the window and see `stty size` follow;
// detach with Enter ~ . and re-attach to find the same shell with its
// history on screen; leave by exit and by kill -TERM of the CLI. After
// every way out the pane's terminal modes (`stty -a`) are what they were.
// Then `airlock replay` of airlockd's recording ends on the same screen as
// the live terminal had.
import fs from 'node:fs';
import { run, check, sleep, pollUntil } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { cliServer, startTmux } from '../interop/cli.mjs';

await run('cli_tmux', async () => {
  const { base, d, op, env } = await cliServer('clitmux');
  const t = startTmux(base, { cols: 100, rows: 30, env: env(op) });
  await t.waitFor(/local\$\s*$/m, 'the local prompt');
  let n = 0;
  const sttyNow = () => t.stty(n++);
  const before = await sttyNow();
  check(/icanon/.test(before) && /echo/.test(before), 'the pane starts in cooked mode');

  // ---- attach, type, see
  let r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['sh'], env: { PS1: 'remote$ ' } });
  const sh = r.json.id;
  t.type('clear; airlock attach ' + sh);
  await t.waitFor(/remote\$/, 'the remote prompt');
  t.type('echo hello-$((6*7)); SECRET=kept-$((2+3))');
  await t.waitFor(/^hello-42\s*$/m, 'the command output');
  check(true, 'attach, type a command, see its output');

  // ---- resize follows
  t.type('stty size');
  await t.waitFor(/^30 100\s*$/m, 'stty size 30 100');
  check(true, 'stty size in the remote shell is the pane size at attach (30 100)');
  t.resize(120, 40);
  await sleep(500); // the new size reaches the remote PTY through the CLI's SIGWINCH: nothing to watch for
  t.type('stty size');
  await t.waitFor(/^40 120\s*$/m, 'stty size 40 120');
  check(true, 'after tmux resizes the window, stty size follows (40 120)');
  t.resize(100, 30);
  await sleep(300); // as above: let the SIGWINCH land before the detach

  // ---- detach with Enter ~ . ; the modes are back
  t.keys('Enter');
  t.literal('~.');
  await t.waitFor(/detached from/, 'the detach message');
  await t.waitFor(/local\$\s*$/m, 'the local prompt after detach');
  check(await sttyNow() === before, 'after a detach, stty -a is what it was');
  r = await api(d.port, 'GET', `/v1/terminals/${sh}`, op);
  check(r.json.state === 'running', 'the remote shell keeps running after the detach');

  // ---- re-attach: the same shell, its history on screen
  t.type('clear; airlock attach ' + sh);
  await t.waitFor(/hello-42/, 'the history after re-attach');
  check(true, 're-attach shows the earlier output (the screen is redrawn from a snapshot)');
  t.type('echo "again:$SECRET"');
  await t.waitFor(/^again:kept-5\s*$/m, 'the shell variable set before the detach');
  check(true, 're-attach finds the same shell (a variable set before the detach is there)');

  // ---- the remote shell exits: status printed, exit code propagated
  t.type('exit 3');
  await t.waitFor(/exited with status 3/, 'the exit status');
  t.type('echo "rc=$?"');
  await t.waitFor(/^rc=3\s*$/m, 'rc=3');
  check(true, 'on exit the CLI prints the status and exits with it (3)');
  check(await sttyNow() === before, 'after the remote exit, stty -a is what it was');

  // ---- kill -TERM of the CLI
  r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['sh'], env: { PS1: 'two$ ' } });
  const sh2 = r.json.id;
  const pidf = `${base}/cli.pid`;
  t.type(`clear; sh -c 'echo $$ > ${pidf}; exec airlock attach ${sh2}'`);
  await t.waitFor(/two\$/, 'the second remote prompt');
  process.kill(Number(fs.readFileSync(pidf, 'utf8')), 'SIGTERM');
  await t.waitFor(/signal 15/, 'the signal message');
  t.type('echo "rc=$?"');
  await t.waitFor(/^rc=143\s*$/m, 'rc=143');
  check(true, 'kill -TERM of the CLI: it leaves with 128+15');
  check(await sttyNow() === before, 'after kill -TERM of the CLI, stty -a is what it was');
  r = await api(d.port, 'GET', `/v1/terminals/${sh2}`, op);
  check(r.json.state === 'running', 'the terminal outlives the signalled CLI');

  // ---- read-only attach: observes, keystrokes do not reach the terminal
  t.type(`clear; airlock attach --read-only ${sh2}`);
  await t.waitFor(/observing/, 'the observing notice');
  t.type('echo VIEWER-TYPED');
  await sleep(700); // the behaviour under test: in this time the keystrokes must not arrive
  t.keys('Enter');
  t.literal('~.');
  await t.waitFor(/detached from/, 'detached from the read-only attach');
  const rec2 = await api(d.port, 'GET', `/v1/terminals/${sh2}/recording`, op);
  check(!/VIEWER-TYPED/.test(rec2.body), 'a read-only attach says it observes, and its keystrokes never reach the terminal');
  await api(d.port, 'DELETE', `/v1/terminals/${sh2}`, op);

  // ---- replay: the final screen equals the live one
  const prog = "sleep 1; printf '\\033[2J\\033[H\\033[1;32mgreen title\\033[0m\\n'; i=1; while [ $i -le 40 ]; do " +
    "printf 'row %02d \\033[7minverse\\033[0m %s\\n' $i \"$(printf '%*s' $i '' | tr ' ' '#')\"; i=$((i+1)); done; " +
    "printf '\\033[5;20H\\033[4;33m HERE \\033[0m\\033[10;1H'; sleep 4";
  r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['sh', '-c', prog], cols: 80, rows: 24 });
  const pr = r.json.id;
  const live = t.newWindow('live', `airlock attach ${pr}; sleep 60`);
  t.resize(80, 24);
  await t.waitFor(/HERE/, 'the live program output', 15000, live);
  // the program's last move puts the cursor on row 10: then the screen is final
  const liveCursor = await pollUntil(() => t.cursor(live), (c) => c === '0,9', 5000);
  const liveScreen = t.screen(live, true);
  await t.waitFor(/exited with status 0/, 'the program to end', 15000, live);
  const play = t.newWindow('play', `airlock replay --speed 4 ${pr}; echo; sleep 60`);
  await t.waitFor(/HERE/, 'the replayed output', 15000, play);
  const strip = (s) => s.split('\n').map((l) => l.trimEnd()).join('\n').trimEnd();
  const top = (s) => strip(s).split('\n').slice(0, 23).join('\n');
  // the replay goes on to its end: poll until it shows the live screen (or time is up)
  const playScreen = await pollUntil(() => t.screen(play, true), (v) => top(v) === top(liveScreen), 5000);
  check(top(playScreen) === top(liveScreen),
    `airlock replay of the recording ends on the live screen, attributes included\n--- live\n${liveScreen}\n--- replay\n${playScreen}`);
  check(/row 40/.test(liveScreen) && /green title/.test(strip(playScreen)) === /green title/.test(strip(liveScreen)), 'the compared screen has content');
  check(liveCursor === '0,9', `the live cursor is where the program left it (${liveCursor})`);

  // interrupting a replay is clean
  const slow = t.newWindow('slow', `airlock replay --speed 0.05 ${pr}; echo "replay-rc=$?"; sleep 60`);
  await sleep(1500);
  t.tmux('send-keys', '-t', slow, 'C-c');
  await t.waitFor(/replay-rc=130/, 'the interrupted replay', 10000, slow);
  check(true, 'Ctrl-C interrupts a replay cleanly (exit 130)');
}, 170000);
