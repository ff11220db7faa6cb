// kill -9 airlockd in the middle of a checksummed 20 MB stream, start it
// again: the local runner (which outlives it) dials back, airlockd adopts
// the terminal at its durable offsets, the attached client reconnects and
// has the stream exactly once, and so does the recording.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { run, check, tmpdir, sleep, pollUntil } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, checksummedStream } from '../interop/airlockd.mjs';

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

await run('airlockd_restart', async () => {
  const base = tmpdir('restart');
  const dir = path.join(base, 'data');
  const admin = addUser(dir, 'ada', 'admin');
  const op = addUser(dir, 'otto', 'operator');
  let d = await startAirlockd({ dir });
  const port = d.port;
  let r = await api(port, 'POST', '/v1/sandboxes', admin, { id: 'box', kind: 'local' });
  check(r.status === 201, 'a local sandbox');

  // 20 MB of printable lines, written into the workspace
  const work = path.join(dir, 'sandboxes', 'box', 'work');
  const { expected, argv } = checksummedStream(work, 20e6);

  for (let i = 0; i < 100; i++) {
    r = await api(port, 'GET', '/v1/sandboxes', admin);
    if (r.json[0].link_up) break;
    await sleep(100);
  }
  r = await api(port, 'POST', '/v1/terminals', op,
    { sandbox: 'box', argv });
  check(r.status === 201, 'a terminal that prints 20 MB');
  const id = r.json.id;
  const a = await attach(port, id, op);
  await a.ctl.wait(() => a.ch.next[1] >= 6e6, '6 MB received', 60000);
  d.p.kill('SIGKILL');
  await d.exited;
  const cut = a.ch.next[1];
  check(cut < expected.length, `airlockd killed with -9 after ${cut} bytes of ${expected.length}`);
  await a.ctl.wait(() => a.ctl.closeInfo, 'the client sees the drop', 10000);

  d = await startAirlockd({ dir, port });
  // the client reconnects (same session: it ATTACHes from where it is)
  for (let i = 0; ; i++) {
    try { await a.ctl.connect(a.url, a.headers); break; } catch (e) { if (i > 50) throw e; await sleep(200); }
  }
  await a.ch.waitExit(120000);
  const got = Buffer.concat(a.ch.out);
  check(!a.ch.gaps, 'no gap was reported to the client');
  check(got.length === expected.length && sha(got) === sha(expected),
    `the client has the stream exactly once (${got.length} bytes, sha256 ${sha(got).slice(0, 12)}…)`);

  r = await pollUntil(() => api(port, 'GET', `/v1/terminals/${id}`, op), (x) => x.json && x.json.state === 'exited', 10000);
  check(r.json.state === 'exited' && r.json.exit_code === 0, 'the terminal is known as exited with code 0 after the restart');
  const checkRecording = (when) => {
    const cast = fs.readFileSync(path.join(dir, 'recordings', `${id}.cast`), 'utf8').split('\n').filter((l) => l);
    const header = JSON.parse(cast[0]);
    let out = '';
    let exits = 0;
    for (const l of cast.slice(1)) {
      const ev = JSON.parse(l);
      if (ev[1] === 'o') out += ev[2];
      if (ev[1] === 'x') exits++;
      if (ev[1] === 'm' && !/^writer: /.test(ev[2])) throw new Error(`unexpected marker in the recording: ${ev[2]}`);
    }
    const rec = Buffer.from(out, 'utf8');
    check(header.version === 3 && exits === 1, `${when}: the recording is asciicast v3 with one exit event`);
    check(rec.length === expected.length && sha(rec) === sha(expected),
      `${when}: the recording holds the complete stream exactly once (${rec.length} bytes)`);
  };
  checkRecording('after the exit');

  // a terminal whose only client never acknowledged anything: no recording
  // size was ever stored; after a kill -9 its recording starts afresh
  r = await api(port, 'POST', '/v1/terminals', op,
    { sandbox: 'box', argv: ['sh', '-c', 'sleep 1; echo second-output; sleep 4; echo second-bye'] });
  const id2 = r.json.id;
  const b = await attach(port, id2, op);
  b.ctl.ws._socket.pause(); // reads (and acknowledges) nothing
  await sleep(2000);
  d.p.kill('SIGKILL');
  await d.exited;
  d = await startAirlockd({ dir, port });
  const c = await attach(port, id2, op);
  await c.ch.waitExit(30000);
  const seen = Buffer.concat([c.ch.snapshot ? c.ch.snapshot.bytes : Buffer.alloc(0), ...c.ch.out]).toString();
  check(/second-bye/.test(seen), 'the second terminal is adopted after the restart');
  await sleep(500);
  r = await api(port, 'GET', `/v1/terminals/${id2}`, op);
  check(!r.json.recording_error, `its recording works after the restart (${JSON.stringify(r.json.recording_error || '')})`);
  // the events only: the header names the command
  const rec2 = fs.readFileSync(path.join(dir, 'recordings', `${id2}.cast`), 'utf8').split('\n').slice(1).join('\n');
  check((rec2.match(/second-output/g) || []).length === 1 && (rec2.match(/second-bye/g) || []).length === 1,
    'it holds the output exactly once');
  const st = await d.stop();
  check(st.code === 0, 'airlockd stops cleanly');
  // the first terminal's recording was reopened (and cut at its stored
  // point) by the last restart: its exit event was stored with it
  checkRecording('after another restart');
}, 300000);
