// Helpers for the web page's tests (tests/integration/web_*.mjs): a real
// airlockd serving the page from the build (<build>/web/), a local sandbox,
// Debian's chromium driven by playwright-core, and readers of the page's
// xterm.js buffers (window.term) to compare screens cell by cell.
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { BIN, tmpdir, onCleanup, sleep } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, stopLocalRunners } from '../interop/airlockd.mjs';

export const CHROMIUM = process.env.AL_CHROMIUM || '/usr/bin/chromium';
export const ARTIFACTS = path.join(BIN, 'artifacts');

// airlockd with four users and a local sandbox 'box' whose link is up.
export async function startWeb(tag, { args = [] } = {}) {
  if (!fs.existsSync(path.join(BIN, 'web', 'index.html')) || !fs.existsSync(path.join(BIN, 'web', 'vendor', 'xterm.js'))) {
    throw new Error(`${BIN}/web is incomplete: build with cmake after tools/deps.sh (npm ci)`);
  }
  const base = tmpdir(tag);
  const dir = path.join(base, 'data');
  const keys = {
    ada: addUser(dir, 'ada', 'admin'),
    otto: addUser(dir, 'otto', 'operator'),
    olga: addUser(dir, 'olga', 'operator'),
    vic: addUser(dir, 'vic', 'viewer'),
  };
  const d = await startAirlockd({ dir, args });
  // the harness's time limit exits without its clean-ups: stop what we
  // started anyway (by pid; the sandbox's runner leads its own group)
  process.on('exit', () => {
    try { if (!d.dead) d.p.kill('SIGKILL'); } catch { /* gone */ }
    stopLocalRunners(dir);
  });
  const r = await api(d.port, 'POST', '/v1/sandboxes', keys.ada, { id: 'box', kind: 'local' });
  if (r.status !== 201) throw new Error(`adding the sandbox: ${r.status} ${r.body}`);
  await waitLink(d.port, keys.ada, 'box');
  return { d, port: d.port, dir, base, keys, origin: `http://127.0.0.1:${d.port}` };
}

export async function waitLink(port, key, id, ms = 20000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const r = await api(port, 'GET', '/v1/sandboxes', key);
    const s = r.json && r.json.find((x) => x.id === id);
    if (s && s.link_up) return s;
    await sleep(100);
  }
  throw new Error(`sandbox ${id}: link never came up`);
}

// Debian's chromium, headless, a fresh profile (playwright makes one).
export async function launch() {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-renderer-backgrounding',
      '--disable-background-timer-throttling', '--disable-backgrounding-occluded-windows'],
  });
  onCleanup(async () => { await browser.close().catch(() => {}); });
  return browser;
}

// A browser context (its own cookies) with one page, console errors collected.
export async function newPage(browser, { width = 1000, height = 640 } = {}) {
  const ctx = await browser.newContext({ viewport: { width, height } });
  const page = await ctx.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') page.errors.push(m.text()); });
  return { ctx, page };
}

export async function signIn(page, origin, key) {
  await page.goto(`${origin}/`);
  await page.waitForSelector('#key', { timeout: 10000 });
  await page.fill('#key', key);
  await page.click('#signin-btn');
  await page.waitForSelector('#who:not([hidden])', { timeout: 10000 });
}

// Fill the dashboard's form; resolves the new terminal's id once the page
// is attached as the writer.
export async function openTerminal(page, { command = 'sh', cols, rows } = {}) {
  await page.waitForSelector('#open-form', { timeout: 10000 });
  await page.waitForFunction(() => document.querySelector('#open-sandbox')?.options.length > 0, null, { timeout: 10000 });
  await page.fill('#open-command', command);
  if (cols) await page.fill('#open-cols', String(cols));
  if (rows) await page.fill('#open-rows', String(rows));
  await page.click('#open-btn');
  await page.waitForFunction(() => /^#\/t\//.test(location.hash), null, { timeout: 10000 });
  const id = (await page.evaluate(() => location.hash)).replace(/^#\/t\//, '');
  await waitRole(page, 'writer');
  return id;
}

export async function waitRole(page, role, ms = 10000) {
  await page.waitForSelector(`#role[data-role=${role}]`, { timeout: ms });
}

// Type as a person would: focus the terminal, then key events.
export async function typeIn(page, text) {
  await page.click('#term .xterm-screen');
  await page.keyboard.type(text, { delay: 5 });
}

// Every line of the page's terminal (scrollback and screen), as text.
export function lines(page) {
  return page.evaluate(() => {
    const b = window.term.buffer.active, out = [];
    for (let y = 0; y < b.length; y++) out.push(b.getLine(y).translateToString(true));
    return out;
  });
}

export async function waitLine(page, re, ms = 15000) {
  const until = Date.now() + ms;
  let ls = [];
  while (Date.now() < until) {
    ls = await lines(page);
    if (ls.some((l) => re.test(l))) return ls;
    await sleep(100);
  }
  throw new Error(`no line ${re} within ${ms} ms; the screen ends with:\n${ls.filter((l) => l).slice(-15).join('\n')}`);
}

// The visible screen, cell by cell: characters, width, colours, attributes;
// plus the cursor, the size and which buffer (normal, alternate) is shown.
export async function screen(page) {
  // wait until xterm.js parsed everything it was given
  await page.evaluate(() => new Promise((r) => window.term.write('', r)));
  return page.evaluate(() => {
    const t = window.term, b = t.buffer.active, grid = [];
    for (let y = 0; y < t.rows; y++) {
      const line = b.getLine(b.viewportY + y), row = [];
      for (let x = 0; x < t.cols; x++) {
        const c = line.getCell(x);
        row.push(`${c.getChars() || ' '}|${c.getWidth()}|${c.getFgColorMode()}:${c.getFgColor()}|${c.getBgColorMode()}:${c.getBgColor()}` +
          `|${c.isBold()}${c.isItalic()}${c.isDim()}${c.isUnderline()}${c.isBlink()}${c.isInverse()}${c.isInvisible()}${c.isStrikethrough()}`);
      }
      grid.push(row);
    }
    return {
      cols: t.cols, rows: t.rows, grid, cursor: [b.cursorX, b.cursorY], alt: b.type,
      text: grid.map((r) => r.map((c) => c.split('|')[0]).join('').trimEnd()).join('\n'),
    };
  });
}

export function diffScreens(a, b) {
  const d = [];
  if (a.cols !== b.cols || a.rows !== b.rows) d.push(`size ${a.cols}x${a.rows} != ${b.cols}x${b.rows}`);
  for (let y = 0; y < Math.min(a.rows, b.rows); y++) {
    for (let x = 0; x < Math.min(a.cols, b.cols); x++) {
      if (a.grid[y][x] !== b.grid[y][x]) d.push(`(${x},${y}) ${a.grid[y][x]} != ${b.grid[y][x]}`);
    }
  }
  if (a.cursor[0] !== b.cursor[0] || a.cursor[1] !== b.cursor[1]) d.push(`cursor ${a.cursor} != ${b.cursor}`);
  if (a.alt !== b.alt) d.push(`buffer ${a.alt} != ${b.alt}`);
  return d;
}

// Wait until two pages show the same screen (output may still be in flight).
export async function sameScreen(pa, pb, ms = 10000) {
  const until = Date.now() + ms;
  let a, b, d;
  do {
    a = await screen(pa); b = await screen(pb); d = diffScreens(a, b);
    if (!d.length) return { a, b, diffs: d };
    await sleep(200);
  } while (Date.now() < until);
  return { a, b, diffs: d };
}

export async function shot(page, name) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, name);
  await page.screenshot({ path: file });
  return file;
}

// A WebSocket upgrade to /v1/terminals/ID/attach with given headers:
// resolves the HTTP status (101 when upgraded).
export async function upgradeStatus(port, termId, headers) {
  const { WebSocket } = await import('ws');
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/terminals/${termId}/attach`, ['airlock.v1'], { headers, perMessageDeflate: false });
    const t = setTimeout(() => { ws.terminate(); resolve(-1); }, 5000);
    ws.on('unexpected-response', (req, res) => { clearTimeout(t); resolve(res.statusCode); req.destroy(); });
    ws.on('open', () => { clearTimeout(t); ws.close(); resolve(101); });
    ws.on('error', () => { clearTimeout(t); resolve(-1); });
  });
}

export { sleep };
