// The abuse matrix, tokens (issue 15): every hostile token of the table
// below against every place a server verifies one: airlock-runner
// --listen at the upgrade (Authorization), the runner's in-band TOKEN
// frame on a live link, and airlockd's /v1/runners/connect (with the
// sandbox's real runner key, so that only the token is wrong). Each case
// must be refused with its status AND with the verifier's reason for that
// very case (the runner's log line, airlockd's audit row): a token refused
// for some earlier, unrelated reason (a header lost, a missing key) would
// fail the row. The control row, a valid token on the same path, gets 101:
// the path works, so the refusals are the tokens'. After each row, the
// target's health check (tests/interop/abuse.mjs): /healthz, a valid
// request, RSS bounded.
//
// Hostile tokens are signed here with the data directory's real signing
// key (node:crypto), so each carries a valid Ed25519 signature unless the
// case is about the signature: only the property under test is wrong.
// What a strict verifier must do with duplicate claims: refuse the token
// (RFC 7515 §5.2 allows refusing, RFC 8725 §3.11 asks for it: two parsers
// taking different duplicates read two different tokens); jansson's
// JSON_REJECT_DUPLICATES does it, and the row checks the reason says so.
//
// | row | targets | how | expected |
// |---|---|---|---|
// | no token; not a Bearer token | runner, airlockd | the upgrade without / with `Basic` | 403 (runner: Unauthenticated, logged) |
// | expired; nbf in the future | runner, in band, airlockd | exp = now - 300; nbf = now + 600 | 403 / ERROR 9, "expired at" / "not valid before" |
// | wrong aud; wrong scope | runner, in band, airlockd | aud sbx-other; scope terminal:write proxy:anthropic | 403 / ERROR 9, the claim named |
// | alg none; HS256 with the public key (PEM, JWK x) | runner, in band, airlockd | the header's alg, an HMAC over the input | 403 / ERROR 9, "alg … is not accepted" |
// | unknown kid; a jwk header with a foreign key | runner, in band, airlockd | kid no-such-kid; signed by the key in the token | 403 / ERROR 9, kid unknown / bad signature |
// | tampered payload; tampered signature | runner, in band, airlockd | another claims segment; one character of the signature | 403 / ERROR 9, bad signature |
// | oversize (4097 bytes) | runner, in band, airlockd | claims padded | runner: the header over 4096 bytes is refused as none (403 Unauthenticated), its log says it is too long; in band: ERROR 1, close 4000 (the TOKEN frame's limit); airlockd: "more than the limit of 4096" |
// | bad base64 (padding; standard alphabet) | runner, in band, airlockd | `=` after the header; `+` `/` in the claims | 403 / ERROR 9, "not strict base64url" |
// | duplicate claims (aud, exp twice); duplicate header member (alg twice) | runner, in band, airlockd | the JSON text with a key twice, validly signed | 403 / ERROR 9, "duplicate object key" |
// | crit header | runner, in band, airlockd | crit: ["exp"], validly signed | 403 / ERROR 9, "header has crit" |
// | a valid token for an identifier not served there | runner, airlockd | aud and identifier ghost | 403, the answer of a bad token (no oracle) |
// | valid token (control) | runner, in band, airlockd | minted by airlockd token | 101 / accepted |
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { run, check, tmpdir, keygen, mint, startRunner, rawHttp, waitFor } from '../interop/harness.mjs';
import { Controller, enc } from '../interop/airlock.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';
import { Target, runMatrix, upgradeRequest } from '../interop/abuse.mjs';

const TOK_MAX_TOKEN = 4096;          // docs/tokens.md: a token is at most 4096 bytes
const RUNNER_KEY = 'A'.repeat(43);   // the reverse sandbox's runner key (pinned by the first link)
const b64u = (b) => Buffer.from(b).toString('base64url');

await run('abuse_tokens', async () => {
  const base = tmpdir('abuse-tok');
  const dir = path.join(base, 'data');
  keygen(dir);
  const admin = addUser(dir, 'ada', 'admin');
  const sk = crypto.createPrivateKey(fs.readFileSync(path.join(dir, 'signing-key.pem')));
  const jwk = JSON.parse(fs.readFileSync(path.join(dir, 'jwks.json'), 'utf8')).keys[0];
  const pubPem = crypto.createPublicKey(sk).export({ type: 'spki', format: 'pem' });
  const now = Math.floor(Date.now() / 1000);

  // A JWS: header object (or raw text), claims raw text, signed with `key`
  // (Ed25519) unless sig is given.
  const jws = (hdr, claimsText, { sig, key = sk } = {}) => {
    const h = b64u(typeof hdr === 'string' ? hdr : JSON.stringify(hdr));
    const c = b64u(claimsText);
    const s = sig !== undefined ? sig(`${h}.${c}`) : b64u(crypto.sign(null, Buffer.from(`${h}.${c}`), key));
    return `${h}.${c}.${s}`;
  };
  const HDR = { alg: 'EdDSA', typ: 'JWT', kid: jwk.kid };
  const claims = (aud, over = {}) => JSON.stringify({ iss: 'airlockd', aud, sub: 'abuse', scope: 'runner:connect',
    iat: now - 10, nbf: now - 10, exp: now + 600, jti: b64u(crypto.randomBytes(16)), ...over });

  // Each hostile token for audience aud: [token, the reason the verifier must give]
  const hostile = {
    'expired': (aud) => [jws(HDR, claims(aud, { iat: now - 900, nbf: now - 900, exp: now - 300 })), /expired at/],
    'nbf in the future': (aud) => [jws(HDR, claims(aud, { nbf: now + 600, exp: now + 900 })), /not valid before/],
    'wrong aud': () => [jws(HDR, claims('sbx-other')), /aud "sbx-other" is not this verifier/],
    'wrong scope': (aud) => [jws(HDR, claims(aud, { scope: 'terminal:write proxy:anthropic' })), /scope "terminal:write proxy:anthropic" does not include/],
    'alg none': (aud) => [jws({ alg: 'none', typ: 'JWT', kid: jwk.kid }, claims(aud), { sig: () => '' }), /alg "none" is not accepted/],
    'HS256 with the public key as secret': (aud) => [jws({ alg: 'HS256', typ: 'JWT', kid: jwk.kid }, claims(aud),
      { sig: (input) => b64u(crypto.createHmac('sha256', pubPem).update(input).digest()) }), /alg "HS256" is not accepted/],
    'HS256 with the JWK x as secret': (aud) => [jws({ alg: 'HS256', typ: 'JWT', kid: jwk.kid }, claims(aud),
      { sig: (input) => b64u(crypto.createHmac('sha256', Buffer.from(jwk.x, 'base64url')).update(input).digest()) }), /alg "HS256" is not accepted/],
    'unknown kid': (aud) => [jws({ ...HDR, kid: 'no-such-kid' }, claims(aud)), /kid "no-such-kid" is not in the key set/],
    'key in the token (jwk header, foreign key)': (aud) => {
      const { privateKey, publicKey } = crypto.generateKeyPairSync('ed25519');
      const j = publicKey.export({ format: 'jwk' });
      return [jws({ ...HDR, jwk: j }, claims(aud), { key: privateKey }), /signature does not verify/];
    },
    'tampered payload': (aud) => {
      const [h, , s] = jws(HDR, claims('sbx-other')).split('.');
      return [`${h}.${b64u(claims(aud))}.${s}`, /signature does not verify/];
    },
    'tampered signature': (aud) => {
      const [h, c, s] = jws(HDR, claims(aud)).split('.');
      return [`${h}.${c}.${s[0] === 'A' ? 'B' : 'A'}${s.slice(1)}`, /signature does not verify/];
    },
    'oversize (4097 bytes)': (aud) => {
      const t0 = jws(HDR, claims(aud, { pad: '' }));
      // pad the claims so that the whole token is one byte over the limit
      const pad = 'p'.repeat(Math.floor((TOK_MAX_TOKEN + 1 - t0.length) * 3 / 4));
      let t = jws(HDR, claims(aud, { pad }));
      for (let extra = 0; t.length < TOK_MAX_TOKEN + 1 && extra < 8; extra++) t = jws(HDR, claims(aud, { pad: pad + 'p'.repeat(extra + 1) }));
      // the runner reads a token header of at most UPGRADE_MAX_HEADER (4096)
      // bytes, "Bearer " included, and refuses a longer one as none, saying
      // so in its log (the longest valid token, 3672 bytes by the segment
      // limits, fits): the verifier's own limit is met in band and at airlockd
      return [t, new RegExp(`token is ${t.length} bytes, more than the limit of ${TOK_MAX_TOKEN}`),
        { runner: { body: 'Unauthenticated', log: /refused 403: its token header is over 4096 bytes/ } }];
    },
    'bad base64 (padding)': (aud) => {
      const [h, c, s] = jws(HDR, claims(aud)).split('.');
      return [`${h}=.${c}.${s}`, /header is not strict base64url/];
    },
    'bad base64 (standard alphabet)': (aud) => {
      // claims whose base64url holds '-' or '_' (the '?' and '>' make them), sent in the '+/' alphabet
      const t = jws(HDR, claims(aud, { x: '???>>>' }));
      const [h, c, s] = t.split('.');
      if (!/[-_]/.test(c)) throw new Error('the claims text must hold - or _ for this case');
      return [`${h}.${c.replace(/-/g, '+').replace(/_/g, '/')}.${s}`, /claims is not strict base64url/];
    },
    'duplicate claims (aud twice)': (aud) => [jws(HDR, claims('sbx-other').replace('{', `{"aud":"${aud}",`)), /claims is not valid JSON: duplicate object key/],
    'duplicate claims (exp twice)': (aud) => [jws(HDR, claims(aud).replace('{', `{"exp":${now - 300},`)), /claims is not valid JSON: duplicate object key/],
    'duplicate header member (alg twice)': (aud) => [jws(`{"alg":"none","alg":"EdDSA","typ":"JWT","kid":"${jwk.kid}"}`, claims(aud)), /header is not valid JSON: duplicate object key/],
    'crit header': (aud) => [jws({ ...HDR, crit: ['exp'], exp: now + 600 }, claims(aud)), /header has crit/],
  };

  // ---- the targets
  const r = await startRunner({ id: 'sbx-1', dir, args: ['--verbose'] }); // --verbose: the accepted in-band token's line
  const d = await startAirlockd({ dir });
  const a = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: 'rev1', kind: 'reverse' });
  check(a.status === 201, 'airlockd: a reverse sandbox rev1 to dial /v1/runners/connect for');
  const runnerQ = `/?identifier=${r.id}&api-version=2024-02-02-preview`;
  const audOf = { runner: r.id, 'runner in band': r.id, airlockd: 'rev1' };
  const up = async (port, target, tok, extra = {}) => {
    try {
      return await rawHttp(port, upgradeRequest(target, { Authorization: tok === null ? null : `Bearer ${tok}`, ...extra }));
    } catch (e) { return { status: `no answer (${e.message})`, body: '' }; }
  };
  const runnerTok = mint(dir, r.id, 'runner:connect', 3600);
  const linkTok = mint(dir, 'rev1', 'runner:connect', 3600);
  const runnerT = new Target({ name: 'runner', pid: r.proc.pid, port: r.port, log: r.log,
    probe: async () => (await up(r.port, runnerQ, runnerTok)).status === 101 });
  const daemonT = new Target({ name: 'airlockd', pid: d.p.pid, port: d.port, log: d.log,
    probe: async () => (await api(d.port, 'GET', '/v1/sandboxes', admin)).status === 200 &&
      (await up(d.port, '/v1/runners/connect?identifier=rev1', linkTok, { 'X-Airlock-Runner-Key': RUNNER_KEY })).status === 101 });
  // the in-band path: a controller's live link; its probe is that the link answers
  let ctl = null;
  const inbandT = new Target({ name: 'runner in band', pid: r.proc.pid, port: r.port, log: r.log,
    probe: async () => {
      if (!ctl) return true;
      ctl.list = null;
      ctl.send(enc.list());
      await ctl.wait(() => ctl.list || ctl.closeInfo, 'LIST_REPLY', 5000).catch(() => {});
      return !!ctl.list && !ctl.closeInfo;
    } });
  for (const t of [runnerT, daemonT]) await t.baseline();

  // How each target is sent a token, and how it must refuse one.
  const send = {
    runner: (tok) => up(r.port, runnerQ, tok),
    airlockd: (tok) => up(d.port, '/v1/runners/connect?identifier=rev1', tok, { 'X-Airlock-Runner-Key': RUNNER_KEY }),
    'runner in band': async (tok) => {
      const before = ctl.errors.length;
      ctl.send(enc.token(tok));
      await ctl.wait(() => ctl.errors.length > before || ctl.closeInfo, 'ERROR', 5000).catch(() => {});
      const e = ctl.errors.slice(before);
      return { status: e.length ? `ERROR ${e[0].code} ${e[0].msg}` : (ctl.closeInfo ? `closed ${ctl.closeInfo.code}` : 'no answer'), body: '' };
    },
  };
  // the runner logs each refusal with its reason at once (runner_listen.c,
  // runner.c); airlockd counts them in audit rows (checked after the matrix)
  const refusedAs = {
    runner: (got, why, t, from, at) => (at
      ? got.status === 403 && got.body.trim() === at.body && at.log.test(t.logSince(from))
      : got.status === 403 && got.body.trim() === 'Forbidden' &&
        new RegExp(`refused 403: token refused: [^\\n]*${why.source}`).test(t.logSince(from))),
    'runner in band': (got, why, t, from) => got.status === 'ERROR 9 token refused' &&
      new RegExp(`in-band token refused: [^\\n]*${why.source}`).test(t.logSince(from)),
    airlockd: (got) => got.status === 403 && /a valid runner:connect token is required/.test(got.body),
  };

  // ---- the matrix: one row per hostile token, against every verifier
  const ALL = ['runner', 'airlockd'];
  const rows = [
    { name: 'no token', targets: ALL, send: (t) => send[t.name](null),
      expect: (g, t, from) => g.status === 403 && (t.name === 'runner'
        ? g.body.trim() === 'Unauthenticated' && /refused 403: no token/.test(t.logSince(from))
        : /runner:connect token/.test(g.body)) },
    { name: 'not a Bearer token', targets: ALL, send: (t) => (t.name === 'runner' ? up(r.port, runnerQ, null, { Authorization: `Basic ${runnerTok}` })
      : up(d.port, '/v1/runners/connect?identifier=rev1', null, { Authorization: `Basic ${linkTok}`, 'X-Airlock-Runner-Key': RUNNER_KEY })),
    expect: (g, t, from) => g.status === 403 && (t.name !== 'runner' || /refused 403: token header is not 'Bearer <token>'/.test(t.logSince(from))) },
  ];
  const made = {};
  for (const [name, make] of Object.entries(hostile)) {
    made[name] = {};
    for (const tn of Object.keys(audOf)) made[name][tn] = make(audOf[tn]);
    rows.push({ name, targets: ALL, send: (t) => send[t.name](made[name][t.name][0]),
      expect: (g, t, from) => refusedAs[t.name](g, made[name][t.name][1], t, from, made[name][t.name][2]?.[t.name]), show: (g) => `${g.status} ${String(g.body).trim()}` });
  }
  // no oracle for identifiers: a valid token for an identifier the target
  // does not serve is answered as a bad token is
  const ghostTok = mint(dir, 'ghost', 'runner:connect', 600);
  rows.push({ name: 'a valid token for an identifier not served here', targets: ALL,
    send: (t) => (t.name === 'runner'
      ? up(r.port, '/?identifier=ghost&api-version=2024-02-02-preview', ghostTok)
      : up(d.port, '/v1/runners/connect?identifier=ghost', ghostTok, { 'X-Airlock-Runner-Key': RUNNER_KEY })),
    expect: (g, t) => g.status === 403 && (t.name === 'runner' ? g.body.trim() === 'Forbidden'
      : /a valid runner:connect token is required/.test(g.body)),
    show: (g) => `${g.status} ${String(g.body).trim()}` });
  // the control row: the same paths, a valid token (made by airlockd token)
  rows.push({ name: 'valid token (control)', targets: ALL, send: (t) => send[t.name](t.name === 'runner' ? runnerTok : linkTok),
    expect: (g) => g.status === 101, show: (g) => `${g.status}` });
  await runMatrix('tokens', rows, { runner: runnerT, airlockd: daemonT });

  // ---- the same tokens in band, on a live controller link: each refused
  // with ERROR 9 (TOKEN_INVALID) and its reason logged; the link stays up
  ctl = await new Controller().connect(r.url, { Authorization: `Bearer ${mint(dir, r.id)}` });
  await inbandT.baseline();
  // (a TOKEN frame over 4096 bytes is malformed framing, protocol.md §3:
  // its own row below)
  const OVERSIZE = 'oversize (4097 bytes)';
  const inRows = Object.keys(hostile).filter((n) => n !== OVERSIZE).map((name) => ({ name, targets: ['runner in band'],
    send: () => send['runner in band'](made[name]['runner in band'][0]),
    expect: (g, t, from) => refusedAs['runner in band'](g, made[name]['runner in band'][1], t, from),
    show: (g) => g.status }));
  let oversizeLink = null;
  inRows.push({ name: `${OVERSIZE}: a malformed TOKEN frame`, targets: ['runner in band'], send: async () => {
    const g = await send['runner in band'](made[OVERSIZE]['runner in band'][0]);
    await ctl.wait(() => ctl.closeInfo, 'the close', 5000).catch(() => {});
    g.close = ctl.closeInfo && ctl.closeInfo.code;
    oversizeLink = ctl;
    ctl = await new Controller().connect(r.url, { Authorization: `Bearer ${runnerTok}` }); // the next rows' link
    return g;
  }, expect: (g) => /^ERROR 1 /.test(g.status) && g.close === 4000, show: (g) => `${g.status}, close ${g.close}` });
  inRows.push({ name: 'valid token (control)', targets: ['runner in band'], send: async () => {
    const from = inbandT.logSize();
    ctl.send(enc.token(runnerTok));
    await waitFor(() => /in-band token accepted/.test(inbandT.logSince(from)) || ctl.closeInfo, 5000, 'the token accepted').catch(() => {});
    return { status: /in-band token accepted/.test(inbandT.logSince(from)) ? 'accepted' : 'not accepted' };
  }, expect: (g) => g.status === 'accepted', show: (g) => g.status });
  await runMatrix('tokens in band', inRows, { 'runner in band': inbandT });
  check(ctl.ready && !ctl.closeInfo && oversizeLink.errors.filter((e) => e.code === 9).length === inRows.length - 2 &&
    oversizeLink.errors.length === inRows.length - 1,
    `the controller's link lived through ${inRows.length - 2} refused tokens (ERROR 9 each) until the malformed frame`);

  // ---- airlockd's reasons: one audit row per source and reason (flushed
  // every 5 s): each hostile token's reason is there
  const rowsOf = async () => {
    const l = await api(d.port, 'GET', '/v1/audit', admin);
    return (l.json || []).filter((e) => e.action === 'runner_refused').map((e) => JSON.parse(e.detail).why);
  };
  const wanted = Object.keys(hostile);
  const whys = await waitFor(async () => {
    const w = await rowsOf();
    return wanted.every((n) => w.some((x) => made[n].airlockd[1].test(x))) && w;
  }, 15000, 'the audit rows of every refused token').catch(() => rowsOf());
  for (const n of wanted) {
    check(whys.some((x) => made[n].airlockd[1].test(x)), `airlockd audits "${n}" with its reason ${made[n].airlockd[1]}`);
  }
  check(whys.some((x) => /no bearer token/.test(x)), 'airlockd audits the missing token');
  await runnerT.healthy('the whole token matrix');
  await daemonT.healthy('the whole token matrix');
}, 120000);
