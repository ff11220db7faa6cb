// Stalls and a killed runner (issue 15). airlockd pings every second and
// drops a link silent for 4 s (--ping-interval 1 --idle-timeout 4), the
// static runner likewise (--ping-interval 1000 --idle-timeout 4000); every
// hop goes through a fault proxy, which stalls one direction of it (stops
// forwarding, so TCP pushes back):
//
// - a stalled viewer, then a stalled writer, of a flooding terminal: the
//   other client goes on receiving (the agent is not held back by a client
//   that stops reading), airlockd drops the stalled one once it is silent
//   for the idle timeout, it comes back resynced (GAP, SNAPSHOT) and live;
//   airlockd's and the runner's memory stay bounded;
// - the runner link stalled each way during a paced, checksummed stream:
//   the silent side's idle timeout closes the link (airlockd's one way, the
//   runner's the other), airlockd dials again, and the stream arrives
//   exactly once; the runner's memory stays bounded (its ring);
// - kill -9 of a local sandbox's runner: the attached JS client, the CLI
//   and the API each report the terminal lost within LOST_MS.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { run, check, sleep, waitFor, rssKb, onCleanup, BIN } from '../interop/harness.mjs';
import { api, attach, addLocalSandbox } from '../interop/airlockd.mjs';
import { descendants } from '../interop/procs.mjs';
import { faultServer, staticSandbox, terminal, faultyClient, pacedStream, sha, go } from '../interop/faults.mjs';

const STALL_MS = 3000;             // how long the other client is watched while one is stalled (at
                                   // least 1 MB must reach it meanwhile, under ASan too)
const RSS_GROWTH_KB = 64 * 1024;   // what a stall may add to a process's memory
const LOST_MS = 15000;             // kill -9 to "lost" everywhere

// the bytes a client has received so far
const received = (a) => a.ch.next[1];

async function stalledClient(s, sb, flood, who) {
  const [stalled, other] = who === 'viewer' ? [flood.v, flood.w] : [flood.w, flood.v];
  const rss0 = { airlockd: rssKb(s.d.p.pid), runner: rssKb(sb.runner.proc.pid) };
  const before = received(other);
  const resyncs = stalled.ch.resyncs.length;
  const detached = (fs.readFileSync(s.d.log, 'utf8').match(/: otto detached/g) || []).length;
  const stall = stalled.proxy.stall('down');
  const t0 = Date.now();
  let rssMax = { airlockd: 0, runner: 0 };
  while (Date.now() - t0 < STALL_MS) {
    rssMax = { airlockd: Math.max(rssMax.airlockd, rssKb(s.d.p.pid)), runner: Math.max(rssMax.runner, rssKb(sb.runner.proc.pid)) };
    await sleep(200);
  }
  const moved = received(other) - before;
  check(stall.fired === 1 && moved > 1e6, `a stalled ${who}: the other client received ${(moved / 1e6).toFixed(1)} MB meanwhile`);
  check(rssMax.airlockd - rss0.airlockd < RSS_GROWTH_KB && rssMax.runner - rss0.runner < RSS_GROWTH_KB,
    `memory bounded: airlockd ${rss0.airlockd} -> ${rssMax.airlockd} kB, runner ${rss0.runner} -> ${rssMax.runner} kB`);
  // airlockd drops it (the proxy, stalled, holds the client's side until
  // the stall ends: the client learns of it then)
  await waitFor(() => (fs.readFileSync(s.d.log, 'utf8').match(/: otto detached/g) || []).length > detached, 8000,
    `airlockd to drop the stalled ${who}`);
  const dropped = Date.now() - t0;
  check(dropped >= 3500 && dropped < 7500, `airlockd dropped the silent ${who} ${dropped} ms into the stall (its idle timeout: 4 s)`);
  stalled.proxy.unstall();
  await waitFor(() => stalled.reconnects > 0, 10000, `the ${who} to come back`);
  await waitFor(() => stalled.ch.resyncs.length > resyncs, 10000, `the ${who} to be resynced`);
  const at = received(stalled);
  await waitFor(() => received(stalled) > at + 1e6, 10000, `the ${who} to receive live output again`);
  check(true, `the ${who} came back resynced (GAP then SNAPSHOT) and live`);
}

async function stalledLink(s) {
  const sb = await staticSandbox(s, 'st-link', { runnerArgs: ['--ping-interval', '1000', '--idle-timeout', '4000'] });
  const out = pacedStream(s.base, 'link', 20e6, 5, 40);
  const id = await terminal(s, sb.id, out.argv);
  const a = await faultyClient(s, id);
  go(out.go);
  const rss0 = rssKb(sb.runner.proc.pid);
  let rssMax = rss0;
  const watch = setInterval(() => { rssMax = Math.max(rssMax, rssKb(sb.runner.proc.pid)); }, 200);
  onCleanup(() => clearInterval(watch));
  for (const dir of ['down', 'up']) {
    await waitFor(() => received(a) > (dir === 'down' ? 3e6 : 9e6), 30000, 'the stream to be under way');
    const links = sb.proxy.stats.connections;
    const stall = sb.proxy.stall(dir);
    const t0 = Date.now();
    await waitFor(() => sb.proxy.stats.connections > links, 15000, `a new runner link after a stall ${dir}`);
    const took = Date.now() - t0;
    // the runner logs why it closed; airlockd logs no reason, only the link's end
    const why = dir === 'up' ? /peer silent for \d+ ms/.test(fs.readFileSync(sb.runner.log, 'utf8')) : took >= 3500;
    check(stall.fired >= 1 && why && took < 12000,
      `the runner link stalled ${dir === 'down' ? 'runner -> airlockd: airlockd' : 'airlockd -> runner: the runner'} closed it for its idle timeout (4 s), airlockd dialed again (${took} ms)`);
  }
  await a.ch.waitExit(90000);
  clearInterval(watch);
  const got = a.ch.output();
  check(got.length === out.data.length && sha(got) === sha(out.data) && !a.ch.gaps,
    `through both stalls the 20 MB stream arrived exactly once (sha256 ${sha(got).slice(0, 12)}, ${got.length} of ${out.data.length} bytes, gaps ${JSON.stringify(a.ch.gapList || [])}, resyncs ${a.ch.resyncs.length})`);
  check(rssMax - rss0 < RSS_GROWTH_KB, `the runner's memory stayed bounded (${rss0} -> ${rssMax} kB)`);
}

async function killRunner(s) {
  await addLocalSandbox(s.port, s.admin, 'box', 20000);
  const id = await terminal(s, 'box', ['sh', '-c', 'echo started; exec sleep 600']);
  const js = await attach(s.port, id, s.op);
  const fd = fs.openSync(path.join(s.base, 'cli.out'), 'w');
  let err = '';
  const cli = spawn(path.join(BIN, 'airlock'), ['attach', id], { stdio: ['pipe', fd, 'pipe'],
    env: { ...process.env, HOME: s.base, XDG_CONFIG_HOME: '', AIRLOCK_URL: `http://127.0.0.1:${s.port}`, AIRLOCK_API_KEY: s.op } });
  fs.closeSync(fd);
  cli.stderr.on('data', (d) => { err += d; });
  const cliExit = new Promise((res) => cli.on('exit', (code, sig) => res({ code, sig })));
  onCleanup(async () => { if (cli.exitCode === null && cli.signalCode === null) { cli.kill('SIGKILL'); await cliExit; } });
  await waitFor(async () => (await api(s.port, 'GET', `/v1/terminals/${id}`, s.op)).json.state === 'running', 10000, 'the terminal to run');
  await sleep(500);
  const runner = descendants(s.d.p.pid).find((pid) => {
    try { return /^[^\0]*airlock-runner\0/.test(fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1')); } catch { return false; }
  });
  check(runner > 1, `the local sandbox's runner is pid ${runner}`);
  const t0 = Date.now();
  process.kill(runner, 'SIGKILL');
  const r = await waitFor(async () => {
    const x = await api(s.port, 'GET', `/v1/terminals/${id}`, s.op);
    return x.json.state === 'lost' && x;
  }, LOST_MS, 'the API to say lost');
  check(r.json.state === 'lost', `kill -9 of the runner: the API says the terminal is "lost" after ${Date.now() - t0} ms`);
  await waitFor(() => js.ch.closed, LOST_MS, 'the JS client to be told');
  check(js.ch.lastError && js.ch.lastError.code === 5 && /^terminal lost/.test(js.ch.lastError.msg),
    `the attached JS client was told: ERROR NO_CHANNEL "${js.ch.lastError && js.ch.lastError.msg}", then CLOSE (${Date.now() - t0} ms)`);
  const st = await Promise.race([cliExit, sleep(LOST_MS).then(() => null)]);
  check(st && st.code === 66 && /no longer has terminal/.test(err),
    `the CLI exited 66 (not found) within ${LOST_MS} ms, saying: ${err.trim().split('\n').pop()}`);
}

await run('fault_stall', async () => {
  const s = await faultServer('faultstall', ['--ping-interval', '1', '--idle-timeout', '4']);
  const sb = await staticSandbox(s, 'st-flood', { runnerArgs: ['--ping-interval', '1000', '--idle-timeout', '4000'] });
  const id = await terminal(s, sb.id, ['sh', '-c', 'stty raw -echo; sleep 1; exec yes "the agent goes on printing, whoever reads it"']);
  const flood = { w: await faultyClient(s, id), v: await faultyClient(s, id, { read: true }) };
  await waitFor(() => received(flood.w) > 5e6 && received(flood.v) > 5e6, 30000, 'both clients to receive the flood');
  await stalledClient(s, sb, flood, 'viewer');
  await stalledClient(s, sb, flood, 'writer');
  await api(s.port, 'DELETE', `/v1/terminals/${id}`, s.op);
  await stalledLink(s);
  await killRunner(s);
}, 200000);
