// encoder.test.mjs - embedding models (BERT-style encoders) on `vx serve`:
// `vx synth` writes bert-tiny and nomic-tiny (random weights, WordPiece
// vocabularies); the server's vectors, through the official `openai` and
// `ollama` clients, must be `vx embed`'s for the same texts (each input is
// one sequence, whole in one batch, whatever else the batch holds), and
// what an encoder cannot do is refused with a 400.
//
// Run: cd tests/e2e && npm ci && node --test encoder.test.mjs
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { VX, spawnServer } from './serve.mjs';

const TEXTS = [
  'hello world',
  'The quick brown fox jumps over the lazy dog, 42 times!',
  'Embedding models such as bge, all-MiniLM and nomic-embed-text read the whole text at once: '.repeat(3),
];

// `vx embed`'s unit vectors for texts (one per line)
function vxEmbed(model, texts) {
  const out = execFileSync(VX, ['embed', '-m', model, '-t', '1', '-p', texts.join('\n'),
    '--embd-output-format', 'array'], { stdio: ['ignore', 'pipe', 'ignore'] });
  return JSON.parse(out.toString());
}

function assertClose(got, want, tol, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  assert.ok(worst <= tol, `${what}: max |difference| ${worst} > ${tol}`);
}

for (const preset of ['bert-tiny', 'nomic-tiny']) {
  describe(`embedding model ${preset}`, () => {
    let dir, model, srv, openai, ollama, ref;
    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vx-e2e-enc-'));
      model = path.join(dir, `${preset}.gguf`);
      execFileSync(VX, ['synth', '--preset', preset, '--type', 'F32', '-o', model], { stdio: 'ignore' });
      ref = vxEmbed(model, TEXTS);
      srv = await spawnServer(['-m', model, '-t', '1', '--parallel', '3', '-c', '256']);
      openai = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none', maxRetries: 0 });
      ollama = new Ollama({ host: srv.base });
    });
    after(async () => {
      if (srv && srv.proc.exitCode === null) srv.proc.kill('SIGTERM');
      if (srv) await srv.exited;
      fs.rmSync(dir, { recursive: true, force: true });
    });

    test('/v1/embeddings gives vx embed\'s vectors', async () => {
      const r = await openai.embeddings.create({ model: preset, input: TEXTS, encoding_format: 'float' });
      assert.equal(r.data.length, TEXTS.length);
      r.data.forEach((d, i) => assertClose(d.embedding, ref[i], 1e-5, `input ${i}`));
      assert.ok(r.usage.prompt_tokens > TEXTS.length * 2);
    });

    test('concurrent requests of mixed lengths: each input whole, the same vectors', async () => {
      const reqs = [];
      for (let k = 0; k < 12; k++) {
        const i = k % TEXTS.length;
        reqs.push(openai.embeddings.create({ model: preset, input: TEXTS[i], encoding_format: 'float' })
          .then((r) => assertClose(r.data[0].embedding, ref[i], 1e-5, `request ${k}`)));
      }
      await Promise.all(reqs);
    });

    test('ollama /api/embed gives the same vectors', async () => {
      const r = await ollama.embed({ model: preset, input: TEXTS });
      assert.equal(r.embeddings.length, TEXTS.length);
      r.embeddings.forEach((e, i) => assertClose(e, ref[i], 1e-5, `input ${i}`));
    });

    test('completions, chat and generate are refused with a 400', async () => {
      await assert.rejects(openai.chat.completions.create({ model: preset, messages: [{ role: 'user', content: 'hi' }] }),
        (e) => e.status === 400 && e.code === 'model_not_supported' && /embedding model/.test(e.message));
      await assert.rejects(openai.completions.create({ model: preset, prompt: 'hi' }),
        (e) => e.status === 400 && e.code === 'model_not_supported');
      await assert.rejects(ollama.generate({ model: preset, prompt: 'hi' }),
        (e) => e.status_code === 400 && /does not support generate/.test(e.error));
    });

    test('an input over the context: context_length_exceeded, and the server goes on', async () => {
      await assert.rejects(openai.embeddings.create({ model: preset, input: 'word '.repeat(300) }),
        (e) => e.status === 400 && e.code === 'context_length_exceeded');
      const r = await openai.embeddings.create({ model: preset, input: TEXTS[0], encoding_format: 'float' });
      assertClose(r.data[0].embedding, ref[0], 1e-5, 'after the refusal');
    });
  });
}
