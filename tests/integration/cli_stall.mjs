// A local side that takes no output must not stop the session: writes to
// stdout are non-blocking and credited only once written, so the server's
// flow control holds the output back while input, stderr and pings go on.
//
// Pipe mode: `airlock run ... | (sleep 8; cat > out)` — nobody reads
// stdout for 8 s while the program prints 2 MB; meanwhile its stderr
// arrives and a line written to the CLI's stdin reaches the program and
// comes back on stderr. Then every stdout byte arrives, exact, and the
// exit code too.
// PTY mode, through tmux: `airlock attach ID >fifo`, a screen nobody
// reads, while the program floods it: keystrokes typed in the pane still
// reach the program, and Enter ~ . leaves at once.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, execFileSync } from 'node:child_process';
import { run, check, sleep, onCleanup } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { cliServer, startTmux, until, AIRLOCK, sq } from '../interop/cli.mjs';

const STALL_S = 8;

await run('cli_stall', async () => {
  const { base, dir, d, op, env } = await cliServer('clistall');

  // ---- pipe mode
  const outFile = path.join(base, 'out.txt'), errFile = path.join(base, 'err.txt');
  const prog = 'seq 1 300000; echo flood-done >&2; read line; echo "got:$line" >&2; exit 3';
  const cmd = `${sq(AIRLOCK)} run box -- sh -c ${sq(prog)} 2>${sq(errFile)} | (sleep ${STALL_S}; cat > ${sq(outFile)}); ` +
    'exit ${PIPESTATUS[0]}';
  const t0 = Date.now();
  const p = spawn('bash', ['-c', cmd], { env: { ...process.env, ...env(op) }, stdio: ['pipe', 'ignore', 'inherit'], detached: true });
  const exited = new Promise((res) => p.on('exit', (code) => res(code)));
  // on a failure, the pipeline this test started (its own process group)
  onCleanup(() => { if (p.exitCode === null && p.signalCode === null) process.kill(-p.pid, 'SIGKILL'); });
  const errText = () => (fs.existsSync(errFile) ? fs.readFileSync(errFile, 'utf8') : '');
  await until(() => /flood-done/.test(errText()), 'the program\'s stderr while stdout is stalled', (STALL_S - 2) * 1000);
  check(!fs.existsSync(outFile), `stderr arrives while nobody reads stdout (${Date.now() - t0} ms in)`);
  p.stdin.write('typed-while-stalled\n');
  await until(() => /got:typed-while-stalled/.test(errText()), 'the typed line to come back', (STALL_S - 1) * 1000 - (Date.now() - t0));
  check(!fs.existsSync(outFile), `a line on stdin reaches the program and its answer comes back, stdout still stalled (${Date.now() - t0} ms in)`);
  p.stdin.end();
  const code = await Promise.race([exited, sleep(60000).then(() => 'timeout')]);
  const want = Array.from({ length: 300000 }, (_, i) => `${i + 1}\n`).join('');
  const sum = (s) => crypto.createHash('sha256').update(s).digest('hex');
  const got = fs.readFileSync(outFile, 'latin1');
  check(code === 3, `the exit code comes back (${code})`);
  check(got.length === want.length && sum(got) === sum(want), `after the stall, every stdout byte arrives exactly once (${got.length} bytes)`);
  check(errText() === 'flood-done\ngot:typed-while-stalled\n', 'stderr is exact');

  // ---- PTY mode: the screen stalls, the keyboard still works
  const t = startTmux(base, { env: env(op) });
  await t.waitFor(/local\$\s*$/m, 'the local prompt');
  const before = await t.stty('before');
  // 1.3 MB: more than the pipe and the CLI's window (512 KiB) hold
  const flood = 'stty -echo; i=0; while [ $i -lt 12 ]; do seq 1 20000; i=$((i+1)); done; ' +
    'read line; echo "$line" > typed.txt; echo done-typed; sleep 30';
  const r = await api(d.port, 'POST', '/v1/terminals', op, { sandbox: 'box', argv: ['sh', '-c', flood] });
  const work = path.join(dir, 'sandboxes', 'box', 'work');
  // the screen is a FIFO that the pane's shell holds open and never reads
  const fifo = path.join(base, 'screen.fifo');
  execFileSync('mkfifo', [fifo]);
  t.type(`exec 3<>${fifo}; airlock attach ${r.json.id} >${fifo}; echo "cli-rc=$?"; exec 3<&-`);
  const t1 = Date.now();
  await sleep(3000);
  t.type('typed-in-the-pane');
  // the shell creates the file before it writes the line: wait for a whole line
  const typedFile = path.join(work, 'typed.txt');
  const typedText = () => (fs.existsSync(typedFile) ? fs.readFileSync(typedFile, 'utf8') : '');
  await until(() => typedText().endsWith('\n'), 'the typed line in the sandbox', 15000);
  const typed = typedText();
  check(typed === 'typed-in-the-pane\n',
    `PTY mode: keystrokes reach the program while the screen's pipe is stalled (${Date.now() - t1} ms in; ${JSON.stringify(typed)})`);
  t.keys('Enter');
  t.literal('~.');
  await t.waitFor(/cli-rc=0/, 'the CLI to leave after the detach', 5000);
  check(true, 'the CLI detaches at once (Enter ~ .), its screen still stalled, and exits 0');
  check(await t.stty('after') === before, 'the pane\'s modes are what they were');
}, 150000);
