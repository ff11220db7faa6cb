// Every byte exactly once through random cuts of both hops (issue 15). Three
// static sandboxes, each dialed by airlockd through a fault proxy, each with
// three terminals whose clients attach through fault proxies of their own:
//
//   hop          client <-> airlockd     airlockd <-> runner
//   client hop   cut                     clean
//   runner hop   clean                   cut
//   both hops    cut (its own seed)      cut (its own seed)
//
// and on each, at once: a PTY printing OUT_SIZE paced, checksummed bytes
// (output), a pipe-mode `sha256sum` fed IN_SIZE bytes on stdin, then EOF
// (input, hashed by the command), and a raw PTY echoing ECHO_SIZE typed bytes
// back (input and output). The cuts fall at random bytes of either
// direction: plain cuts, cuts inside a WebSocket frame, and resets. Each
// stream must arrive whole and once (sha256), with no GAP, and must have
// lived through at least MIN_CUTS faults on each hop that is cut (a 50 MB
// output stream; MIN_CUTS_SHORT for the shorter ones).
//
// Sizes: OUT_SIZE is the issue's 50 MB; the inputs are smaller (IN_SIZE 20 MB,
// ECHO_SIZE 10 MB) because all nine streams share two cores with airlockd,
// three runners and this process's six proxies, and their cut counts still
// reach MIN_CUTS (the cut points are drawn per connection from byte ranges
// sized for it). SEED=N replays the proxies' decisions (each proxy prints its
// own seed; this test derives them all from one, printed first).
import { run, check, waitFor, TIMEOUT_MULT } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import path from 'node:path';
import { faultServer, staticSandbox, terminal, faultyClient, pacedStream, printable, sha, cutsBetween, waitGo, go } from '../interop/faults.mjs';

const OUT_SIZE = 50e6, IN_SIZE = 20e6, ECHO_SIZE = 10e6;
// The issue's bound, at least 5 cuts a hop through each 50 MB stream, for
// the output streams; the shorter input and echo streams (20 and 10 MB) must
// live through at least MIN_CUTS_SHORT, more than their share of it: their
// cut count is random (drawn from the byte ranges below), and a draw of 4
// for the 10 MB echo failed a CI run with every byte right.
const MIN_CUTS = 5;
const MIN_CUTS_SHORT = 3;
// 64 KiB every OUT_GAP_MS (about 1.5 MB/s): a client cut off must be back
// before airlockd's log (4 MiB) moves past it, or it is resynced by design;
// under load a reconnect took over 1.3 s (a GAP at 3 MB/s)
const OUT_GAP_MS = 40;
const HOPS = [
  // name, cut the client hop, cut the runner hop
  ['client', true, false],
  ['runner', false, true],
  ['both', true, true],
];
// cut points, drawn per connection from these byte ranges of each direction
const CUTS = (down, up) => [
  { fault: 'cut-frame', dir: 'down', bytes: down },
  { fault: 'reset', dir: 'down', bytes: down },
  { fault: 'cut', dir: 'up', bytes: up },
  { fault: 'cut-frame', dir: 'up', bytes: up },
];
const CLIENT_CUTS = CUTS([1.5e6, 8e6], [0.7e6, 2.5e6]);
const RUNNER_CUTS = CUTS([3e6, 12e6], [2e6, 7e6]);

await run('fault_cuts', async () => {
  const seed = process.env.SEED !== undefined ? Number(process.env.SEED) : Math.floor(Math.random() * 2 ** 30);
  console.log(`fault_cuts seed=${seed} (SEED=${seed} replays the proxies' decisions)`);
  const s = await faultServer('faultcuts');
  let k = 0;
  const streams = [];
  for (const [hop, cutClient, cutRunner] of HOPS) {
    const sb = await staticSandbox(s, `st-${hop}`, { faults: cutRunner ? RUNNER_CUTS : [], seed: seed + ++k });
    const client = async (id, mode) => faultyClient(s, id, { mode, faults: cutClient ? CLIENT_CUTS : [], seed: seed + ++k,
      label: `faultproxy ${hop}/${id}` });
    // output: a paced, checksummed PTY stream
    const out = pacedStream(s.base, `out-${hop}`, OUT_SIZE, seed + k, OUT_GAP_MS);
    const tOut = await terminal(s, sb.id, out.argv);
    streams.push({ hop, kind: 'output', sb, cutClient, cutRunner, a: await client(tOut, 0), want: out.data, go: out.go });
    // input: hashed by the command, ended by EOF
    const tIn = await terminal(s, sb.id, ['sh', '-c', 'exec sha256sum'], { mode: 'pipes' });
    const inData = printable(IN_SIZE, seed + 100 + k);
    streams.push({ hop, kind: 'input', sb, cutClient, cutRunner, a: await client(tIn, 1), want: Buffer.from(`${sha(inData)}  -\n`), feed: inData });
    // input echoed by a raw PTY (its output starts once the client is
    // attached: a client attached later would get it as a snapshot)
    const goEcho = path.join(s.base, `echo-${hop}.go`);
    const tEcho = await terminal(s, sb.id, ['sh', '-c', `stty raw -echo; ${waitGo(goEcho)}; echo READY; exec head -c ${ECHO_SIZE}`]);
    const echoData = printable(ECHO_SIZE, seed + 200 + k);
    streams.push({ hop, kind: 'echo', sb, cutClient, cutRunner, a: await client(tEcho, 0), want: Buffer.concat([Buffer.from('READY\n'), echoData]), feed: echoData, ready: /READY\n/, go: goEcho });
  }
  const t0 = Date.now();
  for (const st of streams) {
    st.start = Date.now();
    if (st.go) go(st.go);
    if (!st.feed) continue;
    const { ch } = st.a;
    // a raw PTY first: a cooked one holds at most a line of 4095 bytes
    if (st.ready) await ch.waitOutput(st.ready, 20000);
    ch.write(st.feed);
    if (!st.ready) ch.endInput();
  }
  await waitFor(() => {
    for (const st of streams) if (!st.end && st.a.ch.exit) st.end = Date.now();
    return streams.every((st) => st.end);
  }, 240000, 'every stream to end', 100).catch((e) => {
    for (const st of streams) {
      const { ctl, ch } = st.a;
      console.error(`${st.hop}/${st.kind}: exit ${JSON.stringify(ch.exit)} out ${ch.next[1]} in sent ${ch.inSent} acked ${ch.inAcked} ` +
        `limit ${ch.inLimit} base ${ch.inBase} held ${ch.inBuf.length} role ${ch.role} ready ${ctl.ready} reconnects ${st.a.reconnects}`);
    }
    throw e;
  });
  const took = Date.now() - t0;
  for (const st of streams) {
    st.a.stop();
    const { ch } = st.a;
    const got = ch.output();
    const name = `${st.hop === 'both' ? 'both hops' : `${st.hop} hop`}, ${st.kind}`;
    if (ch.gaps) console.log(`${name}: GAPs ${JSON.stringify(ch.resyncs)} last ${JSON.stringify(ch.lastGap)}`);
    check(got.length === st.want.length && sha(got) === sha(st.want),
      `${name}: ${got.length} bytes, exactly the ${st.want.length} ${st.kind === 'input' ? 'of the hash of the input' : 'sent'} (sha256 ${sha(got).slice(0, 12)})`);
    check(!ch.gaps && ch.exit.code === 0, `${name}: no gap, the command exited 0 (${ch.gaps || 0} gaps, ${ch.resyncs.length} resyncs)`);
    const onClient = cutsBetween([st.a.proxy], st.start, st.end);
    const onRunner = cutsBetween([st.sb.proxy], st.start, st.end);
    const minCuts = st.kind === 'output' ? MIN_CUTS : MIN_CUTS_SHORT;
    if (st.cutClient) check(onClient >= minCuts, `${name}: ${onClient} faults on the client hop during it (${st.a.reconnects} reconnects; at least ${minCuts})`);
    if (st.cutRunner) check(onRunner >= minCuts, `${name}: ${onRunner} faults on the runner hop during it (at least ${minCuts})`);
    if (!st.cutClient) check(onClient === 0 && st.a.reconnects === 0, `${name}: the clean client hop was never cut`);
    // a writer whose new connection is attached before airlockd has read
    // its old one to the end gets its role back once the old one goes
    // (RL_WRITER_RETURN_US); it came back a viewer before that was so. The
    // client takes over if it must, which a normal build must never need
    // (under the sanitizers the old connection may take longer to go)
    if (st.a.takeovers) console.log(`NOTE: ${name}: the writer came back a viewer ${st.a.takeovers} times and took over`);
    if (TIMEOUT_MULT === 1) check(!st.a.takeovers, `${name}: the writer kept its role through every reconnect`);
  }
  const fired = {};
  for (const p of new Set(streams.flatMap((st) => [st.a.proxy, st.sb.proxy]))) for (const e of p.events) fired[e.fault] = (fired[e.fault] || 0) + 1;
  check(Object.keys(fired).length === 3, `cuts of every kind fired (${JSON.stringify(fired)}; the streams took ${took} ms)`);
  const r = await api(s.port, 'GET', '/v1/sandboxes', s.admin);
  check(r.status === 200 && r.json.every((x) => x.link_up), 'airlockd still answers, every runner linked');
  const st = await s.d.stop();
  check(st.code === 0, 'airlockd stops cleanly');
}, 290000);
