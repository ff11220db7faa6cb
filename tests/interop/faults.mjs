// Set-up shared by the fault tests (tests/integration/fault_*.mjs): a real
// airlockd, static sandboxes whose runner airlockd dials through a fault
// proxy (tests/tools/faultproxy.mjs), clients attached through fault
// proxies of their own that reconnect by themselves after every cut, and
// checksummed streams both ways.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { tmpdir, startRunner, onCleanup, waitFor } from './harness.mjs';
import { addUser, startAirlockd, api, attach } from './airlockd.mjs';
import { WRITER, VIEWER } from './airlock.mjs';
import { waitLink } from './cli.mjs';
import { startFaultProxy } from '../tools/faultproxy.mjs';

export const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
const RECONNECT_EVERY_MS = 20; // a cut client tries again this often
const ATTACHED_WAIT_MS = 20000; // a client's ATTACH answered, through its faults

// airlockd with an admin and an operator: { base, dir, d, port, admin, op }
export async function faultServer(tag, args = []) {
  const base = tmpdir(tag);
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const d = await startAirlockd({ dir, args });
  return { base, dir, d, port: d.port, admin, op };
}

// A static sandbox `id`: a runner listening on 127.0.0.1 (runnerArgs), and
// airlockd dialing it through a fault proxy with `faults` (seed: its PRNG's).
// Resolves once the link is up: { id, runner, proxy }.
export async function staticSandbox(s, id, { faults = [], seed, runnerArgs = [] } = {}) {
  const runner = await startRunner({ id, dir: s.dir, args: runnerArgs });
  const proxy = await startFaultProxy({ target: runner.port, faults, seed, label: `faultproxy ${id} runner hop` });
  onCleanup(() => proxy.close());
  const url = `ws://127.0.0.1:${proxy.port}/?identifier=${id}&api-version=2024-02-02-preview`;
  const r = await api(s.port, 'POST', '/v1/sandboxes', s.admin, { id, kind: 'static', url });
  if (r.status !== 201) throw new Error(`adding sandbox ${id}: ${r.status} ${r.body}`);
  await waitLink(s.port, s.admin, id);
  return { id, runner, proxy };
}

// A terminal; resolves its id.
export async function terminal(s, sandbox, argv, extra = {}) {
  const r = await api(s.port, 'POST', '/v1/terminals', s.op, { sandbox, argv, ...extra });
  if (r.status !== 201) throw new Error(`creating a terminal: ${r.status} ${r.body}`);
  return r.json.id;
}

// A client attached to terminal `id` through a fault proxy of its own; it
// reconnects (and resumes) after every cut until stop(). The attach
// helper's { ctl, ch, url, headers } plus { proxy, reconnects, stop }.
export async function faultyClient(s, id, { faults = [], seed, label = `faultproxy client ${id}`, mode = 0, read = false } = {}) {
  const proxy = await startFaultProxy({ target: s.port, faults, seed, label });
  onCleanup(() => proxy.close());
  const a = await attach(proxy.port, id, s.op, { mode, read });
  a.proxy = proxy; a.reconnects = 0; a.takeovers = 0;
  a.ch.keepTyped = true; // what it typed while cut is written after the reconnect
  let busy = false;
  const timer = setInterval(async () => {
    // a writer that came back as a viewer (airlockd still held its old
    // connection as the writer) takes over, as a person would (~ t)
    const { ch } = a;
    if (!read && a.ctl.ready && ch.role === VIEWER && ch.roles > 1 && ch.inBuf.length && !a.asked) {
      a.asked = true; a.takeovers++; ch.takeover();
      console.log(`faultyClient ${id}: came back a viewer with input to send: TAKEOVER (${a.takeovers})`);
    }
    if (ch.role === WRITER) a.asked = false;
    if (busy || a.ctl.ready || !a.ctl.closeInfo) return;
    busy = true;
    try {
      await a.ctl.connect(a.url, a.headers); a.reconnects++;
    } catch (e) {
      // refused (an HTTP status: no 'close' comes) or failed: the next turn tries again
      if (!a.ctl.closeInfo) a.ctl.closeInfo = { code: 1006, reason: e.message };
      a.refusals = (a.refusals || 0) + 1;
    } finally { busy = false; }
  }, RECONNECT_EVERY_MS);
  a.stop = () => clearInterval(timer);
  onCleanup(a.stop);
  // attached once airlockd has taken the ATTACH (ATTACHED): a program told
  // to go before that may print first, and a fresh client that attaches
  // after output has started begins at a snapshot (protocol §9), not at 0
  await waitFor(() => a.ch.linked, ATTACHED_WAIT_MS, `ATTACHED for ${id}`, 10);
  return a;
}

// Deterministic printable bytes (an LCG from seed), for streams to hash.
export function printable(size, seed) {
  const b = Buffer.alloc(size);
  let x = seed >>> 0;
  for (let i = 0; i < size; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    b[i] = 33 + ((x >>> 16) % 90);
  }
  return b;
}

// The shell words that wait (at most GO_WAIT_S) for file `go` to exist: a
// program starts its output only once the test has attached its client
// (touch go), so that the client sees it as DATA, not as a late joiner's
// snapshot.
const GO_WAIT_S = 60;
export const waitGo = (go) => `n=0; while [ ! -e '${go}' ] && [ $n -lt ${GO_WAIT_S * 20} ]; do sleep 0.05; n=$((n+1)); done`;
export const go = (file) => fs.writeFileSync(file, '');

// A paced output stream: `size` printable bytes in file WORK/NAME, and the
// argv of a PTY program (raw, no echo) that prints them in 64 KiB chunks,
// `gapMs` apart, once WORK/NAME.go exists (go(s.go) starts it). The pace
// keeps a client that reconnects after a cut within airlockd's log
// (RL_LOG_BYTES, 4 MiB) so that it resumes without a resync. Resolves
// { data, argv, file, go }.
export function pacedStream(work, name, size, seed, gapMs = 20) {
  fs.mkdirSync(work, { recursive: true });
  const data = printable(size, seed);
  const file = path.join(work, name);
  fs.writeFileSync(file, data);
  const chunks = Math.ceil(size / 65536);
  const sec = (gapMs / 1000).toFixed(3);
  const prog = `stty raw -echo; ${waitGo(`${file}.go`)}; i=0; while [ $i -lt ${chunks} ]; do ` +
    `dd if='${file}' bs=65536 skip=$i count=1 status=none; i=$((i+1)); sleep ${sec}; done; sleep 0.5`;
  return { data, file, go: `${file}.go`, argv: ['sh', '-c', prog] };
}

// The faults that fired on proxies, in [from, to] (ms), as one count.
export function cutsBetween(proxies, from, to) {
  let n = 0;
  for (const p of proxies) n += p.events.filter((e) => e.t >= from && e.t <= to).length;
  return n;
}
