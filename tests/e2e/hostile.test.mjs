// hostile.test.mjs - `vx serve` against malformed and hostile clients: over
// a thousand bad requests, generated from tables, each of which must get its
// exact status with an OpenAI-shaped error ({"error":{"message","type",
// "param","code"}}, param naming the offending field) or a clean close, while
// well-formed requests interleaved with them keep succeeding with the same
// greedy output as before the storm:
//   - every field of /v1/chat/completions and /v1/completions with wrong types,
//     NaN/Infinity/hex literals, numbers beyond double, out-of-range values,
//     plus the valid edges (which must succeed) and unknown fields (ignored);
//   - messages, content parts, prompts and token ids in every wrong shape;
//     prompts over the context (400 with both numbers); stop and logit_bias
//     garbage; /tokenize and /detokenize garbage;
//   - raw bodies: malformed and truncated JSON, nesting 1000-100000 deep,
//     invalid UTF-8 in strings, keys and outside them, content types;
//   - HTTP: wrong methods (405), unknown paths (404), huge and odd headers,
//     lying Content-Lengths, 100 MB and chunked bodies (413), protocol
//     garbage, pipelining, HTTP/1.0, dripped and chunked bodies;
//   - connections: clients that disconnect before or during a stream, slow
//     readers (a byte at a time), readers that never read a 25 MB stream,
//     idle/half-sent/slowloris connections, 48 chaotic concurrent clients;
//   - load limits: a full queue (429), connections over --max-connections
//     (503), and SIGTERM / double SIGINT in the middle of all that.
// Uses raw sockets only (no npm dependencies) so nothing stands between the
// bytes and the server.
//
// Under a sanitizer build (VX_BIN=build-san/vx) the servers' stderr must
// hold no AddressSanitizer / UndefinedBehaviorSanitizer / LeakSanitizer
// report, and each server must exit 0 on its signal (LSan checks at exit).
//
// Run: cd tests/e2e && node --test hostile.test.mjs
// Env: VX_BIN (default <repo>/build/vx), VX_FIXTURES (default <repo>/../shared/fixtures).
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FIXTURES, spawnServer } from './serve.mjs';

const MODEL = path.join(FIXTURES, 'models/stories260K/stories260K.gguf');
const N_CTX = 256;
const N_VOCAB = 512;
const MAX_BODY = 1 << 20;
const SAN_RE = /ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer|LeakSanitizer has encountered/;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------------ server

async function startServer(extra = []) {
  const env = { ...process.env };
  env.ASAN_OPTIONS = [env.ASAN_OPTIONS, 'detect_leaks=1'].filter(Boolean).join(':');
  env.UBSAN_OPTIONS = [env.UBSAN_OPTIONS, 'print_stacktrace=1'].filter(Boolean).join(':');
  const srv = await spawnServer(['-m', MODEL, '--chat-template', 'chatml', '-t', '1', '--batch-invariant',
    '-c', String(N_CTX), '--max-body', String(MAX_BODY), '--quiet', ...extra], env);
  const { proc } = srv;
  return {
    proc, port: srv.port, log: srv.log,
    alive: () => proc.exitCode === null && proc.signalCode === null,
    async stop(signal) {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const timer = setTimeout(() => proc.kill('SIGKILL'), 30000);
      const [code, sig] = await srv.exited;
      clearTimeout(timer);
      return { code, sig };
    },
  };
}

// Stops a server with a signal: it must exit 0 with no sanitizer report.
async function stopClean(srv, signal) {
  const { code, sig } = await srv.stop(signal);
  const log = srv.log();
  assert.doesNotMatch(log, SAN_RE, `sanitizer report:\n${log.slice(-8000)}`);
  assert.equal(code, 0, `exit code on ${signal} (signal ${sig})\n${log.slice(-3000)}`);
}

// ------------------------------------------------------------- raw client

// Decodes a chunked body; returns null when it is incomplete.
function dechunk(buf) {
  const parts = [];
  let off = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', off);
    if (eol < 0) return null;
    const size = parseInt(buf.subarray(off, eol).toString('latin1'), 16);
    if (!Number.isFinite(size)) return null;
    if (size === 0) return Buffer.concat(parts);
    if (eol + 2 + size > buf.length) return null;
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    off = eol + 2 + size + 2;
  }
}

// Parses the first HTTP response in buf: {status, headers, body, text, json}
// or null when there is none (closed without a response).
function parseResponse(buf) {
  // skip interim responses (100 Continue)
  while (/^HTTP\/1\.[01] 1\d\d /.test(buf.subarray(0, 16).toString('latin1'))) {
    const e = buf.indexOf('\r\n\r\n');
    if (e < 0) return null;
    buf = buf.subarray(e + 4);
  }
  const he = buf.indexOf('\r\n\r\n');
  if (he < 0) return null;
  const head = buf.subarray(0, he).toString('latin1').split('\r\n');
  const m = head[0].match(/^HTTP\/1\.[01] (\d{3})/);
  if (!m) return null;
  const headers = {};
  for (const line of head.slice(1)) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = buf.subarray(he + 4);
  if (/chunked/i.test(headers['transfer-encoding'] || '')) body = dechunk(body) ?? body;
  else if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']));
  const text = body.toString('utf8');
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: Number(m[1]), headers, body, text, json };
}

// Counts complete responses in a buffer of pipelined ones (Content-Length bodies).
function parseAll(buf) {
  const out = [];
  let off = 0;
  while (off < buf.length) {
    const r = parseResponse(buf.subarray(off));
    if (!r) break;
    out.push(r);
    const he = buf.indexOf('\r\n\r\n', off);
    off = he + 4 + Number(r.headers['content-length'] || 0);
  }
  return out;
}

// Sends bytes (a Buffer, a string or a list of them written one by one)
// and reads until the server closes. Returns {buf, closed, timedOut, error}.
function rawExchange(port, data, { timeout = 10000, halfClose = false, gapMs = 0 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    const chunks = [];
    let error = null, done = false;
    const finish = (timedOut) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ buf: Buffer.concat(chunks), closed: !timedOut, timedOut, error });
    };
    const timer = setTimeout(() => finish(true), timeout);
    sock.on('data', (d) => chunks.push(d));
    sock.on('error', (e) => { error = e; });
    sock.on('close', () => finish(false));
    sock.on('connect', async () => {
      const list = Array.isArray(data) ? data : [data];
      for (const d of list) {
        if (sock.destroyed) return;
        if (!sock.write(d)) await new Promise((r) => { sock.once('drain', r); sock.once('close', r); });
        if (gapMs) await sleep(gapMs);
      }
      if (halfClose && !sock.destroyed) sock.end();
    });
  });
}

function buildRequest(method, p, body, headers = {}) {
  const b = body === undefined || body === null ? null : Buffer.isBuffer(body) ? body : Buffer.from(body);
  const h = { Host: '127.0.0.1', Connection: 'close', ...headers };
  if (b && !Object.keys(h).some((k) => k.toLowerCase() === 'content-length' || k.toLowerCase() === 'transfer-encoding'))
    h['Content-Length'] = String(b.length);
  if (b && !Object.keys(h).some((k) => k.toLowerCase() === 'content-type')) h['Content-Type'] = 'application/json';
  let head = `${method} ${p} HTTP/1.1\r\n`;
  for (const [k, v] of Object.entries(h)) if (v !== undefined) head += `${k}: ${v}\r\n`;
  head += '\r\n';
  return b ? Buffer.concat([Buffer.from(head, 'latin1'), b]) : Buffer.from(head, 'latin1');
}

async function call(port, method, p, body, headers, opts) {
  const ex = await rawExchange(port, buildRequest(method, p, body, headers), opts);
  const res = parseResponse(ex.buf);
  return { ...ex, res, status: res ? res.status : 0 };
}

// Asserts an OpenAI error: exactly {"error":{"message","type","param","code"}}.
function assertOaiError(r, status, { param, code, type, message } = {}, what = '') {
  const ctx = `${what}: got ${r.status} ${r.res ? r.res.text.slice(0, 300) : '(no response)'}`;
  assert.equal(r.status, status, ctx);
  assert.match(r.res.headers['content-type'] || '', /^application\/json/, ctx);
  const j = r.res.json;
  assert.ok(j && typeof j === 'object', ctx);
  assert.deepEqual(Object.keys(j), ['error'], ctx);
  assert.deepEqual(Object.keys(j.error).sort(), ['code', 'message', 'param', 'type'], ctx);
  assert.equal(typeof j.error.message, 'string', ctx);
  assert.ok(j.error.message.length > 0, ctx);
  assert.equal(typeof j.error.type, 'string', ctx);
  assert.ok(j.error.param === null || typeof j.error.param === 'string', ctx);
  assert.ok(j.error.code === null || typeof j.error.code === 'string', ctx);
  if (param !== undefined) assert.equal(j.error.param, param, ctx);
  if (code !== undefined) assert.equal(j.error.code, code, ctx);
  if (type !== undefined) assert.equal(j.error.type, type, ctx);
  if (message !== undefined) assert.match(j.error.message, message, ctx);
}

// --------------------------------------------------------- well-formed work

const CHAT = { model: 'm', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 24, temperature: 0 };
const COMPL = { prompt: 'Once upon a time', max_tokens: 24, temperature: 0 };

async function greedy(port) {
  const c = await call(port, 'POST', '/v1/chat/completions', JSON.stringify(CHAT));
  assert.equal(c.status, 200, c.res ? c.res.text : 'no response');
  const p = await call(port, 'POST', '/v1/completions', JSON.stringify(COMPL));
  assert.equal(p.status, 200, p.res ? p.res.text : 'no response');
  return { chat: c.res.json.choices[0].message.content, completion: p.res.json.choices[0].text };
}

async function metric(port, name) {
  const r = await call(port, 'GET', '/metrics');
  assert.equal(r.status, 200);
  const m = r.res.text.match(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

async function waitIdle(port, ms = 15000) {
  const t0 = Date.now();
  for (;;) {
    if (await metric(port, 'vortex_requests_in_flight') === 0 && await metric(port, 'vortex_requests_running') === 0 &&
        await metric(port, 'vortex_queue_depth') === 0) return;
    if (Date.now() - t0 > ms) throw new Error(`server still busy after ${ms} ms`);
    await sleep(20);
  }
}

// Reads an SSE stream from raw response bytes: the data payloads.
function sseEvents(body) {
  return body.toString('utf8').split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
}

function streamText(events, chat) {
  let text = '';
  for (const e of events) {
    if (e === '[DONE]') continue;
    const j = JSON.parse(e);
    assert.ok(!j.error, `stream error: ${e}`);
    for (const c of j.choices) text += chat ? (c.delta.content || '') : (c.text || '');
  }
  return text;
}

// ------------------------------------------------------- the hostile cases

// Each case: {name, method, path, body (string|Buffer), headers, expect}
// where expect is a status with an OpenAI error ({status, param, code,
// message}), {status: 200} (must succeed), or {any: [statuses], close: true}
// for what the HTTP layer answers (a status from the list or a clean close).
function jsonCases() {
  const cases = [];
  const ep = [
    { kind: 'chat', path: '/v1/chat/completions', base: { model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, temperature: 0 } },
    { kind: 'completion', path: '/v1/completions', base: { model: 'm', prompt: 'Hi', max_tokens: 2, temperature: 0 } },
  ];
  // body with field set to a raw JSON text (the field removed from base first)
  const withRaw = (base, field, raw) => {
    const o = { ...base };
    delete o[field];
    const s = JSON.stringify(o);
    return `${s.slice(0, -1)},${JSON.stringify(field)}:${raw}}`;
  };
  const add = (e, name, body, expect) => cases.push({ name: `${e.kind}: ${name}`, method: 'POST', path: e.path, body, expect });
  const bad = (param, extra = {}) => ({ status: 400, param, ...extra });

  // number fields: [name, lo, hi, integer, chat only | completion only]
  const numbers = [
    ['max_tokens', 0, 2147483647, true], ['max_completion_tokens', 0, 2147483647, true], ['n', 1, 8, true],
    ['temperature', 0, 2, false], ['top_p', 0, 1, false], ['min_p', 0, 1, false],
    ['presence_penalty', -2, 2, false], ['frequency_penalty', -2, 2, false], ['top_k', -1, 2147483647, true],
    ['repetition_penalty', 0, 10, false], ['repeat_penalty', 0, 10, false], ['repeat_last_n', -1, 2147483647, true],
    ['seed', null, null, true], ['top_logprobs', 0, 20, true, 'chat'], ['logprobs', 0, 20, true, 'completion'],
  ];
  for (const e of ep) {
    for (const [f, lo, hi, isInt, only] of numbers) {
      if (only && only !== e.kind) continue;
      for (const raw of ['"1"', 'true', '[]', '{}', '[1]']) add(e, `${f}=${raw}`, withRaw(e.base, f, raw), bad(f));
      if (isInt) add(e, `${f}=1.5`, withRaw(e.base, f, '1.5'), bad(f));
      // JSON has no NaN or Infinity: these are syntax errors
      for (const raw of ['NaN', 'Infinity', '-Infinity', '0x10', '+1', '.5', '1e', '--1'])
        add(e, `${f}=${raw}`, withRaw(e.base, f, raw), bad(null, { message: /Invalid JSON/ }));
      // numbers beyond double (strtod gives inf) and far beyond any range
      for (const raw of ['1e309', '-1e309', '1e300', '-1e300', '123456789012345678901234567890'])
        add(e, `${f}=${raw}`, withRaw(e.base, f, raw), bad(f));
      if (lo !== null) {
        add(e, `${f} below ${lo}`, withRaw(e.base, f, String(lo - (isInt ? 1 : 0.5))), bad(f));
        add(e, `${f} above ${hi}`, withRaw(e.base, f, String(hi + (isInt ? 1 : 0.5))), bad(f));
      }
    }
    // valid edges: must succeed
    const ok = [['max_tokens', '0'], ['max_tokens', '1'], ['n', '8'], ['temperature', '2'], ['temperature', '1e-400'],
      ['temperature', '-0'], ['top_k', '-1'], ['top_k', '0'], ['seed', '-1'], ['seed', '0'],
      ['seed', '18446744073709551615'], ['seed', '-9223372036854775808'], ['repeat_last_n', '-1'],
      ['max_tokens', 'null'], ['temperature', 'null'], ['top_p', '0'], ['min_p', '1']];
    for (const [f, raw] of ok) add(e, `${f}=${raw} (valid)`, withRaw(e.base, f, raw), { status: 200 });
    // the largest windows and cut-offs: valid, and must not make the server allocate their size
    add(e, 'repeat_last_n=2^31-1, top_k=2^31-1, n=8 (valid)', JSON.stringify({ ...e.base, repeat_last_n: 2147483647, top_k: 2147483647, n: 8 }),
      { status: 200 });
    add(e, 'seed=1e-400 (underflows to 0: valid)', withRaw(e.base, 'seed', '1e-400'), { status: 200 });
    add(e, 'seed=2^64 * 10', withRaw(e.base, 'seed', '184467440737095516170'), bad('seed'));

    // booleans and the model
    const bools = ['stream', 'ignore_eos', ...(e.kind === 'chat' ? ['logprobs'] : ['echo'])];
    for (const f of bools) for (const raw of ['1', '0', '"true"', '[]', '{}']) add(e, `${f}=${raw}`, withRaw(e.base, f, raw), bad(f));
    for (const raw of ['1', 'true', '[]', '{}', '["m"]']) add(e, `model=${raw}`, withRaw(e.base, 'model', raw), bad('model'));
    // stream_options
    for (const raw of ['1', '"x"', '[]', 'true']) add(e, `stream_options=${raw}`, withRaw({ ...e.base, stream: true }, 'stream_options', raw), bad('stream_options'));
    add(e, 'stream_options.include_usage="yes"', withRaw({ ...e.base, stream: true }, 'stream_options', '{"include_usage":"yes"}'), bad('stream_options.include_usage'));
    // stop
    for (const raw of ['1', 'true', '{}', '[1]', '[null]', '["a",2]', '[["a"]]'])
      add(e, `stop=${raw}`, withRaw(e.base, 'stop', raw), bad(raw.startsWith('[') ? (raw === '["a",2]' ? 'stop[1]' : 'stop[0]') : 'stop'));
    add(e, 'stop: 17 strings', withRaw(e.base, 'stop', JSON.stringify(Array.from({ length: 17 }, (_, i) => `s${i}`))), bad('stop'));
    add(e, 'stop: 1000 strings', withRaw(e.base, 'stop', JSON.stringify(Array.from({ length: 1000 }, (_, i) => `s${i}`))), bad('stop'));
    add(e, 'stop: 513 bytes', withRaw(e.base, 'stop', JSON.stringify(['x'.repeat(513)])), bad('stop[0]'));
    add(e, 'stop: 16 strings (valid)', withRaw(e.base, 'stop', JSON.stringify(Array.from({ length: 16 }, (_, i) => `s${i}`))), { status: 200 });
    add(e, 'stop: empty strings (valid)', withRaw(e.base, 'stop', '["", ""]'), { status: 200 });
    // logit_bias
    for (const raw of ['[]', '"x"', '1', 'true', '[[1,2]]']) add(e, `logit_bias=${raw}`, withRaw(e.base, 'logit_bias', raw), bad('logit_bias'));
    for (const raw of ['{"abc":1}', '{"-1":1}', '{"1e3":1}', '{"99999999999":1}', '{"":1}', `{"${N_VOCAB}":1}`, '{" 1":1}',
      '{"1 ":1}', '{"1":"x"}', '{"1":1e9}', '{"1":-101}', '{"1":[1]}', '{"1":{}}', '{"1":true}', '{"1":1e309}', '{"0x1":1}'])
      add(e, `logit_bias=${raw}`, withRaw(e.base, 'logit_bias', raw), bad('logit_bias'));
    const bigBias = {};
    for (let i = 0; i < 5000; i++) bigBias[String(i)] = 1;
    add(e, 'logit_bias: 5000 entries', withRaw(e.base, 'logit_bias', JSON.stringify(bigBias)), bad('logit_bias'));
    const ban = (k) => JSON.stringify(Object.fromEntries(Array.from({ length: k }, (_, i) => [String(i), -100])));
    add(e, 'logit_bias bans every token', withRaw(e.base, 'logit_bias', ban(N_VOCAB)), bad('logit_bias', { message: /bans all/ }));
    add(e, 'logit_bias bans all but one token (valid)', withRaw(e.base, 'logit_bias', ban(N_VOCAB - 1)), { status: 200 });
    for (const f of ['repetition_penalty', 'repeat_penalty'])
      add(e, `${f}=1e-300 (0 as a float)`, withRaw(e.base, f, '1e-300'), bad(f));
    add(e, 'logit_bias {"5":-100,"6":100} (valid)', withRaw(e.base, 'logit_bias', '{"5":-100,"6":100}'), { status: 200 });
    // unknown fields are ignored
    add(e, 'unknown fields', JSON.stringify({ ...e.base, foo: 1, tools: [], response_format: { type: 'text' },
      user: 'u', functions: null, nested: { a: [1, { b: null }] } }), { status: 200 });
    // asked-for features it does not have: refused, not ignored
    add(e, 'response_format json_object (valid)', JSON.stringify({ ...e.base, response_format: { type: 'json_object' } }),
      { status: 200 });
    add(e, 'response_format json_schema without a schema', JSON.stringify({ ...e.base, response_format: { type: 'json_schema', json_schema: {} } }),
      bad('response_format.json_schema.schema'));
    add(e, 'response_format json_schema: an unsupported keyword', JSON.stringify({ ...e.base, response_format: { type: 'json_schema',
      json_schema: { schema: { type: 'object', properties: { a: { type: 'number', multipleOf: 3 } } } } } }),
      bad('response_format.json_schema.schema', { message: /multipleOf/ }));
    add(e, 'response_format json_schema: a $ref cycle that never reaches a schema', JSON.stringify({ ...e.base, response_format: { type: 'json_schema',
      json_schema: { schema: { $defs: { a: { $ref: '#/$defs/b' }, b: { $ref: '#/$defs/a' } }, type: 'object', properties: { x: { $ref: '#/$defs/a' } } } } } }),
      bad('response_format.json_schema.schema', { message: /cycle/ }));
    add(e, 'response_format: a string', JSON.stringify({ ...e.base, response_format: 'json' }), bad('response_format'));
    add(e, 'tools', JSON.stringify({ ...e.base, tools: [{ type: 'function', function: { name: 'f' } }] }),
      bad('tools', { message: /tool-call format|\/v1\/completions/ }));
    add(e, 'functions', JSON.stringify({ ...e.base, functions: [{ name: 'f' }] }), bad('functions'));
    add(e, 'tools with tool_choice none (valid)', JSON.stringify({ ...e.base, tools: [{ type: 'function' }], tool_choice: 'none' }),
      { status: 200 });
    add(e, '20000 unknown keys', JSON.stringify({ ...e.base, ...Object.fromEntries(Array.from({ length: 20000 }, (_, i) => [`k${i}`, i])) }), { status: 200 });
    add(e, 'deep unknown field (900 levels)', withRaw(e.base, 'deep', '['.repeat(900) + ']'.repeat(900)), { status: 200 });
    add(e, 'duplicate keys', `${JSON.stringify(e.base).slice(0, -1)},"max_tokens":"x"}`, { status: 200 });
  }

  // chat messages
  const chat = ep[0];
  const msg = (raw) => withRaw(chat.base, 'messages', raw);
  const badMsgs = [
    ['"hi"', 'messages'], ['1', 'messages'], ['{}', 'messages'], ['true', 'messages'], ['[]', 'messages'],
    ['[1]', 'messages[0]'], ['["hi"]', 'messages[0]'], ['[null]', 'messages[0]'], ['[[]]', 'messages[0]'],
    ['[{}]', 'messages[0].role'], ['[{"content":"x"}]', 'messages[0].role'], ['[{"role":1,"content":"x"}]', 'messages[0].role'],
    ['[{"role":"","content":"x"}]', 'messages[0].role'], ['[{"role":["user"],"content":"x"}]', 'messages[0].role'],
    ['[{"role":"user","content":1}]', 'messages[0].content'], ['[{"role":"user","content":true}]', 'messages[0].content'],
    ['[{"role":"user","content":{}}]', 'messages[0].content'], ['[{"role":"user","content":[1]}]', 'messages[0].content[0]'],
    ['[{"role":"user","content":["x"]}]', 'messages[0].content[0]'],
    ['[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x"}}]}]', 'messages[0].content[0].type'],
    ['[{"role":"user","content":[{"type":"text"}]}]', 'messages[0].content[0].text'],
    ['[{"role":"user","content":[{"type":"text","text":5}]}]', 'messages[0].content[0].text'],
    ['[{"role":"user","content":[{"text":"x"}]}]', 'messages[0].content[0].type'],
    ['[{"role":"user","content":[{"type":5,"text":"x"}]}]', 'messages[0].content[0].type'],
    ['[{"role":"user","content":"a"},{"role":2}]', 'messages[1].role'],
    ['[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b"},{}]}]', 'messages[1].content[1].type'],
  ];
  for (const [raw, param] of badMsgs) cases.push({ name: `chat: messages=${raw}`, method: 'POST', path: chat.path, body: msg(raw), expect: bad(param) });
  cases.push({ name: 'chat: messages missing', method: 'POST', path: chat.path, body: JSON.stringify({ model: 'm' }), expect: bad('messages') });
  cases.push({ name: 'chat: messages null', method: 'POST', path: chat.path, body: msg('null'), expect: bad('messages') });
  const okMsgs = ['[{"role":"user","content":null}]', '[{"role":"wizard","content":"x"}]', '[{"role":"user","content":"a\\u0000b"}]',
    '[{"role":"user","content":"<|im_start|>system\\n<|im_end|>"}]', '[{"role":"user","content":"\\ud83d\\ude00"}]',
    '[{"role":"user","content":[]}]', '[{"role":"user","content":"x","name":{"a":[1,2,{"b":null}]}}]',
    `[{"role":"user","content":"x","deep":${'['.repeat(500)}${']'.repeat(500)}}]`,
    '[{"role":"user","content":"x","tool_calls":[{"id":1}]}]'];
  for (const raw of okMsgs) cases.push({ name: `chat: messages=${raw.slice(0, 80)} (valid)`, method: 'POST', path: chat.path, body: msg(raw), expect: { status: 200 } });
  // prompts over the context: 400 with the numbers
  const ctxMsg = new RegExp(`maximum context length is ${N_CTX} tokens.*resulted in \\d+ tokens`);
  // more messages than the context has tokens: refused before rendering
  cases.push({ name: 'chat: 2000 messages over the context', method: 'POST', path: chat.path,
    body: msg(JSON.stringify(Array.from({ length: 2000 }, () => ({ role: 'user', content: 'x' })))),
    expect: bad('messages', { code: 'context_length_exceeded', message: new RegExp(`maximum context length is ${N_CTX} tokens.*you sent 2000 messages`) }) });
  cases.push({ name: 'chat: 200 messages over the context', method: 'POST', path: chat.path,
    body: msg(JSON.stringify(Array.from({ length: 200 }, () => ({ role: 'user', content: 'x' })))),
    expect: bad('messages', { code: 'context_length_exceeded', message: ctxMsg }) });
  cases.push({ name: 'chat: long content over the context', method: 'POST', path: chat.path,
    body: msg(JSON.stringify([{ role: 'user', content: 'Once upon a time '.repeat(300) }])),
    expect: bad('messages', { code: 'context_length_exceeded', message: ctxMsg }) });

  // completion prompts
  const cmp = ep[1];
  const pr = (raw) => withRaw(cmp.base, 'prompt', raw);
  const badPrompts = [['1', 'prompt'], ['true', 'prompt'], ['{}', 'prompt'], ['[]', 'prompt'], ['["a","b"]', 'prompt'],
    ['[[]]', 'prompt[0]'], ['[{}]', 'prompt[0]'], ['[null]', 'prompt[0]'], ['[1.5]', 'prompt[0]'], ['[-1]', 'prompt[0]'],
    [`[${N_VOCAB}]`, 'prompt[0]'], ['[1e10]', 'prompt[0]'], ['[1e309]', 'prompt[0]'], ['[1,2,"x"]', 'prompt'],
    ['[[1,2,"x"]]', 'prompt[0]'], ['[[1,2,-5]]', 'prompt[0][2]'], ['[[1],[2]]', 'prompt'], ['[[[1]]]', 'prompt[0]']];
  for (const [raw, param] of badPrompts) cases.push({ name: `completion: prompt=${raw}`, method: 'POST', path: cmp.path, body: pr(raw), expect: bad(param) });
  cases.push({ name: 'completion: prompt missing', method: 'POST', path: cmp.path, body: JSON.stringify({ max_tokens: 2 }), expect: bad('prompt') });
  for (const raw of ['""', '[1,2,3]', '[[1,2,3]]', '["Hi"]', '"a\\u0000b"', '"\\ud83d\\ude00"'])
    cases.push({ name: `completion: prompt=${raw} (valid)`, method: 'POST', path: cmp.path, body: pr(raw), expect: { status: 200 } });
  cases.push({ name: 'completion: prompt text over the context', method: 'POST', path: cmp.path, body: pr(JSON.stringify('Once upon a time '.repeat(300))),
    expect: bad('prompt', { code: 'context_length_exceeded', message: ctxMsg }) });
  cases.push({ name: 'completion: prompt ids = context', method: 'POST', path: cmp.path, body: pr(JSON.stringify(Array(N_CTX).fill(5))),
    expect: bad('prompt', { code: 'context_length_exceeded', message: new RegExp(`maximum context length is ${N_CTX} tokens.*resulted in ${N_CTX} tokens`) }) });
  cases.push({ name: 'completion: 100000 prompt ids', method: 'POST', path: cmp.path, body: pr(JSON.stringify(Array(100000).fill(5))),
    expect: bad('prompt', { code: 'context_length_exceeded', message: ctxMsg }) });
  cases.push({ name: 'completion: prompt ids = context - 1, max_tokens huge (valid)', method: 'POST', path: cmp.path,
    body: JSON.stringify({ prompt: Array(N_CTX - 1).fill(5), max_tokens: 2147483647, temperature: 0 }), expect: { status: 200 } });
  cases.push({ name: 'completion: echo + logprobs 20 + n 8 (valid)', method: 'POST', path: cmp.path,
    body: JSON.stringify({ prompt: 'Hi', max_tokens: 3, echo: true, logprobs: 20, n: 8, temperature: 1, seed: 1 }), expect: { status: 200 } });

  // tokenize / detokenize
  const tk = (body, expect) => cases.push({ name: `tokenize: ${String(body).slice(0, 60)}`, method: 'POST', path: '/tokenize', body, expect });
  const dt = (body, expect) => cases.push({ name: `detokenize: ${String(body).slice(0, 60)}`, method: 'POST', path: '/detokenize', body, expect });
  for (const b of ['', '{', '[]', '{"content":1}', '{"content":[]}', '{"content":{}}', '{"content":"x","add_special":"yes"}'])
    tk(b, { status: 400 });
  tk('{"content":"Once upon a time"}', { status: 200 });
  for (const b of ['', '{"tokens":"x"}', '{"tokens":[-1]}', `{"tokens":[${N_VOCAB}]}`, '{"tokens":[1.5]}', '{"tokens":["a"]}',
    '{"tokens":[1e309]}', '{"tokens":{}}', '{"tokens":[[1]]}'])
    dt(b, { status: 400 });
  dt('{"tokens":[1,2,3]}', { status: 200 });
  dt('{"tokens":[]}', { status: 200 });
  return cases;
}

function rawBodyCases() {
  const cases = [];
  const paths = ['/v1/chat/completions', '/v1/completions'];
  const good = { '/v1/chat/completions': '{"messages":[{"role":"user","content":"X"}],"max_tokens":2}', '/v1/completions': '{"prompt":"X","max_tokens":2}' };
  const jsonErr = { status: 400, param: null, message: /Invalid JSON|JSON object|empty body/ };
  const utfErr = { status: 400, param: null, message: /not valid UTF-8/ };
  for (const p of paths) {
    const g = good[p];
    const add = (name, body, expect, headers) => cases.push({ name: `${p}: ${name}`, method: 'POST', path: p, body, expect, headers });
    for (const b of ['', ' ', '\n\t ', '{', '}', '[', '"x"', '123', 'null', 'true', '[]', '[{}]', '{"a":}', '{"a" 1}', '{"a":1,}',
      "{'a':1}", '{"a":1}{"b":2}', '{"a":1} x', '{"a":1}/* c */', '// c\n{}', '{"a":"\\x"}', '{"a":"\\u12"}', '{"a":"\\ud800"}',
      '{"a":"\\udc00"}', '{"a":"\\ud800\\u0041"}', '{"a":"abc', '{"a":tru}', '{"a":nul}', '{a:1}', '\ufeff', '\ufeff\ufeff{}'])
      add(`body ${JSON.stringify(b).slice(0, 40)}`, b, jsonErr);
    // truncations of a valid body at every few bytes
    for (let i = 1; i < g.length; i += Math.max(1, Math.floor(g.length / 12))) add(`truncated at ${i}`, g.slice(0, i), jsonErr);
    for (const d of [1001, 5000, 100000]) add(`nesting ${d}`, '['.repeat(d) + ']'.repeat(d), jsonErr);
    add('nesting 100000 unclosed', '{"a":'.repeat(100000), jsonErr);
    // invalid UTF-8: in strings, in keys, outside strings
    const bads = [[0xff], [0xfe], [0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80],
      [0xe2, 0x82], [0x80], [0xc3]];
    for (const bytes of bads) {
      const hex = bytes.map((x) => x.toString(16)).join(' ');
      const i = g.indexOf('X');
      add(`invalid UTF-8 ${hex} in a string`, Buffer.concat([Buffer.from(g.slice(0, i)), Buffer.from(bytes), Buffer.from(g.slice(i + 1))]), utfErr);
    }
    add('invalid UTF-8 in a key', Buffer.concat([Buffer.from('{"'), Buffer.from([0xff]), Buffer.from(`":1,${g.slice(1)}`)]), utfErr);
    add('invalid UTF-8 in model', Buffer.concat([Buffer.from('{"model":"a'), Buffer.from([0xc0, 0x80]), Buffer.from(`",${g.slice(1)}`)]), utfErr);
    add('invalid UTF-8 in stop', Buffer.concat([Buffer.from('{"stop":["'), Buffer.from([0xed, 0xbf, 0xbf]), Buffer.from(`"],${g.slice(1)}`)]), utfErr);
    add('invalid UTF-8 outside strings', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(g)]), utfErr);
    add('invalid UTF-8 at the end', Buffer.concat([Buffer.from(g), Buffer.from([0xe2, 0x82])]), utfErr);
    add('NUL bytes after the object', Buffer.concat([Buffer.from(g), Buffer.alloc(16)]), jsonErr);
    add('raw control bytes in a string', g.replace('X', 'a\u0001\u001fb'), { status: 200 });
    // content types are not enforced: the body is JSON whatever the label
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', '\u00ff'])
      add(`content-type ${ct}`, g, { status: 200 }, { 'Content-Type': ct });
    add('form-encoded body', 'messages=x&prompt=y', jsonErr, { 'Content-Type': 'application/x-www-form-urlencoded' });
    add('no body at all', null, jsonErr);
    add('UTF-8 byte order mark (valid)', `\ufeff${g}`, { status: 200 });
  }
  return cases;
}

function httpCases() {
  const cases = [];
  const postRoutes = ['/v1/chat/completions', '/chat/completions', '/v1/completions', '/completions', '/tokenize', '/detokenize',
    '/v1/embeddings', '/embeddings', '/completion', '/infill'];
  const getRoutes = ['/health', '/metrics', '/v1/models', '/models', '/props'];
  for (const p of postRoutes) for (const m of ['GET', 'PUT', 'DELETE', 'PATCH'])
    cases.push({ name: `${m} ${p}`, method: m, path: p, body: m === 'GET' ? null : '{}', expect: { status: 405 } });
  for (const p of getRoutes) for (const m of ['POST', 'PUT', 'DELETE'])
    cases.push({ name: `${m} ${p}`, method: m, path: p, body: '{}', expect: { status: 405 } });
  // ollama's API: its routes' methods, and bodies its translation must refuse, all in its {"error"} shape
  const ollama = { ollama: true };
  for (const p of ['/api/chat', '/api/generate', '/api/show', '/api/embed', '/api/embeddings'])
    for (const m of ['GET', 'PUT', 'DELETE'])
      cases.push({ name: `${m} ${p}`, method: m, path: p, body: m === 'GET' ? null : '{}', expect: { status: 405, ...ollama } });
  for (const p of ['/', '/%00', '/api/version', '/api/tags', '/api/ps'])
    for (const m of ['POST', 'PUT'])
      cases.push({ name: `${m} ${p}`, method: m, path: p, body: '{}', expect: { status: 405, ...ollama } });
  for (const p of ['/api/pull', '/api/push', '/api/create', '/api/copy', '/api/delete', '/api/blobs/sha256:00'])
    cases.push({ name: `POST ${p}`, method: 'POST', path: p, body: '{"model":"x"}', expect: { status: 501, ...ollama } });
  for (const p of ['/api/', '/api/chat/', '/api/blobs', '/api/nothing'])
    cases.push({ name: `POST ${p}`, method: 'POST', path: p, body: '{}', expect: { status: 404, ...ollama } });
  const hi = '"messages":[{"role":"user","content":"Hi"}]';
  for (const [p, body] of [
    ['/api/chat', '{"messages": ['], ['/api/chat', '[]'], ['/api/chat', '{"messages":"x"}'], ['/api/chat', '{"messages":[1]}'],
    ['/api/chat', `{${hi},"options":[]}`], ['/api/chat', `{${hi},"options":{"num_predict":1.5}}`],
    ['/api/chat', `{${hi},"options":{"num_predict":"9"}}`], ['/api/chat', `{${hi},"options":{"temperature":1e309}}`],
    ['/api/chat', `{${hi},"options":{"top_k":-5}}`], ['/api/chat', `{${hi},"options":{"stop":[1]}}`],
    ['/api/chat', `{${hi},"format":"yaml"}`], ['/api/chat', `{${hi},"format":[]}`], ['/api/chat', `{${hi},"think":"max"}`],
    ['/api/chat', `{${hi},"stream":1}`], ['/api/chat', `{${hi},"tools":{}}`], ['/api/chat', `{${hi},"logprobs":"yes"}`],
    ['/api/chat', '{"messages":[{"role":"user","content":"x","images":["aGk="]}]}'],
    ['/api/generate', '{"prompt":["x"]}'], ['/api/generate', '{"prompt":"x","context":[1,99999]}'],
    ['/api/generate', '{"prompt":"x","context":"1"}'], ['/api/generate', '{"prompt":"x","suffix":"y"}'],
    ['/api/generate', '{"prompt":"x","template":"{{.Prompt}}"}'], ['/api/generate', '{"prompt":"x","raw":"yes"}'],
    ['/api/generate', `{"prompt":"${'x '.repeat(400)}"}`], ['/api/generate', '{"prompt":"\u0000"}'],
    ['/api/embed', '{"input":[1,2]}'], ['/api/embed', '{"input":"x","truncate":"no"}'],
    ['/api/embed', '{"input":"x","dimensions":0}'], ['/api/embeddings', '{"prompt":5}'], ['/api/show', '{"model":'],
  ]) cases.push({ name: `POST ${p} ${body.slice(0, 40)}`, method: 'POST', path: p, body,
    expect: { status: 400, ...ollama } });
  for (const [p, body] of [['/api/chat', `{${hi},"stream":false,"options":{"num_predict":2,"num_ctx":99,"mirostat":2}}`],
    ['/api/generate', '{"prompt":"Hi","stream":false,"options":{"num_predict":2}}'], ['/api/generate', '{}'],
    ['/api/chat', '{"messages":[]}'], ['/api/embed', '{"input":["a","b"]}'], ['/api/embeddings', '{"prompt":"a"}'], ['/api/show', '{"model":"x"}'], ['/api/show', '{}'], ['/api/embed', '{}']])
    cases.push({ name: `POST ${p} ${body.slice(0, 40)}`, method: 'POST', path: p, body, expect: { status: 200 } });
  for (const p of ['/v1', '/v1/', '/v2/chat/completions', '/v1/chat/completions/', '/V1/COMPLETIONS', '/v1/completions%20',
    '/../../etc/passwd', '/api', '/API/CHAT', '/v1/chat/completions/../completions/x', `/${'a'.repeat(4000)}`, '/v1/engines/x/completions',
    '/v1/embedding', '/v1/models/x'])
    cases.push({ name: `POST ${p.slice(0, 40)}`, method: 'POST', path: p, body: '{}', expect: { status: 404, code: 'unknown_url' } });
  // llama-server's own endpoints: bodies the translation or the parser must refuse
  for (const body of ['{"prompt": [', '[]', '{"prompt":5}', '{"prompt":"x","n_predict":"9"}', '{"prompt":"x","n_probs":-1}',
    '{"prompt":"x","grammar":"root ::= x"}', '{"prompt":"x","logit_bias":[[1]]}', '{"prompt":"x","logit_bias":[["x",{}]]}',
    '{"prompt":"x","json_schema":[]}', '{"prompt":"x","response_fields":[1]}', '{"prompt":"x","temperature":1e309}',
    '{"prompt":[99999999]}', '{"prompt":[["a"],["b"]]}', '{"prompt":"x","mirostat":"2"}', '{"prompt":"x","lora":{}}',
    '{"prompt":"x","seed":"1"}', '{"prompt":"x","stop":[5]}', '{"prompt":"x","return_tokens":1}', '{}'])
    cases.push({ name: `POST /completion ${body.slice(0, 40)}`, method: 'POST', path: '/completion', body, expect: { status: 400 } });
  for (const body of ['{"input_prefix":"a","input_suffix":"b"}', '{"input_prefix":1}', '{}', '[1]'])
    cases.push({ name: `POST /infill ${body.slice(0, 40)}`, method: 'POST', path: '/infill', body, expect: { status: 400 } });
  for (const body of ['{"prompt":"Hi","n_predict":2}', '{"prompt":[1,2],"n_predict":1,"n_probs":2,"return_tokens":true}',
    '{"prompt":"Hi","n_predict":2,"response_fields":["content","nope/x"]}', '{"prompt":"Hi","n_predict":0}'])
    cases.push({ name: `POST /completion ${body.slice(0, 40)}`, method: 'POST', path: '/completion', body, expect: { status: 200 } });
  cases.push({ name: 'embeddings without input', method: 'POST', path: '/v1/embeddings', body: '{}', expect: { status: 400 } });
  cases.push({ name: 'embeddings of 2049 inputs', method: 'POST', path: '/v1/embeddings',
    body: JSON.stringify({ input: Array(2049).fill('x') }), expect: { status: 400 } });
  cases.push({ name: 'embeddings of 64 inputs', method: 'POST', path: '/embeddings',
    body: JSON.stringify({ input: Array(64).fill('x y') }), expect: { status: 200 } });
  cases.push({ name: 'query string on a route', method: 'POST', path: '/v1/completions?x=1&y', body: '{"prompt":"x","max_tokens":1}', expect: { status: 200 } });
  cases.push({ name: 'HEAD /health', method: 'HEAD', path: '/health', expect: { any: [200] } });
  cases.push({ name: 'OPTIONS preflight', method: 'OPTIONS', path: '/v1/completions', expect: { any: [204] } });
  cases.push({ name: 'unknown method FOO', method: 'FOO', path: '/v1/completions', body: '{}', expect: { any: [400, 405, 501], close: true } });
  // headers the server must survive
  const g = '{"prompt":"x","max_tokens":1}';
  const hdr = (name, headers, expect) => cases.push({ name, method: 'POST', path: '/v1/completions', body: g, headers, expect });
  hdr('100 KB header', { 'X-Big': 'a'.repeat(100000) }, { any: [400, 413, 431], close: true });
  hdr('2000 headers', Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`X-H${i}`, 'v'.repeat(20)])), { any: [400, 413, 431], close: true });
  hdr('header with invalid UTF-8', { 'X-Bin': '\u00ff\u00fe\u0080' }, { status: 200 });
  hdr('garbage Authorization', { Authorization: 'Bearer \u00ff\u00ff' }, { status: 200 });
  hdr('Content-Length not a number', { 'Content-Length': 'abc' }, { any: [400, 413], close: true });
  hdr('Content-Length negative', { 'Content-Length': '-5' }, { any: [400, 413], close: true });
  hdr('Content-Length 2^70', { 'Content-Length': '1180591620717411303424' }, { any: [400, 413], close: true });
  hdr('Content-Length too large, body short', { 'Content-Length': String(MAX_BODY + 1) }, { any: [413], close: true });
  hdr('two Content-Lengths that differ', { 'Content-Length': [String(g.length), '5'].join('\r\nContent-Length: ') }, { any: [400], close: true });
  hdr('two equal Content-Lengths', { 'Content-Length': [String(g.length), String(g.length)].join('\r\nContent-Length: ') }, { any: [200] });
  hdr('Content-Encoding: gzip', { 'Content-Encoding': 'gzip' }, { any: [415], close: true });
  hdr('Content-Encoding: identity', { 'Content-Encoding': 'identity' }, { any: [200] });
  hdr('Transfer-Encoding: gzip', { 'Transfer-Encoding': 'gzip' }, { any: [501], close: true });
  hdr('Expect: 100-continue', { Expect: '100-continue' }, { any: [200] });
  return cases;
}

// Raw protocol garbage: each must get a 4xx/5xx or a clean close.
function protocolCases() {
  const L = (s) => Buffer.from(s, 'latin1');
  const cases = [
    ['random bytes', Buffer.from(Array.from({ length: 1024 }, (_, i) => (i * 7919 + 13) % 256))],
    ['TLS ClientHello', Buffer.from('16030100a5010000a10303' + '00'.repeat(64), 'hex')],
    ['HTTP/2 preface', L('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')],
    ['HTTP/9.9', L('GET /health HTTP/9.9\r\nHost: x\r\n\r\n')],
    ['HTTP/0.9', L('GET /health\r\n\r\n')],
    ['blank lines', L('\r\n\r\n\r\n\r\n')],
    ['NUL bytes', Buffer.alloc(64)],
    ['header without colon', L('GET /health HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n')],
    ['folded header', L('GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  folded\r\nConnection: close\r\n\r\n')],
    ['no Host on HTTP/1.1', L('GET /health HTTP/1.1\r\nConnection: close\r\n\r\n')],
    ['20 KB request line', L(`GET /${'a'.repeat(20000)} HTTP/1.1\r\nHost: x\r\n\r\n`)],
    ['bare LF line ends', L('GET /health HTTP/1.1\nHost: x\nConnection: close\n\n')],
    ['chunked with a bad size', L('POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n')],
    ['chunked with a huge size', L('POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc\r\n')],
    ['NUL in the request line', L('GET /hea\u0000lth HTTP/1.1\r\nHost: x\r\n\r\n')],
    ['control bytes in the method', L('G\u0001T /health HTTP/1.1\r\nHost: x\r\n\r\n')],
  ];
  return cases.map(([name, data]) => ({ name: `protocol: ${name}`, raw: data, expect: { any: [200, 400, 404, 405, 413, 414, 431, 501, 505], close: true } }));
}

async function runCase(port, c) {
  const r = c.raw ? await rawExchange(port, c.raw, { timeout: 8000 }).then((ex) => ({ ...ex, res: parseResponse(ex.buf), status: parseResponse(ex.buf)?.status || 0 }))
    : await call(port, c.method, c.path, c.body, c.headers, { timeout: 15000 });
  const e = c.expect;
  const ctx = `${c.name}: got ${r.status} ${r.res ? r.res.text.slice(0, 300) : '(no response)'}${r.timedOut ? ' (timed out: hung connection)' : ''}`;
  assert.ok(!r.timedOut, ctx);
  if (e.any) {
    if (r.status === 0) assert.ok(e.close, `${ctx}: no response, no clean close allowed`);
    else assert.ok(e.any.includes(r.status), ctx);
    if (r.res && r.status >= 400 && r.res.json) assertOaiError(r, r.status, {}, c.name);
    return r;
  }
  if (e.ollama) { /* ollama's shape: {"error": "..."} and nothing else */
    assert.equal(r.status, e.status, ctx);
    assert.ok(r.res.json && typeof r.res.json.error === 'string' && r.res.json.error.length > 0, ctx);
    assert.deepEqual(Object.keys(r.res.json), ['error'], ctx);
    return r;
  }
  if (e.status === 200) {
    assert.equal(r.status, 200, ctx);
    assert.ok(r.res.json && !r.res.json.error, ctx);
    return r;
  }
  assertOaiError(r, e.status, { param: e.param, code: e.code, message: e.message }, c.name);
  return r;
}

// Runs cases a few at a time, with a well-formed greedy check every so often.
async function storm(port, cases, reference, concurrency = 4) {
  let i = 0, n = 0;
  const failures = [];
  const worker = async () => {
    while (i < cases.length) {
      const c = cases[i++];
      const t = Date.now();
      try {
        await runCase(port, c);
      } catch (e) {
        failures.push(e.message.split('\n')[0]);
      }
      if (Date.now() - t > 2000) process.stderr.write(`slow case (${Date.now() - t} ms): ${c.name}\n`);
      if (++n % 40 === 0) assert.deepEqual(await greedy(port), reference, `greedy output changed after ${n} hostile requests`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  assert.equal(failures.length, 0, `${failures.length} of ${cases.length} cases failed:\n${failures.slice(0, 40).join('\n')}`);
  return n;
}

// ------------------------------------------------------------ connections

// Opens a socket, sends a streaming request, lets onData decide what to do.
function streamSocket(port, body, p = '/v1/chat/completions') {
  const sock = net.connect(port, '127.0.0.1');
  sock.on('error', () => {});
  sock.write(buildRequest('POST', p, JSON.stringify(body)));
  return sock;
}

const LONG = (stream) => ({ messages: [{ role: 'user', content: 'Tell a story' }], max_tokens: 200, ignore_eos: true, stream, temperature: 0 });

async function disconnectMidStream(port, { after = 'chunk', n = 1, completion = false } = {}) {
  const body = completion ? { prompt: 'Tell a story', max_tokens: 200, ignore_eos: true, stream: true, n, temperature: 0 } : { ...LONG(true), n };
  const sock = streamSocket(port, body, completion ? '/v1/completions' : '/v1/chat/completions');
  if (after === 'send') { sock.destroy(); return; }
  let got = '';
  await new Promise((resolve) => {
    const t = setTimeout(resolve, 10000);
    sock.on('data', (d) => {
      got += d.toString('latin1');
      if (after === 'headers' ? got.includes('\r\n\r\n') : got.includes('data: {')) { clearTimeout(t); resolve(); }
    });
    sock.on('close', () => { clearTimeout(t); resolve(); });
  });
  assert.match(got, /^HTTP\/1\.1 200/);
  sock.destroy();
}

// Reads a stream a byte at a time with pauses for readMs, then the rest at
// full speed; returns the whole response.
async function slowRead(port, body, p, readMs) {
  const sock = net.connect(port, '127.0.0.1');
  sock.setNoDelay(true);
  sock.on('error', () => {});
  await once(sock, 'connect');
  sock.write(buildRequest('POST', p, JSON.stringify(body)));
  const chunks = [];
  let closed = false;
  sock.on('close', () => { closed = true; });
  sock.pause();
  const t0 = Date.now();
  while (Date.now() - t0 < readMs && !closed) {
    const b = sock.read(1);
    if (b) chunks.push(b);
    await sleep(chunks.length % 50 === 0 ? 100 : 2);
  }
  const rest = await new Promise((resolve) => {
    const more = [];
    const b = sock.read();
    if (b) more.push(b);
    if (closed) return resolve(more);
    sock.on('data', (d) => more.push(d));
    sock.on('end', () => resolve(more));
    sock.on('close', () => resolve(more));
    sock.resume();
  });
  sock.destroy();
  return Buffer.concat([...chunks, ...rest]);
}

// ------------------------------------------------------------------ tests

// no test may hang CI: a suite that takes this long has failed
const SUITE = { timeout: 100000 };

describe('vx serve under hostile clients', SUITE, () => {
  let srv, port, reference;
  const t0 = Date.now();
  before(async () => {
    srv = await startServer(['--parallel', '4', '--timeout', '2']);
    port = srv.port;
    reference = await greedy(port);
    assert.ok(reference.chat.length > 0 && reference.completion.length > 0);
  });
  after(async () => {
    if (srv && srv.alive()) await srv.stop('SIGKILL');
    process.stderr.write(`hostile suite: ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  });

  let total = 0;
  test('JSON field storm: wrong types, huge numbers, garbage values', async () => {
    const cases = jsonCases();
    total += await storm(port, cases, reference);
    assert.ok(cases.length > 300, `${cases.length} cases`);
  });

  test('raw body storm: malformed JSON, invalid UTF-8, content types', async () => {
    total += await storm(port, rawBodyCases(), reference);
  });

  test('HTTP storm: methods, paths, headers', async () => {
    total += await storm(port, httpCases(), reference);
  });

  test('protocol garbage and pipelining', async () => {
    total += await storm(port, protocolCases(), reference, 8);
    // pipelined requests are answered in order
    const three = Buffer.concat([buildRequest('GET', '/health', null, { Connection: 'keep-alive' }),
      buildRequest('POST', '/v1/completions', '{"prompt":"x","max_tokens":1,"temperature":0}', { Connection: 'keep-alive' }),
      buildRequest('POST', '/v1/completions', '{"prompt":1}', {})]);
    const ex = await rawExchange(port, three);
    const rs = parseAll(ex.buf);
    assert.deepEqual(rs.map((r) => r.status), [200, 200, 400]);
    // a request followed by garbage: the first is answered, then 400 or close
    const g = await rawExchange(port, Buffer.concat([buildRequest('GET', '/health', null, { Connection: 'keep-alive' }),
      Buffer.from('\u0001\u0002GARBAGE \u00ff\r\n\r\n', 'latin1')]));
    assert.ok(!g.timedOut);
    const gr = parseAll(g.buf);
    assert.equal(gr[0].status, 200);
    if (gr.length > 1) assert.ok(gr[1].status >= 400 && gr[1].status < 600);
    // HTTP/1.0: no chunked encoding, the stream ends with the connection
    const sb = JSON.stringify({ ...COMPL, stream: true });
    const h10 = await rawExchange(port, Buffer.from(`POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${sb.length}\r\n\r\n${sb}`));
    assert.ok(!h10.timedOut);
    const r10 = parseResponse(h10.buf);
    assert.equal(r10.status, 200);
    const head10 = h10.buf.subarray(0, h10.buf.indexOf('\r\n\r\n')).toString('latin1');
    const ev10 = sseEvents(/chunked/i.test(head10) ? r10.body : h10.buf.subarray(h10.buf.indexOf('\r\n\r\n') + 4));
    assert.equal(ev10[ev10.length - 1], '[DONE]');
    assert.equal(streamText(ev10, false), reference.completion);
    // a request dripped a few bytes at a time
    const drip = buildRequest('POST', '/v1/completions', JSON.stringify(COMPL));
    const pieces = Array.from({ length: 20 }, (_, i) => drip.subarray(Math.floor(i * drip.length / 20), Math.floor((i + 1) * drip.length / 20)));
    const dr = await rawExchange(port, pieces, { gapMs: 20 });
    assert.equal(parseResponse(dr.buf)?.status, 200);
    // a chunked request body
    const cb = JSON.stringify(COMPL);
    const ch = await rawExchange(port, Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n` +
      `5\r\n${cb.slice(0, 5)}\r\n${(cb.length - 5).toString(16)}\r\n${cb.slice(5)}\r\n0\r\n\r\n`));
    const chr = parseResponse(ch.buf);
    assert.equal(chr.status, 200, chr.text);
    assert.equal(chr.json.choices[0].text, reference.completion);
    total += 5;
  });

  test('oversized bodies: 413 or a clean close, quickly', async () => {
    // 100 MB announced and sent: answered before it is read
    let t = Date.now();
    const big = Buffer.alloc(1 << 20, 0x61);
    const parts = [Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${100 << 20}\r\n\r\n`)];
    for (let i = 0; i < 100; i++) parts.push(big);
    let ex = await rawExchange(port, parts, { timeout: 20000 });
    assert.ok(!ex.timedOut, '100 MB body: hung');
    let r = parseResponse(ex.buf);
    if (r) assertOaiError({ status: r.status, res: r }, 413, {}, '100 MB body');
    assert.ok(Date.now() - t < 15000, `100 MB body took ${Date.now() - t} ms`);
    // just over the limit: read and dropped, then a full 413
    t = Date.now();
    r = await call(port, 'POST', '/v1/completions', Buffer.alloc(MAX_BODY + 1, 0x20));
    assertOaiError(r, 413, { message: new RegExp(`${MAX_BODY}`) }, 'limit + 1');
    // 5 MB chunked (no Content-Length)
    const chunk = Buffer.concat([Buffer.from(`${(1 << 20).toString(16)}\r\n`), big, Buffer.from('\r\n')]);
    ex = await rawExchange(port, [Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n'),
      chunk, chunk, chunk, chunk, chunk, Buffer.from('0\r\n\r\n')], { timeout: 20000 });
    assert.ok(!ex.timedOut);
    r = parseResponse(ex.buf);
    if (r) assertOaiError({ status: r.status, res: r }, 413, {}, 'chunked 5 MB');
    // exactly the limit is fine as far as size goes (the JSON is bad)
    const pad = Buffer.alloc(MAX_BODY, 0x20);
    Buffer.from('{"prompt":"x","max_tokens":1}').copy(pad, 0);
    r = await call(port, 'POST', '/v1/completions', pad);
    assert.equal(r.status, 200, r.res && r.res.text);
    // a body shorter than announced, then the client goes
    const short = await rawExchange(port, Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"pro'), { timeout: 300 });
    assert.ok(short.timedOut || short.closed);
    total += 5;
    assert.deepEqual(await greedy(port), reference);
  });

  test('clients that disconnect mid-stream or before the answer', async () => {
    const aborted0 = await metric(port, 'vortex_http_requests_aborted_total');
    const runs = [];
    for (const after of ['send', 'headers', 'chunk']) {
      runs.push(disconnectMidStream(port, { after }));
      runs.push(disconnectMidStream(port, { after, n: 3 }));
      runs.push(disconnectMidStream(port, { after, completion: true }));
    }
    await Promise.all(runs);
    // non-streaming, gone before the answer
    for (let i = 0; i < 4; i++) {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => {});
      s.write(buildRequest('POST', '/v1/chat/completions', JSON.stringify({ ...LONG(false), n: 2 })));
      await sleep(30 * i);
      s.destroy();
    }
    // half-close after the request: an answer or a clean close
    const hc = await rawExchange(port, buildRequest('POST', '/v1/completions', '{"prompt":"x","max_tokens":2}'), { halfClose: true });
    assert.ok(!hc.timedOut);
    if (parseResponse(hc.buf)) assert.equal(parseResponse(hc.buf).status, 200);
    total += runs.length + 5;
    await waitIdle(port);
    // the streams cut after the headers or a chunk were seen as aborted
    assert.ok(await metric(port, 'vortex_http_requests_aborted_total') >= aborted0 + 6);
    assert.deepEqual(await greedy(port), reference);
  });

  test('slow readers get the whole stream, unchanged', async () => {
    const chatBody = { ...CHAT, stream: true };
    const cmpBody = { ...COMPL, stream: true, logprobs: 5 };
    const [a, b] = await Promise.all([slowRead(port, chatBody, '/v1/chat/completions', 1500),
      slowRead(port, cmpBody, '/v1/completions', 1500), greedy(port)]);
    for (const [buf, chat, want] of [[a, true, reference.chat], [b, false, reference.completion]]) {
      const r = parseResponse(buf);
      assert.equal(r.status, 200);
      const ev = sseEvents(r.body);
      assert.equal(ev[ev.length - 1], '[DONE]');
      assert.equal(streamText(ev, chat), want);
    }
    total += 2;
  });

  test('idle, half-sent and slowloris connections time out; others keep working', async () => {
    const idle = [];
    for (let i = 0; i < 16; i++) {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => {});
      if (i % 2) s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le');
      idle.push(s);
    }
    const closedAt = idle.map((s) => once(s, 'close').then(() => Date.now()));
    const t = Date.now();
    assert.deepEqual(await greedy(port), reference);
    // the idle timeout (2 s here) closes them all
    let timer;
    const times = await Promise.race([Promise.all(closedAt), new Promise((r) => { timer = setTimeout(() => r(null), 12000); })]);
    clearTimeout(timer);
    assert.ok(times, 'idle connections were never closed (hung)');
    for (const x of times) assert.ok(x - t < 11000);
    total += idle.length;
  });

  test('a stream larger than the socket buffers, never read: dropped after the idle timeout', async () => {
    await waitIdle(port);
    // the model name is echoed in every chunk: ~25 MB of output
    const aborted0 = await metric(port, 'vortex_http_requests_aborted_total');
    const sock = streamSocket(port, { model: 'm'.repeat(200000), prompt: 'Once', max_tokens: 128, ignore_eos: true, stream: true, temperature: 0 },
      '/v1/completions');
    sock.pause();
    const t = Date.now();
    await sleep(500);
    await waitIdle(port, 15000); // the idle timeout is 2 s
    assert.ok(Date.now() - t < 15000);
    assert.equal(await metric(port, 'vortex_http_requests_aborted_total'), aborted0 + 1);
    sock.destroy();
    total += 1;
  });

  test('chaos: 48 concurrent clients streaming, cutting off and sending garbage at random', async () => {
    let seed = Number(process.env.VX_CHAOS_SEED || 12345);
    const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
    const plan = Array.from({ length: 48 }, () => ({ kind: rand(5), cut: 1 + rand(3000), n: 1 + rand(3), stream: rand(2) === 1 }));
    const results = await Promise.all(plan.map(async (c) => {
      if (c.kind === 0) { // well-formed, read to the end
        const r = await call(port, 'POST', '/v1/completions', JSON.stringify({ ...COMPL, n: c.n }), {}, { timeout: 60000 });
        if (r.status === 429 && r.res.json?.error?.code === 'rate_limit_exceeded') return 'ok'; // the queue (64) can fill up
        return r.status === 200 && r.res.json.choices.every((ch) => ch.text === reference.completion) ? 'ok' : `bad ${r.status}`;
      }
      if (c.kind === 1 || c.kind === 2) { // streams cut off after some bytes
        const body = { ...LONG(true), n: c.n };
        const sock = streamSocket(port, c.kind === 1 ? body : { prompt: 'Once', max_tokens: 100, stream: true, n: c.n, logprobs: 3 },
          c.kind === 1 ? '/v1/chat/completions' : '/v1/completions');
        let got = 0;
        await new Promise((resolve) => {
          sock.on('data', (d) => { got += d.length; if (got >= c.cut) { sock.destroy(); resolve(); } });
          sock.on('close', resolve);
        });
        return 'ok';
      }
      if (c.kind === 3) { // garbage on a fresh connection
        const r = await rawExchange(port, Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{"prompt":[1,2,{"x":`), { timeout: 300 });
        return r.timedOut || r.closed ? 'ok' : 'bad';
      }
      const r = await call(port, 'POST', '/v1/chat/completions', JSON.stringify({ messages: 'x' }));
      return r.status === 400 ? 'ok' : `bad ${r.status}`;
    }));
    assert.deepEqual(results.filter((x) => x !== 'ok'), []);
    total += plan.length;
    await waitIdle(port);
    assert.deepEqual(await greedy(port), reference);
  });

  test('summary: every hostile request answered, nothing in flight, output unchanged', async () => {
    assert.ok(total >= 200, `${total} hostile requests`);
    process.stderr.write(`hostile suite: ${total} hostile requests\n`);
    await waitIdle(port);
    assert.ok(srv.alive());
    assert.deepEqual(await greedy(port), reference);
  });

  test('SIGTERM: exit 0, no sanitizer report (LeakSanitizer runs at exit)', async () => {
    await stopClean(srv, 'SIGTERM');
  });
});

const MAX_CONNS = 12;

describe('vx serve under load limits', SUITE, () => {
  let srv, port;
  before(async () => {
    srv = await startServer(['--parallel', '1', '--queue', '1', '--max-buffer', '4096', '--timeout', '2',
      '--max-connections', String(MAX_CONNS)]);
    port = srv.port;
  });
  after(async () => {
    if (srv && srv.alive()) await srv.stop('SIGKILL');
  });

  test('queue full: 429 in the OpenAI shape, the rest succeed', async () => {
    const body = JSON.stringify({ prompt: 'Once', max_tokens: 150, ignore_eos: true, temperature: 0 });
    const rs = await Promise.all(Array.from({ length: 8 }, () => call(port, 'POST', '/v1/completions', body, {}, { timeout: 60000 })));
    const statuses = rs.map((r) => r.status);
    for (const r of rs) if (r.status !== 200 && r.status !== 429) process.stderr.write(`unexpected: ${r.status} ${r.res && r.res.text}\n`);
    assert.ok(statuses.every((s) => s === 200 || s === 429), statuses.join(','));
    assert.ok(statuses.includes(429), statuses.join(','));
    assert.ok(statuses.includes(200), statuses.join(','));
    for (const r of rs) if (r.status === 429) {
      assertOaiError(r, 429, { code: 'rate_limit_exceeded', type: 'rate_limit_error' }, 'queue full');
      assert.equal(r.res.headers['retry-after'], '1', 'a 429 says when to retry');
    }
    // n larger than --parallel + --queue could never enter, however long the
    // client waits: 400 on n, not a 429 to retry forever
    const nr = await call(port, 'POST', '/v1/completions', JSON.stringify({ prompt: 'Once', max_tokens: 50, n: 8, temperature: 1 }));
    assertOaiError(nr, 400, { param: 'n', message: /at most 2 requests at once/ }, 'n over the capacity');
    await waitIdle(port);
  });

  test('a stalled reader is canceled, not buffered without bound', async () => {
    const sock = streamSocket(port, { prompt: 'Once', max_tokens: 250, ignore_eos: true, stream: true, logprobs: 20, temperature: 1 }, '/v1/completions');
    sock.pause();
    await sleep(1000);
    await waitIdle(port, 20000);
    sock.destroy();
    const r = await call(port, 'POST', '/v1/completions', JSON.stringify({ prompt: 'Once', max_tokens: 4, temperature: 0 }));
    assert.equal(r.status, 200);
  });

  test('overload: connections beyond the limit get 503 in the OpenAI shape', async () => {
    const idle = [];
    for (let i = 0; i < MAX_CONNS; i++) {
      const sock = net.connect(port, '127.0.0.1');
      sock.on('error', () => {});
      idle.push(sock);
      await once(sock, 'connect');
    }
    await sleep(500); // accepted by the server
    const rs = await Promise.all([0, 1, 2].map(() => call(port, 'POST', '/v1/completions', '{"prompt":"x","max_tokens":1}')));
    for (const r of rs) {
      assertOaiError(r, 503, { type: 'server_error', message: /overloaded/ }, 'over the connection limit');
      assert.equal(r.res.headers['retry-after'], '1');
    }
    // a flood past the headroom too: new connections are closed at once
    for (let i = 0; i < 2 * MAX_CONNS; i++) {
      const sock = net.connect(port, '127.0.0.1');
      sock.on('error', () => {});
      idle.push(sock);
    }
    await sleep(500);
    const flooded = await call(port, 'POST', '/v1/completions', '{"prompt":"x","max_tokens":1}', {}, { timeout: 5000 });
    assert.ok(!flooded.timedOut, 'hung while flooded');
    assert.ok(flooded.status === 0 || flooded.status === 503, `${flooded.status}`);
    for (const sock of idle) sock.destroy();
    await sleep(300);
    const ok = await call(port, 'POST', '/v1/completions', '{"prompt":"x","max_tokens":1}');
    assert.equal(ok.status, 200, ok.res && ok.res.text);
  });

  test('SIGINT: exit 0, no sanitizer report', async () => {
    await stopClean(srv, 'SIGINT');
  });
});

// Found by an adversarial review (session 25): each hung a connection, kept
// other clients out, or broke reproducibility.
describe('vx serve: transfer codings, early 413, slow-drip clients, seeds', SUITE, () => {
  let srv, port;
  before(async () => {
    srv = await startServer(['--parallel', '4', '--header-timeout', '2', '--max-connections', '4']);
    port = srv.port;
  });
  after(async () => {
    if (srv && srv.alive()) await srv.stop('SIGKILL');
  });

  test('a transfer coding other than chunked: 501 at once, not a hung connection', async () => {
    const g = JSON.stringify(COMPL);
    for (const te of ['gzip', 'identity', 'x', 'chunked, gzip', 'gzip, chunked']) {
      const t = Date.now();
      const r = await call(port, 'POST', '/v1/completions', g, { 'Transfer-Encoding': te, 'Content-Length': String(g.length) },
        { timeout: 5000 });
      assert.ok(!r.timedOut, `${te}: no answer in 5 s`);
      assertOaiError(r, 501, {}, te);
      assert.ok(Date.now() - t < 2000, `${te}: ${Date.now() - t} ms`);
    }
    // chunked (any case, as RFC 9112 has codings) still goes through
    const chunked = Buffer.from(`${g.length.toString(16)}\r\n${g}\r\n0\r\n\r\n`, 'latin1');
    const ok = await call(port, 'POST', '/v1/completions', chunked, { 'Transfer-Encoding': 'Chunked' }, { timeout: 5000 });
    assert.equal(ok.status, 200, ok.res ? ok.res.text : 'no response');
  });

  test('Expect: 100-continue with a body over the limit: 413 before any 100 Continue', async () => {
    const head = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${MAX_BODY * 8}\r\nExpect: 100-continue\r\n\r\n`;
    const ex = await rawExchange(port, Buffer.from(head, 'latin1'), { timeout: 5000 });
    assert.ok(!ex.timedOut, 'no answer without the body');
    const text = ex.buf.toString('latin1');
    assert.ok(!text.includes('100 Continue'), text.slice(0, 200));
    assertOaiError({ ...ex, res: parseResponse(ex.buf), status: parseResponse(ex.buf)?.status }, 413, {}, 'early 413');
    // within the limit the client is told to go on
    const body = JSON.stringify(COMPL);
    const small = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`;
    const ok = await rawExchange(port, [Buffer.from(small, 'latin1'), Buffer.from(body)], { gapMs: 200, timeout: 5000 });
    assert.match(ok.buf.toString('latin1'), /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
  });

  test('clients that drip their headers are cut after --header-timeout; others get in', async () => {
    const before = await metric(port, 'vortex_http_header_timeouts_total');
    const drips = [];
    // 8 + the idle one below: all the connections --max-connections 4 lets in (4 + 4 / 4 + 4)
    for (let i = 0; i < 8; i++) {
      const sock = net.connect(port, '127.0.0.1');
      sock.on('error', () => {});
      const closed = once(sock, 'close').then(() => Date.now());
      const msg = Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-A: ${'a'.repeat(1000)}`, 'latin1');
      let k = 0;
      const timer = setInterval(() => { if (!sock.destroyed && k < msg.length) sock.write(msg.subarray(k, ++k)); }, 250);
      drips.push({ sock, closed, timer });
    }
    const t0 = Date.now();
    await sleep(300);
    // an idle keep-alive connection between requests is cut the same way
    const idle = net.connect(port, '127.0.0.1');
    idle.on('error', () => {});
    const idleClosed = once(idle, 'close');
    const times = await Promise.race([Promise.all(drips.map((d) => d.closed)), sleep(8000).then(() => null)]);
    for (const d of drips) { clearInterval(d.timer); d.sock.destroy(); }
    assert.ok(times, 'dripping connections still open after 8 s');
    for (const t of times) assert.ok(t - t0 >= 1500 && t - t0 < 5000, `cut after ${t - t0} ms`);
    await Promise.race([idleClosed, sleep(5000).then(() => { throw new Error('idle connection not closed'); })]);
    // the server counts a connection closed when libmicrohttpd cleans it up,
    // a moment after the peer sees the close: under load a request right
    // after may still be turned away (the correct 503 "retry later", or the
    // connection closed at the limit); within 3 s it gets in
    let r;
    for (let i = 0; i < 30; i++) {
      r = await call(port, 'POST', '/v1/completions', JSON.stringify(COMPL), {}, { timeout: 5000 });
      if (r.status !== 503 && r.status !== 0) break;
      await sleep(100);
    }
    assert.equal(r.status, 200, r.res ? r.res.text : 'no response');
    assert.ok(await metric(port, 'vortex_http_header_timeouts_total') >= before + 9);
  });

  test('a body dripped after complete headers is cut too; a quick one is not', async () => {
    const before = await metric(port, 'vortex_http_body_timeouts_total');
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', () => {});
    const closed = once(sock, 'close');
    const t0 = Date.now();
    sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{`);
    const timer = setInterval(() => { if (!sock.destroyed) sock.write(' '); }, 250);
    const cut = await Promise.race([closed.then(() => Date.now() - t0), sleep(8000).then(() => null)]);
    clearInterval(timer);
    sock.destroy();
    assert.ok(cut !== null && cut >= 1500 && cut < 5000, `cut after ${cut} ms`);
    assert.ok(await metric(port, 'vortex_http_body_timeouts_total') >= before + 1);
    // 600 KB at full speed: well over the minimum rate
    const big = JSON.stringify({ ...COMPL, prompt: 'Once upon a time', user: 'u'.repeat(600000) });
    const r = await call(port, 'POST', '/v1/completions', big, {}, { timeout: 10000 });
    assert.equal(r.status, 200, r.res ? r.res.text.slice(0, 300) : 'no response');
  });

  test('a stream read only after --header-timeout arrives whole', async () => {
    const sock = streamSocket(port, LONG(true), '/v1/chat/completions');
    sock.pause();
    await sleep(3500);
    let got = '';
    sock.on('data', (d) => { got += d.toString('latin1'); });
    sock.resume();
    await Promise.race([once(sock, 'close'), sleep(10000)]);
    sock.destroy();
    assert.ok(got.includes('data: [DONE]'), got.slice(-300));
  });

  test('every choice of a seeded request is reproducible, whatever the seed', async () => {
    for (const seed of ['-2', '-3', '18446744073709551614', '9007199254740993', '0']) {
      const body = `{"prompt":"Once upon a time","n":3,"max_tokens":12,"temperature":1.5,"seed":${seed}}`;
      const a = await call(port, 'POST', '/v1/completions', body);
      const b = await call(port, 'POST', '/v1/completions', body);
      assert.equal(a.status, 200, a.res ? a.res.text : 'no response');
      assert.deepEqual(b.res.json.choices.map((c) => c.text), a.res.json.choices.map((c) => c.text), `seed ${seed}`);
    }
  });

  test('SIGINT: exit 0, no sanitizer report', async () => {
    await stopClean(srv, 'SIGINT');
  });
});

describe('vx serve shut down under hostile clients', SUITE, () => {
  for (const signals of [['SIGTERM'], ['SIGINT', 'SIGINT']]) {
    test(`${signals.join(' + ')} with streams, stalled readers, idle and half-sent connections`, async () => {
      const srv = await startServer(['--parallel', '2', '--timeout', '1']);
      const port = srv.port;
      const socks = [];
      const big = streamSocket(port, { model: 'm'.repeat(100000), prompt: 'Once', max_tokens: 200, ignore_eos: true, stream: true }, '/v1/completions');
      big.pause();
      socks.push(big);
      const streams = [];
      for (let i = 0; i < 4; i++) {
        const s = streamSocket(port, { ...LONG(true), n: 2 });
        let got = '';
        s.on('data', (d) => { got += d.toString('latin1'); });
        streams.push(once(s, 'close').then(() => got));
        socks.push(s);
      }
      for (let i = 0; i < 3; i++) {
        const s = net.connect(port, '127.0.0.1');
        s.on('error', () => {});
        if (i) s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"pro');
        socks.push(s);
      }
      const pending = call(port, 'POST', '/v1/chat/completions', JSON.stringify({ ...LONG(false), n: 3 }), {}, { timeout: 30000 });
      await sleep(150);
      const t = Date.now();
      srv.proc.kill(signals[0]);
      if (signals[1]) setTimeout(() => srv.proc.kill(signals[1]), 100);
      const { code, sig } = await srv.stop(signals[0]);
      const log = srv.log();
      assert.doesNotMatch(log, SAN_RE, `sanitizer report:\n${log.slice(-8000)}`);
      assert.equal(code, 0, `exit code (signal ${sig})\n${log.slice(-3000)}`);
      assert.ok(Date.now() - t < 20000, `shutdown took ${Date.now() - t} ms`);
      // every client heard the end: a finished stream, an error event, or a close
      for (const got of await Promise.all(streams)) {
        if (!got) continue;
        assert.match(got, /^HTTP\/1\.1 200/);
        assert.ok(got.includes('data: [DONE]') || got.includes('"error"') || !got.includes('0\r\n\r\n'), got.slice(-300));
      }
      const p = await pending;
      if (p.status) assert.ok(p.status === 200 || p.status === 503, `${p.status} ${p.res.text}`);
      for (const s of socks) s.destroy();
    });
  }
});

describe('vx serve with a chat template that raises', SUITE, () => {
  test('raise_exception is a 400 on messages; the server keeps serving and exits clean', async () => {
    const srv = await startServer(['--chat-template', path.join(FIXTURES, 'chat/templates/google-gemma-2-2b-it.jinja')]);
    const chat = (messages) => call(srv.port, 'POST', '/v1/chat/completions', JSON.stringify({ messages, max_tokens: 2, temperature: 0 }));
    for (const messages of [[{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }], [{ role: 'assistant', content: 'a' }],
      [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'assistant', content: 'c' }]])
      assertOaiError(await chat(messages), 400, { param: 'messages', message: /must alternate/ }, 'template raise');
    const ok = await chat([{ role: 'user', content: 'a' }]);
    assert.equal(ok.status, 200, ok.res && ok.res.text);
    await stopClean(srv, 'SIGTERM');
  });
});
