// Shared set-up for the tests of the credential proxy's user-facing parts
// (cli_proxy, web_proxy): tests/tools/fake_anthropic.mjs started on
// 127.0.0.1, a real key of the test's own, and the airlockd --config that
// names it as the upstream `anthropic` (its key in a 0600 file) with the
// direct path on a port the kernel picks (docs/proxy.md).
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';
import { SRC, onCleanup, waitFor, tmpdir } from './harness.mjs';

// A key no test could mistake for another: grep for "airlock[t]est" finds it.
export const newKey = () => `sk-ant-airlocktest-${crypto.randomBytes(16).toString('hex')}`;

// The fake Messages API, holding key: resolves { port, stats() }, where
// stats() is its GET /__stats ({ requests, credential_seen }).
export async function startFakeAnthropic({ key, answer, gapMs = 0 }) {
  const args = [path.join(SRC, 'tests/tools/fake_anthropic.mjs'), '--key', key, '--gap-ms', String(gapMs)];
  if (answer) args.push('--answer', answer);
  const p = spawn('node', args, { stdio: ['ignore', 'pipe', 'inherit'] });
  onCleanup(() => { p.kill('SIGKILL'); });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  const port = await waitFor(() => Number((/listening (\d+)/.exec(out) || [])[1] || 0), 10000, 'the fake upstream');
  const stats = () => new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/__stats', agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString())));
    }).on('error', reject);
  });
  return { port, stats };
}

// An airlockd --config file with the upstream `anthropic` (kind anthropic,
// x-api-key, paths /v1/) at the fake's port and proxy-listen on port 0,
// and with other: an upstream `other` of kind http, bearer, at the same
// port with the same key; returns its path.
export function upstreamConfig(tag, { fakePort, key, other = false }) {
  const dir = tmpdir(tag);
  const secret = path.join(dir, 'anthropic.key');
  fs.writeFileSync(secret, `${key}\n`, { mode: 0o600 });
  const conf = path.join(dir, 'airlockd.conf');
  fs.writeFileSync(conf, [
    'proxy-listen = 127.0.0.1:0',
    `upstream.anthropic.url = http://127.0.0.1:${fakePort}`,
    'upstream.anthropic.kind = anthropic',
    'upstream.anthropic.header = x-api-key',
    `upstream.anthropic.secret-file = ${secret}`,
    'upstream.anthropic.paths = /v1/',
    ...(other ? [`upstream.other.url = http://127.0.0.1:${fakePort}`, `upstream.other.secret-file = ${secret}`] : []),
  ].join('\n') + '\n');
  return conf;
}
