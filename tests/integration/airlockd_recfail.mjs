// A recording that cannot be written (here: airlockd's file size limit,
// RLIMIT_FSIZE, stands in for a full disk; both are write errors on the
// same path) is reported in the API, /metrics, the audit log and the log,
// and the terminal keeps running: its output still reaches the client and
// it still takes input. Also: the per-sandbox link gauges in /metrics.
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, sleep } from '../interop/harness.mjs';
import { addUser, startAirlockd, addLocalSandbox, api, attach } from '../interop/airlockd.mjs';

const LIMIT = 1500000; // bytes any file of airlockd may reach
const OUT = 3000000;   // what the terminal prints: twice the limit

await run('airlockd_recfail', async () => {
  const base = tmpdir('recfail');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  const d = await startAirlockd({ dir, wrap: ['prlimit', `--fsize=${LIMIT}`, '--'] });
  check((await addLocalSandbox(d.port, admin)).link_up, 'the local sandbox links up under the file size limit');
  let r;
  // the first PING goes at link up: the RTT is known at once
  let m = '';
  for (let i = 0; i < 50; i++) {
    m = (await api(d.port, 'GET', '/metrics', op)).body;
    if (/airlock_link_rtt_seconds\{sandbox="box"\} [0-9.]+/.test(m)) break;
    await sleep(100);
  }
  check(/airlock_link_up\{sandbox="box"\} 1\n/.test(m) && /airlock_link_rtt_seconds\{sandbox="box"\} 0\.\d{6}\n/.test(m),
    'GET /metrics shows the sandbox link up and its round-trip time');

  r = await api(d.port, 'POST', '/v1/terminals', op, {
    sandbox: 'box', argv: ['sh', '-c', `stty -onlcr; sleep 0.5; head -c ${OUT} /dev/zero | tr '\\0' x; echo; echo REC-END; exec sh`],
  });
  check(r.status === 201, 'a terminal that prints twice the size limit');
  const id = r.json.id;
  const w = await attach(d.port, id, op);
  const text = () => Buffer.concat([w.ch.snapshot ? w.ch.snapshot.bytes : Buffer.alloc(0), ...w.ch.out]).toString('latin1');
  await w.ctl.wait(() => w.ch.next[1] >= OUT && /REC-END/.test(text().slice(-200)), 'all the output to reach the client', 60000);
  check(w.ch.next[1] >= OUT, `the client got all ${OUT} bytes though the recording failed`);
  w.ch.write('echo still-$((6*7))\n');
  await w.ctl.wait(() => /still-42/.test(text().slice(-2000)), 'the terminal to answer input', 20000);
  check(true, 'the terminal still runs commands after the recording failed');

  r = await api(d.port, 'GET', `/v1/terminals/${id}`, op);
  check(r.status === 200 && typeof r.json.recording_error === 'string' && /too large|too big|File/i.test(r.json.recording_error),
    `the API reports the recording error (${JSON.stringify(r.json.recording_error)})`);
  check(r.json.state === 'running', 'the terminal is still running');
  m = (await api(d.port, 'GET', '/metrics', op)).body;
  check(/airlock_recording_errors_total 1\n/.test(m), '/metrics counts the recording error');
  r = await api(d.port, 'GET', '/v1/audit', admin);
  check(r.json.some((e) => e.action === 'recording_failed' && e.target === id), 'the audit log has recording_failed for the terminal');
  const mints = r.json.filter((e) => e.action === 'token_mint' && e.target === 'box');
  check(mints.some((e) => /"for":"link"/.test(e.detail || JSON.stringify(e))),
    `every runner token minted is audited (${mints.length} for box)`);
  check(/recording failed/.test(fs.readFileSync(d.log, 'utf8')), 'the log says the recording failed');

  // what was recorded before the failure is served, whole lines of JSON
  r = await api(d.port, 'GET', `/v1/terminals/${id}/recording`, op);
  const lines = r.body.split('\n').filter((l) => l.length);
  let parsed = 0;
  for (const l of lines) { try { JSON.parse(l); parsed++; } catch { /* counted below */ } }
  check(r.status === 200 && lines.length > 1 && parsed === lines.length && r.body.length <= LIMIT,
    `the recording up to the failure is served, ${lines.length} lines, all JSON (${r.body.length} bytes)`);

  w.ch.write('exit 3\n');
  await w.ch.waitExit(20000);
  check(w.ch.exit.code === 3, 'the exit code still reaches the client');
  const st = await d.stop();
  check(st.code === 0, 'airlockd stops cleanly');
}, 180000);
