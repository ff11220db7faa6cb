// --log-format json: airlockd (its signer and lws lines included) and
// airlock-runner write one JSON object a line with the same six keys, and a
// peer's hostile string (an identifier with a newline, quotes and an escape
// sequence) stays inside its string: it cannot forge a line or a key.
import fs from 'node:fs';
import { run, check, tmpdir, keygen, startRunner, rawHttp, sleep } from '../interop/harness.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';

const KEYS = ['time', 'ts', 'prog', 'instance', 'level', 'msg'];

// Every line of the log from byte `from` (a log file may hold an earlier
// process's lines before): parsed, or the line that is not JSON.
function lines(log, from = 0) {
  return fs.readFileSync(log).subarray(from).toString('utf8').split('\n').filter((l) => l !== '').map((l) => {
    try { return { obj: JSON.parse(l), line: l }; } catch { return { obj: null, line: l }; }
  });
}

function checkLines(what, ls, prog) {
  const bad = ls.filter(({ obj }) => !obj || typeof obj !== 'object' || Object.keys(obj).join() !== KEYS.join() ||
    !['error', 'info', 'debug'].includes(obj.level) || typeof obj.msg !== 'string' || typeof obj.instance !== 'string' ||
    typeof obj.ts !== 'number' || Math.abs(Date.parse(obj.time) - obj.ts * 1000) > 1 ||
    !(obj.prog === prog || obj.prog.startsWith(`${prog}-`)));
  check(ls.length > 0 && bad.length === 0,
    `${what}: ${ls.length} lines, each one JSON object with ${KEYS.join(', ')}${bad.length ? ` (bad: ${bad[0].line})` : ''}`);
}

await run('log_json', async () => {
  const dir = tmpdir('logjson');
  const admin = addUser(dir, 'ada', 'admin');
  const d = await startAirlockd({ dir, args: ['--log-format', 'json'] });
  // a refused key, a request to a sandbox that does not exist, a terminal
  await api(d.port, 'GET', '/v1/terminals', 'alk_' + 'Z'.repeat(43));
  const hostile = 'x\n1 airlockd[-] error forged\u001b[2J"';
  await api(d.port, 'POST', '/v1/terminals', admin, { sandbox: hostile, argv: ['true'] });
  await sleep(200);
  const ls = lines(d.log, d.from);
  checkLines('airlockd', ls, 'airlockd');
  check(ls.some(({ obj }) => obj && obj.instance === 'signer'), 'the signer process logs JSON too');
  check(ls.some(({ obj }) => obj && /serving http on 127\.0\.0\.1:\d+/.test(obj.msg)), 'the serving line is there, as JSON');
  check(!ls.some(({ line }) => line.startsWith('1 airlockd')), 'no line forged by a request');

  // the runner: a hostile upgrade's identifier is logged inside a string
  const rdir = tmpdir('logjson-r');
  keygen(rdir);
  const r = await startRunner({ id: 'sbx-1', dir: rdir, args: ['--log-format', 'json', '--verbose'] });
  await rawHttp(r.port, 'GET /?identifier=sbx-1%0a1%20forged&api-version=2024-02-02-preview HTTP/1.1\r\n' +
    'Host: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
    'Sec-WebSocket-Version: 13\r\nAuthorization: Bearer garbage\r\n\r\n').catch(() => null);
  await sleep(200);
  const rl = lines(r.log, r.from);
  checkLines('airlock-runner', rl, 'airlock-runner');
  check(rl.some(({ obj }) => obj && /listening on/.test(obj.msg)), 'the runner\'s listening line, as JSON');

  // a bad value is a usage error, not a silent default
  const { spawnSync } = await import('node:child_process');
  const bad = spawnSync(process.env.AL_BIN + '/airlockd', ['serve', '--data', dir, '--listen', '127.0.0.1:0', '--log-format', 'xml']);
  check(bad.status === 2 && /log format 'xml': text or json/.test(bad.stderr.toString()), 'airlockd --log-format xml: exit 2, says why');
  const badr = spawnSync(process.env.AL_BIN + '/airlock-runner', ['--log-format', 'yaml']);
  check(badr.status === 2, 'airlock-runner --log-format yaml: exit 2');
});
