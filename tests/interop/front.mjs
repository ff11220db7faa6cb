// HAProxy on 127.0.0.1 in front of airlockd replicas (issue 17's tests:
// replicas.mjs, leases.mjs): a real load balancer packaged by Debian.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { rawHttp, closedPort, waitFor, addLog, onCleanup } from './harness.mjs';

const FRONT_TRIES = 5; // HAProxy cannot bind port 0: ports it may find taken

// HAProxy in front of the replicas' ports: round robin, a health check on
// /healthz every 300 ms (down after 2 failures; a replica marked down has
// its connections cut, so that a client of a frozen replica comes back
// through the others), a refused connection retried on another replica. It cannot bind port 0, so it is given a port
// the kernel just handed out and freed, and tried again on another if that
// was taken in between. { p, port, dead, exited }
export async function startFront(dir, ports) {
  for (let i = 0; i < FRONT_TRIES; i++) {
    const port = await closedPort();
    const cfg = path.join(dir, `haproxy-${port}.cfg`);
    fs.writeFileSync(cfg, [
      'global',
      '  log stderr format raw local0 info',
      'defaults',
      '  mode http',
      '  log global',
      '  option httplog',
      '  timeout connect 1s',
      '  timeout client 10s',
      '  timeout server 10s',
      '  retries 3',
      '  option redispatch 1',
      'frontend front',
      `  bind 127.0.0.1:${port}`,
      '  default_backend replicas',
      'backend replicas',
      '  balance roundrobin',
      '  option httpchk GET /healthz',
      ...ports.map((p, j) => `  server r${j} 127.0.0.1:${p} check inter 300ms fall 2 rise 1 on-marked-down shutdown-sessions`),
      ''].join('\n'));
    const log = path.join(dir, `haproxy-${port}.log`);
    const out = fs.openSync(log, 'a');
    addLog(log);
    const p = spawn('haproxy', ['-db', '-f', cfg], { stdio: ['ignore', out, out] });
    fs.closeSync(out);
    const f = { p, port, dead: false };
    f.exited = new Promise((res) => p.on('exit', (code, sig) => { f.dead = true; res({ code, sig }); }));
    onCleanup(async () => { if (!f.dead) { p.kill('SIGKILL'); await f.exited; } });
    const up = await waitFor(async () => {
      if (f.dead) return 'dead';
      try { return (await rawHttp(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')).status === 200 && 'up'; } catch { return false; }
    }, 10000, 'HAProxy to answer', 50);
    if (up === 'up') return f;
    if (!/cannot bind|Address already in use/i.test(fs.readFileSync(log, 'utf8')))
      throw new Error(`HAProxy did not start:\n${fs.readFileSync(log, 'utf8')}`);
  }
  throw new Error(`HAProxy found no free port in ${FRONT_TRIES} tries`);
}
