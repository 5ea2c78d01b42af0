/*
 * model_quantize.c - model conversion (see model_quantize.h): the table of
 * mixes, the per-tensor type policy, and the conversion itself (rows
 * dequantized to float and re-quantized on the thread pool, then written
 * with the GGUF writer).
 *
 * The policy is llama.cpp's as documented for its quantization mixes
 * (behaviour of llama-quantize at the build that made the test fixtures):
 *   - only 2-D+ matrices named "*weight" are converted; norms, biases,
 *     rope_freqs and the MoE router (ffn_gate_inp) keep their type;
 *   - output.weight (or token_embd.weight when the output is tied to it)
 *     gets Q6_K in quantized mixes (Q8_0 stays Q8_0; Q8_0 when the row does
 *     not fit the block);
 *   - the _M/_S/_L mixes give more bits to attn_v, ffn_down, attn_output and
 *     attn_qkv in chosen layers ("use more bits": the first and last eighth
 *     of the layers and every third one in between);
 *   - a K-quant whose 256-element block does not divide the row length
 *     falls back to a 32-block type of similar size (Q4_K -> Q5_0, Q6_K ->
 *     Q8_0, ...), and to F16 when even that does not fit.
 */
#include "model_quantize.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "common.h"
#include "model.h"
#include "quant_iq.h"
#include "threadpool.h"

static const vx_quant_mix mixes[] = {
    {"F32", VX_FTYPE_ALL_F32, VX_TYPE_F32, "32-bit float"},
    {"F16", VX_FTYPE_F16, VX_TYPE_F16, "16-bit float"},
    {"BF16", VX_FTYPE_BF16, VX_TYPE_BF16, "bfloat16"},
    {"Q8_0", VX_FTYPE_Q8_0, VX_TYPE_Q8_0, "8.5 bits per weight"},
    {"Q4_0", VX_FTYPE_Q4_0, VX_TYPE_Q4_0, "4.5 bpw"},
    {"Q4_1", VX_FTYPE_Q4_1, VX_TYPE_Q4_1, "5.0 bpw"},
    {"Q5_0", VX_FTYPE_Q5_0, VX_TYPE_Q5_0, "5.5 bpw"},
    {"Q5_1", VX_FTYPE_Q5_1, VX_TYPE_Q5_1, "6.0 bpw"},
    {"Q2_K", VX_FTYPE_Q2_K, VX_TYPE_Q2_K, "Q2_K with Q3_K/Q4_K for sensitive matrices"},
    {"Q3_K_S", VX_FTYPE_Q3_K_S, VX_TYPE_Q3_K, "Q3_K throughout"},
    {"Q3_K_M", VX_FTYPE_Q3_K_M, VX_TYPE_Q3_K, "Q3_K with Q4_K/Q5_K for sensitive matrices"},
    {"Q3_K_L", VX_FTYPE_Q3_K_L, VX_TYPE_Q3_K, "Q3_K with Q5_K for sensitive matrices"},
    {"Q4_K_S", VX_FTYPE_Q4_K_S, VX_TYPE_Q4_K, "Q4_K, Q5_K for the first attn_v/ffn_down"},
    {"Q4_K_M", VX_FTYPE_Q4_K_M, VX_TYPE_Q4_K, "Q4_K with Q6_K for half of attn_v/ffn_down"},
    {"Q5_K_S", VX_FTYPE_Q5_K_S, VX_TYPE_Q5_K, "Q5_K throughout"},
    {"Q5_K_M", VX_FTYPE_Q5_K_M, VX_TYPE_Q5_K, "Q5_K with Q6_K for half of attn_v/ffn_down"},
    {"Q6_K", VX_FTYPE_Q6_K, VX_TYPE_Q6_K, "6.6 bpw"},
    {"IQ4_NL", VX_FTYPE_IQ4_NL, VX_TYPE_IQ4_NL, "4.5 bpw, non-linear levels"},
    {"IQ4_XS", VX_FTYPE_IQ4_XS, VX_TYPE_IQ4_XS, "4.25 bpw, non-linear levels, 6-bit sub-block scales"},
    {"TQ1_0", VX_FTYPE_TQ1_0, VX_TYPE_TQ1_0, "1.69 bpw ternary (for ternary-trained models)"},
    {"TQ2_0", VX_FTYPE_TQ2_0, VX_TYPE_TQ2_0, "2.06 bpw ternary (for ternary-trained models)"},
    /* the grid i-quants: vx writes them (vx synth, random codes) but has no
     * quantizer; throughout, like llama-quantize --pure */
    {"IQ1_S", VX_FTYPE_IQ1_S, VX_TYPE_IQ1_S, "1.56 bpw, every matrix (synth only)"},
    {"IQ1_M", VX_FTYPE_IQ1_M, VX_TYPE_IQ1_M, "1.75 bpw, every matrix (synth only)"},
    {"IQ2_XXS", VX_FTYPE_IQ2_XXS, VX_TYPE_IQ2_XXS, "2.06 bpw, every matrix (synth only)"},
    {"IQ2_XS", VX_FTYPE_IQ2_XS, VX_TYPE_IQ2_XS, "2.31 bpw, every matrix (synth only)"},
    {"IQ2_M", VX_FTYPE_IQ2_M, VX_TYPE_IQ2_S, "2.56 bpw (IQ2_S), every matrix (synth only)"},
    {"IQ3_XXS", VX_FTYPE_IQ3_XXS, VX_TYPE_IQ3_XXS, "3.06 bpw, every matrix (synth only)"},
    {"IQ3_S", VX_FTYPE_IQ3_S, VX_TYPE_IQ3_S, "3.44 bpw, every matrix (synth only)"},
    {"MXFP4_MOE", VX_FTYPE_MXFP4_MOE, VX_TYPE_MXFP4, "MXFP4 experts (4.25 bpw), Q8_0 elsewhere (gpt-oss)"},
};
#define N_MIXES ((int)(sizeof mixes / sizeof mixes[0]))

const vx_quant_mix *vx_quant_mix_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < N_MIXES; i++)
        if (strcasecmp(mixes[i].name, name) == 0) return &mixes[i];
    return NULL;
}

const vx_quant_mix *vx_quant_mix_at(int i) { return i >= 0 && i < N_MIXES ? &mixes[i] : NULL; }

/* ---------------------------------------------------------------- policy */

typedef enum category {
    CAT_OTHER,
    CAT_OUTPUT,
    CAT_TOKEN_EMBD,
    CAT_ATTN_Q,
    CAT_ATTN_K,
    CAT_ATTN_V,
    CAT_ATTN_QKV,
    CAT_ATTN_OUT,
    CAT_FFN_UP,
    CAT_FFN_GATE,
    CAT_FFN_DOWN
} category;

static category categorize(const char *name) {
    if (strcmp(name, "output.weight") == 0) return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0) return CAT_TOKEN_EMBD;
    if (strstr(name, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (strstr(name, "attn_v.weight")) return CAT_ATTN_V;
    if (strstr(name, "attn_k.weight")) return CAT_ATTN_K;
    if (strstr(name, "attn_q.weight")) return CAT_ATTN_Q;
    if (strstr(name, "attn_output.weight")) return CAT_ATTN_OUT;
    if (strstr(name, "ffn_up")) return CAT_FFN_UP;
    if (strstr(name, "ffn_gate")) return CAT_FFN_GATE;
    if (strstr(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

/* Weight matrices only: vectors (norms, biases, rope factors) stay as they
 * are, and so do a few small matrices that are sensitive or tiny. */
static bool convertible(const vx_quant_shape *t) {
    /* dimensions as ggml_n_dims counts them: trailing 1s are none (the
     * converter writes Qwen2-MoE's shared expert gate as [n_embd, 1]) */
    int nd = t->n_dims;
    while (nd > 1 && t->ne[nd - 1] == 1) nd--;
    if (nd < 2) return false;
    const char *n = t->name;
    size_t len = strlen(n);
    if (len < 6 || strcmp(n + len - 6, "weight") != 0) return false;
    static const char *const keep[] = {
        "_norm.weight",       /* normalization weights */
        "ffn_gate_inp.weight", /* MoE router */
        "ssm_conv1d",         /* small convolution kernels */
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (strstr(n, keep[i])) return false;
    return strcmp(n, "position_embd.weight") != 0 && strcmp(n, "token_types.weight") != 0;
}

typedef struct policy {
    int F;       /* ftype */
    bool falcon; /* llama.cpp special-cases Falcon */
    int64_t n_layer, n_gqa, n_expert;
    bool tied;   /* no output.weight: token_embd is also the output */
    int64_t n_attn_v, i_attn_v, i_ffn_down;
} policy;

/* The first and last eighth of the layers and every third one between. */
static bool use_more_bits(int64_t i, int64_t n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* Layer of an FFN tensor: llama.cpp counts them in file order, except for
 * MoE models whose expert tensors it locates by name. */
static int64_t ffn_layer(const policy *P, const char *name, int64_t counter) {
    if (P->n_expert <= 1 || strncmp(name, "blk.", 4) != 0) return counter;
    /* "blk.<n>." parsed by hand: sscanf's %d is undefined on overflow */
    int64_t layer = 0;
    const char *p = name + 4;
    if (*p < '0' || *p > '9') return counter;
    for (; *p >= '0' && *p <= '9'; p++) {
        layer = layer * 10 + (*p - '0');
        if (layer > INT32_MAX) return counter;
    }
    return *p == '.' ? layer : counter;
}

static int mix_type(policy *P, const vx_quant_shape *t, category cat, int type) {
    const int F = P->F;
    const bool gqa4 = P->n_gqa >= 4;
    if (vx_iq_is_grid(type)) return type; /* pure (see the mix table) */
    /* llama.cpp's MXFP4_MOE: the stacked experts MXFP4, every other matrix Q8_0 */
    if (F == VX_FTYPE_MXFP4_MOE) return t->ne[2] > 1 ? VX_TYPE_MXFP4 : VX_TYPE_Q8_0;
    if (cat == CAT_OUTPUT || (P->tied && cat == CAT_TOKEN_EMBD)) {
        const vx_type_traits *tr = vx_type_get_traits(type);
        if (P->falcon || t->ne[0] % tr->blck_size != 0) return VX_TYPE_Q8_0;
        return type == VX_TYPE_Q8_0 ? type : VX_TYPE_Q6_K;
    }
    switch (cat) {
    case CAT_ATTN_V: {
        int64_t i = P->i_attn_v++;
        if (F == VX_FTYPE_Q2_K) type = gqa4 ? VX_TYPE_Q4_K : VX_TYPE_Q3_K;
        else if (F == VX_FTYPE_Q3_K_M) type = i < 2 ? VX_TYPE_Q5_K : VX_TYPE_Q4_K;
        else if (F == VX_FTYPE_Q3_K_L) type = VX_TYPE_Q5_K;
        else if ((F == VX_FTYPE_IQ4_NL || F == VX_FTYPE_IQ4_XS) && gqa4) type = VX_TYPE_Q5_K;
        else if ((F == VX_FTYPE_Q4_K_M || F == VX_FTYPE_Q5_K_M) && use_more_bits(i, P->n_attn_v))
            type = VX_TYPE_Q6_K;
        else if (F == VX_FTYPE_Q4_K_S && i < 4) type = VX_TYPE_Q5_K;
        if (P->n_expert == 8) type = VX_TYPE_Q8_0; /* Mixtral: attn_v is tiny next to the experts */
        return type;
    }
    case CAT_ATTN_K: return P->n_expert == 8 ? VX_TYPE_Q8_0 : type;
    case CAT_FFN_DOWN: {
        int64_t i = ffn_layer(P, t->name, P->i_ffn_down++), n = P->n_layer;
        if (F == VX_FTYPE_Q2_K) return VX_TYPE_Q3_K;
        if (F == VX_FTYPE_Q3_K_M)
            return i < n / 16 ? VX_TYPE_Q5_K
                   : !P->falcon || use_more_bits(i, n) ? VX_TYPE_Q4_K
                                                      : VX_TYPE_Q3_K;
        if (F == VX_FTYPE_Q3_K_L) return P->falcon ? VX_TYPE_Q4_K : VX_TYPE_Q5_K;
        if (F == VX_FTYPE_Q4_K_M) {
            if (P->falcon)
                return i < n / 16 ? VX_TYPE_Q6_K : use_more_bits(i, n) ? VX_TYPE_Q5_K : VX_TYPE_Q4_K;
            return use_more_bits(i, n) ? VX_TYPE_Q6_K : type;
        }
        if ((F == VX_FTYPE_IQ4_NL || F == VX_FTYPE_IQ4_XS) && i < n / 8) return VX_TYPE_Q5_K;
        if (F == VX_FTYPE_Q5_K_M && use_more_bits(i, n)) return VX_TYPE_Q6_K;
        if (F == VX_FTYPE_Q4_K_S && !P->falcon && i < n / 8) return VX_TYPE_Q5_K;
        return type;
    }
    case CAT_ATTN_OUT:
        if (P->falcon) return F == VX_FTYPE_Q3_K_L ? VX_TYPE_Q4_K : type;
        if (P->n_expert == 8) {
            if (F == VX_FTYPE_Q2_K || F == VX_FTYPE_Q3_K_S || F == VX_FTYPE_Q3_K_M ||
                F == VX_FTYPE_IQ4_NL || F == VX_FTYPE_Q4_K_S || F == VX_FTYPE_Q4_K_M || F == VX_FTYPE_IQ4_XS)
                return VX_TYPE_Q5_K;
            return type;
        }
        if (F == VX_FTYPE_Q2_K) return VX_TYPE_Q3_K;
        if (F == VX_FTYPE_Q3_K_M) return VX_TYPE_Q4_K;
        if (F == VX_FTYPE_Q3_K_L) return VX_TYPE_Q5_K;
        return type;
    case CAT_TOKEN_EMBD: /* an untied one (tied: the output's rule above) */
        return F == VX_FTYPE_TQ1_0 || F == VX_FTYPE_TQ2_0 ? VX_TYPE_Q4_K : type;
    case CAT_ATTN_QKV:
        if (F == VX_FTYPE_Q3_K_M || F == VX_FTYPE_Q3_K_L) return VX_TYPE_Q4_K;
        if (F == VX_FTYPE_Q4_K_M) return VX_TYPE_Q5_K;
        if (F == VX_FTYPE_Q5_K_M) return VX_TYPE_Q6_K;
        return type;
    default: return type;
    }
}

/* A type whose block divides the row length, close in size to the wanted
 * one; *fell is set when it had to change. */
static int fit_row(int type, int64_t ne0, bool *fell) {
    const vx_type_traits *tr = vx_type_get_traits(type);
    if (ne0 % tr->blck_size == 0) return type;
    *fell = true;
    int alt;
    switch (type) {
    case VX_TYPE_Q2_K: case VX_TYPE_Q3_K: case VX_TYPE_TQ1_0: case VX_TYPE_TQ2_0: alt = VX_TYPE_Q4_0; break;
    case VX_TYPE_Q4_K: alt = VX_TYPE_Q5_0; break;
    case VX_TYPE_Q5_K: alt = VX_TYPE_Q5_1; break;
    case VX_TYPE_Q6_K: alt = VX_TYPE_Q8_0; break;
    case VX_TYPE_IQ4_XS: case VX_TYPE_IQ1_S: case VX_TYPE_IQ1_M: case VX_TYPE_IQ2_XXS: case VX_TYPE_IQ2_XS:
    case VX_TYPE_IQ2_S: case VX_TYPE_IQ3_XXS: case VX_TYPE_IQ3_S: alt = VX_TYPE_IQ4_NL; break;
    default: alt = VX_TYPE_F16; break;
    }
    return ne0 % vx_type_get_traits(alt)->blck_size == 0 ? alt : VX_TYPE_F16;
}

/* An integer hyperparameter "<arch>.<suffix>"; per-layer arrays give their
 * first element. def when absent or unusable. */
static int64_t hparam(const vx_gguf *g, const char *arch, const char *suffix, int64_t def) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    if (vx_gguf_get_i64(g, key, &v) == 1) return v;
    const vx_gguf_kv *kv;
    vx_gguf_type t;
    uint64_t n;
    if (vx_gguf_get_arr(g, key, &t, &n, &kv) == 1 && n > 0 && vx_gguf_type_size(t) > 0)
        return vx_gguf_arr_i64(kv, 0);
    return def;
}

vx_status vx_quantize_plan_shapes(const vx_quant_shape *ts, int64_t n, const vx_quant_hparams *hp,
                                  const vx_quant_mix *mix, bool pure, bool allow_requantize,
                                  int *types, bool *fallback, char *err, size_t err_size) {
    if (!ts || !hp || !mix || !types) return vx_seterr(err, err_size, VX_EINVAL, "missing argument");
    policy P = {0};
    P.F = mix->ftype;
    const char *arch = hp->arch ? hp->arch : "";
    P.falcon = strcmp(arch, "falcon") == 0;
    int64_t n_down = 0;
    P.tied = true;
    for (int64_t i = 0; i < n; i++) {
        category c = categorize(ts[i].name);
        P.n_attn_v += c == CAT_ATTN_V;
        n_down += c == CAT_FFN_DOWN;
        if (c == CAT_OUTPUT) P.tied = false;
    }
    P.n_layer = hp->n_layer > 0 ? hp->n_layer : n_down > 0 ? n_down : 1;
    const int64_t heads = hp->n_head > 0 ? hp->n_head : 1;
    const int64_t kv_heads = hp->n_head_kv > 0 ? hp->n_head_kv : heads;
    P.n_gqa = heads / kv_heads;
    P.n_expert = hp->n_expert;

    const bool quantized_mix = vx_type_get_traits(mix->base)->is_quantized;
    for (int64_t i = 0; i < n; i++) {
        const vx_quant_shape *t = &ts[i];
        const vx_type_traits *src = vx_type_get_traits(t->type);
        bool fell = false;
        int type = t->type;
        if (convertible(t) && src && src->to_float) {
            type = mix->base;
            if (quantized_mix) {
                if (!pure) type = mix_type(&P, t, categorize(t->name), type);
                type = fit_row(type, t->ne[0], &fell);
            }
        }
        if (type != t->type && src && src->is_quantized && !allow_requantize)
            return vx_seterr(err, err_size, VX_EINVAL,
                             "tensor '%s' is already quantized (%s): converting it again loses "
                             "accuracy; allow requantization to do it anyway",
                             t->name, src->name);
        types[i] = type;
        if (fallback) fallback[i] = fell;
    }
    return VX_OK;
}

vx_status vx_quantize_plan(const vx_gguf *g, const vx_quant_mix *mix, bool pure,
                           bool allow_requantize, int *types, bool *fallback, char *err,
                           size_t err_size) {
    if (!g || !mix || !types) return vx_seterr(err, err_size, VX_EINVAL, "missing argument");
    const char *arch = "";
    vx_gguf_get_str(g, "general.architecture", &arch);
    const int64_t n = vx_gguf_n_tensors(g);
    vx_quant_shape *ts = calloc((size_t)(n ? n : 1), sizeof *ts);
    if (!ts) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
        ts[i].name = t->name;
        ts[i].n_dims = t->n_dims;
        memcpy(ts[i].ne, t->ne, sizeof ts[i].ne);
        ts[i].type = t->type;
    }
    vx_quant_hparams hp = {arch, hparam(g, arch, "block_count", 0),
                           hparam(g, arch, "attention.head_count", 1), 0,
                           hparam(g, arch, "expert_count", 0)};
    hp.n_head_kv = hparam(g, arch, "attention.head_count_kv", hp.n_head);
    vx_status st = vx_quantize_plan_shapes(ts, n, &hp, mix, pure, allow_requantize, types, fallback,
                                           err, err_size);
    free(ts);
    return st;
}

/* ------------------------------------------------------------ conversion */

typedef struct conv_job {
    const vx_type_traits *src_tr, *dst_tr;
    const uint8_t *src;
    uint8_t *dst;
    int64_t ne0, nrows;
    size_t src_row, dst_row;
    float **scratch; /* one row of floats per thread */
} conv_job;

static void conv_task(void *arg, int ith, int nth) {
    const conv_job *j = arg;
    int64_t lo, hi;
    vx_split(j->nrows, ith, nth, 1, &lo, &hi);
    float *x = j->scratch[ith];
    for (int64_t r = lo; r < hi; r++) {
        j->src_tr->to_float(j->src + (size_t)r * j->src_row, x, j->ne0);
        j->dst_tr->from_float(x, j->dst + (size_t)r * j->dst_row, j->ne0);
    }
}

typedef struct qstate {
    vx_model *m; /* the input, loaded (and validated) as a model */
    vx_gguf *g;  /* its reader */
    vx_gguf_writer *w;
    vx_pool *pool;
    int n_threads;
    float **scratch;
    void **bufs; /* converted tensors, freed after the write */
    int64_t n_bufs;
    int *types;
    bool *fallback;
} qstate;

static void qstate_free(qstate *q) {
    if (q->scratch)
        for (int i = 0; i < q->n_threads; i++) free(q->scratch[i]);
    free(q->scratch);
    for (int64_t i = 0; i < q->n_bufs; i++) free(q->bufs[i]);
    free(q->bufs);
    free(q->types);
    free(q->fallback);
    vx_pool_free(q->pool);
    vx_gguf_writer_free(q->w);
    vx_model_free(q->m); /* and its reader, q->g */
}

/* Converts tensor t to type into a new buffer (kept in q->bufs). */
static vx_status convert(qstate *q, const vx_gguf_tensor *t, int type, const void **out,
                         uint64_t *out_size, char *err, size_t err_size) {
    const vx_type_traits *src = vx_type_get_traits(t->type), *dst = vx_type_get_traits(type);
    if (!src->to_float || !dst->from_float)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED, "tensor '%s': cannot convert %s to %s",
                         t->name, src->name, dst->name);
    int64_t nrows = t->ne[1] * t->ne[2] * t->ne[3]; /* bounded: the reader checked the product */
    size_t dst_row = vx_row_size((vx_type)type, t->ne[0]);
    uint64_t size;
    if (vx_mul_ovf(dst_row, (uint64_t)nrows, &size) || size > SIZE_MAX)
        return vx_seterr(err, err_size, VX_ENOMEM, "tensor '%s' is too large", t->name);
    void *buf = malloc(size ? (size_t)size : 1);
    if (!buf) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory converting '%s'", t->name);
    q->bufs[q->n_bufs++] = buf;
    conv_job job = {src, dst, t->data, buf, t->ne[0], nrows,
                    vx_row_size((vx_type)t->type, t->ne[0]), dst_row, q->scratch};
    if (q->pool) vx_pool_run(q->pool, conv_task, &job);
    else conv_task(&job, 0, 1);
    *out = buf;
    *out_size = size;
    return VX_OK;
}

static vx_status quantize_all(qstate *q, const vx_quantize_params *p, vx_quantize_stats *st,
                              char *err, size_t err_size) {
    const int64_t n = vx_gguf_n_tensors(q->g);
    int64_t max_ne0 = 1;
    for (int64_t i = 0; i < n; i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(q->g, i);
        if (q->types[i] != t->type) max_ne0 = VX_MAX(max_ne0, t->ne[0]);
    }
    if ((uint64_t)max_ne0 > SIZE_MAX / sizeof(float))
        return vx_seterr(err, err_size, VX_ENOMEM, "rows are too long");
    q->scratch = calloc((size_t)q->n_threads, sizeof *q->scratch);
    q->bufs = calloc((size_t)n + 1, sizeof *q->bufs);
    if (!q->scratch || !q->bufs) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    for (int i = 0; i < q->n_threads; i++)
        if (!(q->scratch[i] = malloc((size_t)max_ne0 * sizeof(float))))
            return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");

    for (int64_t i = 0; i < n; i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(q->g, i);
        const void *data = t->data;
        uint64_t size = t->size;
        bool conv = q->types[i] != t->type;
        vx_status s;
        if (conv && (s = convert(q, t, q->types[i], &data, &size, err, err_size))) return s;
        s = vx_gguf_add_tensor(q->w, t->name, q->types[i], t->n_dims, t->ne, data, size, true);
        if (s) return vx_seterr(err, err_size, s, "tensor '%s': cannot add it to the output",
                                t->name);
        st->src_bytes += t->size;
        st->dst_bytes += size;
        st->n_converted += conv;
        st->n_fallback += q->fallback[i];
        if (p->on_tensor) {
            vx_quant_tensor_info info = {i, n, t->name, t->n_dims,
                                         {t->ne[0], t->ne[1], t->ne[2], t->ne[3]},
                                         t->type, q->types[i], t->size, size, conv,
                                         q->fallback[i]};
            p->on_tensor(&info, p->user_data);
        }
    }
    st->n_tensors = n;
    return VX_OK;
}

vx_status vx_quantize_model(const char *in, const char *out, const vx_quantize_params *p,
                            vx_quantize_stats *stats, char *err, size_t err_size) {
    vx_quantize_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    if (!in || !out || !p || !p->mix)
        return vx_seterr(err, err_size, VX_EINVAL, "input, output and mix are required");
    if (!vx_type_get_traits(p->mix->base)->from_float)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "%s: vx has no quantizer for this type (it needs an importance matrix and a grid "
                         "search: llama-quantize --imatrix makes these files; vx loads and runs them)",
                         p->mix->name);
    /* the input must load as a model (hyperparameters, every tensor's name,
     * shape and type): quantizing a file vx then refused to load wrote a
     * useless output and reported success. The loaded model's reader (a
     * GGUF file, or a Hugging Face directory imported once) is the input. */
    qstate q = {0};
    vx_model_params mp = vx_model_default_params();
    mp.repack = false;
    vx_status s = vx_model_load(in, &mp, &q.m, err, err_size);
    if (s) return s;
    q.g = q.m->gguf;
    /* an unwritable destination found now, not after the conversion */
    if ((s = vx_gguf_check_dest(out, err, err_size))) {
        vx_model_free(q.m);
        return s;
    }
    const int64_t n = vx_gguf_n_tensors(q.g);
    q.types = malloc(((size_t)n + 1) * sizeof *q.types);
    q.fallback = calloc((size_t)n + 1, sizeof *q.fallback);
    q.w = vx_gguf_writer_init();
    if (!q.types || !q.fallback || !q.w) {
        s = vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        goto done;
    }
    if ((s = vx_quantize_plan(q.g, p->mix, p->pure, p->allow_requantize, q.types, q.fallback,
                              err, err_size)))
        goto done;
    /* metadata: everything from the input, then what describes the new file */
    if ((s = vx_gguf_copy_kv(q.w, q.g)) ||
        (s = vx_gguf_set_u32(q.w, "general.file_type", (uint32_t)p->mix->ftype)) ||
        (s = vx_gguf_set_u32(q.w, "general.quantization_version", 2))) {
        s = vx_seterr(err, err_size, s, "cannot copy the metadata of %s", in);
        goto done;
    }
    q.n_threads = p->n_threads > 0 ? p->n_threads : vx_n_cpus();
    if (q.n_threads > 1 && vx_pool_init(q.n_threads, &q.pool) != VX_OK) q.pool = NULL;
    if (!q.pool) q.n_threads = 1; /* no pool: convert on this thread */
    if ((s = quantize_all(&q, p, stats, err, err_size))) goto done;
    s = vx_gguf_write_file(q.w, out, err, err_size);
done:
    qstate_free(&q);
    return s;
}
