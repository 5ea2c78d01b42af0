#!/usr/bin/env node
// serve-bench.mjs - throughput of an OpenAI-compatible server under N
// concurrent streaming clients (no dependencies: Node 18+ fetch).
//
//   node bench/serve-bench.mjs --url http://127.0.0.1:8080 [--clients 1,4,8,16]
//        [--prompt-words 100] [--max-tokens 64] [--shared-prefix-words 0] [--rounds 1] [--seed 12345]
//   node bench/serve-bench.mjs --url ... --prefix-test 900,1000 [--reps 3]
//
// --prefix-test C,P: time to first token of P-token prompts (token ids, so
// the counts do not depend on the tokenizer) whose first C tokens are
// already in the prefix cache, against P-token prompts that share nothing
// (medians of --reps each, 1 generated token).
//
// For each N: N clients each send --rounds streaming /v1/completions requests
// back to back. Reports aggregate generated tokens/s (wall clock), time to
// first token p50/p99, and the prefix-cache hit rate from /metrics. With
// --shared-prefix-words W every prompt starts with the same W words (a system
// prompt) followed by a per-request suffix. Prompts are made of words drawn
// from a fixed list with a seeded generator (--seed), so runs are comparable;
// a new seed gives prompts a running server has not cached yet.

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : 'true']);
    return acc;
  }, []));
const url = (args.url || 'http://127.0.0.1:8080').replace(/\/$/, '');
const clients = (args.clients || '1,4,8,16').split(',').map(Number);
const promptWords = Number(args['prompt-words'] || 100);
const maxTokens = Number(args['max-tokens'] || 64);
const sharedWords = Number(args['shared-prefix-words'] || 0);
const rounds = Number(args.rounds || 1);
const apiKey = args['api-key'];

const WORDS = ('the of and to in is was that for on with as by at from his her they have had were this which ' +
  'are be one all their there been has when who will more no if out so said what up its about into than them ' +
  'can only other new some could time these two may then do first any my now such like our over man me even ' +
  'most made after also did many before must through back years where much your way well down should because').split(' ');

let seed = Number(args.seed || 12345);
const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
const words = (n) => Array.from({ length: n }, () => WORDS[Math.floor(rnd() * WORDS.length)]).join(' ');
const shared = sharedWords > 0 ? words(sharedWords) + '\n' : '';

const headers = { 'content-type': 'application/json' };
if (apiKey) headers.authorization = `Bearer ${apiKey}`;

async function metrics() {
  const r = await fetch(`${url}/metrics`, { headers });
  const text = await r.text();
  const get = (name) => {
    const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm'));
    return m ? Number(m[1]) : NaN;
  };
  return { lookups: get('vortex_prefix_cache_lookups_total'), hits: get('vortex_prefix_cache_hits_total') };
}

async function one(prompt, maxTok = maxTokens) {
  const t0 = performance.now();
  const r = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers,
    body: JSON.stringify({ prompt, max_tokens: maxTok, temperature: 0, stream: true,
                           stream_options: { include_usage: true }, ignore_eos: true }),
  });
  if (!r.ok) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  let ttft = null, tokens = 0, buf = '';
  const dec = new TextDecoder();
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.choices && j.choices.length && ttft === null) ttft = performance.now() - t0;
      if (j.usage) tokens = j.usage.completion_tokens;
    }
  }
  return { ttft: ttft ?? performance.now() - t0, tokens, ms: performance.now() - t0 };
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))];
};

if (args['prefix-test']) {
  const [cached, total] = args['prefix-test'].split(',').map(Number);
  const reps = Number(args.reps || 3);
  /* ids from 300 up: ordinary pieces in the vocabularies vx synth writes and real ones */
  const ids = (n) => Array.from({ length: n }, () => 300 + Math.floor(rnd() * 20000));
  const med = (xs) => pct(xs, 50);
  const cold = [], warm = [];
  for (let k = 0; k < reps; k++) cold.push((await one(ids(total), 1)).ttft);
  const prefix = ids(cached);
  await one(prefix.concat(ids(total - cached)), 1); /* fills the cache */
  for (let k = 0; k < reps; k++) warm.push((await one(prefix.concat(ids(total - cached)), 1)).ttft);
  const m = await metrics();
  console.log(`server ${url}; ${total}-token prompts, first ${cached} cached vs none (medians of ${reps})`);
  console.log('| uncached TTFT ms | cached-prefix TTFT ms | ratio | prefix hits / lookups (server total) |');
  console.log('|---:|---:|---:|---:|');
  console.log(`| ${med(cold).toFixed(0)} | ${med(warm).toFixed(0)} | ${(med(warm) / med(cold) * 100).toFixed(1)}% | ` +
              `${m.hits} / ${m.lookups} |`);
  process.exit(0);
}

console.log(`server ${url}; prompts of ~${promptWords} words (${sharedWords} shared), ${maxTokens} tokens each`);
console.log('| clients | requests | gen tokens | wall s | aggregate t/s | TTFT p50 ms | TTFT p99 ms | prefix hit rate |');
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const n of clients) {
  const before = await metrics();
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: n }, async () => {
    const out = [];
    for (let k = 0; k < rounds; k++) out.push(await one(shared + words(promptWords - sharedWords)));
    return out;
  }));
  const wall = (performance.now() - t0) / 1000;
  const flat = results.flat();
  const gen = flat.reduce((a, r) => a + r.tokens, 0);
  const after = await metrics();
  const lookups = after.lookups - before.lookups, hits = after.hits - before.hits;
  const rate = lookups > 0 ? (100 * hits / lookups).toFixed(1) + '%' : 'n/a';
  console.log(`| ${n} | ${flat.length} | ${gen} | ${wall.toFixed(2)} | ${(gen / wall).toFixed(2)} | ` +
              `${pct(flat.map((r) => r.ttft), 50).toFixed(0)} | ${pct(flat.map((r) => r.ttft), 99).toFixed(0)} | ${rate} |`);
}
