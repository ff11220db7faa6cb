// wss:// dials through wsctls.c (OpenSSL over memory BIOs under the wsc
// link), the runner's and airlockd's, against servers that are not who
// they say: a certificate for another name, a self-signed one not in the
// store, an expired one, a server that stalls mid-handshake, and one that
// answers plain HTTP instead of TLS. Each is refused with a one-line
// reason, nobody links, nothing hangs; a certificate from the store's CA
// for the dialed name links (SNI carries a name, never an address). The
// store is OpenSSL's default one, pointed at a test CA by SSL_CERT_FILE.
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { WebSocketServer } from 'ws';
import { run, check, tmpdir, keygen, mint, BIN, addLog, waitFor, scaled } from '../interop/harness.mjs';
import { Controller } from '../interop/airlock.mjs';
import { addUser, startAirlockd, api } from '../interop/airlockd.mjs';

const ossl = (args) => execFileSync('openssl', args, { stdio: 'ignore' });

// A CA for the store, and the servers' certificates.
function certs(dir) {
  const p = (n) => path.join(dir, n);
  ossl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('ca.key'), '-out', p('ca.pem'),
    '-days', '2', '-subj', '/CN=airlock test CA']);
  const signed = (name, san, days) => {
    ossl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', p(`${name}.key`), '-out', p(`${name}.csr`), '-subj', `/CN=${name}`]);
    fs.writeFileSync(p(`${name}.ext`), `subjectAltName=${san}\n`);
    ossl(['x509', '-req', '-in', p(`${name}.csr`), '-CA', p('ca.pem'), '-CAkey', p('ca.key'), '-CAcreateserial',
      '-days', String(days), '-extfile', p(`${name}.ext`), '-out', p(`${name}.pem`)]);
  };
  signed('good', 'DNS:localhost,IP:127.0.0.1', 1);
  signed('othername', 'DNS:other.example', 1);
  signed('expired', 'DNS:localhost,IP:127.0.0.1', -1); // notAfter a day before notBefore
  ossl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('self.key'), '-out', p('self.pem'),
    '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1']);
  const pair = (n) => ({ key: fs.readFileSync(p(`${n}.key`)), cert: fs.readFileSync(p(`${n}.pem`)) });
  return { ca: p('ca.pem'), good: pair('good'), othername: pair('othername'), expired: pair('expired'), self: pair('self') };
}

const listen = (srv) => new Promise((r) => srv.listen(0, '127.0.0.1', () => r(srv.address().port)));

await run('dial_tls_hostile', async () => {
  const dir = tmpdir('dialtlsh');
  const c = certs(dir);
  const sockets = [];
  const servers = [];
  const seen = {}; // upgrades that reached a server, by mode
  const sni = {};
  // the TLS servers: one per certificate; an upgrade that gets through is counted
  const tlsServer = async (mode, pair, onWs) => {
    const srv = https.createServer(pair, (req, res) => { res.writeHead(404); res.end(); });
    srv.on('connection', (s) => { sockets.push(s); s.on('error', () => {}); });
    srv.on('tlsClientError', () => {});
    const wss = new WebSocketServer({ noServer: true });
    srv.on('upgrade', (req, sock, head) => {
      (seen[mode] ||= []).push(req.headers);
      sni[mode] = req.socket.servername;
      if (onWs) wss.handleUpgrade(req, sock, head, onWs);
      else sock.destroy();
    });
    servers.push(srv);
    return listen(srv);
  };
  // plain TCP: one reads and never answers (the handshake stalls), one answers HTTP
  const tcpServer = async (onSock) => {
    const srv = net.createServer((s) => { sockets.push(s); s.on('error', () => {}); onSock(s); });
    servers.push(srv);
    return listen(srv);
  };
  const ctl = new Controller();
  const ports = {
    good: await tlsServer('good', c.good, (ws) => ctl.adopt(ws)),
    othername: await tlsServer('othername', c.othername),
    self: await tlsServer('self', c.self),
    expired: await tlsServer('expired', c.expired),
    stall: await tcpServer(() => {}),
    garbage: await tcpServer((s) => s.once('data', () => s.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'))),
  };
  ports.othername_dns = ports.othername; // the same server, dialed by name
  const srvOf = (mode) => (mode === 'othername_dns' ? 'othername' : mode);
  const hostOf = (mode) => (mode === 'good' || mode === 'othername_dns' ? 'localhost' : '127.0.0.1');
  // what each refusal must say
  const expect = {
    othername: /certificate is refused: IP address mismatch/,
    othername_dns: /certificate is refused: hostname mismatch/,
    self: /certificate is refused: self[- ]signed certificate/,
    expired: /certificate is refused: certificate has expired/,
    stall: /TLS handshake not done within 10 s/,
    garbage: /TLS handshake failed: (wrong version number|packet length too long|record layer failure)/,
  };

  // ---- the runner dialing each ----
  keygen(dir);
  const tokfile = path.join(dir, 'token');
  fs.writeFileSync(tokfile, mint(dir, 'sbx-t', 'runner:connect', 600) + '\n');
  const env = { ...process.env, SSL_CERT_FILE: c.ca };
  delete env.AIRLOCK_INSECURE_TLS;
  delete env.SSL_CERT_DIR;
  const runners = {};
  const startRunner = (mode, host) => {
    const log = path.join(dir, `runner-${mode}.log`);
    addLog(log);
    const out = fs.openSync(log, 'a');
    const url = `wss://${host}:${ports[mode]}/v1/runners/connect`;
    const p = spawn(path.join(BIN, 'airlock-runner'), ['--connect', url, '--identifier', 'sbx-t',
      '--jwks', path.join(dir, 'jwks.json'), '--token-file', tokfile, '--verbose'],
    { stdio: ['ignore', out, out], env });
    fs.closeSync(out);
    runners[mode] = { p, log, exited: new Promise((r) => p.on('exit', r)) };
  };
  const logOf = (mode) => fs.readFileSync(runners[mode].log, 'utf8');
  try {
    for (const mode of ['good', ...Object.keys(expect)]) startRunner(mode, hostOf(mode));
    await ctl.wait(() => ctl.ready, 'the runner to dial in over TLS', scaled(10000));
    const term = ctl.open(['sh', '-c', 'head -c 300000 /dev/zero | tr "\\0" y; echo; echo done-tls']);
    await term.waitExit(scaled(20000));
    const got = term.output().toString();
    check(/done-tls/.test(got) && (got.match(/y/g) || []).length === 300000,
      'a certificate from the store\'s CA for "localhost" links, and 300 kB arrive whole');
    check(sni.good === 'localhost', `SNI carried the dialed name (${sni.good})`);
    for (const [mode, re] of Object.entries(expect)) {
      const line = await waitFor(() => logOf(mode).split('\n').find((l) => re.test(l)), scaled(20000),
        `the runner's refusal of ${mode}`, 100);
      check(!seen[srvOf(mode)], `runner, ${mode}: refused before any upgrade: ${line.replace(/^.*failed: /, '')}`);
    }
  } finally {
    for (const r of Object.values(runners)) if (r.p.exitCode === null && r.p.signalCode === null) { r.p.kill('SIGTERM'); await r.exited; }
  }
  for (const mode of Object.keys(runners)) check(!/Sanitizer|LeakSanitizer/.test(logOf(mode)), `runner ${mode}: no sanitizer report`);

  // ---- airlockd dialing each, as static sandboxes' runners ----
  const ddir = path.join(dir, 'data');
  const admin = addUser(ddir, 'ada', 'admin');
  const saved = process.env.SSL_CERT_FILE;
  process.env.SSL_CERT_FILE = c.ca; // airlockd inherits it
  const d = await startAirlockd({ dir: ddir });
  if (saved === undefined) delete process.env.SSL_CERT_FILE; else process.env.SSL_CERT_FILE = saved;
  try {
    delete seen.good;
    const modes = ['good', ...Object.keys(expect)];
    for (const mode of modes) {
      const host = hostOf(mode);
      const r = await api(d.port, 'POST', '/v1/sandboxes', admin, { id: `s-${mode}`, kind: 'static', url: `wss://${host}:${ports[mode]}/${mode}` });
      check(r.status === 201, `sandbox ${mode}: ${r.status} ${r.body}`);
    }
    const row = async (id) => (await api(d.port, 'GET', '/v1/sandboxes', admin)).json.find((x) => x.id === id);
    await waitFor(() => seen.good?.length, scaled(20000), 'airlockd\'s upgrade over TLS', 100);
    const h = seen.good[0];
    check(h.upgrade === 'websocket' && /^Bearer \S+$/.test(h.authorization) && sni.good === 'localhost',
      'airlockd reaches a certificate from the store\'s CA, SNI "localhost", and its upgrade carries its token');
    for (const [mode, re] of Object.entries(expect)) {
      const e = await waitFor(async () => { const x = (await row(`s-${mode}`))?.link_error; return x && re.test(x) ? x : null; },
        scaled(30000), `s-${mode}'s link_error`, 200);
      check(!seen[srvOf(mode)] && !(await row(`s-${mode}`)).link_up, `airlockd, ${mode}: refused before any upgrade: ${e}`);
    }
  } finally {
    for (const s of sockets) s.destroy();
    for (const s of servers) s.close();
    const st = await d.stop();
    check(st.code === 0, `airlockd stopped cleanly (${JSON.stringify(st)})`);
    check(!/Sanitizer/.test(fs.readFileSync(d.log, 'utf8')), 'airlockd: no sanitizer report');
  }
}, 150000);
