// The web page end to end, in Debian's chromium (playwright-core) against a
// real airlockd and a local sandbox (issue 6):
// - without a session or key the API answers 401; sign-in with a wrong key
//   fails, with a right one sets an HttpOnly, SameSite=Strict cookie;
// - an operator opens a terminal running sh from the page's form, types
//   `echo airlock-$((6*7))` and airlock-42 is in xterm.js's buffer (a
//   screenshot is kept in <build>/artifacts/);
// - a viewer in a second browser context sees the same screen cell for cell,
//   its typing changes nothing, and both pages show both people;
// - a WebSocket upgrade with the session cookie but a foreign Origin: 403;
// - take-over from the page; a late joiner on vi sees the writer's screen
//   cell for cell; the exit code is shown;
// - the replay of the recording ends on the live terminal's final screen;
// - sign-out ends the session.
import fs from 'node:fs';
import path from 'node:path';
import { run, check, rawHttp } from '../interop/harness.mjs';
import { api } from '../interop/airlockd.mjs';
import {
  startWeb, launch, newPage, signIn, openTerminal, waitRole, typeIn, lines, waitLine, screen,
  diffScreens, sameScreen, shot, upgradeStatus, sleep,
} from '../web/webutil.mjs';

const names = (page) => page.$$eval('#viewers .v', (els) => els.map((e) => `${e.dataset.name}:${e.dataset.role}`).sort().join(','));

await run('web_terminal', async () => {
  const w = await startWeb('web');
  const { port, origin, keys } = w;

  // ---- no session, no key: 401; the page itself needs none
  let r = await api(port, 'GET', '/v1/terminals');
  check(r.status === 401, 'GET /v1/terminals without a session or key: 401');
  r = await api(port, 'GET', '/v1/session');
  check(r.status === 401, 'GET /v1/session without a cookie: 401');
  r = await rawHttp(port, 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  check(r.status === 200 && /<title>Airlock<\/title>/.test(r.body), 'GET / serves the page without auth');
  r = await rawHttp(port, 'GET /vendor/xterm.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 10000);
  check(r.status === 200, 'GET /vendor/xterm.js is served from the build (no CDN)');

  const browser = await launch();

  // ---- sign-in
  const A = await newPage(browser);
  await A.page.goto(`${origin}/`);
  await A.page.waitForSelector('#key');
  await A.page.fill('#key', 'alk_' + 'A'.repeat(43));
  await A.page.click('#signin-btn');
  await A.page.waitForFunction(() => /not valid/.test(document.querySelector('#signin-error').textContent));
  check(true, 'a wrong key is refused on the sign-in form');
  await signIn(A.page, origin, keys.otto);
  check(await A.page.textContent('#who-name') === 'otto', 'signed in as otto (operator)');
  const cookies = await A.ctx.cookies();
  const sc = cookies.find((c) => c.name === 'airlock_session');
  check(sc && sc.httpOnly && sc.sameSite === 'Strict' && sc.path === '/', 'the session is an HttpOnly, SameSite=Strict cookie on /');
  check(!(await A.page.evaluate(() => document.cookie)).includes('airlock_session'), "the page's script cannot read the session cookie");
  check(!(await A.page.evaluate(() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage))).includes('alk_'), 'the API key is not stored in the browser');
  await A.page.waitForSelector('#sandboxes tr[data-id=box] .dot.up', { timeout: 10000 });
  check(true, "the dashboard shows the sandbox 'box' with its link up");
  await shot(A.page, 'web_dashboard.png');

  // ---- open a terminal running sh, type, read airlock-42 from xterm.js
  const id = await openTerminal(A.page, { command: 'sh' });
  check(/^[A-Za-z0-9._-]+$/.test(id), `the form opened terminal ${id}; the page is its writer`);
  await waitLine(A.page, /[$#] ?$/);
  await typeIn(A.page, 'echo airlock-$((6*7))\n');
  await waitLine(A.page, /^airlock-42$/);
  check(true, 'typed `echo airlock-$((6*7))`: airlock-42 is in xterm.js\'s buffer');
  const png = await shot(A.page, 'web_terminal.png');
  check(fs.statSync(png).size > 1000, `screenshot saved: ${png}`);

  // ---- the cookie carries the WebSocket; a foreign Origin is refused
  const cookieHdr = `airlock_session=${sc.value}`;
  check(await upgradeStatus(port, id, { Cookie: cookieHdr, Origin: 'http://evil.example' }) === 403,
    'a WebSocket upgrade with the session cookie and a foreign Origin: 403');
  check(await upgradeStatus(port, id, { Origin: origin }) === 401, 'a WebSocket upgrade without cookie or key: 401');
  r = await api(port, 'GET', `/v1/terminals/${id}`, keys.ada);
  check(r.json.writer === 'otto', 'the API names otto as the writer');

  // ---- a viewer in a second browser context
  const V = await newPage(browser);
  await signIn(V.page, origin, keys.vic);
  await V.page.waitForSelector(`#terminals tr[data-id="${id}"] a.watch`, { timeout: 10000 });
  check(await V.page.$(`#terminals tr[data-id="${id}"] a.drive`) === null, 'a viewer-role user is offered Watch, not Open');
  await V.page.click(`#terminals tr[data-id="${id}"] a.watch`);
  await waitRole(V.page, 'viewer');
  check(/OBSERVER/.test(await V.page.textContent('#role')), 'the viewer page says it is an observer');
  check(await V.page.isHidden('#takeover'), 'no take-over button for a viewer-role user');
  let s = await sameScreen(A.page, V.page);
  check(s.diffs.length === 0 && /airlock-42/.test(s.b.text),
    `the viewer sees the writer's screen cell for cell${s.diffs.length ? `: ${s.diffs.slice(0, 4).join('; ')}` : ''}`);
  await A.page.waitForFunction(() => document.querySelectorAll('#viewers .v').length === 2, null, { timeout: 10000 });
  await V.page.waitForFunction(() => document.querySelectorAll('#viewers .v').length === 2, null, { timeout: 10000 });
  check(await names(A.page) === 'otto:writer,vic:viewer' && await names(V.page) === 'otto:writer,vic:viewer',
    `both pages show both people: ${await names(V.page)}`);
  const before = (await lines(A.page)).join('\n');
  await typeIn(V.page, 'echo VIEWER-TYPED-$((2*3))\n');
  await V.page.waitForSelector('#notice:not([hidden])', { timeout: 5000 });
  check(/not sent/.test(await V.page.textContent('#notice')), "the viewer's page says its keystrokes are not sent");
  await sleep(1000);
  check((await lines(A.page)).join('\n') === before && !(await lines(V.page)).some((l) => /VIEWER-TYPED/.test(l)),
    "the viewer's typing changes nothing, on either screen");
  await typeIn(A.page, 'echo after-$((1+2))\n');
  await waitLine(V.page, /^after-3$/);
  s = await sameScreen(A.page, V.page);
  check(s.diffs.length === 0, 'after more output both screens are still equal');

  // ---- the writer's window shrinks: the terminal follows it, the viewer too
  const wasCols = await A.page.evaluate(() => window.term.cols);
  await A.page.setViewportSize({ width: 760, height: 500 });
  await A.page.waitForFunction((c) => window.term.cols < c, wasCols, { timeout: 5000 });
  const size = await A.page.evaluate(() => [window.term.cols, window.term.rows]);
  let until = Date.now() + 10000;
  while (Date.now() < until && (r = await api(port, 'GET', `/v1/terminals/${id}`, keys.ada)).json.cols !== size[0]) await sleep(100);
  check(r.json.cols === size[0] && r.json.rows === size[1], `the writer's page resized the terminal to its window: ${size.join('x')} (API: ${r.json.cols}x${r.json.rows})`);
  await typeIn(A.page, 'stty size; echo resized-$((4*4))\n');
  await waitLine(A.page, /^resized-16$/);
  check((await lines(A.page)).includes(`${size[1]} ${size[0]}`), 'the program sees the new size (stty size)');
  await V.page.waitForFunction((sz) => window.term.cols === sz[0] && window.term.rows === sz[1], size, { timeout: 10000 });
  s = await sameScreen(A.page, V.page);
  check(s.diffs.length === 0, `the viewer follows the new size with the same screen${s.diffs.length ? `: ${s.diffs.slice(0, 4).join('; ')}` : ''}`);
  await A.page.setViewportSize({ width: 1000, height: 640 });
  r = await api(port, 'GET', `/v1/terminals/${id}/recording`, keys.ada);
  check(!/VIEWER-TYPED/.test(r.body), 'nothing the viewer typed is in the recording');

  // ---- take-over by another operator
  const O = await newPage(browser);
  await signIn(O.page, origin, keys.olga);
  await O.page.goto(`${origin}/#/t/${id}`);
  await waitRole(O.page, 'viewer');
  check(await O.page.isVisible('#takeover'), 'a second operator attaches as a viewer with a take-over button');
  await O.page.click('#takeover');
  await waitRole(O.page, 'writer');
  await waitRole(A.page, 'viewer');
  check(true, "take-over: olga's page is the writer, otto's page shows him as an observer");
  await V.page.waitForFunction(() => document.querySelectorAll('#viewers .v').length === 3 &&
    document.querySelector('#viewers .v[data-name=olga]').dataset.role === 'writer', null, { timeout: 10000 });
  check(await names(V.page) === 'olga:writer,otto:viewer,vic:viewer', `presence follows: ${await names(V.page)}`);
  await typeIn(A.page, 'echo OLD-WRITER\n');
  await typeIn(O.page, 'echo taken-$((2+3))\n');
  await waitLine(A.page, /^taken-5$/);
  check(!(await lines(O.page)).some((l) => /OLD-WRITER/.test(l)), "the demoted writer's keystrokes do not reach the terminal");

  // ---- a late joiner on a full-screen program
  const work = path.join(w.dir, 'sandboxes', 'box', 'work');
  fs.mkdirSync(work, { recursive: true });
  fs.writeFileSync(path.join(work, 'notes.txt'),
    Array.from({ length: 80 }, (_, i) => `line ${i} \u00e9t\u00e9 ${'#'.repeat(i % 40)} \u4e16\u754c`).join('\n'));
  await typeIn(O.page, 'vi -u NONE -c "set number" notes.txt\n');
  await waitLine(O.page, /line 3 /);
  await typeIn(O.page, '12Gddkkx');
  await O.page.keyboard.press('Control+D');
  await sleep(1500);
  const L = await newPage(browser);
  await signIn(L.page, origin, keys.vic);
  await L.page.goto(`${origin}/#/t/${id}/watch`);
  await waitRole(L.page, 'viewer');
  await L.page.waitForFunction(() => window.link && window.link.snapshots > 0, null, { timeout: 10000 });
  s = await sameScreen(O.page, L.page);
  check(s.a.alt === 'alternate' && /line \d+/.test(s.a.text) && s.diffs.length === 0,
    `a late joiner on vi sees the writer's screen cell for cell${s.diffs.length ? `: ${s.diffs.slice(0, 4).join('; ')}` : ''}`);
  await shot(L.page, 'web_late_joiner.png');
  await O.page.keyboard.press('Escape');
  await typeIn(O.page, ':q!\n');
  await waitLine(O.page, /^taken-5$/);
  await typeIn(O.page, 'printf "\\033[1;32mgreen\\033[0m\\n"; exit 3\n');
  await O.page.waitForSelector('#exit:not([hidden])', { timeout: 10000 });
  check(await O.page.getAttribute('#exit', 'data-code') === '3' && /code 3/.test(await O.page.textContent('#exit')),
    'the shell exits: the page shows exit code 3');
  await A.page.waitForSelector('#exit:not([hidden])', { timeout: 10000 });
  const live = await screen(O.page);

  // ---- replay reaches the live terminal's final screen
  const R = await newPage(browser);
  await signIn(R.page, origin, keys.otto /* the creator: recordings are for admins and the creator */);
  await R.page.waitForSelector(`#terminals tr[data-id="${id}"] a.replay`, { timeout: 10000 });
  await R.page.click(`#terminals tr[data-id="${id}"] a.replay`);
  await R.page.waitForFunction(() => window.player && window.player.duration > 0, null, { timeout: 10000 });
  check(await R.page.isEnabled('#play') && await R.page.isEnabled('#timeline'), 'the replay has play/pause and a timeline');
  await R.page.selectOption('#speed', '16');
  await R.page.evaluate(() => window.player.seek(window.player.duration));
  await R.page.waitForFunction(() => window.player.drawn && window.player.exitStatus !== null, null, { timeout: 20000 });
  const rep = await screen(R.page);
  const rd = diffScreens(live, rep);
  check(/green/.test(rep.text) && rd.length === 0,
    `the replay ends on the live terminal's final screen${rd.length ? `: ${rd.slice(0, 4).join('; ')}` : ''}`);
  await R.page.waitForSelector('#replay-status:not([hidden])');
  check(/status 3/.test(await R.page.textContent('#replay-status')), 'the replay shows the exit status');
  // seek back to the start and play again at speed: same end
  await R.page.evaluate(() => window.player.seek(0));
  await R.page.evaluate(() => window.player.play());
  await R.page.waitForFunction(() => !window.player.playing && window.player.drawn, null, { timeout: 30000 });
  check(diffScreens(live, await screen(R.page)).length === 0, 'played again from the start at 16×: the same final screen');
  await shot(R.page, 'web_replay.png');

  // ---- sign-out
  await A.page.click('#signout');
  await A.page.waitForSelector('#key', { timeout: 10000 });
  const after = await A.page.evaluate(async () => (await fetch('/v1/terminals')).status);
  check(after === 401, 'after sign-out the page gets 401 from the API');
  const errs = [A, V, O, L, R].flatMap((x) => x.page.errors).filter((e) => !/status of 401/.test(e));
  check(errs.length === 0, `no script errors in the pages${errs.length ? `: ${errs.slice(0, 3).join(' | ')}` : ''}`);
}, 180000);
