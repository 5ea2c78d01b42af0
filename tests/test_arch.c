/*
 * test_arch.c - architectures the shared fixtures do not cover, held to
 * llama.cpp's own logits recorded here (tests/data/README.md says how).
 *
 * Gemma: `vx synth --preset gemma-tiny` (embeddings times sqrt(n_embd),
 * GeGLU with GELU's tanh form, head_dim 128 x 4 heads over n_embd 256,
 * one KV head, tied output) in F32 and Q8_0. Gemma 2: `gemma2-tiny` (26
 * layers, as llama.cpp needs; attention logits capped at 0.5, final
 * logits at 1.0, a 6-position window on even layers, post-attention and
 * post-FFN norms). Against llama.cpp as released (F16 KV caches on both
 * sides), F32 must agree within its GELU table's error (2e-4 for Gemma's
 * 2 layers, 3e-3 for Gemma 2's 26) with the same top-1 everywhere; against
 * llama.cpp with that table off and F32 KV caches, within 1e-5 (float
 * rounding: the engines sum in other orders). Q8_0 must be as close to the
 * F32 truth as llama.cpp's Q8_0 is (within 1.25x, the fixtures' bar).
 * Each as one batch and token by token. The binary that writes the models
 * is $BUILD/vx (default build/vx).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "vortex.h"

static const vx_token k_ids[] = {1, 300, 517, 42, 999, 260, 777, 5, 1023, 12, 600, 301, 302, 303, 100, 64};
enum { N_IDS = sizeof k_ids / sizeof k_ids[0], N_VOCAB = 1024 };

/* The model's logits for k_ids: one batch (decode 0) or token by token,
 * with a KV cache of type kv. */
static float *logits_of(vx_model *m, int decode, vx_kv_type kv) {
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.kv_type = kv;
    vx_context *ctx = NULL;
    char err[256];
    if (vx_context_init(m, &cp, &ctx, err, sizeof err) != VX_OK) {
        fprintf(stderr, "context: %s\n", err);
        return NULL;
    }
    float *out = vx_context_n_vocab(ctx) == N_VOCAB ? malloc((size_t)N_IDS * N_VOCAB * sizeof *out) : NULL;
    vx_token tok[N_IDS];
    vx_pos pos[N_IDS];
    vx_seq_id seq[N_IDS];
    int8_t want[N_IDS];
    for (int i = 0; i < N_IDS; i++) tok[i] = k_ids[i], pos[i] = i, seq[i] = 0, want[i] = 1;
    for (int i0 = 0; out && i0 < N_IDS; i0 += decode ? 1 : N_IDS) {
        const int n = decode ? 1 : N_IDS;
        vx_batch b = {n, tok + i0, pos + i0, seq + i0, want + i0, NULL};
        if (vx_decode(ctx, &b) != VX_OK) {
            free(out);
            out = NULL;
            break;
        }
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)(i0 + i) * N_VOCAB, vx_get_logits_ith(ctx, i), N_VOCAB * sizeof *out);
    }
    vx_context_free(ctx);
    return out;
}

static double rel_rmse(const float *a, const float *ref) {
    double se = 0, sr = 0;
    for (size_t i = 0; i < (size_t)N_IDS * N_VOCAB; i++)
        se += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]), sr += (double)ref[i] * ref[i];
    return sr > 0 ? sqrt(se / sr) : 1;
}

static int top1_agree(const float *a, const float *b) {
    int agree = 0;
    for (int t = 0; t < N_IDS; t++) agree += vx_argmax(a + t * N_VOCAB, N_VOCAB) == vx_argmax(b + t * N_VOCAB, N_VOCAB);
    return agree;
}

static float *read_ref(const char *path) {
    size_t sz = 0;
    float *r = (float *)(void *)vx_test_read_file(path, &sz);
    CHECKF(r && sz == (size_t)N_IDS * N_VOCAB * sizeof(float), "%s: %zu bytes", path, sz);
    if (r && sz != (size_t)N_IDS * N_VOCAB * sizeof(float)) {
        free(r);
        r = NULL;
    }
    return r;
}

/* vx synth --preset preset --type type, loaded */
static vx_model *synth(const char *preset, const char *type, const char *path) {
    CHECKF(vx_test_synth(preset, type, path), "vx synth --preset %s --type %s failed", preset, type);
    vx_model *m = NULL;
    char err[256] = "";
    CHECKF(vx_model_load(path, NULL, &m, err, sizeof err) == VX_OK, "%s: %s", path, err);
    return m;
}

/* An F32 model against llama.cpp as released (F16 KV caches, bound rel)
 * and with its GELU table off (F32 KV caches, bound 1e-5). */
static void check_f32(const char *name, vx_model *m, const char *stock, const char *exact, double bound) {
    float *rs = read_ref(stock), *rx = read_ref(exact);
    for (int decode = 0; decode < 2 && m && rs && rx; decode++) {
        float *a = logits_of(m, decode, VX_KV_F16), *b = logits_of(m, decode, VX_KV_F32);
        CHECK(a && b);
        if (a && b) {
            const double es = rel_rmse(a, rs), ex = rel_rmse(b, rx);
            const int ts = top1_agree(a, rs);
            CHECKF(es < bound && ts == N_IDS && ex < 1e-5,
                   "%s F32 %s: rel_rmse %.3g vs llama.cpp (bound %.3g), top-1 %d/%d; %.3g vs its exact GELU", name,
                   decode ? "decode" : "batch", es, bound, ts, N_IDS, ex);
            printf("%-11s %-6s F32 rel_rmse %.2e vs llama.cpp (top-1 %d/%d), %.2e vs llama.cpp's exact GELU\n", name,
                   decode ? "decode" : "batch", es, ts, N_IDS, ex);
        }
        free(a);
        free(b);
    }
    free(rs);
    free(rx);
}

static void test_gemma(void) {
    const char *p32 = "/tmp/vx_test_arch_gemma_f32.gguf", *p8 = "/tmp/vx_test_arch_gemma_q8_0.gguf";
    vx_model *m32 = synth("gemma-tiny", "F32", p32), *m8 = synth("gemma-tiny", "Q8_0", p8);
    check_f32("gemma-tiny", m32, "tests/data/gemma-tiny-F32.llamacpp.f32", "tests/data/gemma-tiny-F32.llamacpp-exact.f32",
              2e-4);
    float *r32 = read_ref("tests/data/gemma-tiny-F32.llamacpp.f32"), *r8 = read_ref("tests/data/gemma-tiny-Q8_0.llamacpp.f32");
    const double lc8 = r32 && r8 ? rel_rmse(r8, r32) : 1; /* llama.cpp's Q8_0 against its F32 */
    for (int decode = 0; decode < 2 && m8 && r32 && r8; decode++) {
        float *b = logits_of(m8, decode, VX_KV_F16);
        CHECK(b != NULL);
        if (b) {
            const double e8 = rel_rmse(b, r8), e8t = rel_rmse(b, r32);
            CHECKF(e8 < 1e-2 && e8t <= 1.25 * lc8, "gemma Q8_0 %s: rel_rmse %.3g vs llama.cpp Q8_0, %.3g vs F32 "
                   "(llama.cpp's %.3g)", decode ? "decode" : "batch", e8, e8t, lc8);
            printf("gemma-tiny  %-6s Q8_0 rel_rmse %.2e vs llama.cpp's Q8_0, %.2e vs F32 (llama.cpp's %.2e)\n",
                   decode ? "decode" : "batch", e8, e8t, lc8);
        }
        free(b);
    }
    free(r32);
    free(r8);
    vx_model_free(m32);
    vx_model_free(m8);
    remove(p32);
    remove(p8);
}

static void test_gemma2(void) {
    const char *p = "/tmp/vx_test_arch_gemma2_f32.gguf";
    vx_model *m = synth("gemma2-tiny", "F32", p);
    check_f32("gemma2-tiny", m, "tests/data/gemma2-tiny-F32.llamacpp.f32",
              "tests/data/gemma2-tiny-F32.llamacpp-exact.f32", 3e-3);
    vx_model_free(m);
    remove(p);
}

int main(void) {
    test_gemma();
    test_gemma2();
    return vx_test_finish("test_arch");
}
