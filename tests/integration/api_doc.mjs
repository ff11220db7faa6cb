// docs/api.md cannot drift from the code:
// - every example in it (a ```http request block followed by a ```http
//   response block, "How the examples run" in api.md) is sent, in order, to
//   a real airlockd on 127.0.0.1 with a linked local sandbox and two
//   upstreams of the credential proxy (never called), and the
//   answer's status, the headers shown and the body (JSON: the same members,
//   the same strings and booleans, numbers of the same kind) must be the
//   documented ones;
// - api.md's route table and the route table of the code (routes[] in
//   src/control/api_route.c) have the same rows, method and path (a row of the
//   code ending in "*", what a resource's routes leave, lies under a row of
//   api.md), every other path the code (src/control/api*.c) writes is in
//   api.md's table, and every row of that table has an example;
// - each row's "answers" include every status the code answers for it that
//   can be known without guessing: the status of each example of the route
//   (the real airlockd gave it) and each status its handler names (but
//   500, which "Routes" allows everywhere);
// - the options tables of api.md list exactly the options each program's
//   --help shows (airlockd keygen, token, user, serve; airlock-runner; airlock).
// Every mismatch is reported before the test fails. AL_API_DOC_SHOW=1
// prints every answer (to write a new example from).
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { run, check, tmpdir, rawHttp, sleep, BIN, SRC } from '../interop/harness.mjs';
import { startAirlockd, addUser, addLocalSandbox } from '../interop/airlockd.mjs';

const DOC = path.join(SRC, 'docs', 'api.md');
const ROUTES_C = path.join(SRC, 'src', 'control', 'api_route.c'); // holds routes[]
// the other files of the API, whose paths must be in the table too
const API_C = fs.readdirSync(path.dirname(ROUTES_C))
  .filter((f) => /^api.*\.c$/.test(f) && f !== path.basename(ROUTES_C))
  .map((f) => path.join(path.dirname(ROUTES_C), f));
const GET_RETRY_MS = 10000; // a GET that does not match yet is retried this long
const fails = [];
function want(cond, msg) {
  console.log(`${cond ? 'ok' : 'not ok'} - ${msg}`);
  if (!cond) fails.push(msg);
}

// ---- the document ----------------------------------------------------------

// Fenced blocks in order: { lang, text, line }.
function blocks(md) {
  const out = [];
  const lines = md.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^```(\S*)/.exec(lines[i]);
    if (!m) continue;
    const start = i + 1;
    let j = start;
    while (j < lines.length && !/^```\s*$/.test(lines[j])) j++;
    out.push({ lang: m[1], text: lines.slice(start, j).join('\n'), line: start });
    i = j;
  }
  return out;
}

// "HEAD\nName: v\n...\n\nbody" -> { first, headers: [[name, value]], body }
function splitMessage(text) {
  const lines = text.split('\n');
  const blank = lines.findIndex((l) => l.trim() === '');
  const head = blank < 0 ? lines : lines.slice(0, blank);
  const body = blank < 0 ? '' : lines.slice(blank + 1).join('\n').trim();
  const headers = head.slice(1).map((l) => {
    const c = l.indexOf(':');
    return [l.slice(0, c).trim(), l.slice(c + 1).trim()];
  });
  return { first: head[0], headers, body };
}

function examples(md) {
  const out = [];
  const bs = blocks(md).filter((b) => b.lang === 'http');
  for (let i = 0; i < bs.length; i++) {
    const req = splitMessage(bs[i].text);
    const m = /^([A-Z]+) (\S+)$/.exec(req.first);
    if (!m) throw new Error(`api.md:${bs[i].line}: an http block that is no request: ${req.first}`);
    const res = bs[i + 1] && splitMessage(bs[i + 1].text);
    const s = res && /^HTTP\/1\.1 (\d{3})\b/.exec(res.first);
    if (!s) throw new Error(`api.md:${bs[i].line}: a request without its response block`);
    out.push({ line: bs[i].line, method: m[1], target: m[2], req, status: Number(s[1]), res });
    i++;
  }
  return out;
}

// ---- matching ----------------------------------------------------------------

const PH = /\{\{([a-z_][a-z0-9_]*)\}\}/g;

function fill(text, vars, where) {
  return text.replace(PH, (_, name) => {
    if (!(name in vars)) throw new Error(`${where}: {{${name}}} is not known yet`);
    return String(vars[name]);
  });
}

// A documented string as a pattern: {{x}} bound is its value, unbound is
// captured; "…" is any text. Returns null when the string is plain.
function pattern(s, vars) {
  if (!s.includes('…') && !/\{\{/.test(s)) return null;
  const names = [];
  let re = '';
  let last = 0;
  const esc = (t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/…/g, '[\\s\\S]*');
  for (const m of s.matchAll(PH)) {
    re += esc(s.slice(last, m.index));
    if (m[1] in vars) re += esc(String(vars[m[1]]));
    else { re += '([\\s\\S]*?)'; names.push(m[1]); }
    last = m.index + m[0].length;
  }
  re += esc(s.slice(last));
  return { re: new RegExp(`^${re}$`), names };
}

function matchString(doc, act, vars, bind) {
  if (typeof act !== 'string') return 'not a string';
  const p = pattern(doc, vars);
  if (!p) return doc === act ? null : `${JSON.stringify(act)} is not ${JSON.stringify(doc)}`;
  const m = p.re.exec(act);
  if (!m) return `${JSON.stringify(act)} does not match ${JSON.stringify(doc)}`;
  p.names.forEach((n, k) => { bind[n] = m[k + 1]; });
  return null;
}

const kind = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

// null when act has the documented shape; else why not (with its path).
function match(doc, act, vars, bind, at = '$') {
  const whole = typeof doc === 'string' && /^\{\{([a-z_][a-z0-9_]*)\}\}$/.exec(doc);
  if (whole) {
    const n = whole[1];
    if (n in vars || n in bind) {
      const want = n in bind ? bind[n] : vars[n];
      return JSON.stringify(want) === JSON.stringify(act) || String(want) === act ? null
        : `${at}: ${JSON.stringify(act)} is not {{${n}}} = ${JSON.stringify(want)}`;
    }
    bind[n] = act;
    return null;
  }
  if (kind(doc) !== kind(act)) return `${at}: a ${kind(act)} where the document has a ${kind(doc)}`;
  if (typeof doc === 'string') {
    const why = matchString(doc, act, { ...vars, ...bind }, bind);
    return why && `${at}: ${why}`;
  }
  if (typeof doc === 'number') {
    return Number.isInteger(doc) === Number.isInteger(act) ? null : `${at}: ${act} is not an integer like ${doc}`;
  }
  if (typeof doc === 'boolean' || doc === null) return doc === act ? null : `${at}: ${act} is not ${doc}`;
  if (Array.isArray(doc)) {
    if (doc.length === 0) return act.length === 0 ? null : `${at}: ${act.length} elements where none are documented`;
    for (let i = 0; i < doc.length; i++) {
      let found = null;
      const reasons = [];
      for (const a of act) {
        const b = { ...bind };
        const why = match(doc[i], a, vars, b, `${at}[${i}]`);
        if (!why) { found = b; break; }
        reasons.push(why);
      }
      if (!found) {
        return reasons.length ? `${at}[${i}]: no element of the answer matches it (against the first: ${reasons[0]})`
          : `${at}: empty, the document shows ${doc.length}`;
      }
      Object.assign(bind, found);
    }
    return null;
  }
  const dk = Object.keys(doc).sort(), ak = Object.keys(act).sort();
  const missing = dk.filter((k) => !(k in act)), extra = ak.filter((k) => !(k in doc));
  if (missing.length || extra.length) {
    return `${at}: members differ (missing ${JSON.stringify(missing)}, undocumented ${JSON.stringify(extra)})`;
  }
  for (const k of dk) {
    const why = match(doc[k], act[k], vars, bind, `${at}.${k}`);
    if (why) return why;
  }
  return null;
}

function parseHead(head) {
  const lines = head.split('\r\n');
  return lines.slice(1).map((l) => {
    const c = l.indexOf(':');
    return [l.slice(0, c).trim().toLowerCase(), l.slice(c + 1).trim()];
  });
}

// Check one answer against its example: null, or why not. bind gets captures.
function verdict(ex, r, vars, bind) {
  if (r.status !== ex.status) return `status ${r.status} (body ${r.body.slice(0, 300)})`;
  const got = parseHead(r.head);
  for (const [name, value] of ex.res.headers) {
    const cands = got.filter(([n]) => n === name.toLowerCase());
    if (!cands.length) return `no ${name} header`;
    const whys = cands.map(([, v]) => matchString(value, v, { ...vars, ...bind }, bind));
    if (!whys.includes(null)) return `${name}: ${whys[0]}`;
  }
  if (!ex.res.body) return null;
  const ctype = (got.find(([n]) => n === 'content-type') || [])[1] || '';
  if (/json/.test(ctype)) {
    let doc, act;
    try { doc = JSON.parse(ex.res.body); } catch (e) { return `the documented body is not JSON: ${e.message}`; }
    try { act = JSON.parse(r.body); } catch { return `the answer is not JSON: ${r.body.slice(0, 200)}`; }
    const why = match(doc, act, vars, bind);
    return why && `${why}\n    answer: ${r.body.slice(0, 1500)}`;
  }
  const why = matchString(ex.res.body, r.body.replace(/\r\n/g, '\n').trim(), { ...vars, ...bind }, bind);
  return why && `body: ${why.slice(0, 600)}`;
}

async function send(port, ex, vars) {
  const where = `api.md:${ex.line}`;
  const target = fill(ex.target, vars, where);
  const headers = ex.req.headers.map(([n, v]) => [n, fill(v, vars, where)]);
  const body = fill(ex.req.body, vars, where);
  const has = (n) => headers.some(([h]) => h.toLowerCase() === n);
  if (!has('host')) headers.unshift(['Host', `127.0.0.1:${port}`]);
  if (ex.method !== 'GET' && !has('content-length')) headers.push(['Content-Length', String(Buffer.byteLength(body))]);
  const raw = `${ex.method} ${target} HTTP/1.1\r\n${headers.map(([n, v]) => `${n}: ${v}`).join('\r\n')}\r\n\r\n${body}`;
  return rawHttp(port, raw, 15000);
}

// ---- routes -----------------------------------------------------------------------

// The route table of api.md: rows "| METHOD | PATH | ... | ANSWERS |",
// answers as the statuses of the last cell.
function routeTable(md) {
  const rows = [];
  const sec = md.split(/^## /m).find((s) => s.startsWith('Routes'));
  if (!sec) return rows;
  for (const l of sec.split('\n')) {
    const m = /^\|\s*(GET|POST|DELETE|any)\s*\|\s*`([^`]+)`/.exec(l);
    if (!m) continue;
    const cells = l.split('|');
    const answers = (cells[cells.length - 2].match(/\b[1-5]\d\d\b/g) || []).map(Number);
    rows.push({ method: m[1], path: m[2], answers });
  }
  return rows;
}

// The code's route table: the rows "{M_METHOD, "PATH", ..., HANDLER}" of
// routes[], and the other string literals of the file that are paths of
// the API.
function codeRoutes(src) {
  const start = src.search(/\broutes\[\] = \{/);
  if (start < 0) return { rows: [], others: [] };
  const end = src.indexOf('};', start);
  const block = src.slice(start, end);
  const rows = [...block.matchAll(/\{(M_[A-Z]+),\s*"([^"]*)",[^{}]*?(\w+)\s*\}/g)]
    .map((m) => ({ method: m[1], path: m[2], fn: m[3] }));
  const rest = src.slice(0, start) + src.slice(end);
  return { rows, others: [...new Set(codePaths(rest))] };
}

// The paths a source names in string literals.
function codePaths(src) {
  return [...src.matchAll(/"(\/(?:v1\/|metrics|healthz|app\/|vendor\/)[^"]*)"/g)].map((m) => m[1]);
}

// The statuses a handler names itself (api_reply_*(wsi, STATUS, ...), a
// literal or a choice of literals), from its body in one of the sources;
// null when its body is not found.
const STATUS_ANYWHERE = 500; // "Routes": any route may answer it
function handlerStatuses(fn, sources) {
  for (const s of sources) {
    const m = new RegExp(`\\n(?:static )?int ${fn}\\([^)]*\\)\\n\\{`).exec(s);
    if (!m) continue;
    const body = s.slice(m.index, s.indexOf('\n}\n', m.index));
    const out = new Set();
    for (const call of body.matchAll(/api_reply_\w*\(\s*wsi,\s*([^,]+),/g)) {
      for (const n of call[1].matchAll(/\b[1-5]\d\d\b/g)) out.add(Number(n[0]));
    }
    return out;
  }
  return null;
}

// The row of api.md's table an example falls under (method and path), or none.
function rowOf(table, ex) {
  const target = ex.target.replace(PH, 'x');
  return table.find((r) => (r.method === 'any' || r.method === ex.method) && rowRegex(r.path).test(target));
}

function rowRegex(p) {
  const parts = p.split(/(\{[a-z]+\})/);
  return new RegExp(`^${parts.map((x) => (/^\{[a-z]+\}$/.test(x) ? '[^/?]+' : x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('')}(\\?.*)?$`);
}

// ---- options -----------------------------------------------------------------------

const OPT = /(?<![\w-])--[a-z][a-z0-9-]*/g;

function helpOptions(argv) {
  let out;
  try { out = execFileSync(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] }).toString(); } catch (e) { out = `${e.stdout}`; }
  return new Set([...out.matchAll(OPT)].map((m) => m[0]).filter((o) => o !== '--help'));
}

// The options table of a "### `PROGRAM`" section: the options in each row's first cell.
function docOptions(md, heading) {
  const start = md.indexOf(`### \`${heading}\``);
  if (start < 0) return null;
  const rest = md.slice(start + 4);
  const end = rest.search(/^#{2,3} /m);
  const sec = end < 0 ? rest : rest.slice(0, end);
  const set = new Set();
  for (const l of sec.split('\n')) {
    const m = /^\|([^|]*)\|/.exec(l);
    if (!m || /^\s*-+\s*$/.test(m[1])) continue;
    for (const o of m[1].matchAll(OPT)) if (o[0] !== '--help') set.add(o[0]);
  }
  return set;
}

await run('api_doc', async () => {
  const md = fs.readFileSync(DOC, 'utf8');

  // options: both directions, for each program
  const progs = [
    ['airlockd keygen', [path.join(BIN, 'airlockd'), 'keygen', '--help']],
    ['airlockd token', [path.join(BIN, 'airlockd'), 'token', '--help']],
    ['airlockd user', [path.join(BIN, 'airlockd'), 'user', '--help']],
    ['airlockd serve', [path.join(BIN, 'airlockd'), 'serve', '--help']],
    ['airlock-runner', [path.join(BIN, 'airlock-runner'), '--help']],
    ['airlock', [path.join(BIN, 'airlock'), '--help']],
  ];
  for (const [name, argv] of progs) {
    const help = helpOptions(argv), doc = docOptions(md, name);
    if (!doc) { want(false, `api.md has a section "### \`${name}\`"`); continue; }
    const undocumented = [...help].filter((o) => !doc.has(o));
    const unknown = [...doc].filter((o) => !help.has(o));
    want(help.size > 0 && !undocumented.length && !unknown.length,
      `${name}: the ${help.size} options of --help are the documented ones` +
      (undocumented.length ? `; undocumented: ${undocumented.join(' ')}` : '') +
      (unknown.length ? `; not in --help: ${unknown.join(' ')}` : ''));
  }

  // routes: the code's table is api.md's, and no path of the code is elsewhere
  const src = fs.readFileSync(ROUTES_C, 'utf8');
  const table = routeTable(md);
  check(table.length > 0, `api.md has a route table (${table.length} rows)`);
  const code = codeRoutes(src);
  code.others = [...new Set([...code.others, ...API_C.flatMap((f) => codePaths(fs.readFileSync(f, 'utf8')))])];
  check(code.rows.length > 0, `${path.basename(ROUTES_C)} has a route table (${code.rows.length} rows)`);
  const docMethod = { M_ANY: 'any', M_GET: 'GET', M_POST: 'POST', M_DELETE: 'DELETE', M_UPGRADE: 'GET' };
  for (const c of code.rows) {
    const m = docMethod[c.method];
    const ok = c.path.endsWith('*')
      ? table.some((r) => r.path.startsWith(c.path.slice(0, -1)))
      : table.some((r) => r.method === m && r.path === c.path);
    want(ok, `the code's route ${c.method} ${c.path} is in api.md's route table`);
  }
  for (const r of table) {
    want(code.rows.some((c) => docMethod[c.method] === r.method && c.path === r.path),
      `api.md's route ${r.method} ${r.path} is in the code's route table`);
  }
  // a printf format ("/v1/terminals/%s/attach%s", a replica's hop): each
  // inner %s one {parameter} of the table's path, a last %s its query
  const esc = (x) => x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const formatRe = (lit) => new RegExp(`^${lit.replace(/%s$/, '').split('%s').map(esc).join('\\{[a-z_]+\\}')}$`);
  for (const lit of code.others) {
    const ok = table.some((r) => (lit.includes('%s') ? formatRe(lit).test(r.path)
      : lit.endsWith('/') ? r.path.startsWith(lit) : r.path === lit || r.path.endsWith(`}${lit}`)));
    want(ok, `the code's path "${lit}" is in api.md's route table`);
  }

  // the examples, against a real airlockd
  const exs = examples(md);
  check(exs.length > 20, `api.md has ${exs.length} examples`);
  for (const r of table) {
    const re = rowRegex(r.path);
    want(exs.some((e) => (r.method === 'any' || e.method === r.method) && re.test(e.target.replace(PH, 'x'))),
      `the route ${r.method} ${r.path} has an example`);
  }

  // each row's answers: the statuses of its examples (checked against the
  // real answers below) and those its handler names
  for (const ex of exs) {
    const r = rowOf(table, ex);
    if (r) want(r.answers.includes(ex.status), `api.md:${ex.line}: ${ex.status} is among the answers of ${r.method} ${r.path} (${r.answers.join(', ')})`);
  }
  const sources = [src, ...API_C.map((f) => fs.readFileSync(f, 'utf8'))];
  for (const c of code.rows.filter((x) => !x.path.endsWith('*'))) {
    const r = table.find((t) => t.method === docMethod[c.method] && t.path === c.path);
    const st = handlerStatuses(c.fn, sources);
    if (!r) continue; // reported above
    if (!st) { want(false, `the handler ${c.fn} of ${c.method} ${c.path} is in src/control/api*.c`); continue; }
    const missing = [...st].filter((n) => n !== STATUS_ANYWHERE && !r.answers.includes(n));
    want(!missing.length, `${r.method} ${r.path}: its handler ${c.fn}'s statuses are among its answers` +
      (missing.length ? `; missing: ${missing.join(', ')}` : ''));
  }

  const base = tmpdir('apidoc');
  const dir = path.join(base, 'data');
  const vars = {
    admin_key: addUser(dir, 'ada', 'admin'),
    operator_key: addUser(dir, 'oli', 'operator'),
    viewer_key: addUser(dir, 'vic', 'viewer'),
  };
  // the credential proxy's upstreams of "How the examples run" (never called)
  const conf = path.join(base, 'airlockd.conf');
  const lines = ['proxy-listen = 127.0.0.1:0'];
  for (const [name, url, kind, header] of [['anthropic', 'https://api.anthropic.com', 'anthropic', 'x-api-key'],
    ['github', 'https://github.com', 'git', 'basic']]) {
    const secret = path.join(base, `${name}.key`);
    fs.writeFileSync(secret, `not-a-real-${name}-key\n`, { mode: 0o600 });
    lines.push(`upstream.${name}.url = ${url}`, `upstream.${name}.kind = ${kind}`,
      `upstream.${name}.header = ${header}`, `upstream.${name}.secret-file = ${secret}`);
  }
  fs.writeFileSync(conf, `${lines.join('\n')}\n`);
  const d = await startAirlockd({ dir, args: ['--config', conf] });
  vars.host = `127.0.0.1:${d.port}`;
  await addLocalSandbox(d.port, vars.admin_key, 'box');
  for (const ex of exs) {
    const name = `api.md:${ex.line} ${ex.method} ${ex.target} -> ${ex.status}`;
    let why;
    const upgrade = ex.req.headers.some(([n]) => n.toLowerCase() === 'upgrade');
    const until = Date.now() + (ex.method === 'GET' && !upgrade ? GET_RETRY_MS : 0);
    for (;;) {
      let r;
      try { r = await send(d.port, ex, vars); } catch (e) { why = `no answer: ${e.message}`; break; }
      const bind = {};
      if (process.env.AL_API_DOC_SHOW) console.log(`# api.md:${ex.line}: ${r.status} ${r.body.slice(0, 2000)}`);
      why = verdict(ex, r, vars, bind);
      if (!why) { Object.assign(vars, bind); break; }
      if (Date.now() >= until) break;
      await sleep(200);
    }
    want(!why, why ? `${name}: ${why}` : name);
  }
  await d.stop();
  check(!fails.length, `docs/api.md matches the code (${fails.length} mismatches${fails.length ? `:\n  ${fails.join('\n  ')}` : ''})`);
});
