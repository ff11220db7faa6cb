// Nothing lost when the connection drops: while a terminal prints a
// checksummed 50 MB stream, a proxy cuts the TCP connection at least 5 times
// at random points; the client resumes each time; the stream it received
// must hash exactly like the one printed. Input typed during the cuts must
// arrive exactly once as well.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, keygen, mint, startRunner, sleep } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';
import { startProxy } from '../interop/proxy.mjs';

const SIZE = 50 * 1000 * 1000;
const CUTS = 6;

await run('runner_resume', async () => {
  const dir = tmpdir('resume');
  keygen(dir);
  // deterministic, checksummed content (printable, so any terminal path is fine)
  let seed = 12345;
  const data = Buffer.alloc(SIZE);
  for (let i = 0; i < SIZE; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    data[i] = 33 + ((seed >>> 16) % 90);
  }
  const file = path.join(dir, 'stream.txt');
  fs.writeFileSync(file, data);
  const want = crypto.createHash('sha256').update(data).digest('hex');

  const r = await startRunner({ dir });
  const proxy = await startProxy(r.port);
  const url = r.url.replace(`:${r.port}/`, `:${proxy.port}/`);
  const token = mint(dir, r.id, 'runner:connect', 600);
  const ctl = new Controller();
  await ctl.connect(url, { Authorization: `Bearer ${token}` });

  // raw mode: the PTY passes bytes through unchanged
  const out = ctl.open(['sh', '-c', `stty raw -echo; sleep 0.2; cat ${file}; sleep 0.5`]);
  // input: typed continuously, hashed by the agent
  const INPUT = 300000;
  const typed = Buffer.alloc(INPUT);
  for (let i = 0; i < INPUT; i++) typed[i] = 97 + (i * 7 + (i >> 9)) % 26;
  // (typing starts once the line discipline is raw: a cooked PTY would
  // hold at most 4095 bytes of an unfinished line)
  const inp = ctl.open(['sh', '-c', `stty raw -echo; echo READY; head -c ${INPUT} | sha256sum`], { mode: 0 });
  await inp.waitOutput(/READY/);
  const wantIn = crypto.createHash('sha256').update(typed).digest('hex');

  const cutPoints = [];
  for (let i = 0; i < CUTS; i++) cutPoints.push(Math.floor((SIZE / (CUTS + 1)) * (i + 0.5 + Math.random() * 0.8)));
  let cuts = 0, typedSent = 0, cutsWhileTyping = 0;
  const reconnect = async () => {
    for (let i = 0; i < 50; i++) {
      try { await ctl.connect(url, { Authorization: `Bearer ${token}` }); return; } catch { await sleep(100); }
    }
    throw new Error('could not reconnect');
  };
  while (!(out.exit && inp.exit)) {
    // type a little, whether connected or not
    // typing keeps pace with the output, so it spans every cut
    const due = Math.min(INPUT, Math.floor(INPUT * (out.next[1] / SIZE)) + 2000);
    if (typedSent < due) {
      const n = Math.min(600, due - typedSent);
      inp.write(typed.subarray(typedSent, typedSent + n));
      typedSent += n;
    }
    if (cuts < CUTS && out.next[1] >= cutPoints[cuts]) {
      proxy.cut();
      cuts++;
      if (typedSent > 0 && typedSent < INPUT) cutsWhileTyping++;
      await sleep(50 + Math.random() * 200);
      await reconnect();
    }
    await sleep(5);
    if (!ctl.ready && (!out.exit || !inp.exit)) await reconnect();
  }
  check(cuts >= 5, `the connection was cut ${cuts} times mid-stream`);
  check(cutsWhileTyping >= 2, `${cutsWhileTyping} cuts fell while input was being typed`);
  const got = out.output();
  check(got.length === SIZE, `received ${got.length} bytes, printed ${SIZE}`);
  check(crypto.createHash('sha256').update(got).digest('hex') === want, 'output checksum matches exactly (no loss, no repeat)');
  check(out.gaps === undefined, 'no gap was needed');
  check(inp.output().toString().includes(wantIn), 'input typed across the cuts arrived exactly once (sha256 matches)');
  await proxy.close();
}, 280000);
