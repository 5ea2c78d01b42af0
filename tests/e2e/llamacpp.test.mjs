// llamacpp.test.mjs - llama-server's own endpoints on `vx serve`:
// /completion (one object or server-sent events, llama-server's fields),
// /infill and /props. /completion is a translation of /v1/completions, so
// at temperature 0 its text must be that endpoint's, token for token.
//
// Run: cd tests/e2e && node --test llamacpp.test.mjs
import path from 'node:path';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FIXTURES, spawnServer } from './serve.mjs';

const MODEL = path.join(FIXTURES, 'models/stories260K/stories260K.gguf');

async function post(base, route, body) {
  const r = await fetch(`${base}${route}`, { method: 'POST', body: JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* a stream */ }
  return { status: r.status, type: r.headers.get('content-type'), text, json };
}

// The events of a server-sent stream: [{event, data}]
function events(text) {
  return text.split('\n\n').filter((b) => b.trim() && !b.startsWith(':')).map((b) => {
    const i = b.indexOf(': ');
    return { event: b.slice(0, i), data: JSON.parse(b.slice(i + 2)) };
  });
}

describe('llama-server API', () => {
  let srv;
  before(async () => { srv = await spawnServer(['-m', MODEL, '-t', '1', '--batch-invariant', '-c', '256', '--parallel', '2']); });
  after(async () => {
    if (srv.proc.exitCode === null) srv.proc.kill('SIGTERM');
    await srv.exited;
  });

  const PROMPT = 'Once upon a time, there was a little girl';

  test('/completion gives /v1/completions\' text, with llama-server\'s fields', async () => {
    const a = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 24, temperature: 0 });
    const b = await post(srv.base, '/v1/completions', { prompt: PROMPT, max_tokens: 24, temperature: 0 });
    assert.equal(a.status, 200, a.text);
    assert.equal(a.json.content, b.json.choices[0].text);
    assert.equal(a.json.stop, true);
    assert.equal(a.json.stop_type, 'limit');
    assert.equal(a.json.tokens_predicted, 24);
    assert.equal(a.json.tokens_predicted, b.json.usage.completion_tokens);
    assert.equal(a.json.tokens_evaluated, b.json.usage.prompt_tokens);
    assert.equal(a.json.prompt, PROMPT);
    assert.equal(a.json.generation_settings.n_predict, 24);
    assert.equal(a.json.timings.predicted_n, 24);
    assert.ok(a.json.timings.predicted_per_second > 0);
  });

  test('streaming: data events whose pieces make the whole text, the last with stop and timings, no [DONE]', async () => {
    const whole = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 20, temperature: 0 });
    const s = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 20, temperature: 0, stream: true });
    assert.match(s.type, /text\/event-stream/);
    assert.ok(!s.text.includes('[DONE]'));
    const ev = events(s.text);
    assert.ok(ev.length >= 2 && ev.every((e) => e.event === 'data'));
    const last = ev[ev.length - 1].data;
    assert.equal(last.stop, true);
    assert.equal(last.stop_type, 'limit');
    assert.equal(last.tokens_predicted, 20);
    assert.ok(last.timings.predicted_n === 20);
    assert.ok(ev.slice(0, -1).every((e) => e.data.stop === false));
    assert.equal(ev.map((e) => e.data.content).join(''), whole.json.content);
    // each piece carries its tokens: together the whole reply's
    const ids = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 20, temperature: 0, return_tokens: true });
    assert.deepEqual(ev.flatMap((e) => e.data.tokens), ids.json.tokens);
    assert.equal(last.tokens_cached, last.tokens_evaluated + 20 - 1);
  });

  test('n_predict 0 evaluates the prompt and samples one token, as llama-server (cache warm-up)', async () => {
    const r = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 0, temperature: 0 });
    assert.equal(r.json.tokens_predicted, 1);
    assert.equal(r.json.tokens_cached, r.json.tokens_evaluated);
  });

  test('a stop word: stop_type word, stopping_word, the text before it', async () => {
    const whole = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 32, temperature: 0 });
    const words = whole.json.content.trim().split(/\s+/);
    const word = words[Math.min(3, words.length - 1)];
    const r = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 32, temperature: 0, stop: [word] });
    assert.equal(r.json.stop_type, 'word');
    assert.equal(r.json.stopping_word, word);
    assert.equal(r.json.content, whole.json.content.slice(0, whole.json.content.indexOf(word)));
  });

  test('n_probs, return_tokens and response_fields', async () => {
    const r = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 6, temperature: 0, n_probs: 3,
      return_tokens: true });
    assert.equal(r.json.completion_probabilities.length, 6);
    for (const p of r.json.completion_probabilities) {
      assert.equal(p.top_logprobs.length, 3);
      assert.equal(p.id, p.top_logprobs[0].id); // greedy: the most likely one
      assert.ok(p.logprob <= 0 && Array.isArray(p.bytes));
    }
    assert.deepEqual(r.json.tokens, r.json.completion_probabilities.map((p) => p.id));
    const d = await post(srv.base, '/detokenize', { tokens: r.json.tokens });
    assert.equal(d.json.content.trim(), r.json.content.trim()); // (detokenize drops a leading space)
    const f = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 6, temperature: 0,
      response_fields: ['content', 'timings/predicted_n'] });
    assert.deepEqual(Object.keys(f.json).sort(), ['content', 'timings/predicted_n']);
    assert.equal(f.json.content, r.json.content);
    assert.equal(f.json['timings/predicted_n'], 6);
  });

  test('grammar (GBNF): the text is a sentence of it, generation stops where it must end; a bad one is a 400', async () => {
    const grammar = 'root ::= "The " word (" " word){2,4} "."\nword ::= [a-z]{1,8}';
    const want = /^The [a-z]{1,8}( [a-z]{1,8}){2,4}\.$/;
    for (const seed of [1, 2, 3]) {
      const a = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 200, seed, grammar });
      assert.equal(a.status, 200, a.text);
      assert.match(a.json.content, want);
      assert.ok(a.json.tokens_predicted < 200);
      assert.notEqual(a.json.stop_type, 'limit');
      assert.equal(a.json.generation_settings.grammar, grammar);
    }
    const c = await post(srv.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 60,
      grammar: 'root ::= "yes" | "no"' });
    assert.equal(c.status, 200, c.text);
    assert.match(c.json.choices[0].message.content, /^(yes|no)$/);
    assert.equal(c.json.choices[0].finish_reason, 'stop');
    const s = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 200, grammar, stream: true });
    assert.match(events(s.text).map((x) => x.data.content).join(''), want);
    const bad = await post(srv.base, '/completion', { prompt: PROMPT, grammar: 'root ::= [a-' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'grammar');
    assert.match(bad.json.error.message, /line 1, column 10/);
    // hostile ones: 60,000 nested groups (the parser once recursed into a crash), parses that double with each
    // byte (an error naming the bound, not a silently narrowed choice), and the server goes on
    const deep = await post(srv.base, '/completion', { prompt: PROMPT, grammar: `root ::= ${'('.repeat(60000)}"a"${')'.repeat(60000)}` });
    assert.equal(deep.status, 400);
    assert.match(deep.json.error.message, /nested more than 256 deep/);
    const amb = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 40, temperature: 0,
      grammar: 'root ::= x\nx ::= "a" x "b" | "a" x "c" | "d"', logit_bias: [[475, 100], [100, 100]] });
    assert.ok(amb.status === 200 || amb.status === 500, amb.text);
    assert.match(amb.text, /too ambiguous/);
    const after = await post(srv.base, '/completion', { prompt: PROMPT, n_predict: 4, temperature: 0 });
    assert.equal(after.status, 200);
  });

  test('/props, /infill without FIM tokens, samplers vx does not have', async () => {
    const p = await fetch(`${srv.base}/props`).then((x) => x.json());
    assert.equal(p.total_slots, 2);
    assert.equal(p.default_generation_settings.n_ctx, 256);
    assert.ok(p.model_path.endsWith('stories260K.gguf'));
    const i = await post(srv.base, '/infill', { input_prefix: 'a', input_suffix: 'b' });
    assert.equal(i.status, 400);
    assert.match(i.json.error.message, /Infill is not supported/);
    const m = await post(srv.base, '/completion', { prompt: 'x', mirostat: 2 });
    assert.equal(m.status, 400);
    assert.equal(m.json.error.param, 'mirostat');
    const ok = await post(srv.base, '/completion', { prompt: 'x', mirostat: 0, typical_p: 1, n_predict: 2 });
    assert.equal(ok.status, 200);
  });
});

// llama-server's speculative decoding: n-gram lookup and a draft model (the
// model itself here, so that drafts are taken) change speed, not output:
// the same texts as a server without them, greedy and seeded, streamed or
// not, several requests at once; timings report the drafts as llama-server's
// do; speculative.n_max 0 turns them off for one request.
describe('speculative decoding', () => {
  let plain, spec;
  const common = ['-m', MODEL, '-t', '1', '--batch-invariant', '-c', '256', '--parallel', '3'];
  before(async () => {
    plain = await spawnServer(common);
    spec = await spawnServer([...common, '--spec-type', 'ngram-simple', '--spec-ngram-size-n', '2', '-md', MODEL,
      '--draft-max', '6', '--draft-p-min', '0.3']);
  });
  after(async () => {
    for (const s of [plain, spec]) {
      if (s && s.proc.exitCode === null) s.proc.kill('SIGTERM');
      if (s) await s.exited;
    }
  });

  test('the same texts as without drafts; timings.draft_n / draft_n_accepted', async () => {
    const bodies = [
      { prompt: 'Once upon a time', n_predict: 60, temperature: 0 },
      { prompt: 'The little dog', n_predict: 50, temperature: 0.9, seed: 42, repeat_penalty: 1.1 },
      { prompt: 'Lily and Ben', n_predict: 40, temperature: 0.7, top_k: 20, seed: 7, n_probs: 2 },
    ];
    const run = (s) => Promise.all(bodies.map((b) => post(s.base, '/completion', b)));
    const [want, got] = [await run(plain), await run(spec)];
    let drafted = 0, taken = 0;
    for (let i = 0; i < bodies.length; i++) {
      assert.equal(got[i].status, 200, got[i].text);
      assert.equal(got[i].json.content, want[i].json.content, `request ${i}`);
      assert.deepEqual(got[i].json.completion_probabilities, want[i].json.completion_probabilities);
      assert.equal(want[i].json.timings.draft_n, undefined);
      drafted += got[i].json.timings.draft_n || 0;
      taken += got[i].json.timings.draft_n_accepted || 0;
    }
    assert.ok(drafted > 0 && taken > 0 && taken <= drafted, `${taken} of ${drafted}`);
    const metrics = await fetch(`${spec.base}/metrics`).then((x) => x.text());
    assert.match(metrics, /vortex_draft_tokens_accepted_total [1-9]/);
    // streamed: the pieces make the same text
    const s = await post(spec.base, '/completion', { ...bodies[1], stream: true });
    const text = events(s.text).map((e) => e.data.content).join('');
    assert.equal(text, want[1].json.content);
    // one request without drafts; bad values are a 400 naming the field
    const off = await post(spec.base, '/completion', { ...bodies[0], 'speculative.n_max': 0 });
    assert.equal(off.json.content, want[0].json.content);
    assert.equal(off.json.timings.draft_n, undefined);
    const bad = await post(spec.base, '/completion', { ...bodies[0], 'speculative.p_min': 2 });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'speculative.p_min');
  });
});
