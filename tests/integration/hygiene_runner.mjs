// airlock-runner --listen and one valid token used 300 times: every newer
// upgrade replaces the current link, and every replaced link is closed
// (4005), so exactly one stays open. Also: a wrong identifier is answered
// 403 like a bad token (runner_upgrade.mjs has the whole matrix).
import WebSocket from 'ws';
import { run, check, tmpdir, keygen, mint, startRunner, sleep } from '../interop/harness.mjs';

const UPGRADES = 300;

await run('hygiene_runner', async () => {
  const dir = tmpdir('hyg-runner');
  keygen(dir);
  const r = await startRunner({ id: 'sbx-1', dir });
  const tok = mint(dir, 'sbx-1');
  const links = [];
  for (let i = 0; i < UPGRADES; i++) {
    const l = { closed: false, code: 0, opened: false };
    l.ws = new WebSocket(r.url, 'airlock.v1', { headers: { Authorization: `Bearer ${tok}` } });
    l.ws.on('error', () => {});
    l.ws.on('close', (code) => { l.closed = true; l.code = code; });
    await new Promise((res) => { l.ws.on('open', () => { l.opened = true; res(); }); l.ws.on('close', res); setTimeout(res, 3000); });
    links.push(l);
    // bounded: the replaced links must go, or the per-address limit would refuse
    for (let w = 0; w < 40 && links.filter((x) => !x.closed).length > 8; w++) await sleep(50);
  }
  for (let w = 0; w < 100 && links.filter((x) => !x.closed).length > 1; w++) await sleep(50);
  check(links.every((x) => x.opened), `all ${UPGRADES} upgrades were accepted`);
  const open = links.filter((x) => !x.closed);
  check(open.length === 1 && open[0] === links[UPGRADES - 1], `${UPGRADES} upgrades with one token leave one link open (${open.length})`);
  check(links.slice(0, -1).every((x) => x.code === 4005), 'every replaced link was closed with 4005');
  links[UPGRADES - 1].ws.terminate();
  await sleep(200);
}, 120000);
