/*
 * test_spec.c - greedy speculative decoding (vx_spec_step) against plain
 * greedy decoding of the target, and sampled (vx_spec_step_sample) against
 * the target's plain seeded draws, on the fixture llama (F32 target; drafts:
 * the target itself, its Q4_0 and Q2_K quantizations), batch-invariant
 * contexts: the same token ids, bit for bit, for several draft lengths;
 * both caches exactly as long as the tokens kept after every step; a draft
 * identical to the target has every token accepted; wrong uses are refused
 * (vocabulary sizes, draft lengths, a full context). The binary that
 * writes the other-vocabulary model is $BUILD/vx (default build/vx).
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "vortex.h"

enum { N_GEN = 40, MAX_PROMPT = 64 };

static vx_context *ctx_of(vx_model *m, uint32_t n_ctx) {
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    cp.batch_invariant = true;
    vx_context *c = NULL;
    char err[256];
    CHECKF(vx_context_init(m, &cp, &c, err, sizeof err) == VX_OK, "%s", err);
    return c;
}

static bool decode_prompt(vx_context *c, const vx_token *ids, int n) {
    vx_pos pos[MAX_PROMPT];
    vx_seq_id seq[MAX_PROMPT] = {0};
    for (int i = 0; i < n; i++) pos[i] = i;
    const vx_batch b = {n, ids, pos, seq, NULL, NULL};
    return vx_decode(c, &b) == VX_OK;
}

/* The target's greedy continuation, one token per decode. */
static void plain_greedy(vx_model *m, const vx_token *ids, int n, vx_token *out) {
    vx_context *c = ctx_of(m, 128);
    CHECK(c && decode_prompt(c, ids, n));
    for (int i = 0; c && i < N_GEN; i++) {
        out[i] = vx_argmax(vx_get_logits_ith(c, -1 + (i == 0 ? n : 1)), vx_context_n_vocab(c));
        vx_pos p = n + i;
        const vx_seq_id s = 0;
        const vx_batch b = {1, &out[i], &p, &s, NULL, NULL};
        CHECK(vx_decode(c, &b) == VX_OK);
    }
    vx_context_free(c);
}

/* Seeded sampling with penalties (what vx run's defaults plus a repeat
 * penalty do), hot enough that the draws often leave the draft's argmax. */
static vx_sampler *sampler_of(vx_context *c, uint64_t seed) {
    vx_sampler_params sp = vx_sampler_default_params();
    sp.seed = seed;
    sp.temperature = 1.2f;
    sp.repeat_penalty = 1.3f;
    vx_sampler *s = NULL;
    CHECK(vx_sampler_init(&sp, vx_context_n_vocab(c), &s) == VX_OK);
    return s;
}

/* The target's sampled continuation, one token per decode. */
static void plain_sampled(vx_model *m, const vx_token *ids, int n, uint64_t seed, vx_token *out) {
    vx_context *c = ctx_of(m, 128);
    vx_sampler *smp = c ? sampler_of(c, seed) : NULL;
    CHECK(c && smp && decode_prompt(c, ids, n));
    for (int i = 0; i < n && smp; i++) vx_sampler_accept(smp, ids[i]);
    for (int i = 0; smp && i < N_GEN; i++) {
        out[i] = vx_sampler_sample(smp, vx_get_logits_ith(c, -1 + (i == 0 ? n : 1)));
        vx_sampler_accept(smp, out[i]);
        vx_pos p = n + i;
        const vx_seq_id s = 0;
        const vx_batch b = {1, &out[i], &p, &s, NULL, NULL};
        CHECK(vx_decode(c, &b) == VX_OK);
    }
    vx_sampler_free(smp);
    vx_context_free(c);
}

/* The target's continuation through speculative steps with draft model
 * d: greedy (seed NULL: vx_spec_step), or sampled as sampler_of(*seed)
 * draws (vx_spec_step_sample). */
static void spec_run(vx_model *m, vx_model *d, const vx_token *ids, int n, const uint64_t *seed, int n_draft,
                     vx_token *out, vx_spec_stats *st) {
    vx_context *tc = ctx_of(m, 128), *dc = ctx_of(d, 128);
    vx_sampler *smp = tc && seed ? sampler_of(tc, *seed) : NULL;
    CHECK(tc && dc && (smp || !seed) && decode_prompt(tc, ids, n) && decode_prompt(dc, ids, n));
    if (!tc || !dc || (seed && !smp)) goto done;
    for (int i = 0; smp && i < n; i++) vx_sampler_accept(smp, ids[i]);
    int got = 0;
    const float *first = vx_get_logits_ith(tc, n - 1);
    out[got] = smp ? vx_sampler_sample(smp, first) : vx_argmax(first, vx_context_n_vocab(tc));
    if (smp) vx_sampler_accept(smp, out[got]);
    got++;
    vx_pos past = n;
    while (got < N_GEN) {
        vx_token step[65];
        int32_t k = 0;
        const vx_status s = smp ? vx_spec_step_sample(tc, dc, smp, out[got - 1], past, n_draft, step, &k, st)
                                : vx_spec_step(tc, dc, out[got - 1], past, n_draft, step, &k, st);
        CHECKF(s == VX_OK && k >= 1 && k <= n_draft + 1, "step: %s, %d tokens", vx_status_str(s), k);
        if (s != VX_OK || k < 1) break;
        past += k;
        CHECKF(vx_kv_seq_len(tc, 0) == past && vx_kv_seq_len(dc, 0) == past, "caches %d / %d, expected %d",
               vx_kv_seq_len(tc, 0), vx_kv_seq_len(dc, 0), past);
        for (int i = 0; i < k && got < N_GEN; i++) out[got++] = step[i];
    }
done:
    vx_sampler_free(smp);
    vx_context_free(tc);
    vx_context_free(dc);
}

static bool allow_all(void *ctx, vx_token t) {
    (void)ctx;
    return t >= 0;
}

int main(void) {
    size_t sz;
    char *pj = vx_test_read_file(vx_test_fixture_path("models/prompt.json"), &sz);
    cJSON *p = pj ? cJSON_Parse(pj) : NULL;
    free(pj);
    const cJSON *jids = cJSON_GetObjectItemCaseSensitive(p, "ids");
    vx_token ids[MAX_PROMPT];
    int n = 0;
    for (int i = 0; i < cJSON_GetArraySize(jids) && i < 24; i++) ids[n++] = (vx_token)cJSON_GetArrayItem(jids, i)->valuedouble;
    cJSON_Delete(p);
    CHECK(n > 0);
    char err[256];
    vx_model *m = NULL, *drafts[3] = {NULL, NULL, NULL};
    static const char *const names[3] = {"models/llama/llama-F32.gguf", "models/llama/llama-Q4_0.gguf",
                                         "models/llama/llama-Q2_K.gguf"};
    CHECKF(vx_model_load(vx_test_fixture_path(names[0]), NULL, &m, err, sizeof err) == VX_OK, "%s", err);
    for (int i = 0; i < 3; i++)
        CHECKF(vx_model_load(vx_test_fixture_path(names[i]), NULL, &drafts[i], err, sizeof err) == VX_OK, "%s", err);
    if (!m || !drafts[0] || !drafts[1] || !drafts[2] || n == 0) return vx_test_finish("test_spec");

    vx_token want[N_GEN];
    plain_greedy(m, ids, n, want);
    static const int ks[] = {1, 3, 8};
    for (int di = 0; di < 3; di++)
        for (int ki = 0; ki < 3; ki++) {
            vx_token got[N_GEN];
            vx_spec_stats st = {0, 0, 0};
            memset(got, 0xff, sizeof got);
            spec_run(m, drafts[di], ids, n, NULL, ks[ki], got, &st);
            CHECKF(memcmp(got, want, sizeof want) == 0, "draft %s, %d a step: not the target's greedy tokens",
                   names[di], ks[ki]);
            if (di == 0)
                CHECKF(st.n_accepted == st.n_drafted, "the target as its own draft: %d of %d accepted", st.n_accepted,
                       st.n_drafted);
            printf("draft %-30s %d a step: %2d target passes for %d tokens, %3d of %3d drafts accepted\n", names[di],
                   ks[ki], st.n_steps, N_GEN, st.n_accepted, st.n_drafted);
        }

    /* sampled: the target's own draws, the same tokens as without a draft
     * for each seed; a greedy draft rarely agrees with hot draws, so some
     * steps keep a draft and some do not */
    int n_seeds_differ = 0, n_kept = 0, n_missed = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        vx_token want_s[N_GEN];
        plain_sampled(m, ids, n, seed, want_s);
        n_seeds_differ += memcmp(want_s, want, sizeof want) != 0;
        for (int di = 0; di < 3; di++)
            for (int ki = 0; ki < 3; ki += 2) {
                vx_token got[N_GEN];
                vx_spec_stats st = {0, 0, 0};
                memset(got, 0xff, sizeof got);
                spec_run(m, drafts[di], ids, n, &seed, ks[ki], got, &st);
                CHECKF(memcmp(got, want_s, sizeof want_s) == 0, "seed %llu, draft %s, %d a step: not the target's draws",
                       (unsigned long long)seed, names[di], ks[ki]);
                n_kept += st.n_accepted;
                n_missed += st.n_drafted - st.n_accepted;
            }
    }
    CHECKF(n_seeds_differ == 3, "%d of 3 seeds sample other tokens than greedy", n_seeds_differ);
    CHECKF(n_kept > 0 && n_missed > 0, "sampled steps: %d drafts kept, %d not", n_kept, n_missed);
    printf("sampled (temperature 1.2, repeat penalty 1.3), 3 seeds x 3 drafts x 2 lengths: the plain draws; %d drafts kept, %d not\n",
           n_kept, n_missed);

    /* refused: draft lengths, a full context, another vocabulary size */
    vx_context *tc = ctx_of(m, 32), *dc = ctx_of(drafts[1], 32);
    vx_token out[65];
    int32_t k = -1;
    CHECK(tc && dc && decode_prompt(tc, ids, n) && decode_prompt(dc, ids, n));
    CHECK(vx_spec_step(tc, dc, ids[0], n, 0, out, &k, NULL) == VX_EINVAL && k == 0);
    CHECK(vx_spec_step(tc, dc, ids[0], n, 65, out, &k, NULL) == VX_EINVAL);
    CHECK(vx_spec_step(tc, dc, ids[0], n, 32 - n, out, &k, NULL) == VX_EINVAL); /* n + k + 1 > 32 */
    CHECK(vx_spec_step(tc, dc, ids[0], n, 31 - n, out, &k, NULL) == VX_OK && k >= 1); /* exactly fits */
    vx_context_free(tc);
    vx_context_free(dc);
    /* a draft context with room for fewer than n_draft + 1 positions (a
     * step that keeps all drafts stores the last one), and a sampler with
     * a filter the step cannot advance between its draws */
    tc = ctx_of(m, 64), dc = ctx_of(drafts[1], (uint32_t)n + 4);
    vx_sampler_params sp = vx_sampler_default_params();
    vx_sampler *fs = NULL;
    CHECK(vx_sampler_init(&sp, vx_context_n_vocab(tc), &fs) == VX_OK);
    vx_sampler_set_filter(fs, allow_all, NULL);
    CHECK(tc && dc && decode_prompt(tc, ids, n) && decode_prompt(dc, ids, n));
    CHECK(vx_spec_step(tc, dc, ids[0], n, 4, out, &k, NULL) == VX_EINVAL); /* n + 4 + 1 > n + 4 */
    CHECK(vx_spec_step_sample(tc, dc, fs, ids[0], n, 2, out, &k, NULL) == VX_EINVAL);
    vx_sampler_set_filter(fs, NULL, NULL);
    CHECK(vx_spec_step_sample(tc, dc, fs, ids[0], n, 3, out, &k, NULL) == VX_OK && k >= 1);
    vx_sampler_free(fs);
    vx_context_free(tc);
    vx_context_free(dc);
    /* the fixtures all have 512 tokens: vx synth's tiny preset has 1024 */
    vx_model *other = NULL;
    const char *tiny = "/tmp/vx_test_spec_tiny.gguf";
    CHECK(vx_test_synth("tiny", "F32", tiny));
    CHECKF(vx_model_load(tiny, NULL, &other, err, sizeof err) == VX_OK, "%s", err);
    remove(tiny);
    if (other) {
        vx_context *a = ctx_of(m, 32), *b = ctx_of(other, 32);
        CHECK(a && b && vx_context_n_vocab(a) != vx_context_n_vocab(b));
        CHECK(vx_spec_step(a, b, 1, 0, 4, out, &k, NULL) == VX_EINVAL);
        vx_context_free(a);
        vx_context_free(b);
        vx_model_free(other);
    }
    for (int i = 0; i < 3; i++) vx_model_free(drafts[i]);
    vx_model_free(m);
    return vx_test_finish("test_spec");
}
