/*
 * test_quantize.c - model conversion (src/model_quantize.c):
 *   - the per-tensor type policy of every mix reproduces the tensor types of
 *     the llama.cpp-made fixtures (llama F32 -> all 13 fixture types; the
 *     llama3/qwen2/qwen3/phi3/moe F16 files -> Q8_0 and Q4_K_M: tied
 *     embeddings, fused qkv, experts), and general.file_type matches;
 *   - rules the fixtures cannot show (row-length fallbacks, 8 experts, GQA,
 *     requantization) on small files made with the GGUF writer;
 *   - real conversions of llama-F32 to Q8_0 and Q4_K_M: the result loads with
 *     vx_model_load, has the expected types and metadata, dequantizes close
 *     to the F32 weights (no worse than llama.cpp's own files), and does not
 *     depend on the thread count.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "model_quantize.h"
#include "ops.h"
#include "quant.h"
#include "testutil.h"
#include "vortex.h"

#define VX_MAX_SZ(a, b) ((a) > (b) ? (a) : (b))

static char g_dir[256];

static const char *tpath(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", g_dir, name);
    return buf;
}

static vx_gguf *open_fixture(const char *rel) {
    char err[VX_ERRMSG_MAX];
    vx_gguf *g = NULL;
    if (vx_gguf_open(vx_test_fixture_path(rel), &g, err, sizeof err) != VX_OK) {
        CHECKF(0, "%s: %s", rel, err);
        return NULL;
    }
    return g;
}

/* Plans src under mix and compares every tensor's type, by name, with the
 * llama.cpp-made file ref. */
static void plan_matches(const char *src_rel, const char *mix_name, const char *ref_rel) {
    vx_gguf *src = open_fixture(src_rel), *ref = open_fixture(ref_rel);
    const vx_quant_mix *mix = vx_quant_mix_find(mix_name);
    CHECKF(mix != NULL, "mix %s", mix_name);
    if (!src || !ref || !mix) goto done;
    int64_t n = vx_gguf_n_tensors(src);
    int *types = malloc((size_t)n * sizeof *types);
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_quantize_plan(src, mix, false, false, types, NULL, err, sizeof err) == VX_OK,
           "%s: %s", ref_rel, err);
    CHECKF(vx_gguf_n_tensors(ref) == n, "%s: tensor count", ref_rel);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(src, i);
        const vx_gguf_tensor *r = vx_gguf_find_tensor(ref, t->name);
        if (!r || r->type != types[i]) {
            if (bad++ < 4)
                CHECKF(0, "%s %s: %s planned %s, llama.cpp has %s", src_rel, mix_name, t->name,
                       vx_type_name(types[i]), r ? vx_type_name(r->type) : "(absent)");
        }
    }
    CHECKF(bad == 0, "%s -> %s: %d tensors differ", src_rel, mix_name, bad);
    int64_t ft;
    CHECKF(vx_gguf_get_i64(ref, "general.file_type", &ft) == 1 && ft == mix->ftype,
           "%s: file_type %lld, mix %s has %d", ref_rel, (long long)ft, mix_name, mix->ftype);
    free(types);
done:
    vx_gguf_close(src);
    vx_gguf_close(ref);
}

static void test_plans_vs_fixtures(void) {
    static const char *const llama_types[] = {"F16",  "BF16", "Q8_0",   "Q4_0",   "Q4_1",
                                              "Q5_0", "Q5_1", "Q2_K",   "Q3_K_M", "Q4_K_M",
                                              "Q5_K_M", "Q6_K", "IQ4_NL"};
    char ref[256];
    for (size_t i = 0; i < sizeof llama_types / sizeof llama_types[0]; i++) {
        snprintf(ref, sizeof ref, "models/llama/llama-%s.gguf", llama_types[i]);
        plan_matches("models/llama/llama-F32.gguf", llama_types[i], ref);
    }
    static const char *const variants[] = {"llama3", "qwen2", "qwen3", "phi3", "moe"};
    static const char *const types[] = {"Q8_0", "Q4_K_M"};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        char src[256];
        snprintf(src, sizeof src, "models/%s/%s-F16.gguf", variants[v], variants[v]);
        for (size_t t = 0; t < 2; t++) {
            snprintf(ref, sizeof ref, "models/%s/%s-%s.gguf", variants[v], variants[v], types[t]);
            plan_matches(src, types[t], ref);
        }
    }
    /* mixes are found case-insensitively; unknown names are refused */
    CHECK(vx_quant_mix_find("q4_k_m") == vx_quant_mix_find("Q4_K_M"));
    CHECK(vx_quant_mix_find("Q4_K") == NULL && vx_quant_mix_find(NULL) == NULL);
    int n_mixes = 0;
    while (vx_quant_mix_at(n_mixes)) n_mixes++;
    CHECK(n_mixes == 29);
    /* the grid i-quant mixes are vx synth's only: quantizing to one is refused, clearly */
    vx_quantize_params qp = {vx_quant_mix_find("IQ2_XXS"), 1, false, false, NULL, NULL};
    char err[256] = "";
    CHECK(qp.mix && vx_quantize_model(vx_test_fixture_path("models/llama/llama-F16.gguf"), "/tmp/vx_test_iq.gguf",
                                       &qp, NULL, err, sizeof err) == VX_EUNSUPPORTED);
    CHECKF(strstr(err, "no quantizer"), "IQ2_XXS refusal: %s", err);
}

/* ----------------------------------------------------- synthetic plans */

typedef struct syn_tensor {
    const char *name;
    int64_t ne0, ne1;
} syn_tensor;

/* Writes a model-shaped file of F32 tensors (zeros) with the given kv. */
static vx_gguf *synth(const syn_tensor *ts, size_t n, uint32_t n_layer, uint32_t heads,
                      uint32_t kv_heads, uint32_t experts) {
    char path[512], err[VX_ERRMSG_MAX];
    tpath(path, sizeof path, "synth.gguf");
    vx_gguf_writer *w = vx_gguf_writer_init();
    vx_gguf_set_str(w, "general.architecture", "llama");
    vx_gguf_set_u32(w, "llama.block_count", n_layer);
    vx_gguf_set_u32(w, "llama.attention.head_count", heads);
    vx_gguf_set_u32(w, "llama.attention.head_count_kv", kv_heads);
    if (experts) vx_gguf_set_u32(w, "llama.expert_count", experts);
    size_t max = 0;
    for (size_t i = 0; i < n; i++) max = VX_MAX_SZ(max, (size_t)(ts[i].ne0 * ts[i].ne1 * 4));
    void *zeros = calloc(1, max);
    for (size_t i = 0; i < n; i++) {
        int64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        /* ne1 1 is a vector, but for the shared expert gate: 2-D [n, 1], as the converter writes it */
        const uint32_t nd = ts[i].ne1 > 1 || strstr(ts[i].name, "gate_inp_shexp") ? 2 : 1;
        CHECK(vx_gguf_add_tensor(w, ts[i].name, VX_TYPE_F32, nd, ne, zeros,
                                 (uint64_t)(ne[0] * ne[1] * 4), true) == VX_OK);
    }
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_OK);
    vx_gguf_writer_free(w);
    free(zeros);
    vx_gguf *g = NULL;
    CHECKF(vx_gguf_open(path, &g, err, sizeof err) == VX_OK, "synth: %s", err);
    return g;
}

/* Plans g under mix and checks the type of each named tensor. */
static void expect_plan(vx_gguf *g, const char *mix, const char *const *names,
                        const int *want, const bool *want_fb, size_t n) {
    int types[64];
    bool fb[64];
    char err[VX_ERRMSG_MAX];
    CHECK(vx_gguf_n_tensors(g) <= 64);
    CHECKF(vx_quantize_plan(g, vx_quant_mix_find(mix), false, false, types, fb, err,
                            sizeof err) == VX_OK, "%s: %s", mix, err);
    for (size_t k = 0; k < n; k++) {
        for (int64_t i = 0; i < vx_gguf_n_tensors(g); i++) {
            if (strcmp(vx_gguf_tensor_at(g, i)->name, names[k]) != 0) continue;
            CHECKF(types[i] == want[k], "%s %s: %s, want %s", mix, names[k],
                   vx_type_name(types[i]), vx_type_name(want[k]));
            if (want_fb) CHECKF(fb[i] == want_fb[k], "%s %s: fallback flag", mix, names[k]);
        }
    }
}

static void test_synthetic_plans(void) {
    /* rows of 896 (Qwen2-0.5B's width) and 48 (not even a multiple of 32) */
    static const syn_tensor odd[] = {
        {"token_embd.weight", 896, 16},   {"output_norm.weight", 896, 1},
        {"output.weight", 896, 16},       {"blk.0.attn_norm.weight", 896, 1},
        {"blk.0.attn_q.weight", 896, 8},  {"blk.0.attn_q.bias", 896, 1},
        {"blk.0.attn_k.weight", 896, 4},  {"blk.0.attn_v.weight", 896, 4},
        {"blk.0.attn_output.weight", 896, 8}, {"blk.0.ffn_down.weight", 48, 8},
        {"blk.0.ffn_up.weight", 512, 8},  {"rope_freqs.weight", 32, 1},
    };
    vx_gguf *g = synth(odd, sizeof odd / sizeof odd[0], 1, 4, 2, 0);
    if (g) {
        const char *names[] = {"token_embd.weight", "output_norm.weight", "output.weight",
                               "blk.0.attn_q.weight", "blk.0.attn_q.bias", "blk.0.attn_v.weight",
                               "blk.0.ffn_down.weight", "blk.0.ffn_up.weight",
                               "rope_freqs.weight"};
        /* Q4_K_M: output -> Q8_0 (row does not fit Q6_K); the only attn_v
         * and ffn_down get "more bits" (Q6_K -> Q8_0 by fallback); 48 fits
         * nothing: F16 */
        const int q4km[] = {VX_TYPE_Q5_0, VX_TYPE_F32, VX_TYPE_Q8_0, VX_TYPE_Q5_0, VX_TYPE_F32,
                            VX_TYPE_Q8_0, VX_TYPE_F16, VX_TYPE_Q4_K, VX_TYPE_F32};
        const bool q4km_fb[] = {true, false, false, true, false, true, true, false, false};
        expect_plan(g, "Q4_K_M", names, q4km, q4km_fb, 9);
        const int q5ks[] = {VX_TYPE_Q5_1, VX_TYPE_F32, VX_TYPE_Q8_0, VX_TYPE_Q5_1, VX_TYPE_F32,
                            VX_TYPE_Q5_1, VX_TYPE_F16, VX_TYPE_Q5_K, VX_TYPE_F32};
        expect_plan(g, "Q5_K_S", names, q5ks, NULL, 9);
        const int q2k[] = {VX_TYPE_Q4_0, VX_TYPE_F32, VX_TYPE_Q8_0, VX_TYPE_Q4_0, VX_TYPE_F32,
                           VX_TYPE_Q4_0, VX_TYPE_F16, VX_TYPE_Q2_K, VX_TYPE_F32};
        expect_plan(g, "Q2_K", names, q2k, NULL, 9);
        /* 32-block types fit 896 but not 48; output's Q6_K does not: Q8_0 */
        const int q40b[] = {VX_TYPE_Q4_0, VX_TYPE_F32, VX_TYPE_Q8_0, VX_TYPE_Q4_0, VX_TYPE_F32,
                            VX_TYPE_Q4_0, VX_TYPE_F16, VX_TYPE_Q4_0, VX_TYPE_F32};
        expect_plan(g, "Q4_0", names, q40b, NULL, 9);
        const int f16[] = {VX_TYPE_F16, VX_TYPE_F32, VX_TYPE_F16, VX_TYPE_F16, VX_TYPE_F32,
                           VX_TYPE_F16, VX_TYPE_F16, VX_TYPE_F16, VX_TYPE_F32};
        expect_plan(g, "F16", names, f16, NULL, 9);
        /* IQ4_XS falls back to IQ4_NL where its 256-element blocks do not
         * fit (896), then to F16 (48), as llama-quantize does; output Q8_0 */
        const int iq4xs[] = {VX_TYPE_IQ4_NL, VX_TYPE_F32,    VX_TYPE_Q8_0, VX_TYPE_IQ4_NL, VX_TYPE_F32,
                             VX_TYPE_IQ4_NL, VX_TYPE_F16,    VX_TYPE_IQ4_XS, VX_TYPE_F32};
        const bool iq4xs_fb[] = {true, false, false, true, false, true, true, false, false};
        expect_plan(g, "IQ4_XS", names, iq4xs, iq4xs_fb, 9);
        /* TQ2_0 (llama-quantize's ternary rules): an untied token_embd
         * wants Q4_K (-> Q5_0 at 896), the rest falls back to Q4_0, then F16 */
        const int tq2[] = {VX_TYPE_Q5_0, VX_TYPE_F32,    VX_TYPE_Q8_0, VX_TYPE_Q4_0, VX_TYPE_F32,
                           VX_TYPE_Q4_0, VX_TYPE_F16,    VX_TYPE_TQ2_0, VX_TYPE_F32};
        const bool tq2_fb[] = {true, false, false, true, false, true, true, false, false};
        expect_plan(g, "TQ2_0", names, tq2, tq2_fb, 9);
        vx_gguf_close(g);
    }

    /* 8 experts (Mixtral) and GQA 8 */
    static const syn_tensor moe[] = {
        {"token_embd.weight", 256, 16},       {"output.weight", 256, 16},
        {"blk.0.attn_q.weight", 256, 8},      {"blk.0.attn_k.weight", 256, 2},
        {"blk.0.attn_v.weight", 256, 2},      {"blk.0.attn_output.weight", 256, 8},
        {"blk.0.ffn_gate_inp.weight", 256, 8}, {"blk.0.ffn_down_exps.weight", 256, 8},
        {"blk.0.ffn_gate_inp_shexp.weight", 256, 1}, /* 2-D [n_embd, 1], as llama.cpp's converter writes it */
    };
    g = synth(moe, sizeof moe / sizeof moe[0], 1, 8, 1, 8);
    if (g) {
        const char *names[] = {"blk.0.attn_q.weight",       "blk.0.attn_k.weight",
                               "blk.0.attn_v.weight",       "blk.0.attn_output.weight",
                               "blk.0.ffn_gate_inp.weight", "token_embd.weight",
                               "blk.0.ffn_gate_inp_shexp.weight"};
        const int q4km[] = {VX_TYPE_Q4_K, VX_TYPE_Q8_0, VX_TYPE_Q8_0, VX_TYPE_Q5_K, VX_TYPE_F32,
                            VX_TYPE_Q4_K, VX_TYPE_F32};
        expect_plan(g, "Q4_K_M", names, q4km, NULL, 7);
        const int q2k[] = {VX_TYPE_Q2_K, VX_TYPE_Q8_0, VX_TYPE_Q8_0, VX_TYPE_Q5_K, VX_TYPE_F32,
                           VX_TYPE_Q2_K, VX_TYPE_F32};
        expect_plan(g, "Q2_K", names, q2k, NULL, 7);
        vx_gguf_close(g);
    }
    /* GQA >= 4 without experts: Q2_K gives attn_v Q4_K; Q4_K_S the first 4
     * attn_v Q5_K; Q3_K_M the first two attn_v Q5_K, later ones Q4_K */
    static const syn_tensor gqa[] = {
        {"blk.0.attn_v.weight", 256, 2}, {"blk.1.attn_v.weight", 256, 2},
        {"blk.2.attn_v.weight", 256, 2}, {"blk.3.attn_v.weight", 256, 2},
        {"blk.4.attn_v.weight", 256, 2}, {"output.weight", 256, 4},
    };
    g = synth(gqa, sizeof gqa / sizeof gqa[0], 5, 8, 2, 0);
    if (g) {
        const char *names[] = {"blk.0.attn_v.weight", "blk.2.attn_v.weight",
                               "blk.4.attn_v.weight"};
        const int q2k[] = {VX_TYPE_Q4_K, VX_TYPE_Q4_K, VX_TYPE_Q4_K};
        expect_plan(g, "Q2_K", names, q2k, NULL, 3);
        const int q4ks[] = {VX_TYPE_Q5_K, VX_TYPE_Q5_K, VX_TYPE_Q4_K};
        expect_plan(g, "Q4_K_S", names, q4ks, NULL, 3);
        const int q3km[] = {VX_TYPE_Q5_K, VX_TYPE_Q4_K, VX_TYPE_Q4_K};
        expect_plan(g, "Q3_K_M", names, q3km, NULL, 3);
        const int iq4[] = {VX_TYPE_Q5_K, VX_TYPE_Q5_K, VX_TYPE_Q5_K};
        expect_plan(g, "IQ4_NL", names, iq4, NULL, 3);
        expect_plan(g, "IQ4_XS", names, iq4, NULL, 3);
        /* pure: no rules, even for output.weight */
        int types[8];
        char err[VX_ERRMSG_MAX];
        CHECK(vx_quantize_plan(g, vx_quant_mix_find("Q4_K_M"), true, false, types, NULL, err,
                               sizeof err) == VX_OK);
        for (int i = 0; i < 6; i++) CHECK(types[i] == VX_TYPE_Q4_K);
        vx_gguf_close(g);
    }
    char path[512];
    unlink(tpath(path, sizeof path, "synth.gguf"));

    /* requantization is refused unless allowed; unchanged types are fine */
    vx_gguf *q = open_fixture("models/llama/llama-Q4_K_M.gguf");
    if (q) {
        int types[64];
        char err[VX_ERRMSG_MAX] = "";
        CHECK(vx_quantize_plan(q, vx_quant_mix_find("Q8_0"), false, false, types, NULL, err,
                               sizeof err) == VX_EINVAL);
        CHECKF(strstr(err, "already quantized"), "message: %s", err);
        CHECK(vx_quantize_plan(q, vx_quant_mix_find("Q8_0"), false, true, types, NULL, err,
                               sizeof err) == VX_OK);
        /* the same mix again keeps every type: nothing to requantize */
        CHECK(vx_quantize_plan(q, vx_quant_mix_find("Q4_K_M"), false, false, types, NULL, err,
                               sizeof err) == VX_OK);
        for (int64_t i = 0; i < vx_gguf_n_tensors(q); i++)
            CHECK(types[i] == vx_gguf_tensor_at(q, i)->type);
        CHECK(vx_quantize_plan(q, NULL, false, false, types, NULL, err, sizeof err) == VX_EINVAL);
        vx_gguf_close(q);
    }
}

/* ------------------------------------------------------------ conversion */

/* Relative RMS error of tensor t against the F32 reference r. */
static double rel_err(const vx_gguf_tensor *t, const vx_gguf_tensor *r) {
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *x = malloc((size_t)n * sizeof *x);
    vx_type_get_traits(t->type)->to_float(t->data, x, n);
    const float *ref = r->data;
    double se = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - ref[i];
        se += d * d;
        ss += (double)ref[i] * ref[i];
    }
    free(x);
    return ss > 0 ? sqrt(se / ss) : sqrt(se);
}

typedef struct progress_log {
    int64_t calls, last_index, converted;
} progress_log;

static void on_tensor(const vx_quant_tensor_info *info, void *ud) {
    progress_log *p = ud;
    CHECK(info->index == p->calls && info->count == 39 && info->name != NULL);
    CHECK(info->dst_bytes == vx_row_size((vx_type)info->dst_type, info->ne[0]) *
                                 (uint64_t)(info->ne[1] * info->ne[2] * info->ne[3]));
    p->calls++;
    p->converted += info->converted;
}

static void convert_and_check(const char *mix_name, const char *ref_rel, double max_err) {
    char out[512], out2[512], err[VX_ERRMSG_MAX];
    snprintf(out, sizeof out, "%s/llama-%s.gguf", g_dir, mix_name);
    const char *in = vx_test_fixture_path("models/llama/llama-F32.gguf");
    char in_path[1024];
    snprintf(in_path, sizeof in_path, "%s", in);
    progress_log log = {0};
    vx_quantize_params p = {vx_quant_mix_find(mix_name), 2, false, false, on_tensor, &log};
    vx_quantize_stats st;
    vx_status s = vx_quantize_model(in_path, out, &p, &st, err, sizeof err);
    CHECKF(s == VX_OK, "%s: %s", mix_name, err);
    if (s) return;
    CHECK(log.calls == 39 && log.converted == 30);
    CHECK(st.n_tensors == 39 && st.n_converted == 30 && st.n_fallback == 0);

    /* loads as a model */
    vx_model *m = NULL;
    s = vx_model_load(out, NULL, &m, err, sizeof err);
    CHECKF(s == VX_OK, "%s: load: %s", mix_name, err);
    if (m) {
        CHECK(vx_model_n_layer(m) == 4 && vx_model_n_embd(m) == 256);
        CHECK(vx_model_size(m) == st.dst_bytes);
        vx_model_free(m);
    }

    /* types by name as in llama.cpp's file; metadata; weights close */
    vx_gguf *g = NULL, *f32 = open_fixture("models/llama/llama-F32.gguf");
    vx_gguf *ref = open_fixture(ref_rel);
    if (vx_gguf_open(out, &g, err, sizeof err) != VX_OK || !f32 || !ref) {
        CHECKF(0, "reopen: %s", err);
        vx_gguf_close(g);
        vx_gguf_close(f32);
        vx_gguf_close(ref);
        return;
    }
    uint64_t src_bytes = 0, dst_bytes = 0;
    for (int64_t i = 0; i < vx_gguf_n_tensors(f32); i++) src_bytes += vx_gguf_tensor_at(f32, i)->size;
    for (int64_t i = 0; i < vx_gguf_n_tensors(g); i++) dst_bytes += vx_gguf_tensor_at(g, i)->size;
    CHECK(st.src_bytes == src_bytes && st.dst_bytes == dst_bytes);
    int64_t v;
    CHECK(vx_gguf_get_i64(g, "general.file_type", &v) == 1 &&
          v == vx_quant_mix_find(mix_name)->ftype);
    CHECK(vx_gguf_get_i64(g, "general.quantization_version", &v) == 1 && v == 2);
    const char *s_arch;
    CHECK(vx_gguf_get_str(g, "general.architecture", &s_arch) == 1 && !strcmp(s_arch, "llama"));
    CHECK(vx_gguf_n_kv(g) == vx_gguf_n_kv(ref));
    for (int64_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
        const vx_gguf_tensor *r = vx_gguf_find_tensor(f32, t->name);
        const vx_gguf_tensor *l = vx_gguf_find_tensor(ref, t->name);
        if (!r || !l) {
            CHECKF(0, "%s: %s missing in a fixture", mix_name, t->name);
            continue;
        }
        CHECKF(t->type == l->type, "%s: %s is %s, llama.cpp %s", mix_name, t->name,
               vx_type_name(t->type), vx_type_name(l->type));
        CHECK(memcmp(t->ne, r->ne, sizeof t->ne) == 0);
        if (t->type == VX_TYPE_F32) {
            CHECKF(memcmp(t->data, r->data, t->size) == 0, "%s: %s copied", mix_name, t->name);
            continue;
        }
        double e = rel_err(t, r), e_ref = rel_err(l, r);
        CHECKF(e < max_err * (t->type == VX_TYPE_Q6_K ? 0.5 : 1.0),
               "%s: %s (%s) relative error %.4f", mix_name, t->name, vx_type_name(t->type), e);
        /* our quantizers should be about as good as ggml's */
        CHECKF(e <= e_ref * 1.1 + 1e-4, "%s: %s error %.5f vs llama.cpp %.5f", mix_name,
               t->name, e, e_ref);
    }
    vx_gguf_close(g);
    vx_gguf_close(f32);
    vx_gguf_close(ref);

    /* one thread gives the same bytes */
    snprintf(out2, sizeof out2, "%s/llama-%s-1t.gguf", g_dir, mix_name);
    p.n_threads = 1;
    p.on_tensor = NULL;
    CHECK(vx_quantize_model(in_path, out2, &p, NULL, err, sizeof err) == VX_OK);
    size_t na, nb;
    char *a = vx_test_read_file(out, &na), *b = vx_test_read_file(out2, &nb);
    CHECKF(a && b && na == nb && memcmp(a, b, na) == 0, "%s: output depends on threads",
           mix_name);
    free(a);
    free(b);
    unlink(out);
    unlink(out2);
}

static void count_tensor(const vx_quant_tensor_info *info, void *ud) {
    (void)info;
    ++*(int64_t *)ud;
}

static void test_errors(void) {
    char out[512], err[VX_ERRMSG_MAX];
    tpath(out, sizeof out, "x.gguf");
    vx_quantize_params p = {vx_quant_mix_find("Q8_0"), 1, false, false, NULL, NULL};
    err[0] = 0;
    CHECK(vx_quantize_model("/nonexistent/in.gguf", out, &p, NULL, err, sizeof err) == VX_EIO);
    CHECK(strstr(err, "/nonexistent/in.gguf") != NULL);
    char in[1024];
    snprintf(in, sizeof in, "%s", vx_test_fixture_path("models/stories260K/stories260K.gguf"));
    CHECK(vx_quantize_model(in, "/nonexistent/dir/out.gguf", &p, NULL, err, sizeof err) ==
          VX_EIO);
    CHECK(strstr(err, "ENOENT") != NULL);
    /* found before any tensor is converted (a large model's minutes) */
    p.on_tensor = count_tensor;
    int64_t n_done = 0;
    p.user_data = &n_done;
    CHECK(vx_quantize_model(in, "/nonexistent/dir/out.gguf", &p, NULL, err, sizeof err) == VX_EIO);
    CHECKF(n_done == 0, "%lld tensors converted before the unwritable output was found", (long long)n_done);
    p.on_tensor = NULL;
    p.user_data = NULL;
    p.mix = NULL;
    CHECK(vx_quantize_model(in, out, &p, NULL, err, sizeof err) == VX_EINVAL);
    /* requantization refused: and no output appears */
    p.mix = vx_quant_mix_find("Q4_0");
    snprintf(in, sizeof in, "%s", vx_test_fixture_path("models/llama/llama-Q8_0.gguf"));
    CHECK(vx_quantize_model(in, out, &p, NULL, err, sizeof err) == VX_EINVAL);
    struct stat sb;
    CHECK(stat(out, &sb) != 0);
    /* a real llama2.c model with rows of 64 and 172: K-quants fall back */
    snprintf(in, sizeof in, "%s", vx_test_fixture_path("models/stories260K/stories260K.gguf"));
    p.mix = vx_quant_mix_find("Q4_K_M");
    vx_quantize_stats st;
    CHECK(vx_quantize_model(in, out, &p, &st, err, sizeof err) == VX_OK);
    CHECK(st.n_fallback > 0 && st.dst_bytes < st.src_bytes);
    vx_model *m = NULL;
    vx_status s = vx_model_load(out, NULL, &m, err, sizeof err);
    CHECKF(s == VX_OK, "stories Q4_K_M: %s", err);
    vx_model_free(m);
    unlink(out);
}

/* The output path as users give it: through a symbolic link the target
 * gets the file and the link stays; a node that is not a regular file (a
 * fifo here; a device such as /dev/full as root) is refused and left. */
static void test_destinations(void) {
    char in[1024], target[512], link[512], fifo[512], err[VX_ERRMSG_MAX];
    snprintf(in, sizeof in, "%s", vx_test_fixture_path("models/stories260K/stories260K.gguf"));
    tpath(target, sizeof target, "target.gguf");
    tpath(link, sizeof link, "link.gguf");
    tpath(fifo, sizeof fifo, "fifo.gguf");
    FILE *f = fopen(target, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    CHECK(symlink("target.gguf", link) == 0);
    vx_quantize_params p = {vx_quant_mix_find("Q8_0"), 1, false, false, NULL, NULL};
    CHECKF(vx_quantize_model(in, link, &p, NULL, err, sizeof err) == VX_OK, "through a link: %s", err);
    struct stat ls, ts;
    CHECK(lstat(link, &ls) == 0 && S_ISLNK(ls.st_mode));
    CHECKF(stat(target, &ts) == 0 && ts.st_size > 100000, "the link's target holds %lld bytes", (long long)ts.st_size);
    CHECK(mkfifo(fifo, 0600) == 0);
    err[0] = 0;
    CHECK(vx_quantize_model(in, fifo, &p, NULL, err, sizeof err) == VX_EIO);
    CHECKF(strstr(err, "not a regular file") != NULL, "fifo: '%s'", err);
    CHECK(lstat(fifo, &ls) == 0 && S_ISFIFO(ls.st_mode));
    unlink(link);
    unlink(target);
    unlink(fifo);
}

/* ------------------------------------------------ IQ4_XS, end to end */

/* Logits [48][512] of the fixture prompt on model file path (repacked at
 * load or not), or NULL. */
static float *prompt_logits(const char *path, bool repack) {
    char err[VX_ERRMSG_MAX];
    vx_model_params mp = vx_model_default_params();
    mp.repack = repack;
    vx_model *m = NULL;
    if (vx_model_load(path, &mp, &m, err, sizeof err) != VX_OK) {
        CHECKF(0, "%s: %s", path, err);
        return NULL;
    }
    uint64_t bytes;
    /* no packed copies with the generic kernels (CI's VX_ISA=generic pass) */
    CHECKF((vx_model_n_repacked(m, &bytes) > 0) == (repack && vx_cpu_best_isa() >= VX_ISA_AVX2),
           "%s: repacked %d weights", path,
           vx_model_n_repacked(m, &bytes));
    size_t sz;
    char *js = vx_test_read_file(vx_test_fixture_path("models/manifest.json"), &sz);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    const cJSON *pids = cJSON_GetObjectItem(root, "prompt_ids");
    enum { NP = 48, NV = 512 };
    float *out = NULL;
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = 64, cp.n_batch = NP, cp.n_threads = 2, cp.kv_type = VX_KV_F32;
    vx_context *c = NULL;
    if (cJSON_GetArraySize(pids) == NP && vx_context_init(m, &cp, &c, err, sizeof err) == VX_OK) {
        vx_token ids[NP];
        vx_pos pos[NP];
        vx_seq_id seq[NP];
        int8_t want[NP];
        for (int i = 0; i < NP; i++)
            ids[i] = cJSON_GetArrayItem(pids, i)->valueint, pos[i] = i, seq[i] = 0, want[i] = 1;
        vx_batch b = {NP, ids, pos, seq, want, NULL};
        if (vx_decode(c, &b) == VX_OK && (out = malloc(sizeof(float) * NP * NV)))
            for (int i = 0; i < NP; i++) memcpy(out + (size_t)i * NV, vx_get_logits_ith(c, i), sizeof(float) * NV);
    }
    CHECKF(out != NULL, "%s: no logits", path);
    vx_context_free(c);
    cJSON_Delete(root);
    vx_model_free(m);
    return out;
}

static double logits_rel_rmse(const float *a, const float *ref) {
    double se = 0, ss = 0;
    for (int i = 0; i < 48 * 512; i++) {
        const double d = (double)a[i] - ref[i];
        se += d * d;
        ss += (double)ref[i] * ref[i];
    }
    return sqrt(se / ss);
}

/* IQ4_XS has no llama.cpp fixture: the llama fixture's F32 weights are
 * quantized to it and to IQ4_NL (the same code book, an fp16 scale per 32
 * instead of 6 bits of one per 256) by our own quantizers, and the logits
 * of each are compared with the exact (float64) logits of the F32 weights.
 * The plain layout (reference dot products, Q8_0 activations) and the
 * repacked one (IQ4_NL_R8 kernels, scales rounded to fp16) must agree to
 * the level activation rounding sets. */
static void test_iq4_xs_model(void) {
    char xs[512], nl[512], err[VX_ERRMSG_MAX];
    snprintf(xs, sizeof xs, "%s/llama-IQ4_XS.gguf", g_dir);
    snprintf(nl, sizeof nl, "%s/llama-IQ4_NL.gguf", g_dir);
    const char *in = vx_test_fixture_path("models/llama/llama-F32.gguf");
    char in_path[1024];
    snprintf(in_path, sizeof in_path, "%s", in);
    vx_quantize_params p = {vx_quant_mix_find("IQ4_XS"), 2, false, false, NULL, NULL};
    vx_quantize_stats st;
    CHECKF(vx_quantize_model(in_path, xs, &p, &st, err, sizeof err) == VX_OK, "IQ4_XS: %s", err);
    /* 4.25 bpw: 136 bytes per 256 weights, the one output matrix Q6_K */
    vx_gguf *g = NULL;
    int n_xs = 0;
    if (vx_gguf_open(xs, &g, err, sizeof err) == VX_OK) {
        for (int64_t i = 0; i < vx_gguf_n_tensors(g); i++) {
            const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
            if (t->type != VX_TYPE_IQ4_XS) continue;
            n_xs++;
            CHECK(t->size == (uint64_t)(t->ne[0] * t->ne[1] / 256 * 136));
        }
        vx_gguf_close(g);
    }
    CHECKF(n_xs == 29, "%d IQ4_XS tensors, expected 29", n_xs);
    p.mix = vx_quant_mix_find("IQ4_NL");
    CHECKF(vx_quantize_model(in_path, nl, &p, &st, err, sizeof err) == VX_OK, "IQ4_NL: %s", err);
    size_t rsz;
    float *ref = (float *)(void *)vx_test_read_file(vx_test_fixture_path("models/llama/llama-F32.ref64.f32"), &rsz);
    CHECK(ref && rsz == 48 * 512 * sizeof(float));
    float *lx = prompt_logits(xs, true), *lp = prompt_logits(xs, false), *ln = prompt_logits(nl, true);
    if (ref && lx && lp && ln) {
        const double ex = logits_rel_rmse(lx, ref), ep = logits_rel_rmse(lp, ref), en = logits_rel_rmse(ln, ref),
                     eb = logits_rel_rmse(lx, lp);
        printf("IQ4_XS logits vs the F32 weights' float64 logits: rel_rmse %.4f repacked, %.4f plain "
               "(IQ4_NL %.4f); repacked vs plain %.2e\n",
               ex, ep, en, eb);
        CHECKF(ex <= 1.25 * en && ep <= 1.25 * en, "IQ4_XS rel_rmse %.4f / %.4f vs IQ4_NL %.4f", ex, ep, en);
        /* the fp16 scales move each dot product by ~1e-5 of its magnitude
         * (test_quant), but any change flips some 8-bit activation
         * roundings downstream: the two layouts differ about as much as
         * Q8_0 weights differ from F32 here (the fixtures' ref64: 2.6e-2) */
        CHECKF(eb <= 5e-2, "IQ4_XS repacked vs plain layout: rel_rmse %.3g", eb);
    }
    free(ref);
    free(lx);
    free(lp);
    free(ln);
    unlink(xs);
    unlink(nl);
}

/* ------------------------------------------------ TQ1_0 / TQ2_0, end to end */

/* The llama fixture's F32 weights made ternary both ways: the two types
 * hold the same values (one scale per 256, codes -1/0/1 by the same
 * rounding), so their logits must be the same bits (both run as the same
 * Q2_K_R8 records on the SIMD tiers, and through the reference dot
 * products on the generic one); finite; close to the file layout's; and
 * each tensor the size its type says.
 * (Random weights made ternary say nothing about accuracy: no bound
 * against the float64 logits.) */
static void test_ternary_model(void) {
    char p1[512], p2[512], err[VX_ERRMSG_MAX];
    snprintf(p1, sizeof p1, "%s/llama-TQ1_0.gguf", g_dir);
    snprintf(p2, sizeof p2, "%s/llama-TQ2_0.gguf", g_dir);
    char in_path[1024];
    snprintf(in_path, sizeof in_path, "%s", vx_test_fixture_path("models/llama/llama-F32.gguf"));
    const char *paths[2] = {p1, p2};
    const int types[2] = {VX_TYPE_TQ1_0, VX_TYPE_TQ2_0};
    const size_t bsize[2] = {54, 66};
    vx_quantize_stats st;
    for (int k = 0; k < 2; k++) {
        vx_quantize_params p = {vx_quant_mix_find(k ? "TQ2_0" : "TQ1_0"), 2, false, false, NULL, NULL};
        CHECKF(vx_quantize_model(in_path, paths[k], &p, &st, err, sizeof err) == VX_OK, "%s: %s", paths[k], err);
        vx_gguf *g = NULL;
        int n = 0;
        if (vx_gguf_open(paths[k], &g, err, sizeof err) == VX_OK) {
            for (int64_t i = 0; i < vx_gguf_n_tensors(g); i++) {
                const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
                if (!strcmp(t->name, "token_embd.weight")) /* untied: llama-quantize's Q4_K */
                    CHECKF(t->type == VX_TYPE_Q4_K, "ternary token_embd: %s", vx_type_name(t->type));
                if (t->type != types[k]) continue;
                n++;
                CHECK(t->size == (uint64_t)(t->ne[0] * t->ne[1] / 256) * bsize[k]);
            }
            vx_gguf_close(g);
        }
        CHECKF(n == 28, "%d %s tensors, expected 28 (every matrix but token_embd)", n, vx_type_name(types[k]));
    }
    /* repacked (the SIMD tiers: as Q2_K_R8) and in the file's layout (the
     * reference dot products) */
    float *l1 = prompt_logits(p1, true), *l2 = prompt_logits(p2, true), *lp = prompt_logits(p2, false);
    if (l1 && l2 && lp) {
        bool finite = true;
        for (int i = 0; i < 48 * 512; i++) finite = finite && isfinite(l1[i]);
        CHECK(finite);
        CHECKF(memcmp(l1, l2, sizeof(float) * 48 * 512) == 0, "TQ1_0 and TQ2_0 logits differ (rel_rmse %.3g)",
               logits_rel_rmse(l1, l2));
        /* the same integer sums; only the float steps differ (d y.d (I -
         * M) in double, or fma(d y.d, I) then fnma(d y.d, M) in float),
         * but any change flips 8-bit activation roundings downstream, as
         * with IQ4_XS above: 7.1e-3 here */
        const double eb = logits_rel_rmse(l2, lp);
        CHECKF(eb <= 2.5e-2, "TQ2_0 repacked vs plain layout: rel_rmse %.3g", eb);
        printf("TQ1_0, TQ2_0: the llama fixture made ternary, the same logits from both; repacked vs plain %.2e\n",
               eb);
    }
    free(l1);
    free(l2);
    free(lp);
    unlink(p1);
    unlink(p2);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/vx_test_quantize.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_plans_vs_fixtures();
    test_synthetic_plans();
    convert_and_check("Q8_0", "models/llama/llama-Q8_0.gguf", 0.01);
    convert_and_check("Q4_K_M", "models/llama/llama-Q4_K_M.gguf", 0.12);
    test_iq4_xs_model();
    test_ternary_model();
    test_errors();
    test_destinations();
    rmdir(g_dir);
    return vx_test_finish("test_quantize");
}
