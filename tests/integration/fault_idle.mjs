// Connections that a path ends by their idleness or their age (issue 15),
// both hops behind fault proxies, three parts at once:
//
// - pings: airlockd with --ping-interval 2 and a CLI with --ping-interval 2,
//   behind proxies that cut a connection silent for 5 s (an ingress's idle
//   timeout): an idle attach (a JS client and the CLI) and the idle runner
//   link live through IDLE_MS of silence, never cut; then the terminal's
//   output arrives.
// - default pings (15 s), longer than the cut: the same idle attach is cut
//   every 5 s on both hops and resumed each time; the output that follows
//   arrives exactly once in the JS client and in the CLI (sha256). A CLI
//   with --ping-interval 2 on the same airlockd is not cut: its own pings
//   suffice.
// - age: both hops cut at a connection age of 3 s during a paced 20 MB
//   stream: it completes exactly once.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { run, check, onCleanup, BIN } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { faultServer, staticSandbox, terminal, faultyClient, pacedStream, printable, sha, cutsBetween, go } from '../interop/faults.mjs';
import { startFaultProxy } from '../tools/faultproxy.mjs';

const IDLE_CUT = [{ fault: 'idle-cut', ms: 5000 }];
const IDLE_MS = 16000;          // the terminal's silence: room for two idle cuts after the attach
const TAIL = 1 << 20;           // what it prints after it
const AGE_CUT = [{ fault: 'age-cut', ms: 3000 }];
const AGE_SIZE = 20e6;

// `airlock attach ID` through a proxy of its own; stdout to a file. Returns
// { proxy, p, out, err(), exited }.
async function cliAttach(s, id, base, name, extra = []) {
  const proxy = await startFaultProxy({ target: s.port, faults: IDLE_CUT, label: `faultproxy cli ${name}` });
  onCleanup(() => proxy.close());
  const out = path.join(base, `${name}.out`);
  const fd = fs.openSync(out, 'w');
  let err = '';
  // stdin a pipe kept open: the terminal's input never ends
  const p = spawn(path.join(BIN, 'airlock'), ['attach', id, ...extra], { stdio: ['pipe', fd, 'pipe'],
    env: { ...process.env, HOME: base, XDG_CONFIG_HOME: '', AIRLOCK_URL: `http://127.0.0.1:${proxy.port}`, AIRLOCK_API_KEY: s.op } });
  fs.closeSync(fd);
  p.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((res) => p.on('exit', (code, sig) => res({ code, sig })));
  onCleanup(async () => { if (p.exitCode === null && p.signalCode === null) { p.kill('SIGKILL'); await exited; } });
  return { proxy, p, out, err: () => err, exited };
}

// A terminal silent for IDLE_MS, then printing TAIL checksummed bytes.
function quietThenTail(base, name, seed) {
  const data = printable(TAIL, seed);
  const file = path.join(base, name);
  fs.writeFileSync(file, data);
  return { data, argv: ['sh', '-c', `stty raw -echo; sleep ${IDLE_MS / 1000}; cat '${file}'; sleep 0.5`] };
}

// one airlockd, one static sandbox behind a proxy with runnerFaults
async function setup(tag, args, runnerFaults) {
  const s = await faultServer(tag, args);
  const sb = await staticSandbox(s, `st-${tag}`, { faults: runnerFaults });
  return { s, sb };
}

async function pings() {
  const { s, sb } = await setup('idlepings', ['--ping-interval', '2', '--idle-timeout', '7'], IDLE_CUT);
  const t = quietThenTail(s.base, 'tail', 1);
  const id = await terminal(s, sb.id, t.argv);
  const js = await faultyClient(s, id, { faults: IDLE_CUT });
  const cli = await cliAttach(s, id, s.base, 'pinged', ['--ping-interval', '2']);
  const since = (await api(s.port, 'GET', '/v1/sandboxes', s.admin)).json[0].link_since;
  await js.ch.waitExit(IDLE_MS + 20000);
  const st = await cli.exited;
  const got = fs.readFileSync(cli.out);
  check(sb.proxy.fired('idle-cut') === 0 && js.proxy.fired('idle-cut') === 0 && cli.proxy.fired('idle-cut') === 0,
    `pings every 2 s: ${IDLE_MS / 1000} s of silence behind 5 s idle cuts, no hop was cut (runner link, JS client, CLI)`);
  check((await api(s.port, 'GET', '/v1/sandboxes', s.admin)).json[0].link_since === since && js.reconnects === 0,
    'the runner link and the JS client kept their connections');
  check(sha(js.ch.output()) === sha(t.data) && st.code === 0 && sha(got) === sha(t.data),
    `pings: the output after the silence arrives whole (JS client, CLI exit ${st.code})`);
  check(!/connection lost/.test(cli.err()), 'the CLI never lost its connection');
}

async function defaultPings() {
  const { s, sb } = await setup('idledefault', [], IDLE_CUT);
  const t = quietThenTail(s.base, 'tail', 2);
  const id = await terminal(s, sb.id, t.argv);
  const js = await faultyClient(s, id, { faults: IDLE_CUT });
  // read-only: a viewer from its first ROLE (an interactive attach by the
  // writer's user waits up to RL_WRITER_RETURN_US for it, which is traffic)
  const cli = await cliAttach(s, id, s.base, 'unpinged', ['--read-only']);
  const pinged = await cliAttach(s, id, s.base, 'own-pings', ['--ping-interval', '2', '--read-only']);
  const t0 = Date.now();
  await js.ch.waitExit(IDLE_MS + 30000);
  const st = await cli.exited;
  const cuts = [sb.proxy, js.proxy, cli.proxy].map((p) => cutsBetween([p], t0, Date.now()));
  // The clients' hops carry VIEWERS whenever the other client leaves or
  // comes back, about every 5 s, the same period as the cut: one of them
  // may never stay silent for 5 s (one run in several here, when two of
  // these tests ran at once). The runner link carries nothing and must be
  // cut; of the clients' hops at least one, and each one cut reconnected.
  check(cuts[0] >= 2 && cuts[1] + cuts[2] >= 1, `default pings (15 s) behind 5 s idle cuts: the runner link and the clients' hops were cut while idle (runner, JS, CLI: ${cuts})`);
  const cliBack = /connection lost/.test(cli.err()) && /reconnected/.test(cli.err());
  check((cuts[1] === 0 || js.reconnects >= 1) && (cuts[2] === 0 || cliBack),
    `each client whose hop was cut reconnected (JS: ${js.reconnects} reconnects, CLI: ${cliBack ? 'yes' : 'no'})`);
  check(sha(js.ch.output()) === sha(t.data) && !js.ch.gaps, 'the JS client has the output exactly once, no gap');
  const got = fs.readFileSync(cli.out);
  check(st.code === 0 && got.length === t.data.length && sha(got) === sha(t.data),
    `the CLI has it exactly once (${got.length} bytes, exit ${st.code}; it said: ${cli.err().replace(/\s+/g, ' ')}${
      sha(got) === sha(t.data) ? '' : `; it starts ${JSON.stringify(got.subarray(0, 60).toString('latin1'))}, the data's last 64 bytes at ${got.indexOf(t.data.subarray(-64))}`})`);
  const pst = await pinged.exited;
  check(pinged.proxy.fired('idle-cut') === 0 && pst.code === 0 && sha(fs.readFileSync(pinged.out)) === sha(t.data),
    'a CLI with --ping-interval 2 on the same airlockd was never cut, and has the output');
}

function firstDiff(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return n;
}

async function age() {
  const { s, sb } = await setup('age', [], AGE_CUT);
  const out = pacedStream(s.base, 'age', AGE_SIZE, 3, 40);
  const id = await terminal(s, sb.id, out.argv);
  const js = await faultyClient(s, id, { faults: AGE_CUT });
  go(out.go);
  const t0 = Date.now();
  await js.ch.waitExit(120000);
  const took = Date.now() - t0;
  const got = js.ch.output();
  check(got.length === out.data.length && sha(got) === sha(out.data) && !js.ch.gaps,
    `age cuts every 3 s: the ${AGE_SIZE} byte stream arrived exactly once, no gap (${took} ms; got ${got.length} bytes, ${
      js.ch.gaps || 0} gaps ${JSON.stringify(js.ch.gapList || [])}, ${js.reconnects} reconnects${got.length && sha(got) !== sha(out.data) ? `, first difference at ${firstDiff(got, out.data)}` : ''})`);
  check(sb.proxy.fired('age-cut') >= 3 && js.proxy.fired('age-cut') >= 3,
    `both hops were cut at their age (runner ${sb.proxy.fired('age-cut')}, client ${js.proxy.fired('age-cut')} times)`);
}

await run('fault_idle', async () => {
  // the usage: an idle timeout that does not exceed twice the pings is refused
  const p = spawn(path.join(BIN, 'airlockd'), ['serve', '--data', '/nonexistent', '--listen', '127.0.0.1:0',
    '--ping-interval', '5', '--idle-timeout', '10'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => { err += d; });
  const code = await new Promise((res) => p.on('exit', res));
  check(code === 2 && /more than twice ping-interval/.test(err), `airlockd refuses --idle-timeout 10 with --ping-interval 5: usage error 2 (${code})`);
  await Promise.all([pings(), defaultPings(), age()]);
}, 150000);
