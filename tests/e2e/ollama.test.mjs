// ollama.test.mjs - ollama's native API on `vx serve`, driven by the official
// `ollama` npm client (ollama-js). The API is a translation of the OpenAI
// one, so at temperature 0 its replies must be the OpenAI endpoints' replies
// to the same request, token for token; ollama's shapes (NDJSON streaming,
// done/done_reason, counts, context, thinking, {"error"}) are checked too.
//
// Run: cd tests/e2e && npm ci && node --test ollama.test.mjs
import path from 'node:path';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Ollama } from 'ollama';
import { FIXTURES, spawnServer } from './serve.mjs';

const MODEL = path.join(FIXTURES, 'models/qwen2/qwen2-Q8_0.gguf');
const template = (name) => path.join(FIXTURES, 'chat/templates', `${name}.jinja`);

async function startServer(extra = []) {
  const srv = await spawnServer(['-m', MODEL, '-t', '1', '--batch-invariant', '-c', '1024', '--parallel', '4',
    ...extra]);
  return {
    ...srv,
    ollama: new Ollama({ host: srv.base }),
    async stop() {
      if (srv.proc.exitCode === null) srv.proc.kill('SIGTERM');
      const [code] = await srv.exited;
      return code;
    },
  };
}

async function post(base, route, body) {
  const r = await fetch(`${base}${route}`, { method: 'POST', body: JSON.stringify(body) });
  return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
}

// ollama's defaults, spelled out for the OpenAI endpoints (repeat_penalty
// and repeat_last_n are llama.cpp's fields, which vx reads)
const OLLAMA_SAMPLING = { top_k: 40, top_p: 0.9, min_p: 0, repeat_penalty: 1.1, repeat_last_n: 64 };

describe('ollama API', () => {
  let srv;
  before(async () => { srv = await startServer(['--chat-template', template('Qwen-Qwen2.5-7B-Instruct')]); });
  after(async () => { assert.equal(await srv.stop(), 0); });

  test('/, version, tags, ps and show describe the served model', async () => {
    const root = await fetch(`${srv.base}/`);
    assert.equal(root.status, 200);
    assert.equal(await root.text(), 'Ollama is running');
    assert.match((await srv.ollama.version()).version, /^\d+\.\d+\.\d+$/);
    const { models } = await srv.ollama.list();
    assert.equal(models.length, 1);
    const m = models[0];
    assert.equal(m.name, 'qwen2-Q8_0');
    assert.equal(m.model, 'qwen2-Q8_0');
    assert.match(m.digest, /^[0-9a-f]{64}$/);
    assert.ok(m.size > 1e6, `size ${m.size}`);
    assert.ok(!Number.isNaN(new Date(m.modified_at).getTime()));
    assert.deepEqual({ ...m.details, parameter_size: undefined }, {
      parent_model: '', format: 'gguf', family: 'qwen2', families: ['qwen2'], parameter_size: undefined,
      quantization_level: 'Q8_0',
    });
    assert.match(m.details.parameter_size, /^\d+\.\dM$/);
    const ps = (await srv.ollama.ps()).models;
    assert.equal(ps.length, 1);
    assert.equal(ps[0].name, m.name);
    assert.equal(ps[0].context_length, 1024);
    const show = await srv.ollama.show({ model: 'qwen2-Q8_0' });
    assert.match(show.template, /<\|im_start\|>/);
    assert.deepEqual(show.capabilities, ['completion', 'tools']);
    assert.equal(show.model_info['general.architecture'], 'qwen2');
    assert.equal(show.model_info['qwen2.block_count'], show.model_info['qwen2.block_count'] | 0);
    assert.ok(show.model_info['general.parameter_count'] > 0);
  });

  test('chat: the OpenAI endpoint\'s reply, streamed as NDJSON or whole, with ollama\'s counts', async () => {
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }];
    const options = { temperature: 0, num_predict: 12 };
    const whole = await srv.ollama.chat({ model: 'any', messages, options });
    assert.equal(whole.model, 'any');
    assert.equal(whole.message.role, 'assistant');
    assert.equal(whole.done, true);
    assert.equal(whole.done_reason, 'length');
    assert.equal(whole.eval_count, 12);
    assert.ok(whole.prompt_eval_count > 10);
    for (const k of ['total_duration', 'prompt_eval_duration', 'eval_duration'])
      assert.ok(Number.isInteger(whole[k]) && whole[k] > 0, `${k} ${whole[k]}`);
    assert.ok(whole.total_duration >= whole.prompt_eval_duration + whole.eval_duration - 1e6);

    const oai = await post(srv.base, '/v1/chat/completions',
      { messages, max_tokens: 12, temperature: 0, ...OLLAMA_SAMPLING });
    const ref = JSON.parse(oai.text);
    assert.equal(whole.message.content, ref.choices[0].message.content);
    assert.equal(whole.prompt_eval_count, ref.usage.prompt_tokens);

    const parts = [];
    let last;
    for await (const part of await srv.ollama.chat({ model: 'any', messages, options, stream: true })) {
      assert.equal(typeof part.created_at, 'string');
      if (!part.done) parts.push(part.message.content);
      last = part;
    }
    assert.ok(parts.length >= 2);
    assert.equal(parts.join(''), whole.message.content);
    assert.equal(last.done_reason, 'length');
    assert.equal(last.message.content, '');
    assert.equal(last.eval_count, 12);

    // no "stream" at all: ollama streams (the client always sends one)
    const raw = await post(srv.base, '/api/chat', { messages, options });
    assert.equal(raw.status, 200);
    assert.match(raw.type, /application\/x-ndjson/);
    const lines = raw.text.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines.at(-1).done, true);
    assert.equal(lines.slice(0, -1).map((l) => l.message.content).join(''), whole.message.content);
  });

  test('options reach the sampler: a seed reproduces, stop strings stop, defaults are ollama\'s', async () => {
    const messages = [{ role: 'user', content: 'Tell me a story' }];
    const a = await srv.ollama.chat({ model: 'm', messages, options: { seed: 7, num_predict: 16 } });
    const b = await srv.ollama.chat({ model: 'm', messages, options: { seed: 7, num_predict: 16 } });
    assert.equal(a.message.content, b.message.content);
    // ollama's defaults (temperature 0.8, top_k 40, top_p 0.9, repeat_penalty 1.1 ...) = the same
    // request on the OpenAI endpoint with them spelled out
    const ref = JSON.parse((await post(srv.base, '/v1/chat/completions',
      { messages, max_tokens: 16, seed: 7, temperature: 0.8, ...OLLAMA_SAMPLING })).text);
    assert.equal(a.message.content, ref.choices[0].message.content);
    const greedy = await srv.ollama.chat({ model: 'm', messages, options: { temperature: 0, num_predict: 16 } });
    const cut = greedy.message.content.slice(3, 6);
    assert.ok(cut.length > 0);
    const stopped = await srv.ollama.chat({ model: 'm', messages, options: { temperature: 0, num_predict: 16, stop: [cut] } });
    assert.equal(stopped.done_reason, 'stop');
    assert.equal(stopped.message.content, greedy.message.content.slice(0, greedy.message.content.indexOf(cut)));
  });

  test('generate: the chat template around the prompt, raw as a completion, context continues', async () => {
    const options = { temperature: 0, num_predict: 8 };
    const g = await srv.ollama.generate({ model: 'm', prompt: 'Once upon a time', system: 'You tell stories.', options });
    const chat = await srv.ollama.chat({ model: 'm', options, messages: [
      { role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Once upon a time' }] });
    assert.equal(g.response, chat.message.content);
    assert.equal(g.done_reason, 'length');
    assert.ok(Array.isArray(g.context));
    assert.equal(g.context.length, g.prompt_eval_count + g.eval_count);

    const raw = await srv.ollama.generate({ model: 'm', prompt: 'Once upon a time', raw: true, options });
    const comp = JSON.parse((await post(srv.base, '/v1/completions',
      { prompt: 'Once upon a time', max_tokens: 8, temperature: 0, ...OLLAMA_SAMPLING })).text);
    assert.equal(raw.response, comp.choices[0].text);

    // the next turn after the context: its tokens, then the new prompt's (no second BOS)
    const next = await srv.ollama.generate({ model: 'm', prompt: ' and then', raw: true, context: raw.context, options });
    const tok = JSON.parse((await post(srv.base, '/tokenize', { content: ' and then', add_special: false })).text).tokens;
    assert.equal(next.prompt_eval_count, raw.context.length + tok.length);
    assert.deepEqual(next.context.slice(0, raw.context.length), raw.context);

    // nothing to generate: ollama's "load" answer
    const load = await srv.ollama.generate({ model: 'm', prompt: '' });
    assert.equal(load.done, true);
    assert.equal(load.done_reason, 'load');
    const loadChat = await srv.ollama.chat({ model: 'm', messages: [] });
    assert.equal(loadChat.done_reason, 'load');
    const unload = await srv.ollama.generate({ model: 'm', prompt: '', keep_alive: 0 });
    assert.equal(unload.done_reason, 'unload');
  });

  test('format: JSON mode and a JSON Schema hold the reply to them', async () => {
    const messages = [{ role: 'user', content: 'Give me JSON' }];
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'],
      additionalProperties: false };
    const r = await srv.ollama.chat({ model: 'm', messages, format: schema, options: { temperature: 0, num_predict: 200 } });
    assert.equal(r.done_reason, 'stop', r.message.content);
    assert.equal(typeof JSON.parse(r.message.content).ok, 'boolean');
    const j = await srv.ollama.generate({ model: 'm', prompt: 'JSON:', format: 'json', options: { temperature: 0, num_predict: 300 } });
    if (j.done_reason === 'stop') assert.equal(typeof JSON.parse(j.response), 'object');
    else assert.match(j.response, /^\s*\{/);
  });

  test('tools and tool results in the history render through the template', async () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const messages = [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', content: 'sunny', tool_name: 'get_weather' },
    ];
    const r = await srv.ollama.chat({ model: 'm', messages, tools, options: { temperature: 0, num_predict: 4 } });
    const rendered = JSON.parse((await post(srv.base, '/apply-template', { messages, tools })).text).prompt;
    assert.match(rendered, /"city": "Paris"/);
    assert.match(rendered, /get_weather/);
    const tok = JSON.parse((await post(srv.base, '/tokenize', { content: rendered, add_special: true })).text).tokens;
    assert.equal(r.prompt_eval_count, tok.length);
  });

  test('a NUL byte the model writes is text on both APIs', async () => {
    // the fixture's token 3 is "\u0000"; this seed draws it within 60 tokens
    const sampling = { seed: 25, temperature: 2, top_k: 0, top_p: 1, min_p: 0, repeat_penalty: 1 };
    const oai = JSON.parse((await post(srv.base, '/v1/completions',
      { prompt: 'hi', max_tokens: 60, repeat_last_n: 64, ...sampling })).text).choices[0].text;
    assert.ok(oai.includes('\u0000'));
    const g = await srv.ollama.generate({ model: 'm', prompt: 'hi', raw: true, options: { num_predict: 60, ...sampling } });
    assert.equal(g.response, oai);
    let streamed = '';
    for await (const part of await srv.ollama.generate({ model: 'm', prompt: 'hi', raw: true, stream: true,
      options: { num_predict: 60, ...sampling } })) streamed += part.response;
    assert.equal(streamed, oai);
  });

  test('logprobs in ollama\'s shape', async () => {
    const r = await srv.ollama.chat({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], logprobs: true,
      top_logprobs: 3, options: { temperature: 0, num_predict: 4 } });
    assert.equal(r.logprobs.length, 4);
    for (const lp of r.logprobs) {
      assert.equal(typeof lp.token, 'string');
      assert.ok(lp.logprob <= 0);
      assert.equal(lp.top_logprobs.length, 3);
      assert.ok(lp.top_logprobs[0].logprob >= lp.logprob - 1e-6); // greedy: the top one was drawn
      assert.ok(Array.isArray(lp.bytes));
    }
  });

  test('embed and embeddings: /v1/embeddings\' vectors, normalized or as they are', async () => {
    const e = await srv.ollama.embed({ model: 'm', input: ['hello world', 'a second text'] });
    assert.equal(e.embeddings.length, 2);
    assert.ok(e.prompt_eval_count > 4);
    const ref = JSON.parse((await post(srv.base, '/v1/embeddings', { input: ['hello world', 'a second text'] })).text);
    for (let i = 0; i < 2; i++) {
      const v = e.embeddings[i];
      assert.deepEqual(v, ref.data[i].embedding);
      assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5);
    }
    const cut = await srv.ollama.embed({ model: 'm', input: 'hello world', dimensions: 8 });
    assert.equal(cut.embeddings[0].length, 8);
    assert.ok(Math.abs(Math.hypot(...cut.embeddings[0]) - 1) < 1e-5);
    const old = await srv.ollama.embeddings({ model: 'm', prompt: 'hello world' });
    const raw = JSON.parse((await post(srv.base, '/v1/embeddings', { input: 'hello world', embd_normalize: -1 })).text);
    assert.deepEqual(old.embedding, raw.data[0].embedding);
    // truncate (default true) cuts an input over the context; false refuses it
    // nothing to embed: ollama's empty answers (clients send them to load the model)
    assert.deepEqual((await srv.ollama.embed({ model: 'm', input: [] })).embeddings, []);
    assert.deepEqual((await srv.ollama.embeddings({ model: 'm', prompt: '' })).embedding, []);
    const long = 'word '.repeat(1500);
    const t = await srv.ollama.embed({ model: 'm', input: long });
    assert.equal(t.prompt_eval_count, 1024);
    await assert.rejects(srv.ollama.embed({ model: 'm', input: long, truncate: false }),
      (err) => err.status_code === 400 && /maximum context length is 1024/.test(err.error));
  });

  test('errors are ollama\'s {"error"} with the status, and the server goes on', async () => {
    const bad = async (p, why, status) => assert.rejects(p, (err) => {
      assert.equal(err.status_code, status, err.error);
      assert.match(err.error, why);
      return true;
    });
    await bad(srv.ollama.chat({ model: 'm', messages: [{ role: 'user', content: 'hi', images: ['aGk='] }] }), /images/, 400);
    await bad(srv.ollama.chat({ model: 'm', messages: [{ role: 'user', content: 'hi' }], options: { temperature: 'hot' } }),
      /temperature/, 400);
    await bad(srv.ollama.chat({ model: 'm', messages: [{ role: 'user', content: 'hi' }], format: 'yaml' }), /format/, 400);
    // fill in the middle needs the model's FIM tokens, which the fixture's vocabulary lacks (both APIs)
    await bad(srv.ollama.generate({ model: 'm', prompt: 'a', suffix: 'b' }), /fill-in-the-middle tokens/, 400);
    const fim = await post(srv.base, '/v1/completions', { prompt: 'a', suffix: 'b' });
    assert.equal(fim.status, 400);
    assert.equal(JSON.parse(fim.text).error.param, 'suffix');
    await bad(srv.ollama.generate({ model: 'm', prompt: 'a', context: [1, -5] }), /context/, 400);
    await bad(srv.ollama.pull({ model: 'llama3.2' }), /not supported/, 501);
    await bad(srv.ollama.delete({ model: 'llama3.2' }), /not supported/, 501);
    const unknown = await fetch(`${srv.base}/api/nothing`);
    assert.equal(unknown.status, 404);
    assert.deepEqual(Object.keys(await unknown.json()), ['error']);
    const blob = await fetch(`${srv.base}/api/blobs/sha256:00`, { method: 'HEAD' });
    assert.equal(blob.status, 501);
    await bad(srv.ollama.generate({ model: 'm', prompt: 'x '.repeat(3000) }), /maximum context length/, 400);
    const r = await post(srv.base, '/api/chat', '{"messages": [');
    assert.equal(r.status, 400);
    assert.match(JSON.parse(r.text).error, /JSON/);
    const ok = await srv.ollama.chat({ model: 'm', messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 2 } });
    assert.equal(ok.eval_count, 2);
  });

  test('a client that aborts a stream cancels it; the next request is served', async () => {
    const stream = await srv.ollama.chat({ model: 'm', messages: [{ role: 'user', content: 'Go on' }], stream: true,
      options: { num_predict: 100000, temperature: 0 } });
    let n = 0;
    try {
      for await (const part of stream) {
        if (++n === 3) stream.abort(); // parts already read may still come
        assert.equal(part.done, false);
      }
    } catch (err) {
      assert.equal(err.name, 'AbortError');
    }
    assert.ok(n >= 3);
    const ok = await srv.ollama.generate({ model: 'm', prompt: 'hi', options: { num_predict: 3 } });
    assert.equal(ok.eval_count, 3);
    // the server saw the client leave (its log line), and nothing is left running
    const t0 = Date.now();
    for (;;) {
      const m = await (await fetch(`${srv.base}/metrics`)).text();
      if (/^vortex_requests_running 0$/m.test(m) && /POST \/api\/chat 200-aborted/.test(srv.log())) break;
      assert.ok(Date.now() - t0 < 5000, `${m}\n${srv.log().slice(-2000)}`);
      await new Promise((res) => setTimeout(res, 50));
    }
  });
});

describe('ollama API: think', () => {
  let srv;
  before(async () => { srv = await startServer(['--chat-template', template('llama-cpp-deepseek-r1')]); });
  after(async () => { assert.equal(await srv.stop(), 0); });

  test('think true puts the reply\'s thoughts in message.thinking; false leaves them in the content', async () => {
    // this template's generation prompt opens a thought, which the fixture's model never closes
    const messages = [{ role: 'user', content: 'Why?' }];
    const options = { temperature: 0, num_predict: 8 };
    const on = await srv.ollama.chat({ model: 'm', messages, think: true, options });
    assert.ok(on.message.thinking.length > 0);
    assert.equal(on.message.content, '');
    const off = await srv.ollama.chat({ model: 'm', messages, think: false, options });
    assert.equal(off.message.thinking, undefined);
    assert.equal(off.message.content, on.message.thinking);
    let streamed = '';
    for await (const part of await srv.ollama.chat({ model: 'm', messages, think: 'high', options, stream: true })) {
      assert.equal(part.message.content, '');
      streamed += part.message.thinking ?? '';
    }
    assert.equal(streamed, on.message.thinking);
    const g = await srv.ollama.generate({ model: 'm', prompt: 'Why?', think: true, options });
    assert.equal(g.thinking, on.message.thinking);
    assert.equal(g.response, '');
  });
});

describe('ollama API: tool calls', () => {
  let srv;
  before(async () => {
    const sv = await spawnServer(['-m', path.join(FIXTURES, 'models/llama3/llama3-Q8_0.gguf'), '-t', '1',
      '--batch-invariant', '-c', '1024', '--chat-template', template('meta-llama-Llama-3.1-8B-Instruct')]);
    srv = { ...sv, ollama: new Ollama({ host: sv.base }) };
  });
  after(async () => { srv.proc.kill('SIGTERM'); assert.equal((await srv.exited)[0], 0); });

  test('a call comes back with object arguments, streamed or not, its logprobs once', async () => {
    // format holds the fixture's random model to Llama 3's call shape (the JSON object is the call)
    const req = {
      model: 'm', messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
        properties: { city: { type: 'string' } }, required: ['city'] } } }],
      format: { type: 'object', properties: { name: { const: 'get_weather' }, parameters: { type: 'object',
        properties: { city: { enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false } },
      required: ['name', 'parameters'], additionalProperties: false },
      logprobs: true, options: { temperature: 0, repeat_penalty: 3, num_predict: 300 },
    };
    const whole = await srv.ollama.chat(req);
    assert.equal(whole.done_reason, 'stop');
    assert.equal(whole.message.tool_calls.length, 1);
    const f = whole.message.tool_calls[0].function;
    assert.equal(f.name, 'get_weather');
    assert.ok(['Paris', 'Rome'].includes(f.arguments.city), JSON.stringify(f));
    assert.equal(whole.logprobs.length, whole.eval_count);
    let calls = [], lps = 0, last;
    for await (const part of await srv.ollama.chat({ ...req, stream: true })) {
      calls = calls.concat(part.message.tool_calls ?? []);
      lps += part.logprobs?.length ?? 0;
      last = part;
    }
    assert.deepEqual(calls, whole.message.tool_calls);
    assert.equal(last.eval_count, whole.eval_count);
    assert.equal(lps, whole.eval_count);
  });
});

describe('ollama API: durations with one slot', () => {
  let srv;
  before(async () => { srv = await startServer(['--parallel', '1']); });
  after(async () => { assert.equal(await srv.stop(), 0); });

  test('time waiting in the queue is in total_duration, not prompt_eval_duration', async () => {
    const options = { temperature: 0, num_predict: 1000 };
    const a = srv.ollama.generate({ model: 'm', prompt: 'a', raw: true, options });
    await new Promise((res) => setTimeout(res, 30)); // b arrives while a generates
    const b = await srv.ollama.generate({ model: 'm', prompt: 'b', raw: true, options: { temperature: 0, num_predict: 5 } });
    const first = await a;
    assert.ok(first.eval_count > 100, `${first.eval_count}`);
    const waited = b.total_duration - b.prompt_eval_duration - b.eval_duration;
    assert.ok(waited > first.eval_duration / 2, JSON.stringify({ first, b }));
    assert.ok(b.prompt_eval_duration < first.eval_duration / 4, JSON.stringify({ first, b }));
  });
});
