// The abuse matrix's frame (tests/integration/abuse_*.mjs): a server under
// attack is a Target, and the matrix is a table of rows, each row one
// hostile case { name, targets, send, expect } run against each target it
// names, followed at once by that target's health check:
// - it still answers a well-formed request: GET /healthz is 200, and its
//   own probe (a real request of the kind the case attacked: an upgrade
//   with a valid token, an API call with a valid key) succeeds;
// - its resident memory (VmRSS) has grown by at most RSS_GROWTH_MAX_KB
//   since the baseline taken before the first row.
// A row's expect(got, target) returns true or false; the check line shows
// what was got, so a failure says what the server answered instead.
import fs from 'node:fs';
import { check, rawHttp, rssKb, scaled, sleep } from './harness.mjs';

// Under the sanitizers (CMakeLists.txt sets AIRLOCK_TEST_SANITIZE) freed
// memory stays resident in ASan's quarantine, 256 MiB by default: every
// RSS bound allows for it there (the normal build's bound is the check).
export const SANITIZED = process.env.AIRLOCK_TEST_SANITIZE === '1';
export const ASAN_QUARANTINE_KB = 256 * 1024;
const slack = SANITIZED ? ASAN_QUARANTINE_KB : 0;

// How much a server's RSS may grow over a whole matrix: far above what
// serving the matrix's requests needs (a few MiB of caches and pools),
// far below what buffering an attacker's bytes without bound would take
// (the big cases send hundreds of MiB).
export const RSS_GROWTH_MAX_KB = 48 * 1024 + slack;
const RECOVER_MS = 3000; // a limit filled by a row drains within this
// How much it may grow while a flood runs towards a client that takes
// nothing: its rings and windows, not the flood (tens of MB a second)
export const FLOOD_RSS_MAX_KB = 24 * 1024 + slack;

export class Target {
  // name: for the check lines; pid: the process whose memory is watched;
  // port: where /healthz answers; probe: async () => true when a
  // well-formed request of the kind attacked succeeds.
  constructor({ name, pid, port, probe, log }) {
    Object.assign(this, { name, pid, port, probe, log });
    this.base = 0;
    this.peak = 0;
  }

  async baseline() {
    if (!(await this.probe())) throw new Error(`${this.name}: its probe fails before any abuse`);
    this.base = rssKb(this.pid);
    this.peak = this.base;
    check(this.base > 0, `${this.name}: baseline RSS ${this.base} KiB (bound: +${RSS_GROWTH_MAX_KB} KiB)`);
  }

  // A new baseline, where a row leaves memory held by design (said why).
  rebase(why) {
    const was = this.base;
    this.base = rssKb(this.pid);
    check(this.base > 0, `${this.name}: RSS baseline moved from ${was} to ${this.base} KiB (${why})`);
  }

  // The process is alive, serves, and its memory is bounded.
  async healthy(after) {
    let alive = true;
    try { process.kill(this.pid, 0); } catch { alive = false; }
    // a row that filled a connection limit may leave it full for a moment
    // while the server reads the closes: it must serve again within
    // RECOVER_MS, and the time it took is in the line
    let hz, waited;
    const t0 = Date.now();
    for (;;) {
      try { hz = (await rawHttp(this.port, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', scaled(5000))).status; } catch { hz = -1; }
      waited = Date.now() - t0;
      if (hz === 200 || hz === -1 || waited >= scaled(RECOVER_MS)) break;
      await sleep(100);
    }
    const ok = alive && hz === 200 && (await this.probe());
    const rss = alive ? rssKb(this.pid) : 0;
    this.peak = Math.max(this.peak, rss);
    check(ok && rss - this.base <= RSS_GROWTH_MAX_KB,
      `${this.name} healthy after ${after} (alive, healthz ${hz} after ${waited} ms, probe ok: ${ok}, RSS ${rss - this.base >= 0 ? '+' : ''}${rss - this.base} KiB)`);
  }

  // The log from byte `from` on ('' if there is no log).
  logSince(from = 0) {
    if (!this.log) return '';
    try { return fs.readFileSync(this.log, 'latin1').slice(from); } catch { return ''; }
  }

  logSize() {
    try { return fs.statSync(this.log).size; } catch { return 0; }
  }
}

// Run every row against each target it names (targets: { name: Target }),
// each followed by the target's health check. A row:
//   { name, targets: ['runner', 'airlockd'], send: async (t) => got,
//     expect: (got, t) => boolean, show: (got) => text,
//     rebase: why the RSS baseline moves after this row (optional) }
export async function runMatrix(title, rows, targets) {
  for (const row of rows) {
    for (const tn of row.targets) {
      const t = targets[tn];
      if (!t) throw new Error(`matrix ${title}: row ${row.name} names an unknown target ${tn}`);
      const from = t.logSize();
      const got = await row.send(t);
      const shown = row.show ? row.show(got) : JSON.stringify(got);
      check(await row.expect(got, t, from), `${title} | ${row.name} | ${tn} | ${shown}`);
      if (row.rebase) t.rebase(row.rebase);
      await t.healthy(`"${row.name}"`);
    }
  }
}

// A WebSocket upgrade request, raw: headers with a null value are left out.
export function upgradeRequest(target, headers = {}) {
  const h = { Host: '127.0.0.1', Upgrade: 'websocket', Connection: 'Upgrade',
    'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version': '13',
    'Sec-WebSocket-Protocol': 'airlock.v1', ...headers };
  return `GET ${target} HTTP/1.1\r\n${Object.entries(h).filter(([, v]) => v !== null)
    .map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`;
}
