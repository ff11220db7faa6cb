// The soak (issue 15 point 4): `make soak`, SOAK_S seconds (default 600),
// bounded in time and stopping by itself.
//
// - Two static sandboxes, each dialed by airlockd through a fault proxy that
//   cuts the runner hop at random bytes (plain cuts, cuts inside a frame,
//   resets), each with TERMS_PER_SBX terminals printing paced, checksummed
//   output for the whole run, each watched by a writer client attached
//   through a fault proxy of its own (random cuts of the client hop) that
//   reconnects and resumes by itself.
// - Viewers join and leave all along (read-only attaches, straight to
//   airlockd, held 1 to 4 s each).
// - airlockd is stopped and started again twice (at 1/3 and 2/3 of the
//   run, on the same port and data): every link and client comes back.
// - The runner's link is replaced (at 1/2 of the run): the first sandbox's
//   runner hop is stalled both ways (its TCP connection open, nothing
//   passing), airlockd (pings every 3 s, a silent peer dropped after 10 s,
//   AIRLOCKD_ARGS) gives up on it and dials again while the runner (45 s)
//   still holds the old connection; the runner takes the new one and closes
//   the old with 4005 ("a newer connection replaces the current one").
// - At the end: every stream verifies by sha256 (every byte once, no GAP),
//   each runner's RSS is within 10 % of its level after warm-up (and
//   airlockd's within 10 % of its level after warm-up since its last
//   start), no runner holds more fds than after warm-up, and airlockd's and
//   the runners' logs hold no error-level line but those the injected
//   faults explain (listed in EXPECTED_ERRORS). A summary table is printed.
//
// SEED=N replays the proxies' decisions. AL_BIN as for the tests.
import fs from 'node:fs';
import { run, check, waitFor, sleep, rssKb } from '../interop/harness.mjs';
import { api, attach, startAirlockd } from '../interop/airlockd.mjs';
import { waitLink } from '../interop/cli.mjs';
import { faultServer, staticSandbox, terminal, faultyClient, pacedStream, sha, go } from '../interop/faults.mjs';

const SOAK_S = Number(process.env.SOAK_S || 600);
const TERMS_PER_SBX = 2;
const RATE = 100e3;          // bytes per second each terminal prints
const WARM_FRAC = 0.15;      // warm-up: this share of the run
const RSS_SLACK = 0.10;      // the bound
const RSS_FLOOR_KB = 2048;   // ... but never tighter than this (allocator noise on small heaps)
const VIEWER_EVERY_MS = 3000;
// airlockd drops a silent runner link well before the runner drops it (its
// defaults: 15 s pings, 45 s idle), so that a stalled link is replaced
const AIRLOCKD_ARGS = ['--ping-interval', '3', '--idle-timeout', '10']; // seconds
const REPLACE_WAIT_MS = 40000;
const REPLACED = /a newer connection replaces the current one/g;
// cut points, drawn per connection from these byte ranges
const CUTS = (lo, hi) => [
  { fault: 'cut', dir: 'down', bytes: [lo, hi] },
  { fault: 'cut-frame', dir: 'down', bytes: [lo, hi] },
  { fault: 'reset', dir: 'down', bytes: [lo * 2, hi * 2] },
];
// error-level log lines the injected faults and restarts explain
const EXPECTED_ERRORS = [
  /connection (reset|closed|lost)|peer (closed|went away)|link (down|lost|closed)/i,
  /dial failed/i,
  /stopping/i,
];

const fds = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;
const errorLines = (file, from = 0) => fs.readFileSync(file, 'utf8').slice(from).split('\n')
  .filter((l) => / error /.test(l) && !EXPECTED_ERRORS.some((re) => re.test(l)));

await run('soak', async () => {
  const seed = process.env.SEED !== undefined ? Number(process.env.SEED) : Math.floor(Math.random() * 2 ** 30);
  console.log(`soak ${SOAK_S} s, seed=${seed} (SEED=${seed} replays the proxies' decisions)`);
  const s = await faultServer('soak', AIRLOCKD_ARGS);
  const size = Math.floor(RATE * SOAK_S * 0.8); // ends before the deadline, paced
  const gapMs = Math.max(1, Math.floor(65536 / RATE * 1000));
  let k = 0;
  const sbxs = [], streams = [];
  for (let i = 0; i < 2; i++) {
    // a cut every 5 to 20 s of traffic on each hop
    const sb = await staticSandbox(s, `soak-${i}`, { faults: CUTS(5 * RATE * TERMS_PER_SBX, 20 * RATE * TERMS_PER_SBX), seed: seed + ++k });
    sbxs.push(sb);
    for (let j = 0; j < TERMS_PER_SBX; j++) {
      const out = pacedStream(s.base, `out-${i}-${j}`, size, seed + ++k, gapMs);
      const id = await terminal(s, sb.id, out.argv);
      const a = await faultyClient(s, id, { faults: CUTS(5 * RATE, 20 * RATE), seed: seed + ++k, label: `faultproxy client ${sb.id}/${j}` });
      streams.push({ id, sb, out, a });
    }
  }
  const t0 = Date.now();
  for (const st of streams) go(st.out.go);

  // viewers come and go all along
  let viewers = 0, viewerBytes = 0, stopViewers = false;
  const viewerLoop = (async () => {
    while (!stopViewers) {
      const st = streams[viewers % streams.length];
      try {
        const v = await attach(s.port, st.id, s.op, { read: true });
        await sleep(1000 + (viewers * 997) % 3000);
        viewerBytes += v.ch.next[1];
        v.ctl.ws.terminate();
        viewers++;
      } catch { /* airlockd restarting: try again */ }
      await sleep(VIEWER_EVERY_MS);
    }
  })();

  // warm-up, then the levels to hold
  await sleep(SOAK_S * 1000 * WARM_FRAC);
  const runnerLevel = sbxs.map((sb) => ({ pid: sb.runner.proc.pid, rss: rssKb(sb.runner.proc.pid), fds: fds(sb.runner.proc.pid) }));

  // two restarts of airlockd, and the runner's link replaced between them
  let d = s.d;
  const restarts = [];
  const replaced = (sb) => (fs.readFileSync(sb.runner.log, 'utf8').match(REPLACED) || []).length;
  let replace = null;
  for (const at of [1 / 3, 1 / 2, 2 / 3]) {
    const wait = t0 + SOAK_S * 1000 * at - Date.now();
    if (wait > 0) await sleep(wait);
    if (at === 1 / 2) {
      const sb = sbxs[0], before = replaced(sb), t = Date.now();
      sb.proxy.stall('up'); sb.proxy.stall('down');
      const ok = await waitFor(() => replaced(sb) > before, REPLACE_WAIT_MS,
        'the stalled link to be replaced at the runner', 200).then(() => true, () => false);
      sb.proxy.unstall();
      replace = { ok, ms: Date.now() - t, at: t - t0 };
      await waitLink(s.port, s.admin, sb.id, 30000);
      continue;
    }
    const st = await d.stop();
    restarts.push({ at: Date.now() - t0, code: st.code });
    d = await startAirlockd({ dir: s.dir, port: s.port, args: AIRLOCKD_ARGS });
    for (const sb of sbxs) await waitLink(s.port, s.admin, sb.id, 30000);
  }
  const logFrom = fs.statSync(d.log).size;
  await sleep(Math.min(SOAK_S * 1000 * WARM_FRAC, Math.max(0, t0 + SOAK_S * 1000 * 0.85 - Date.now())));
  const airlockdLevel = { pid: d.p.pid, rss: rssKb(d.p.pid) };

  // the streams end on their own; the run's deadline bounds the wait
  await waitFor(() => streams.every((st) => st.a.ch.exit), Math.max(30000, t0 + SOAK_S * 1000 * 1.15 - Date.now()),
    'every stream to end', 200);
  stopViewers = true;
  await viewerLoop;
  const took = (Date.now() - t0) / 1000;

  // ---- verdicts
  const rows = [];
  for (const st of streams) {
    st.a.stop();
    const got = st.a.ch.output();
    const ok = got.length === st.out.data.length && sha(got) === sha(st.out.data) && !st.a.ch.gaps;
    check(ok, `${st.sb.id} ${st.id}: ${got.length} of ${st.out.data.length} bytes, sha256 ${ok ? 'equal' : 'DIFFERENT'}, ${st.a.ch.gaps || 0} gaps`);
    rows.push([`${st.sb.id}/${st.id}`, `${(got.length / 1e6).toFixed(1)} MB`, ok ? 'exact' : 'WRONG', st.a.reconnects, st.a.proxy.events.length]);
  }
  // the streams' last bytes acknowledged and the rings given back (2 s of
  // quiet, EP_RING_IDLE_US): a few seconds after the end
  await sleep(5000);
  const endRunner = runnerLevel.map((l) => ({ ...l, rssEnd: rssKb(l.pid), fdsEnd: fds(l.pid) }));
  for (const l of endRunner) {
    check(l.rssEnd <= Math.max(l.rss * (1 + RSS_SLACK), l.rss + RSS_FLOOR_KB), `runner ${l.pid}: RSS ${l.rss} KB after warm-up, ${l.rssEnd} KB at the end`);
    check(l.fdsEnd <= l.fds, `runner ${l.pid}: ${l.fds} fds after warm-up, ${l.fdsEnd} at the end`);
  }
  const dEnd = rssKb(d.p.pid);
  check(dEnd <= Math.max(airlockdLevel.rss * (1 + RSS_SLACK), airlockdLevel.rss + RSS_FLOOR_KB),
    `airlockd: RSS ${airlockdLevel.rss} KB after warm-up since its last start, ${dEnd} KB at the end`);
  check(restarts.length === 2 && restarts.every((r) => r.code === 0), `airlockd restarted twice, each stop clean (${JSON.stringify(restarts)})`);
  check(replace && replace.ok, `the runner's link replaced: ${sbxs[0].id}'s runner hop stalled at ${(replace.at / 1000).toFixed(0)} s, ` +
    `the runner took airlockd's new link after ${(replace.ms / 1000).toFixed(1)} s (bound ${REPLACE_WAIT_MS / 1000} s)`);
  const runnerCuts = sbxs.reduce((n, sb) => n + sb.proxy.events.length, 0);
  const clientCuts = streams.reduce((n, st) => n + st.a.proxy.events.length, 0);
  check(runnerCuts > 0 && clientCuts > 0, `faults fired on both hops (runner hop ${runnerCuts}, client hop ${clientCuts})`);
  check(viewers > 0 && viewerBytes > 0, `${viewers} viewers came and went (${(viewerBytes / 1e6).toFixed(1)} MB seen)`);
  const errs = [...errorLines(d.log, logFrom), ...sbxs.flatMap((sb) => errorLines(sb.runner.log))];
  for (const e of errs.slice(0, 10)) console.log(`  unexplained: ${e}`);
  check(errs.length === 0, `no error in the logs but the injected ones (${errs.length} others)`);
  const r = await api(s.port, 'GET', '/v1/sandboxes', s.admin);
  check(r.status === 200 && r.json.every((x) => x.link_up), 'airlockd answers, every runner linked');

  console.log(`\nsoak summary: ${took.toFixed(0)} s (SOAK_S ${SOAK_S}), seed ${seed}, restarts at ${restarts.map((x) => (x.at / 1000).toFixed(0) + ' s').join(', ')}, ` +
    `link replaced at ${(replace.at / 1000).toFixed(0)} s (${(replace.ms / 1000).toFixed(1)} s after the stall)`);
  console.log('| stream | bytes | verdict | client reconnects | client-hop faults |\n|---|---|---|---|---|');
  for (const row of rows) console.log(`| ${row.join(' | ')} |`);
  console.log('\n| process | RSS after warm-up | RSS at end | fds after warm-up | fds at end |\n|---|---|---|---|---|');
  for (const l of endRunner) console.log(`| runner ${l.pid} | ${l.rss} KB | ${l.rssEnd} KB | ${l.fds} | ${l.fdsEnd} |`);
  console.log(`| airlockd ${d.p.pid} | ${airlockdLevel.rss} KB | ${dEnd} KB | | |`);
  console.log(`\nrunner-hop faults ${runnerCuts}, client-hop faults ${clientCuts}, viewers ${viewers}`);
}, Math.ceil(SOAK_S * 1.3 * 1000) + 120000);
