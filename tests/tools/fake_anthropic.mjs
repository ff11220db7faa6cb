// A stand-in for the Anthropic Messages API on 127.0.0.1, for the credential
// proxy's tests: it answers POST /v1/messages (streamed as server-sent
// events with `event:` lines when the body asks for "stream": true, else
// one JSON message) only to the real key given with --key, in x-api-key or
// as a bearer token, and refuses anything else with 401. Between events it
// waits --gap-ms, so a test can tell a relayed stream from a buffered one.
// It keeps what it was sent: GET /__stats answers
//   {"requests": [{method, url, headers, at_ms, bytes}], "credential_seen": bool}
// (bytes: the request body's length)
// where credential_seen says whether any header ever held an Airlock proxy
// credential (alp_...), which must never reach an upstream.
//
// Usage: node fake_anthropic.mjs --key KEY [--gap-ms N] [--answer TEXT]
// Prints "listening PORT" on stdout once it listens (it binds port 0).
import http from 'node:http';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
};
const KEY = opt('key', null);
const GAP_MS = Number(opt('gap-ms', '0'));
const ANSWER = opt('answer', 'the answer is forty-two');
if (!KEY) {
  process.stderr.write('fake_anthropic: --key KEY is required\n');
  process.exit(2);
}

const requests = [];
let credentialSeen = false;
const t0 = Date.now();

function keyOk(h) {
  return h['x-api-key'] === KEY || h.authorization === `Bearer ${KEY}`;
}

function json(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function stream(req, res, model) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let gone = false;
  res.on('close', () => { gone = true; });
  const ev = async (type, data) => {
    if (gone) return;
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    if (GAP_MS) await sleep(GAP_MS);
  };
  await ev('message_start', {
    message: { id: 'msg_fake', type: 'message', role: 'assistant', model, content: [],
      stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } },
  });
  await ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
  for (const word of ANSWER.split(/(?<= )/)) {
    await ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: word } });
  }
  await ev('content_block_stop', { index: 0 });
  await ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } });
  await ev('message_stop', {});
  if (!gone) res.end();
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/__stats') {
      json(res, 200, { requests, credential_seen: credentialSeen });
      return;
    }
    requests.push({ method: req.method, url: req.url, headers: req.headers, at_ms: Date.now() - t0,
      bytes: chunks.reduce((n, c) => n + c.length, 0) });
    for (const v of Object.values(req.headers)) {
      if (/alp_[A-Za-z0-9_-]{20,}/.test(String(v))) credentialSeen = true;
    }
    if (!keyOk(req.headers)) {
      json(res, 401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
      return;
    }
    if (req.method !== 'POST' || !req.url.startsWith('/v1/messages')) {
      json(res, 404, { type: 'error', error: { type: 'not_found_error', message: 'no such endpoint' } });
      return;
    }
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
    } catch {
      json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'bad JSON' } });
      return;
    }
    const model = body.model || 'fake-model';
    if (body.stream) {
      stream(req, res, model);
      return;
    }
    json(res, 200, { id: 'msg_fake', type: 'message', role: 'assistant', model,
      content: [{ type: 'text', text: ANSWER }], stop_reason: 'end_turn', stop_sequence: null,
      usage: { input_tokens: 1, output_tokens: 1 } });
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
