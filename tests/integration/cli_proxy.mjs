// `airlock run SANDBOX --proxy NAME -- CMD` (issue 13's interface, cli.md):
// airlockd holds the key of its upstream `anthropic`
// (tests/tools/fake_anthropic.mjs, tests/interop/upstream.mjs) and serves
// the proxy's direct path; the CLI runs, in a local sandbox,
//   sh -c 'curl $ANTHROPIC_BASE_URL/v1/messages -H "Authorization: Bearer
//          $ANTHROPIC_AUTH_TOKEN" ...'
// and prints the fake's answer: the command's environment holds the base
// URL and a credential, never the key; the fake got the real key only.
// - --proxy is repeatable: the terminal is given each upstream named.
// - Without --proxy the terminal has no upstream (the request as before).
// - An upstream airlockd does not have, or a malformed name: airlockd's
//   400 as one line on stderr naming it (and the ones airlockd has), exit
//   65 as for every refusal, and no terminal started. --proxy without a
//   name is a usage error (64).
import { run, check } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { cliServer, runCli as cli, EXIT } from '../interop/cli.mjs';
import { newKey, startFakeAnthropic, upstreamConfig } from '../interop/upstream.mjs';

const ANSWER = 'cli-proxy-answered';
const MESSAGE = JSON.stringify({ model: 'fake', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
// What the command runs: whether its environment holds the key (grep's
// pattern does not match itself), its variables, then the call.
const AGENT = [
  'echo "KEYS=$(env | grep -c "airlock[t]est")"',
  'echo "BASE=$ANTHROPIC_BASE_URL"',
  'echo "TOKEN=$ANTHROPIC_AUTH_TOKEN"',
  'echo "PROXY_URL=${AIRLOCK_PROXY_URL:-none}"',
  `curl -sS "$ANTHROPIC_BASE_URL/v1/messages" -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN"` +
    ` -H "content-type: application/json" -H "anthropic-version: 2023-06-01" -d '${MESSAGE}'`,
  'c=$?; echo; echo "CURL-EXIT=$c"',
].join('; ');
const flat = (s) => String(s).trim().replace(/\n/g, ' | ').slice(0, 600);

// The terminal the last `airlock run` opened (the list is oldest first),
// as GET /v1/terminals/ID shows it.
async function lastTerminal(port, key) {
  const l = await api(port, 'GET', '/v1/terminals', key);
  const t = l.json[l.json.length - 1];
  return t ? (await api(port, 'GET', `/v1/terminals/${t.id}`, key)).json : null;
}

await run('cli_proxy', async () => {
  const key = newKey();
  const fake = await startFakeAnthropic({ key, answer: ANSWER });
  const conf = upstreamConfig('cliproxy-conf', { fakePort: fake.port, key, other: true });
  const { port, op, env } = await cliServer('cliproxy', { args: ['--config', conf] });
  const as = { env: env(op) };

  // ---- the call through the proxy, key held by airlockd only
  let r = await cli(['run', 'box', '--proxy', 'anthropic', '--', 'sh', '-c', AGENT], as);
  check(r.code === 0 && r.out.includes(`"text":"${ANSWER}"`) && /^CURL-EXIT=0$/m.test(r.out),
    `airlock run box --proxy anthropic -- sh -c 'curl $ANTHROPIC_BASE_URL/v1/messages ...' prints the fake's answer (${r.code}: ${flat(r.out)} ${flat(r.err)})`);
  check(/^KEYS=0$/m.test(r.out) && !r.out.includes(key), 'the command\'s environment does not hold the key');
  check(/^BASE=http:\/\/127\.0\.0\.1:\d+\/v1\/proxy\/anthropic$/m.test(r.out) && /^TOKEN=alp_[A-Za-z0-9_-]{43}$/m.test(r.out),
    'it holds ANTHROPIC_BASE_URL (the proxy\'s direct path) and a credential in ANTHROPIC_AUTH_TOKEN');
  const st = await fake.stats();
  const calls = st.requests.filter((x) => x.url === '/v1/messages');
  check(calls.length === 1 && calls[0].headers['x-api-key'] === key && !calls[0].headers.authorization && !st.credential_seen,
    'the fake got the real key in x-api-key, and never the credential');
  let t = await lastTerminal(port, op);
  check(t && t.proxy && t.proxy.upstreams.join() === 'anthropic' && t.proxy.revoked === true && t.state === 'closed',
    `its terminal was given [anthropic], and once closed its credential is revoked (${JSON.stringify(t && t.proxy)} ${t && t.state})`);

  // ---- repeated: every upstream named
  r = await cli(['run', 'box', '--proxy', 'anthropic', '--proxy', 'other', '--', 'sh', '-c', 'echo "PROXY_URL=$AIRLOCK_PROXY_URL"'], as);
  t = await lastTerminal(port, op);
  check(r.code === 0 && /^PROXY_URL=http:\/\/127\.0\.0\.1:\d+\/v1\/proxy$/m.test(r.out) && t.proxy && t.proxy.upstreams.join() === 'anthropic,other',
    `--proxy anthropic --proxy other: the terminal is given both (${r.code} ${flat(r.out)} ${JSON.stringify(t.proxy)})`);

  // ---- without --proxy: no upstream, the request as before
  r = await cli(['run', 'box', '--', 'sh', '-c', 'echo "BASE=${ANTHROPIC_BASE_URL:-none} PROXY=${AIRLOCK_PROXY_URL:-none}"'], as);
  t = await lastTerminal(port, op);
  check(r.code === 0 && /^BASE=none PROXY=none$/m.test(r.out) && !('proxy' in t),
    `without --proxy the terminal has no upstream (${flat(r.out)})`);

  // ---- refusals: one line, exit 65, nothing started
  const before = (await api(port, 'GET', '/v1/terminals', op)).json.length;
  r = await cli(['run', 'box', '--proxy', 'nope', '--', 'true'], as);
  const lines = r.err.trim().split('\n');
  check(r.code === EXIT.REFUSED && lines.length === 1 &&
    lines[0] === 'airlock: starting the command: "proxy"[0]: no upstream "nope" in airlockd\'s configuration (it has: anthropic, other) (the request was refused, HTTP 400)',
  `an upstream airlockd does not have: one line naming it and those it has, exit ${EXIT.REFUSED} (${r.code}: ${flat(r.err)})`);
  r = await cli(['run', 'box', '--proxy', 'anthropic', '--proxy', 'Anthropic', '--', 'true'], as);
  check(r.code === EXIT.REFUSED && r.err.trim().split('\n').length === 1 && /"proxy"\[1\]: must be 1 to 32 of a-z 0-9 _ -/.test(r.err),
    `a malformed name: airlockd's 400 naming which (${r.code}: ${flat(r.err)})`);
  check((await api(port, 'GET', '/v1/terminals', op)).json.length === before, 'no terminal was started by either');
  r = await cli(['run', 'box', '--', 'true', '--proxy'], as);
  check(r.code === 0, '--proxy after -- is the command\'s own');
  r = await cli(['run', 'box', '--proxy'], as);
  check(r.code === EXIT.USAGE && /--proxy wants a value/.test(r.err), `--proxy without a name: a usage error (${r.code}: ${flat(r.err)})`);
});
