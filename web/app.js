// Airlock's web page: sign-in, the sandboxes and terminals (live), a live
// terminal (airlock.v1 through client.js) and the replay of recordings
// (replay.js). One page, routed by the URL's hash:
//   #/               sandboxes and terminals, a form to open a terminal
//   #/t/ID           a terminal: drive it (operators) or watch it
//   #/t/ID/watch     the same, attached read-only (?mode=read)
//   #/replay/ID      the terminal's recording
// The session is an HttpOnly cookie airlockd sets on POST /v1/session plus
// the CSRF token in that answer's body (docs/web.md). Cookies reach every
// port of this host, so the cookie alone is worth nothing: the page keeps
// the token in sessionStorage (this origin only: scheme, host and port) and
// sends it with every API call (X-Airlock-CSRF) and every WebSocket
// (Sec-WebSocket-Protocol "airlock-csrf.TOKEN", after airlock.v1; never in
// the URL). The page never keeps the API key after sending it once.
//
// For tests, the live objects are on window: term, link, fit, player.

import { TerminalLink, WRITER, VIEWER } from './client.js';
import { parseCast, Player } from './replay.js';

const POLL_MS = 2000;
const KEEPALIVE_MS = 5 * 60 * 1000; // any call keeps the session from idling out (1 hour); it still ends at its expiry
const CSRF_KEY = 'airlock.csrf';   // sessionStorage

const $ = (sel, root = document) => root.querySelector(sel);
const main = $('#main');
let session = null;           // { name, role } once signed in
let leave = () => {};         // tears the current view down
let renewTimer = null;
const csrf = {
  get: () => { try { return sessionStorage.getItem(CSRF_KEY); } catch { return null; } },
  set: (t) => { try { if (t) sessionStorage.setItem(CSRF_KEY, t); else sessionStorage.removeItem(CSRF_KEY); } catch { /* storage off */ } },
};
const authHeaders = () => (csrf.get() ? { 'X-Airlock-CSRF': csrf.get() } : {});

// ---- small helpers ------------------------------------------------------------

// h('tag.class#id', {attrs}, ...children): DOM without innerHTML, so text
// from the server (names, argv) is always text.
function h(spec, attrs = {}, ...kids) {
  const m = /^([a-z0-9]+)((?:[.#][\w-]+)*)$/i.exec(spec);
  const el = document.createElement(m ? m[1] : spec);
  if (m) for (const part of m[2].match(/[.#][\w-]+/g) || []) {
    if (part[0] === '.') el.classList.add(part.slice(1)); else el.id = part.slice(1);
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of kids.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { ...authHeaders() } };
  if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
  let r;
  try { r = await fetch(path, init); } catch (e) { return { status: 0, json: null, error: String(e) }; }
  let json = null;
  try { json = await r.json(); } catch { /* not JSON */ }
  if (r.status === 401 && path !== '/v1/session') signedOut('Your session ended: sign in again.');
  return { status: r.status, json };
}

const mayOperate = () => session && (session.role === 'operator' || session.role === 'admin');
const fmtBytes = (n) => (n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(1)} GiB` : n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB`
  : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);
const fmtTime = (s) => { s = Math.max(0, s); const m = Math.floor(s / 60); return `${m}:${(s - m * 60).toFixed(1).padStart(4, '0')}`; };
// how long ago a time the API gives (Unix ms) was
const ago = (ms) => { if (!ms) return ''; const s = Math.max(0, Math.round((Date.now() - ms) / 1000)); return s < 60 ? `${s}s` : s < 3600 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`; };
function exitText(t) {
  if (t.exit_signal) return `signal ${t.exit_signal}`;
  if (t.state === 'exited' || t.state === 'closed') return `code ${t.exit_code}`;
  return '';
}

// "vi -u NONE 'my file'" → ['vi', '-u', 'NONE', 'my file'] (sh-like quotes)
export function splitCommand(s) {
  const out = []; let cur = ''; let any = false; let q = null;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (q === "'") { if (c === "'") q = null; else cur += c; continue; }
    if (q === '"') {
      if (c === '"') q = null;
      else if (c === '\\' && i + 1 < s.length && '"\\$`'.includes(s[i + 1])) cur += s[++i];
      else cur += c;
      continue;
    }
    if (c === "'" || c === '"') { q = c; any = true; continue; }
    if (c === '\\' && i + 1 < s.length) { cur += s[++i]; any = true; continue; }
    if (/\s/.test(c)) { if (any || cur) out.push(cur); cur = ''; any = false; continue; }
    cur += c;
  }
  if (q) throw new Error('unclosed quote');
  if (any || cur) out.push(cur);
  return out;
}

// ---- session --------------------------------------------------------------------

function showWho() {
  $('#who').hidden = !session; $('#nav').hidden = !session;
  if (session) { $('#who-name').textContent = session.name; $('#who-role').textContent = session.role; }
}

function signedOut(msg) {
  if (!session && $('.signin')) return;
  session = null; clearInterval(renewTimer); csrf.set(null);
  showWho();
  leave(); leave = () => {};
  renderSignin(msg);
}

function renderSignin(msg = '') {
  main.replaceChildren();
  const err = h('p.error#signin-error', {}, msg);
  const key = h('input#key', { type: 'password', name: 'key', placeholder: 'alk_…', autocomplete: 'current-password', required: true });
  const form = h('form#signin', {
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      const r = await api('POST', '/v1/session', { key: key.value.trim() });
      key.value = '';
      if (r.status === 200 && r.json) { startSession(r.json); return; }
      err.textContent = r.status === 401 ? 'That API key is not valid.' : `Sign-in failed (${r.status || 'no answer'}).`;
    },
  }, h('label', { for: 'key' }, 'API key'), key, h('button.primary#signin-btn', { type: 'submit' }, 'Sign in'), err);
  main.append(h('div.page', {}, h('div.signin', {}, h('h1', {}, 'Sign in to Airlock'),
    h('p.muted', {}, 'Your API key becomes a session for this tab; the key itself is not kept.'), form)));
  key.focus();
}

function startSession(s) {
  if (s.csrf) csrf.set(s.csrf);
  session = { name: s.name, role: s.role }; showWho();
  clearInterval(renewTimer);
  renewTimer = setInterval(() => api('GET', '/v1/session'), KEEPALIVE_MS);
  route();
}

$('#signout').addEventListener('click', async () => {
  leave(); leave = () => {}; // a terminal's link ends before its session does (else: closed with 4401)
  await api('DELETE', '/v1/session');
  signedOut('Signed out.');
});

// ---- routing --------------------------------------------------------------------------

function route() {
  if (!session) return;
  leave(); leave = () => {};
  const hash = location.hash.replace(/^#/, '') || '/';
  let m;
  if ((m = /^\/t\/([A-Za-z0-9._-]+)(\/watch)?$/.exec(hash))) leave = terminalView(m[1], !!m[2]);
  else if ((m = /^\/replay\/([A-Za-z0-9._-]+)$/.exec(hash))) leave = replayView(m[1]);
  else leave = dashboard();
}
window.addEventListener('hashchange', route);

// ---- dashboard: sandboxes and terminals, live -------------------------------------------

function dashboard() {
  const sbBody = h('tbody'), tBody = h('tbody');
  const err = h('p.error#open-error');
  const sandboxSel = h('select#open-sandbox', { name: 'sandbox', required: true });
  const cmd = h('input#open-command', { name: 'command', value: 'sh', required: true, spellcheck: false, class: 'mono' });
  const cols = h('input#open-cols', { name: 'cols', type: 'number', min: 1, max: 4096, value: 80 });
  const rows = h('input#open-rows', { name: 'rows', type: 'number', min: 1, max: 4096, value: 24 });
  // the credential proxy's upstreams (GET /v1/proxy/upstreams), one
  // checkbox each: the terminal gets a credential of its own for those
  // checked, airlockd keeps the keys (docs/proxy.md); hidden when none
  const proxyBox = h('fieldset.proxy#open-proxy', { hidden: true });
  const form = h('form.open-form#open-form', {
    onsubmit: async (e) => {
      e.preventDefault(); err.textContent = '';
      let argv;
      try { argv = splitCommand(cmd.value); } catch (x) { err.textContent = x.message; return; }
      if (!argv.length) { err.textContent = 'Give a command.'; return; }
      const body = { sandbox: sandboxSel.value, argv, cols: Number(cols.value), rows: Number(rows.value) };
      const proxy = [...proxyBox.querySelectorAll('input[name=proxy]:checked')].map((x) => x.value);
      if (proxy.length) body.proxy = proxy;
      const r = await api('POST', '/v1/terminals', body);
      if ((r.status === 200 || r.status === 201) && r.json && r.json.id) { location.hash = `#/t/${r.json.id}`; return; }
      err.textContent = `Could not open the terminal: ${(r.json && r.json.error) || r.status}`;
    },
  }, h('label', {}, 'Sandbox', sandboxSel), h('label', {}, 'Command', cmd), h('label', {}, 'Columns', cols),
  h('label', {}, 'Rows', rows), proxyBox, h('button.primary#open-btn', { type: 'submit' }, 'Open terminal'));

  main.replaceChildren(h('div.page', {},
    h('h2', {}, 'Sandboxes'),
    h('table#sandboxes', {}, h('thead', {}, h('tr', {}, ['Sandbox', 'Kind', 'Link', 'RTT', 'Address'].map((x) => h('th', {}, x)))), sbBody),
    h('h2', {}, 'Terminals'),
    h('table#terminals', {}, h('thead', {}, h('tr', {}, ['Terminal', 'Sandbox', 'Command', 'State', 'Exit', 'Size', 'Watching', 'Output', ''].map((x) => h('th', {}, x)))), tBody),
    mayOperate() ? [h('h2', {}, 'Open a terminal'), form, err] : null));

  let stopped = false;
  const showUpstreams = (list) => {
    proxyBox.replaceChildren(h('legend', {}, 'Model and Git APIs (keys stay in airlockd)'), ...list.map((u) => h('label.check', {
      title: u.served ? `${u.kind}: the terminal gets this upstream's variables and a credential of its own, never the key`
        : 'airlockd does not serve the credential proxy (--proxy-listen)',
    }, h('input', { type: 'checkbox', name: 'proxy', value: u.name, disabled: !u.served, dataset: { kind: u.kind } }),
    h('span.mono', {}, u.name), h('span.muted', {}, `(${u.kind})`))));
    proxyBox.hidden = !list.length;
  };
  if (mayOperate()) {
    api('GET', '/v1/proxy/upstreams').then((r) => { if (!stopped && r.status === 200 && Array.isArray(r.json)) showUpstreams(r.json); });
  }
  const poll = async () => {
    const [s, t] = await Promise.all([api('GET', '/v1/sandboxes'), api('GET', '/v1/terminals')]);
    if (stopped) return;
    if (s.status === 200 && Array.isArray(s.json)) {
      sbBody.replaceChildren(...s.json.map((x) => h('tr', { dataset: { id: x.id } },
        h('td.mono', {}, x.id), h('td', {}, x.kind),
        h('td.link', {}, h('span', { class: `dot${x.link_up ? ' up' : ''}` }), x.link_up ? `up ${ago(x.link_since)}` : 'down',
          // runner links refused for a key not the sandbox's: a copied token (an impostor?)
          x.refused_links > 0 ? h('span.warn', { title: 'a valid runner token without the runner\'s key; see the audit log (runner_impostor)' },
            ` ⚠ ${x.refused_links} link${x.refused_links === 1 ? '' : 's'} refused, the last ${ago(x.refused_link_at)}`) : null),
        h('td.rtt', {}, x.link_up && x.rtt_us > 0 ? `${(x.rtt_us / 1000).toFixed(1)} ms` : '—'),
        h('td.mono.muted', {}, x.url || ''))));
      if (!s.json.length) sbBody.replaceChildren(h('tr', {}, h('td.muted', { colSpan: 5 }, 'No sandboxes yet (an admin adds them).')));
      const keep = sandboxSel.value;
      sandboxSel.replaceChildren(...s.json.map((x) => h('option', { value: x.id, selected: x.id === keep }, `${x.id}${x.link_up ? '' : ' (link down)'}`)));
    }
    if (t.status === 200 && Array.isArray(t.json)) {
      const live = (x) => x.state === 'running' || x.state === 'opening' || x.state === 'exited';
      tBody.replaceChildren(...t.json.map((x) => h('tr', { dataset: { id: x.id, state: x.state } },
        h('td.mono', {}, x.id), h('td.mono', {}, x.sandbox),
        h('td.mono', {}, (x.argv || []).join(' ')),
        h('td', { class: `state state-${x.state}` }, x.state),
        h('td.exit', {}, exitText(x)),
        h('td.mono', {}, `${x.cols}×${x.rows}`),
        h('td.watching', {}, (x.viewers || []).map((v) => h('span', { class: `pill ${v.role}` }, `${v.name}${v.role === 'writer' ? ' ✎' : ''}`))),
        h('td.mono', {}, fmtBytes(x.out_bytes || 0)),
        h('td.actions', {},
          live(x) && mayOperate() ? h('a.drive', { href: `#/t/${x.id}` }, 'Open') : null,
          live(x) ? h('a.watch', { href: `#/t/${x.id}/watch` }, 'Watch') : null,
          x.recording_bytes ? h('a.replay', { href: `#/replay/${x.id}` }, 'Replay') : null))));
      if (!t.json.length) tBody.replaceChildren(h('tr', {}, h('td.muted', { colSpan: 9 }, 'No terminals.')));
    }
  };
  poll();
  const timer = setInterval(poll, POLL_MS);
  return () => { stopped = true; clearInterval(timer); };
}

// ---- a live terminal ---------------------------------------------------------------------

function terminalView(id, watchOnly) {
  const roleEl = h('span.role#role', { dataset: { role: 'none' } }, 'connecting…');
  const connEl = h('span.conn#conn', { dataset: { state: 'connecting' } }, 'connecting');
  const rttEl = h('span#rtt.muted', { title: 'round trip to airlockd (PING/PONG)' }, '');
  const viewersEl = h('span.viewers#viewers');
  const takeBtn = h('button#takeover', { type: 'button', hidden: true, title: 'Become the writer; the current writer becomes a viewer' }, 'Take over');
  const notice = h('div.notice#notice', { hidden: true });
  const exitEl = h('div.notice.exit#exit', { hidden: true });
  const infoEl = h('span.muted#info');
  const host = h('div.termhost');
  const wrap = h('div.termwrap#term', { dataset: { role: 'none' } }, host);
  const replayLink = h('a#replay-link', { href: `#/replay/${id}` }, 'Replay');
  main.replaceChildren(h('div.termview', {},
    h('div.bar', {}, h('a', { href: '#/' }, '←'), h('span.title.mono', {}, id), infoEl, roleEl, takeBtn,
      h('span.muted', {}, 'watching:'), viewersEl, connEl, rttEl, replayLink),
    notice, exitEl, wrap));

  const term = new window.Terminal({
    cursorBlink: true, scrollback: 10000, fontSize: 14, allowProposedApi: false,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace', theme: { background: '#000000' },
  });
  const fit = new window.FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(host);
  let role = null;
  let closed = false;

  const fitSize = () => {
    try { fit.fit(); } catch { /* not laid out */ }
    return { cols: term.cols, rows: term.rows };
  };
  const setNotice = (text) => { notice.textContent = text; notice.hidden = !text; };
  let noticeTimer = null;
  const flash = (text, ms = 4000) => { setNotice(text); clearTimeout(noticeTimer); noticeTimer = setTimeout(() => setNotice(''), ms); };

  const showRole = (r) => {
    role = r;
    const writer = r === WRITER;
    roleEl.dataset.role = writer ? 'writer' : 'viewer';
    roleEl.textContent = writer ? 'WRITER — your keystrokes go to the terminal' : 'OBSERVER — read only';
    wrap.dataset.role = roleEl.dataset.role;
    wrap.classList.toggle('fixed', !writer);
    takeBtn.hidden = writer || watchOnly || !mayOperate();
    if (writer) term.focus();
  };

  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const url = `${proto}//${location.host}/v1/terminals/${encodeURIComponent(id)}/attach${watchOnly ? '?mode=read' : ''}`;
  const link = new TerminalLink({
    url, term, name: session ? session.name : 'browser', fitSize, csrf: csrf.get(),
    on: {
      status: (s, detail) => {
        if (s === 'signed-out') { signedOut('Your session ended: sign in again.'); return; }
        connEl.dataset.state = s;
        connEl.textContent = s === 'live' ? 'live' : s === 'reconnecting' ? `reconnecting…${detail ? ` (${detail})` : ''}` : s;
        if (s !== 'live') rttEl.textContent = '';
      },
      role: showRole,
      viewers: (list) => viewersEl.replaceChildren(...list.map((v) => h('span', {
        class: `v ${v.role === WRITER ? 'writer' : 'viewer'}`, dataset: { name: v.name, role: v.role === WRITER ? 'writer' : 'viewer' },
      }, `${v.name} (${v.role === WRITER ? 'writer' : 'viewer'})`))),
      rtt: (ms) => { rttEl.textContent = `RTT ${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`; },
      exit: (x) => {
        exitEl.hidden = false;
        exitEl.dataset.code = String(x.code);
        exitEl.textContent = x.signo ? `The program was killed by signal ${x.signo}${x.core ? ' (core dumped)' : ''}.`
          : `The program exited with code ${x.code}.`;
        takeBtn.hidden = true;
      },
      gap: (g) => flash(`Output skipped: ${fmtBytes(g.to - g.from)} this view could not keep up with (the screen was redrawn).`),
      error: (msg, code) => flash(code === 11 ? `Refused: ${msg}` : msg, 6000),
      snapshot: () => {},
    },
  });
  takeBtn.addEventListener('click', () => link.takeover());
  let hintAt = 0;
  const onInput = (data) => {
    if (link.input(data) || Date.now() - hintAt < 3000) return;
    hintAt = Date.now();
    if (role === VIEWER) {
      flash(mayOperate() && !watchOnly ? 'You are observing: your keystrokes are not sent. Take over to type.'
        : 'You are observing: your keystrokes are not sent.');
    } else if (link.exit) {
      flash('The program has ended: keystrokes are not sent.');
    } else if (link.state !== 'live') {
      flash('Reconnecting: keystrokes typed now are not sent.');
    }
  };
  term.onData(onInput);
  term.onBinary((s) => onInput(Uint8Array.from(s, (c) => c.charCodeAt(0) & 255)));

  let resizeTimer = null;
  const onWinResize = () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (role === WRITER) link.sendSize(); }, 100);
  };
  window.addEventListener('resize', onWinResize);

  // The terminal's row: state, size (viewers follow the writer's size with a
  // fresh snapshot), who is attached. Closed terminals are not attached.
  let lastAskedSize = '';
  const poll = async () => {
    const r = await api('GET', `/v1/terminals/${encodeURIComponent(id)}`);
    if (closed) return;
    if (r.status === 404) { setNotice('No such terminal.'); link.stop(); return; }
    if (r.status !== 200 || !r.json) return;
    const t = r.json;
    const proxy = t.proxy ? ` · proxy: ${t.proxy.upstreams.join(', ')}${t.proxy.revoked ? ' (revoked)' : ''}` : '';
    infoEl.textContent = `${(t.argv || []).join(' ')} · ${t.sandbox} · ${t.state}${proxy}`;
    if (t.state === 'closed' || t.state === 'lost') {
      if (link.state !== 'closed' && !link.exit) setNotice(`This terminal is ${t.state}; its recording can be replayed.`);
      link.stop();
      return;
    }
    if (!started) {
      started = true;
      // a pipe-mode terminal's output has bare LFs and no screen to snapshot
      if (t.mode === 'pipes') term.options.convertEol = true;
      link.start();
    }
    const size = `${t.cols}x${t.rows}`;
    if (role === VIEWER && link.state === 'live' && (t.cols !== term.cols || t.rows !== term.rows) && size !== lastAskedSize) {
      lastAskedSize = size;
      link.requestSnapshot();
    }
  };
  let started = false;
  poll();
  const timer = setInterval(poll, POLL_MS);

  Object.assign(window, { term, link, fit });
  return () => {
    closed = true;
    clearInterval(timer); clearTimeout(resizeTimer); clearTimeout(noticeTimer);
    window.removeEventListener('resize', onWinResize);
    link.stop(); term.dispose();
    if (window.link === link) { window.link = null; window.term = null; }
  };
}

// ---- replay of a recording ------------------------------------------------------------------

function replayView(id) {
  const playBtn = h('button#play', { type: 'button', disabled: true }, '▶ Play');
  const speedSel = h('select#speed', {}, [0.5, 1, 2, 4, 8, 16].map((x) => h('option', { value: x, selected: x === 1 }, `${x}×`)));
  const range = h('input#timeline', { type: 'range', min: 0, max: 0, step: 0.01, value: 0, disabled: true });
  const marks = h('div.marks#marks');
  const timeEl = h('span#time.mono', {}, '');
  const idle = h('input#idle', { type: 'checkbox', checked: true });
  const markerList = h('div.markers#markers', { hidden: true });
  const status = h('div.notice#replay-status', { hidden: true });
  const host = h('div.termhost');
  const wrap = h('div.termwrap.fixed#term', {}, host);
  main.replaceChildren(h('div.termview', {},
    h('div.bar', {}, h('a', { href: '#/' }, '←'), h('span.title.mono', {}, `${id} · replay`), h('span.muted#replay-info')),
    h('div.controls', {}, playBtn, h('label', {}, 'speed ', speedSel), h('div.timeline', {}, marks, range), timeEl,
      h('label', { title: 'cut pauses to the recording\'s idle limit' }, idle, ' compress idle')),
    markerList, status, wrap));
  const term = new window.Terminal({ scrollback: 10000, fontSize: 14, disableStdin: true, cursorBlink: false,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace', theme: { background: '#000000' } });
  term.open(host);
  let player = null, closed = false, dragging = false;
  const showStatus = (text) => { status.textContent = text; status.hidden = !text; };

  const drawMarks = () => {
    marks.replaceChildren(...player.markers.map((m) => h('span.mark', { style: `left:${player.duration ? (m.t / player.duration) * 100 : 0}%`, title: m.label })));
    markerList.replaceChildren(h('span.muted', {}, 'markers:'), ...player.markers.map((m, i) => h('button.marker', {
      type: 'button', dataset: { i: String(i) }, onclick: () => player.seek(m.t),
    }, `${fmtTime(m.t)} ${m.label || '(marker)'}`)));
    markerList.hidden = !player.markers.length;
    range.max = String(player.duration);
  };

  (async () => {
    const r = await fetch(`/v1/terminals/${encodeURIComponent(id)}/recording`, { credentials: 'same-origin', headers: authHeaders() });
    if (closed) return;
    if (r.status === 401) { signedOut('Your session ended: sign in again.'); return; }
    if (r.status !== 200) { showStatus(`No recording (${r.status}).`); return; }
    let cast;
    try { cast = parseCast(await r.text()); } catch (e) { showStatus(`The recording cannot be read: ${e.message}`); return; }
    if (closed) return;
    let cmd = cast.header.command || '';
    try { const a = JSON.parse(cmd); if (Array.isArray(a)) cmd = a.join(' '); } catch { /* a plain command line */ }
    $('#replay-info').textContent = `${cmd} · ${cast.header.cols}×${cast.header.rows} at the start · ${cast.events.length} events`;
    player = new Player(term, cast, {
      time: (t, d) => { timeEl.textContent = `${fmtTime(t)} / ${fmtTime(d)}`; if (!dragging) range.value = String(t); },
      state: (s) => { playBtn.textContent = s === 'playing' ? '❚❚ Pause' : '▶ Play'; playBtn.dataset.state = s; },
      exit: (st) => showStatus(`The program exited with status ${st}.`),
    });
    window.player = player;
    drawMarks();
    playBtn.disabled = false; range.disabled = false;
    timeEl.textContent = `${fmtTime(0)} / ${fmtTime(player.duration)}`;
    player.play();
  })();

  playBtn.addEventListener('click', () => { if (!player) return; if (player.playing) player.pause(); else { showStatus(''); player.play(); } });
  speedSel.addEventListener('change', () => player && player.setSpeed(Number(speedSel.value)));
  range.addEventListener('input', () => { dragging = true; if (player) { showStatus(''); player.seek(Number(range.value)); } });
  range.addEventListener('change', () => { dragging = false; });
  idle.addEventListener('change', () => { if (player) { player.setIdleCompression(idle.checked); drawMarks(); } });

  window.term = term;
  return () => { closed = true; if (player) player.pause(); term.dispose(); if (window.player === player) window.player = null; };
}

// ---- start ------------------------------------------------------------------------------------------

(async () => {
  if (!window.Terminal || !window.FitAddon) {
    main.replaceChildren(h('div.page', {}, h('p.error', {}, 'xterm.js is missing from /vendor/: the build did not copy it (run tools/deps.sh, then rebuild).')));
    return;
  }
  // a session is the cookie and this tab's token: without the token, sign in
  const r = csrf.get() ? await api('GET', '/v1/session') : { status: 401 };
  if (r.status === 200 && r.json) startSession(r.json);
  else { csrf.set(null); renderSignin(); }
})();
