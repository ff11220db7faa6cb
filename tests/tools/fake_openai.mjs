// A stand-in for the OpenAI Responses API on 127.0.0.1, for the credential
// proxy's Codex test: it answers POST /v1/responses (streamed as server-sent
// events with `event:` lines, the events Codex reads: response.created,
// response.output_item.added, response.output_text.delta,
// response.output_item.done, response.completed) and GET /v1/models (an
// empty list), only to the real key given with --key as a bearer token, and
// refuses anything else with 401. Between events it waits --gap-ms.
//
// It refuses a WebSocket upgrade with 426 and counts it: through the
// credential proxy none may arrive (the proxy answers them itself).
// It keeps what it was sent: GET /__stats answers
//   {"requests": [{method, url, headers, at_ms, body_bytes}],
//    "upgrades": [{url, headers, at_ms}], "credential_seen": bool}
// where credential_seen says whether any header ever held an Airlock proxy
// credential (alp_...), which must never reach an upstream.
//
// Usage: node fake_openai.mjs --key KEY [--gap-ms N] [--answer TEXT]
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
  process.stderr.write('fake_openai: --key KEY is required\n');
  process.exit(2);
}

const requests = [];
const upgrades = [];
let credentialSeen = false;
let seq = 0;
const t0 = Date.now();

const sawCredential = (headers) => {
  for (const v of Object.values(headers)) {
    if (/alp_[A-Za-z0-9_-]{20,}/.test(String(v))) credentialSeen = true;
  }
};

function json(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function stream(res, model) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let gone = false;
  res.on('close', () => { gone = true; });
  seq += 1;
  const id = `resp_fake${seq}`, itemId = `msg_fake${seq}`;
  const ev = async (type, data) => {
    if (gone) return;
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    if (GAP_MS) await sleep(GAP_MS);
  };
  const response = { id, object: 'response', created_at: Math.floor(Date.now() / 1000), model,
    status: 'in_progress', output: [] };
  await ev('response.created', { response });
  await ev('response.output_item.added', { output_index: 0,
    item: { id: itemId, type: 'message', role: 'assistant', status: 'in_progress', content: [] } });
  for (const word of ANSWER.split(/(?<= )/)) {
    await ev('response.output_text.delta', { item_id: itemId, output_index: 0, content_index: 0, delta: word });
  }
  const item = { id: itemId, type: 'message', role: 'assistant', status: 'completed',
    content: [{ type: 'output_text', text: ANSWER, annotations: [] }] };
  await ev('response.output_item.done', { output_index: 0, item });
  await ev('response.completed', { response: { ...response, status: 'completed', output: [item],
    usage: { input_tokens: 1, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 6 } } });
  if (!gone) res.end();
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/__stats') {
      json(res, 200, { requests, upgrades, credential_seen: credentialSeen });
      return;
    }
    const body = Buffer.concat(chunks);
    requests.push({ method: req.method, url: req.url, headers: req.headers, at_ms: Date.now() - t0,
      body_bytes: body.length });
    sawCredential(req.headers);
    if (req.headers.authorization !== `Bearer ${KEY}`) {
      json(res, 401, { error: { type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided' } });
      return;
    }
    const path = req.url.replace(/\?.*$/, '');
    if (req.method === 'GET' && path === '/v1/models') {
      json(res, 200, { object: 'list', data: [] });
      return;
    }
    if (req.method !== 'POST' || path !== '/v1/responses') {
      json(res, 404, { error: { type: 'invalid_request_error', message: 'no such endpoint' } });
      return;
    }
    let parsed;
    try {
      parsed = JSON.parse(body.toString('utf8') || '{}');
    } catch {
      json(res, 400, { error: { type: 'invalid_request_error', message: 'bad JSON' } });
      return;
    }
    stream(res, parsed.model || 'fake-model');
  });
});

server.on('upgrade', (req, socket) => {
  upgrades.push({ url: req.url, headers: req.headers, at_ms: Date.now() - t0 });
  sawCredential(req.headers);
  socket.end('HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
