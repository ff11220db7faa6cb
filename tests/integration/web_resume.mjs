// The web page survives dropped connections (issue 6): the page is loaded
// through a TCP proxy in front of a real airlockd (so its Origin, its Host
// and its WebSocket all go through the proxy); while the terminal prints a
// checksummed stream the test cuts every connection, twice. The page
// reconnects by itself (ATTACH with its offset) and the stream is in
// xterm.js's buffer complete, in order, exactly once.
import { run, check } from '../interop/harness.mjs';
import { startProxy } from '../interop/proxy.mjs';
import { onCleanup } from '../interop/harness.mjs';
import { startWeb, launch, newPage, signIn, openTerminal, typeIn, lines, waitLine, sleep } from '../web/webutil.mjs';

const N = 3000;
// line i is "L<i> <(i*7919) % 10007>"; then "SUM <sum of the check values>"
const expectLine = (i) => `L${i} ${(i * 7919) % 10007}`;

await run('web_resume', async () => {
  const w = await startWeb('webres');
  const proxy = await startProxy(w.port);
  onCleanup(() => proxy.close());
  const origin = `http://127.0.0.1:${proxy.port}`;
  const browser = await launch();
  const { page } = await newPage(browser);
  await signIn(page, origin, w.keys.otto);
  const id = await openTerminal(page, { command: 'sh' });
  check(!!id, `terminal ${id} opened through the proxy`);
  await waitLine(page, /[$#] ?$/);
  // about 40 KB, paced so that the cuts fall in the middle of it
  await typeIn(page, `i=0; s=0; while [ $i -lt ${N} ]; do c=$(( (i*7919) % 10007 )); echo "L$i $c"; s=$((s+c)); i=$((i+1));` +
    ' [ $((i%150)) = 0 ] && sleep 0.1; done; echo "SUM $s"; echo stream-$((40+2))-done\n');
  await waitLine(page, /^L600 /);
  const cut1 = proxy.cut();
  check(cut1 >= 1, `cut ${cut1} connection(s) through the proxy mid-stream`);
  await page.waitForFunction(() => window.link.reconnects >= 1 && window.link.state === 'live', null, { timeout: 15000 });
  check(true, 'the page reconnected by itself');
  await waitLine(page, /^L1800 /, 20000);
  const cut2 = proxy.cut();
  check(cut2 >= 1, 'cut again');
  await waitLine(page, /^stream-42-done$/, 30000);
  check(await page.evaluate(() => window.link.reconnects) >= 2, 'the page reconnected after each cut');
  const ls = await lines(page);
  const got = ls.filter((l) => /^L\d+ /.test(l));
  let bad = -1;
  for (let i = 0; i < N; i++) if (got[i] !== expectLine(i)) { bad = i; break; }
  const sumLine = ls.find((l) => /^SUM \d+$/.test(l));
  let sum = 0;
  for (let i = 0; i < N; i++) sum += (i * 7919) % 10007;
  check(got.length === N && bad < 0, `all ${N} lines are in the buffer, in order, exactly once (got ${got.length}` +
    `${bad >= 0 ? `, first wrong at ${bad}: ${JSON.stringify(got[bad])}` : ''})`);
  check(sumLine === `SUM ${sum}`, `the checksum printed after the stream matches (${sumLine})`);
  const gaps = await page.evaluate(() => window.link.gaps.filter((g) => g.resync).length);
  check(gaps === 0, 'no output was skipped (no resync) across the drops');
  // the page still drives the terminal
  await typeIn(page, 'echo after-$((3*3))\n');
  await waitLine(page, /^after-9$/);
  check(true, 'typing works after the reconnects');
  check(page.errors.filter((e) => !/401/.test(e)).length === 0, `no script errors (${page.errors.join(' | ')})`);
  await sleep(100);
}, 180000);
