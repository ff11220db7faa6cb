// The web page's "Open a terminal" form and the credential proxy (issue
// 13's interface, web.md), in Debian's chromium against a real airlockd
// holding the key of its upstream `anthropic` (tests/tools/fake_anthropic.mjs,
// tests/interop/upstream.mjs) with the proxy's direct path served:
// - GET /v1/proxy/upstreams: names and kinds for an operator (no URL, no
//   key, no secret file), 403 for a viewer, 401 without a credential;
// - an operator's form offers the upstream as a checkbox; a terminal
//   opened with it checked is given it (GET /v1/terminals/ID shows its
//   upstreams; the page's title line names them), and `curl
//   $ANTHROPIC_BASE_URL/v1/messages` typed in the page prints the fake's
//   answer, which got the real key and never the credential;
// - opened again with the box unchecked, a terminal has no upstream;
// - a viewer's page has no form.
import { run, check } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import { startWeb, launch, newPage, signIn, openTerminal, typeIn, waitLine, shot } from '../web/webutil.mjs';
import { newKey, startFakeAnthropic, upstreamConfig } from '../interop/upstream.mjs';

const ANSWER = 'web-proxy-answered';
const BOX = '#open-proxy input[name=proxy][value=anthropic]';

await run('web_proxy', async () => {
  const key = newKey();
  const fake = await startFakeAnthropic({ key, answer: ANSWER });
  const conf = upstreamConfig('webproxy-conf', { fakePort: fake.port, key });
  const w = await startWeb('webproxy', { args: ['--config', conf] });
  const { port, origin, keys } = w;

  // ---- the route the form reads
  let r = await api(port, 'GET', '/v1/proxy/upstreams', keys.otto);
  check(r.status === 200 && JSON.stringify(r.json) === '[{"name":"anthropic","kind":"anthropic","served":true}]',
    `GET /v1/proxy/upstreams: names and kinds for an operator (${r.status} ${r.body})`);
  check(!r.body.includes(String(fake.port)) && !r.body.includes(key) && !/key|url|http/i.test(r.body),
    'no URL, key or secret file in it');
  r = await api(port, 'GET', '/v1/proxy/upstreams', keys.vic);
  check(r.status === 403, `a viewer: 403 (${r.status} ${r.body})`);
  r = await api(port, 'GET', '/v1/proxy/upstreams');
  check(r.status === 401, `no credential: 401 (${r.status})`);

  const browser = await launch();
  const A = await newPage(browser);
  await signIn(A.page, origin, keys.otto);

  // ---- the form offers the upstream; checked, the terminal is given it
  await A.page.waitForSelector(BOX, { timeout: 10000 });
  check(await A.page.isVisible(BOX) && !(await A.page.isChecked(BOX)) && await A.page.isEnabled(BOX),
    'the form offers the upstream anthropic as a checkbox, unchecked');
  check(await A.page.getAttribute(BOX, 'data-kind') === 'anthropic', 'with its kind');
  await shot(A.page, 'web_proxy_form.png');
  await A.page.check(BOX);
  const id = await openTerminal(A.page, { command: 'sh' });
  r = await api(port, 'GET', `/v1/terminals/${id}`, keys.otto);
  check(r.status === 200 && r.json.proxy && r.json.proxy.upstreams.join() === 'anthropic' && r.json.proxy.revoked === false,
    `the terminal opened with it checked has the upstream (GET /v1/terminals/${id}: ${JSON.stringify(r.json.proxy)})`);
  await A.page.waitForFunction(() => /proxy: anthropic/.test(document.querySelector('#info').textContent), null, { timeout: 10000 });
  check(true, 'the terminal\'s title line names its upstream');

  // ---- the agent's call, typed in the page
  await waitLine(A.page, /[$#] ?$/);
  await typeIn(A.page, 'curl -sS "$ANTHROPIC_BASE_URL/v1/messages" -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN"' +
    ' -H "content-type: application/json" -d \'{"model":"fake","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}\'' +
    ' | grep -o \'"text":"[^"]*"\'\n');
  await waitLine(A.page, new RegExp(`^"text":"${ANSWER}"$`));
  check(true, 'curl $ANTHROPIC_BASE_URL/v1/messages in the page\'s terminal prints the fake\'s answer');
  await typeIn(A.page, 'echo "KEYS=$(env | grep -c "airlock[t]est")"\n');
  await waitLine(A.page, /^KEYS=0$/);
  check(true, 'and the terminal\'s environment holds no key');
  const st = await fake.stats();
  const calls = st.requests.filter((x) => x.url === '/v1/messages');
  check(calls.length === 1 && calls[0].headers['x-api-key'] === key && !calls[0].headers.authorization && !st.credential_seen,
    'the fake got the real key in x-api-key, and never the credential');
  await shot(A.page, 'web_proxy_terminal.png');

  // ---- unchecked: no upstream
  await A.page.goto(`${origin}/#/`);
  await A.page.waitForSelector(BOX, { timeout: 10000 });
  check(!(await A.page.isChecked(BOX)), 'back on the dashboard the box is unchecked');
  const id2 = await openTerminal(A.page, { command: 'sh' });
  r = await api(port, 'GET', `/v1/terminals/${id2}`, keys.otto);
  check(r.status === 200 && !('proxy' in r.json), `a terminal opened with it unchecked has no upstream (${id2})`);

  // ---- a viewer: no form at all
  const V = await newPage(browser);
  await signIn(V.page, origin, keys.vic);
  await V.page.waitForSelector('#sandboxes tr[data-id=box]', { timeout: 10000 });
  check(await V.page.$('#open-form') === null && await V.page.$('#open-proxy') === null, 'a viewer\'s page has no form and no upstreams');

  const errs = [A, V].flatMap((x) => x.page.errors);
  check(errs.length === 0, `no script errors in the pages${errs.length ? `: ${errs.slice(0, 3).join(' | ')}` : ''}`);
}, 180000);
