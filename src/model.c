/*
 * model.c - loading a GGUF model: architecture table, hyperparameters from
 * metadata, binding weight views (with shape and type checks), and the
 * public model API (vx_model_*).
 */
#include "model.h"
#include "dist.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common.h"
#include "hf_import.h"
#include "matmul.h"
#include "vocab.h"

static const vx_arch vx_archs[] = {
    /* name, rope, fused qkv, fused gate/up, gelu, embed scale, gemma2, encoder, abs_pos, gemma3, bitnet, gpt_oss */
    {"llama", VX_ROPE_NORM, false, false, false, false, false, false, false, false, false, false},
    {"mistral", VX_ROPE_NORM, false, false, false, false, false, false, false, false, false, false},
    {"qwen2", VX_ROPE_NEOX, false, false, false, false, false, false, false, false, false, false},
    {"qwen3", VX_ROPE_NEOX, false, false, false, false, false, false, false, false, false, false},
    /* Qwen3's attention, Mixtral's routing (softmax, top-k, renormalized) */
    {"qwen3moe", VX_ROPE_NEOX, false, false, false, false, false, false, false, false, false, false},
    /* Qwen2's attention, experts whose weights are not renormalized, and a
     * shared expert gated by a sigmoid */
    {"qwen2moe", VX_ROPE_NEOX, false, false, false, false, false, false, false, false, false, false},
    {"phi3", VX_ROPE_NEOX, true, true, false, false, false, false, false, false, false, false},
    /* GGUF's Gemma norms hold 1 + w already (the converter adds the 1) */
    {"gemma", VX_ROPE_NEOX, false, false, true, true, false, false, false, false, false, false},
    {"gemma2", VX_ROPE_NEOX, false, false, true, true, true, false, false, false, false, false},
    {"gemma3", VX_ROPE_NEOX, false, false, true, true, true, false, false, true, false, false},
    /* IBM Granite 3.x (dense): Llama's blocks, with multipliers for the
     * embeddings, the block outputs, the attention scores and the logits */
    {"granite", VX_ROPE_NORM, false, false, false, false, false, false, false, false, false, false},
    /* Granite MoE: the same with experts (renormalized) and, in its
     * "shared" models, an ungated shared expert */
    {"granitemoe", VX_ROPE_NORM, false, false, false, false, false, false, false, false, false, false},
    /* BERT (bge, MiniLM, mxbai-embed, ...): a GELU FFN with biases; nomic-bert
     * (nomic-embed-text): fused qkv, RoPE (NeoX pairs), SwiGLU */
    {"bert", VX_ROPE_NEOX, false, false, true, false, false, true, true, false, false, false},
    {"nomic-bert", VX_ROPE_NEOX, true, false, false, false, false, true, false, false, false, false},
    /* BitNet b1.58 (vx_arch.bitnet): NeoX RoPE, as llama.cpp rotates it */
    {"bitnet", VX_ROPE_NEOX, false, false, false, false, false, false, false, false, true, false},
    /* gpt-oss (vx_arch.gpt_oss): NeoX RoPE, as llama.cpp rotates it */
    {"gpt-oss", VX_ROPE_NEOX, false, false, false, false, false, false, false, false, false, true},
};

static const vx_arch *arch_find(const char *name) {
    for (size_t i = 0; i < sizeof vx_archs / sizeof vx_archs[0]; i++)
        if (strcmp(vx_archs[i].name, name) == 0) return &vx_archs[i];
    return NULL;
}

vx_model_params vx_model_default_params(void) {
    vx_model_params p;
    memset(&p, 0, sizeof p);
    p.use_mmap = true;
    p.repack = true;
    return p;
}

typedef struct loader {
    vx_model *m;
    char *err;
    size_t err_size;
    const char *arch;
} loader;

/* Reads "<arch>.<suffix>" as an integer; required ones fail when absent. */
static vx_status hp_int(loader *L, const char *suffix, bool required, int64_t def, int64_t lo,
                        int64_t hi, int32_t *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
    int64_t v = def;
    int r = vx_gguf_get_i64(L->m->gguf, key, &v);
    if (r < 0) {
        /* Some converters store a per-layer array (e.g. head_count_kv); take
         * the first element when all are equal. */
        const vx_gguf_kv *kv;
        vx_gguf_type t;
        uint64_t n;
        if (vx_gguf_get_arr(L->m->gguf, key, &t, &n, &kv) == 1 && n > 0 &&
            vx_gguf_type_size(t) > 0 && t != VX_GGUF_FLOAT32 && t != VX_GGUF_FLOAT64) {
            v = vx_gguf_arr_i64(kv, 0);
            for (uint64_t i = 1; i < n; i++)
                if (vx_gguf_arr_i64(kv, i) != v)
                    return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                                     "%s: per-layer values that differ are not supported", key);
        } else {
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s has the wrong type", key);
        }
    } else if (r == 0 && required) {
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "missing required metadata key %s",
                         key);
    }
    if (v < lo || v > hi)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s = %" PRId64 " is out of range [%" PRId64
                         ", %" PRId64 "]", key, v, lo, hi);
    *out = (int32_t)v;
    return VX_OK;
}

static vx_status hp_float(loader *L, const char *suffix, double def, float *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
    double v = def;
    if (vx_gguf_get_f64(L->m->gguf, key, &v) < 0)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s has the wrong type", key);
    /* a double beyond FLT_MAX would not convert (undefined in C11, an
     * infinity in practice): reject it like an infinity */
    if (!isfinite(v) || fabs(v) > FLT_MAX)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s = %g is not a finite float", key, v);
    *out = (float)v;
    return VX_OK;
}

/* Binds a tensor by name and checks its shape: ne0/ne1/ne2 (0 = any). */
static vx_status bind(loader *L, vx_weight *w, const char *name, bool required, int64_t ne0,
                      int64_t ne1, int64_t ne2) {
    memset(w, 0, sizeof *w);
    const vx_gguf_tensor *t = vx_gguf_find_tensor(L->m->gguf, name);
    if (!t) {
        if (required)
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "missing tensor '%s'", name);
        return VX_OK;
    }
    if (t->ne[3] != 1 || (ne0 && t->ne[0] != ne0) || (ne1 && t->ne[1] != ne1) ||
        (ne2 && t->ne[2] != ne2) || (!ne2 && t->ne[2] != 1))
        return vx_seterr(L->err, L->err_size, VX_EFORMAT,
                         "tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64
                         "], expected [%" PRId64 ", %" PRId64 ", %" PRId64 "] (0 = any)",
                         name, t->ne[0], t->ne[1], t->ne[2], ne0, ne1, ne2 ? ne2 : 1);
    const vx_type_traits *tr = vx_type_get_traits(t->type);
    if (!tr || !tr->to_float)
        return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                         "tensor '%s': type %s is not supported for computation", name,
                         vx_type_name(t->type));
    w->data = t->data;
    w->type = t->type;
    w->ne[0] = t->ne[0];
    w->ne[1] = t->ne[1];
    w->ne[2] = t->ne[2];
    w->row_size = vx_row_size((vx_type)t->type, t->ne[0]);
    w->mat_size = w->row_size * (size_t)t->ne[1];
    w->name = t->name;
    return VX_OK;
}

/* Norm weights and biases are applied in float: require F32 to keep the
 * hot path free of conversions. */
static vx_status need_f32(loader *L, const vx_weight *w) {
    if (w->data && w->type != VX_TYPE_F32)
        return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                         "tensor '%s' is %s; norm weights and biases must be F32", w->name,
                         vx_type_name(w->type));
    return VX_OK;
}

/* YaRN's parameters (model.h), llama.cpp's keys and arithmetic: the
 * correction dims of pairs whose wavelength turns beta_fast and beta_slow
 * times within the original context, floored and ceiled as ggml does
 * (Hugging Face's "truncate": false for gpt-oss keeps them fractional: a
 * small difference llama.cpp has too). */
static vx_status yarn_params(loader *L, float factor) {
    vx_hparams *hp = &L->m->hp;
    vx_status st;
    float fast = 32, slow = 1, ext = -1, attn = 1;
    int32_t orig = 0;
    if ((st = hp_float(L, "rope.scaling.yarn_beta_fast", 32.0, &fast)) ||
        (st = hp_float(L, "rope.scaling.yarn_beta_slow", 1.0, &slow)) ||
        (st = hp_float(L, "rope.scaling.yarn_ext_factor", -1.0, &ext)) ||
        (st = hp_float(L, "rope.scaling.attn_factor", 1.0, &attn)) ||
        (st = hp_int(L, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, 1 << 30, &orig)))
        return st;
    if (!(factor > 0 && isfinite(factor)) || !(fast > 0) || !(slow > 0) || !isfinite(attn))
        return vx_seterr(L->err, L->err_size, VX_EFORMAT,
                         "%s.rope.scaling: YaRN needs a positive factor and betas (factor %g, beta_fast %g, "
                         "beta_slow %g, attn_factor %g)", L->arch, (double)factor, (double)fast, (double)slow,
                         (double)attn);
    float yl = 0;
    if ((st = hp_float(L, "rope.scaling.yarn_log_multiplier", 0.0, &yl))) return st;
    if (yl != 0)
        return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                         "%s.rope.scaling.yarn_log_multiplier (DeepSeek's attention factor) is not supported", L->arch);
    hp->yarn = true;
    hp->yarn_factor = factor;
    hp->yarn_ext = ext < 0 ? 1.0f : ext;
    /* llama.cpp's: 1 + 0.1 ln factor (ggml's term, with ext != 0) times
     * rope.scaling.attn_factor */
    hp->yarn_mscale = attn * (hp->yarn_ext != 0 && factor > 1 ? 1.0f + 0.1f * logf(factor) : 1.0f);
    const double n = hp->n_rot, lb = 2.0 * log((double)hp->rope_base);
    const double lo = floor(n * log(orig / (fast * 2.0 * M_PI)) / lb);
    const double hi = ceil(n * log(orig / (slow * 2.0 * M_PI)) / lb);
    hp->yarn_lo = (float)VX_MAX(0.0, lo);
    hp->yarn_hi = (float)VX_MIN(n - 1, hi);
    return VX_OK;
}

static vx_status load_hparams(loader *L) {
    vx_model *m = L->m;
    vx_hparams *hp = &m->hp;
    vx_status st;
    if ((st = hp_int(L, "embedding_length", true, 0, 1, 1 << 20, &hp->n_embd))) return st;
    if ((st = hp_int(L, "block_count", true, 0, 1, VX_MAX_LAYERS, &hp->n_layer))) return st;
    if ((st = hp_int(L, "feed_forward_length", true, 0, 1, 1 << 22, &hp->n_ff))) return st;
    if ((st = hp_int(L, "attention.head_count", true, 0, 1, 4096, &hp->n_head))) return st;
    if ((st = hp_int(L, "attention.head_count_kv", false, hp->n_head, 1, 4096, &hp->n_head_kv)))
        return st;
    if ((st = hp_int(L, "context_length", false, 2048, 1, 1 << 24, &hp->n_ctx_train))) return st;
    /* embedding models say how to pool; an optional key: a value of another
     * type or that is not computed here (rank: 4) only goes unused */
    {
        char key[160];
        int64_t pt = VX_POOLING_UNSPECIFIED;
        snprintf(key, sizeof key, "%s.pooling_type", L->arch);
        hp->pooling = vx_gguf_get_i64(L->m->gguf, key, &pt) == 1 && pt >= VX_POOLING_NONE && pt <= VX_POOLING_LAST
                          ? (int32_t)pt
                          : VX_POOLING_UNSPECIFIED;
        if (m->arch->encoder && pt == 4) /* llama.cpp's LLAMA_POOLING_TYPE_RANK */
            return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                             "%s = 4: reranking models (a classification head scoring query/document pairs) are "
                             "not supported yet; embedding models are",
                             key);
    }
    int32_t hd_def = hp->n_embd / hp->n_head;
    if ((st = hp_int(L, "attention.key_length", false, hd_def, 1, 1 << 16, &hp->head_dim)))
        return st;
    int32_t vlen;
    if ((st = hp_int(L, "attention.value_length", false, hp->head_dim, 1, 1 << 16, &vlen)))
        return st;
    if (vlen != hp->head_dim)
        return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                         "key length %d != value length %d is not supported", hp->head_dim, vlen);
    if (hp->n_head % hp->n_head_kv != 0)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT,
                         "head_count %d is not a multiple of head_count_kv %d", hp->n_head,
                         hp->n_head_kv);
    if ((st = hp_int(L, "rope.dimension_count", false, hp->head_dim, 2, hp->head_dim, &hp->n_rot)))
        return st;
    if (hp->n_rot % 2)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "rope.dimension_count %d is odd",
                         hp->n_rot);
    if ((st = hp_int(L, "expert_count", false, 0, 0, 1024, &hp->n_expert))) return st;
    if ((st = hp_int(L, "expert_used_count", false, 0, 0, hp->n_expert, &hp->n_expert_used)))
        return st;
    if (hp->n_expert > 0 && hp->n_expert_used == 0)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "expert_count %d but no expert_used_count",
                         hp->n_expert);
    const bool qwen3moe = !strcmp(m->arch->name, "qwen3moe"), qwen2moe = !strcmp(m->arch->name, "qwen2moe");
    const bool granitemoe = !strcmp(m->arch->name, "granitemoe");
    if ((qwen3moe || qwen2moe || granitemoe) && hp->n_expert == 0)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s.expert_count: %s needs experts", L->arch, L->arch);
    hp->moe_norm = !qwen2moe;
    hp->n_ff_shexp = 0;
    /* the shared expert's length: its key, else feed_forward_length (llama.cpp's) */
    if ((qwen2moe || granitemoe) && (st = hp_int(L, "expert_shared_feed_forward_length", false,
                                                 qwen2moe ? hp->n_ff : 0, 0, 1 << 22, &hp->n_ff_shexp)))
        return st;
    if (qwen2moe && hp->n_ff_shexp == 0) hp->n_ff_shexp = hp->n_ff; /* 0: the default, as llama.cpp reads it */
    /* an expert's FFN length: its own key (Qwen3-MoE), else llama.cpp's
     * defaults, feed_forward_length (Mixtral) or it over the experts used
     * (qwen3moe); an MoE model has no other FFN, so it is n_ff from here */
    if (hp->n_expert > 0) {
        const int32_t def = qwen3moe || qwen2moe ? hp->n_ff / hp->n_expert_used : hp->n_ff;
        int32_t fe = def;
        /* Granite MoE: feed_forward_length only, as llama.cpp reads it */
        if (!granitemoe && (st = hp_int(L, "expert_feed_forward_length", false, def, 0, 1 << 22, &fe))) return st;
        hp->n_ff = fe > 0 ? fe : def; /* 0: the default, as llama.cpp reads it */
        if (hp->n_ff < 1)
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s: no expert FFN length (feed_forward_length %d)",
                             L->arch, hp->n_ff);
    }
    /* encoders' LayerNorms take their own key, which llama.cpp requires */
    const char *eps_key = m->arch->encoder ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
    if (m->arch->encoder) {
        char k[160];
        snprintf(k, sizeof k, "%s.%s", L->arch, eps_key);
        if (!vx_gguf_find(m->gguf, k))
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "missing key '%s'", k);
        bool causal = false;
        snprintf(k, sizeof k, "%s.attention.causal", L->arch);
        if (vx_gguf_get_bool(m->gguf, k, &causal) < 0)
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s is not a bool", k);
        if (causal)
            return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED, "%s = true: a causal %s is not supported", k,
                             L->arch);
    }
    if ((st = hp_float(L, eps_key, 1e-5, &hp->rms_eps))) return st;
    if (hp->rms_eps < 0) /* 1/sqrt(mean + eps) would be NaN for small rows */
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s.%s = %g is negative", L->arch, eps_key,
                         hp->rms_eps);
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->attn_softcap = hp->final_softcap = 0;
    hp->embd_scale = 0;
    hp->residual_scale = hp->logit_scale = 1;
    if (!strncmp(m->arch->name, "granite", 7)) {
        /* llama.cpp's keys: logit_scale required, the others optional (0 or
         * missing: none; attention.scale 0: 1/sqrt(head_dim)) */
        float as = 0, es = 0, rs = 0, ls = 0;
        char lk[160];
        snprintf(lk, sizeof lk, "%s.logit_scale", L->arch);
        if (!vx_gguf_find(m->gguf, lk)) return vx_seterr(L->err, L->err_size, VX_EFORMAT, "missing key '%s'", lk);
        if ((st = hp_float(L, "logit_scale", 0.0, &ls)) || (st = hp_float(L, "embedding_scale", 0.0, &es)) ||
            (st = hp_float(L, "residual_scale", 0.0, &rs)) || (st = hp_float(L, "attention.scale", 0.0, &as)))
            return st;
        if (!(ls > 0))
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s = %g: the logits' divisor must be positive", lk,
                             (double)ls);
        if (hp->n_expert > 0 && !granitemoe)
            return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                             "granite with experts: Granite MoE files are granitemoe");
        hp->logit_scale = ls;
        if (es != 0) hp->embd_scale = es;
        if (rs != 0) hp->residual_scale = rs;
        if (as != 0) hp->attn_scale = as;
    }
    hp->n_swa = 0;
    hp->swa_period = 0;
    if (m->arch->gemma3) {
        /* llama.cpp's: no score cap (Gemma 3 dropped it, a file's key goes
         * unused), the logits' cap from the file, a window only when the
         * file gives one, every 6th layer global unless the file says, and
         * queries scaled by 1/sqrt(head_dim) but for the 27B model (62
         * layers): 1/sqrt(n_embd / n_head) */
        /* a per-layer array (Gemma 3n's bools) is not a period */
        char pk[160];
        const vx_gguf_kv *pkv;
        vx_gguf_type pt;
        uint64_t pn;
        snprintf(pk, sizeof pk, "%s.attention.sliding_window_pattern", L->arch);
        if (vx_gguf_get_arr(m->gguf, pk, &pt, &pn, &pkv) == 1)
            return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                             "%s: a per-layer array is not supported (a period: every n-th layer global)", pk);
        if ((st = hp_float(L, "final_logit_softcapping", 0.0, &hp->final_softcap)) ||
            (st = hp_int(L, "attention.sliding_window", false, 0, 0, 1 << 30, &hp->n_swa)) ||
            (st = hp_int(L, "attention.sliding_window_pattern", false, 6, 1, 1 << 16, &hp->swa_period)) ||
            (st = hp_float(L, "rope.freq_base_swa", 10000.0, &hp->rope_base_swa)))
            return st;
        if (!(hp->final_softcap >= 0))
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "gemma3: a negative logit soft cap");
        if (!(hp->rope_base_swa > 0))
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s.rope.freq_base_swa must be positive", L->arch);
        hp->rope_dual = hp->n_swa > 0;
        hp->attn_scale =
            1.0f / sqrtf((float)vx_gemma_query_scalar(true, hp->n_layer, hp->n_embd, hp->n_head, hp->head_dim));
    } else if (m->arch->gemma2) {
        /* llama.cpp's defaults and rule: the caps and the window from the
         * file, a 4096 window when it has none, and the 27B model (46
         * layers) scaling queries by 1/sqrt(n_embd / n_head) */
        if ((st = hp_float(L, "attn_logit_softcapping", 0.0, &hp->attn_softcap)) ||
            (st = hp_float(L, "final_logit_softcapping", 0.0, &hp->final_softcap)) ||
            (st = hp_int(L, "attention.sliding_window", false, 4096, 0, 1 << 30, &hp->n_swa)))
            return st;
        if (!(hp->attn_softcap >= 0) || !(hp->final_softcap >= 0))
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "gemma2: a negative logit soft cap");
        hp->swa_period = 2;
        hp->attn_scale = 1.0f / sqrtf((float)vx_gemma_query_scalar(false, hp->n_layer, hp->n_embd, hp->n_head, hp->head_dim));
    }
    hp->ffn_act = m->arch->gelu ? VX_FFN_GELU : VX_FFN_SILU;
    if (m->arch->gpt_oss) {
        /* llama.cpp's: the window required, every 2nd layer global unless
         * the file says, the local layers' RoPE the global one's */
        char pk[160];
        const vx_gguf_kv *pkv;
        vx_gguf_type pt;
        uint64_t pn;
        float base_swa = 0;
        snprintf(pk, sizeof pk, "%s.attention.sliding_window_pattern", L->arch);
        if (vx_gguf_get_arr(m->gguf, pk, &pt, &pn, &pkv) == 1)
            return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                             "%s: a per-layer array is not supported (a period: every n-th layer global)", pk);
        if (hp->n_expert == 0)
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s.expert_count: %s needs experts", L->arch, L->arch);
        if ((st = hp_int(L, "attention.sliding_window", true, 0, 0, 1 << 30, &hp->n_swa)) ||
            (st = hp_int(L, "attention.sliding_window_pattern", false, 2, 1, 1 << 16, &hp->swa_period)) ||
            (st = hp_float(L, "rope.freq_base_swa", 0.0, &base_swa)))
            return st;
        float base = 10000;
        if ((st = hp_float(L, "rope.freq_base", 10000.0, &base))) return st;
        if (base_swa != 0 && base_swa != base)
            return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                             "%s.rope.freq_base_swa = %g: local layers with their own RoPE base are not supported "
                             "for %s", L->arch, (double)base_swa, L->arch);
        hp->ffn_act = VX_FFN_SWIGLU_OAI;
        hp->moe_norm = true; /* a softmax of the chosen experts' logits: the renormalized softmax */
    }
    if (m->arch->bitnet) {
        if (hp->n_expert > 0)
            return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED, "bitnet with experts is not supported");
        /* llama.cpp's rule: {arch}.hidden_activation when the file has it
         * (BitNet b1.58 2B4T's converters write "relu2"), else SiLU (the
         * older bitnet_b1_58 files) */
        char ak[160];
        const char *act = NULL;
        snprintf(ak, sizeof ak, "%s.hidden_activation", L->arch);
        if (vx_gguf_get_str(m->gguf, ak, &act) < 0)
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s is not a string", ak);
        if (act && (!strcmp(act, "relu2") || !strcmp(act, "relu_squared") || !strcmp(act, "relu_sqr")))
            hp->ffn_act = VX_FFN_RELU2;
        else if (act && strcmp(act, "silu") != 0 && strcmp(act, "swish") != 0)
            return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                             "%s = '%s': the supported activations are silu and relu2", ak, act);
    }
    if ((st = hp_float(L, "rope.freq_base", 10000.0, &hp->rope_base))) return st;
    if (hp->rope_base <= 0)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "rope.freq_base must be positive");
    hp->rope_scale = 1.0f;
    hp->yarn = false;
    char key[160];
    const char *stype = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", L->arch);
    if (vx_gguf_get_str(m->gguf, key, &stype) < 0)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "%s is not a string", key);
    float factor = 1.0f;
    if ((st = hp_float(L, "rope.scaling.factor", 1.0, &factor))) return st;
    if (stype && strcmp(stype, "linear") == 0) {
        /* a factor that is not positive was ignored: wrong positions, silently */
        if (!(factor > 0 && isfinite(factor)))
            return vx_seterr(L->err, L->err_size, VX_EFORMAT,
                             "%s.rope.scaling.factor = %g: linear scaling needs a positive factor", L->arch,
                             (double)factor);
        hp->rope_scale = factor;
    } else if (stype && strcmp(stype, "yarn") == 0 && factor != 1.0f && factor != 0.0f) {
        if ((st = yarn_params(L, factor))) return st;
    } else if (stype && strcmp(stype, "none") != 0 && strcmp(stype, "linear") != 0 && strcmp(stype, "yarn") != 0 &&
               factor != 1.0f) {
        return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                         "rope scaling type '%s' is not supported yet", stype);
    }
    return VX_OK;
}

/* Every kernel table starts from the reference one (cpu.c), so a type
 * without a reference GEMV has no matmul kernel at all: Q8_1 and Q8_K are
 * activation formats that dequantize (bind accepts them) but would be
 * called through a NULL pointer at the first forward. */
static vx_status need_matmul(loader *L, const vx_weight *w) {
    if (!w->data) return VX_OK;
    vx_gemv_fn gemv[VX_TYPE_COUNT] = {0};
    vx_act_fn act[VX_TYPE_COUNT] = {0};
    vx_matmul_kernels_ref(gemv, act);
    if (w->type < 0 || w->type >= VX_TYPE_COUNT || !gemv[w->type])
        return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                         "tensor '%s': type %s is not supported for matrix multiplication",
                         w->name, vx_type_name(w->type));
    return VX_OK;
}

/* Checks that no tensor belongs to a layer past block_count (the file's
 * layer count would disagree with its tensors: llama.cpp refuses files
 * with unused tensors), then allocates the layers. */
static vx_status start_layers(loader *L) {
    vx_model *m = L->m;
    for (int64_t i = 0; i < vx_gguf_n_tensors(m->gguf); i++) {
        const char *tn = vx_gguf_tensor_at(m->gguf, i)->name;
        long il;
        char *end;
        if (strncmp(tn, "blk.", 4) != 0) continue;
        errno = 0;
        il = strtol(tn + 4, &end, 10);
        if (end != tn + 4 && *end == '.' && !errno && il >= m->hp.n_layer)
            return vx_seterr(L->err, L->err_size, VX_EFORMAT,
                             "tensor '%s' belongs to layer %ld, but %s.block_count is %d", tn, il, L->arch,
                             m->hp.n_layer);
    }
    m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    return m->layers ? VX_OK : vx_seterr(L->err, L->err_size, VX_ENOMEM, "out of memory");
}

/* Whether weight w of the model is bound to the tensor data p. */
static bool bound_to(const vx_weight *w, const void *p) { return w->data == p; }

/* A tensor the loader did not bind: refused, as llama.cpp refuses files
 * with tensors it does not use (a position_embd in a nomic-bert file, or a
 * shared expert in a qwen3moe one, would be a model vx does not run,
 * silently). A decoder's tensors outside the layers may be there besides
 * (the vision tower ollama keeps in a Gemma 3 file: a text model still). */
_Static_assert(sizeof(vx_layer) == 45 * sizeof(vx_weight), "unused_tensors lists every weight of a vx_layer");
static vx_status unused_tensors(loader *L) {
    const vx_model *m = L->m;
    const vx_weight *top[] = {&m->tok_embd, &m->type_embd, &m->pos_embd, &m->tok_norm, &m->tok_norm_b, &m->cls,
                              &m->cls_b,    &m->cls_out,   &m->cls_out_b, &m->output_norm, &m->output, &m->rope_freqs};
    for (int64_t i = 0; i < vx_gguf_n_tensors(m->gguf); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(m->gguf, i);
        if (!m->arch->encoder && strncmp(t->name, "blk.", 4) != 0) continue;
        bool used = false;
        for (size_t k = 0; k < sizeof top / sizeof top[0] && !used; k++) used = bound_to(top[k], t->data);
        for (int il = 0; il < m->hp.n_layer && !used; il++) {
            const vx_layer *l = &m->layers[il];
            const vx_weight *ws[] = {&l->attn_norm,     &l->wq,        &l->wk,           &l->wv,
                                     &l->wqkv,          &l->wo,        &l->bq,           &l->bk,
                                     &l->bv,            &l->bqkv,      &l->bo,           &l->q_norm,
                                     &l->k_norm,        &l->ffn_norm,  &l->attn_post_norm, &l->ffn_post_norm,
                                     &l->ffn_gate,      &l->ffn_up,    &l->ffn_down,     &l->ffn_gate_inp,
                                     &l->attn_norm_b,   &l->ffn_norm_b, &l->ffn_up_b,    &l->ffn_down_b,
                                     &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps,
                                     &l->ffn_gate_inp_shexp, &l->ffn_gate_shexp, &l->ffn_up_shexp,
                                     &l->ffn_down_shexp, &l->attn_sub_norm, &l->ffn_sub_norm, &l->wq_s,
                                     &l->wk_s,          &l->wv_s,      &l->wo_s,         &l->ffn_gate_s,
                                     &l->ffn_up_s,      &l->ffn_down_s,    &l->attn_sinks,   &l->ffn_gate_inp_b,
                                     &l->ffn_gate_exps_b, &l->ffn_up_exps_b, &l->ffn_down_exps_b};
            for (size_t k = 0; k < sizeof ws / sizeof ws[0] && !used; k++) used = bound_to(ws[k], t->data);
        }
        if (!used)
            return vx_seterr(L->err, L->err_size, VX_EFORMAT, "tensor '%s' is not part of a %s model", t->name,
                             L->arch);
    }
    return VX_OK;
}

/* A BERT-style encoder's tensors (llama.cpp's names): bert has q/k/v, the
 * output projection and the FFN with biases and absolute positions,
 * nomic-bert a fused qkv and a gated FFN without biases. */
static vx_status load_encoder_weights(loader *L) {
    vx_model *m = L->m;
    vx_hparams *hp = &m->hp;
    vx_status st;
    const int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    const int64_t QD = (int64_t)hp->n_head * hp->head_dim, KD = (int64_t)hp->n_head_kv * hp->head_dim;
    const bool bert = m->arch->abs_pos;
    if ((st = bind(L, &m->tok_embd, "token_embd.weight", true, E, V, 0)) ||
        (st = bind(L, &m->type_embd, "token_types.weight", true, E, 0, 0)) ||
        (bert && (st = bind(L, &m->pos_embd, "position_embd.weight", true, E, 0, 0))) ||
        (st = bind(L, &m->tok_norm, "token_embd_norm.weight", true, E, 1, 0)) ||
        (st = bind(L, &m->tok_norm_b, "token_embd_norm.bias", true, E, 1, 0)) ||
        (st = bind(L, &m->cls, "cls.weight", false, E, E, 0)) ||
        (st = bind(L, &m->cls_b, "cls.bias", false, E, 1, 0)) ||
        (st = bind(L, &m->cls_out, "cls.output.weight", false, E, 0, 0)) ||
        (st = bind(L, &m->cls_out_b, "cls.output.bias", false, 0, 1, 0)))
        return st;
    if (m->type_embd.ne[1] < 1)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT, "token_types.weight has no rows (token type 0 is added)");
    if (m->pos_embd.data && m->pos_embd.ne[1] < hp->n_ctx_train)
        return vx_seterr(L->err, L->err_size, VX_EFORMAT,
                         "position_embd.weight has %lld positions, context_length is %d",
                         (long long)m->pos_embd.ne[1], hp->n_ctx_train);
    const vx_weight *f32s[] = {&m->tok_norm, &m->tok_norm_b, &m->cls_b, &m->cls_out_b};
    for (size_t i = 0; i < sizeof f32s / sizeof f32s[0]; i++)
        if ((st = need_f32(L, f32s[i]))) return st;
    if ((st = need_matmul(L, &m->cls)) || (st = need_matmul(L, &m->cls_out))) return st;
    if ((st = start_layers(L))) return st;
    hp->tied_output = false;
    hp->fused_qkv = !bert;
    char nm[128];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d.%s", il, s), nm)
    for (int il = 0; il < hp->n_layer; il++) {
        vx_layer *l = &m->layers[il];
        if (bert) {
            if ((st = bind(L, &l->wq, NAME("attn_q.weight"), true, E, QD, 0)) ||
                (st = bind(L, &l->wk, NAME("attn_k.weight"), true, E, KD, 0)) ||
                (st = bind(L, &l->wv, NAME("attn_v.weight"), true, E, KD, 0)) ||
                (st = bind(L, &l->bq, NAME("attn_q.bias"), true, QD, 1, 0)) ||
                (st = bind(L, &l->bk, NAME("attn_k.bias"), true, KD, 1, 0)) ||
                (st = bind(L, &l->bv, NAME("attn_v.bias"), true, KD, 1, 0)) ||
                (st = bind(L, &l->bo, NAME("attn_output.bias"), true, E, 1, 0)) ||
                (st = bind(L, &l->ffn_up_b, NAME("ffn_up.bias"), true, F, 1, 0)) ||
                (st = bind(L, &l->ffn_down_b, NAME("ffn_down.bias"), true, E, 1, 0)))
                return st;
        } else {
            if ((st = bind(L, &l->wqkv, NAME("attn_qkv.weight"), true, E, QD + 2 * KD, 0)) ||
                (st = bind(L, &l->ffn_gate, NAME("ffn_gate.weight"), true, E, F, 0)))
                return st;
        }
        if ((st = bind(L, &l->wo, NAME("attn_output.weight"), true, QD, E, 0)) ||
            (st = bind(L, &l->attn_norm, NAME("attn_output_norm.weight"), true, E, 1, 0)) ||
            (st = bind(L, &l->attn_norm_b, NAME("attn_output_norm.bias"), true, E, 1, 0)) ||
            (st = bind(L, &l->ffn_up, NAME("ffn_up.weight"), true, E, F, 0)) ||
            (st = bind(L, &l->ffn_down, NAME("ffn_down.weight"), true, F, E, 0)) ||
            (st = bind(L, &l->ffn_norm, NAME("layer_output_norm.weight"), true, E, 1, 0)) ||
            (st = bind(L, &l->ffn_norm_b, NAME("layer_output_norm.bias"), true, E, 1, 0)))
            return st;
        const vx_weight *vecs[] = {&l->bq,        &l->bk,         &l->bv,       &l->bo,      &l->attn_norm,
                                   &l->attn_norm_b, &l->ffn_up_b, &l->ffn_down_b, &l->ffn_norm, &l->ffn_norm_b};
        for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++)
            if ((st = need_f32(L, vecs[i]))) return st;
        const vx_weight *mats[] = {&l->wq, &l->wk, &l->wv, &l->wqkv, &l->wo, &l->ffn_gate, &l->ffn_up, &l->ffn_down};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if ((st = need_matmul(L, mats[i]))) return st;
    }
#undef NAME
    return unused_tensors(L);
}

static vx_status load_weights(loader *L) {
    vx_model *m = L->m;
    if (m->arch->encoder) return load_encoder_weights(L);
    vx_hparams *hp = &m->hp;
    vx_status st;
    const int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    const int64_t QD = (int64_t)hp->n_head * hp->head_dim;
    const int64_t KD = (int64_t)hp->n_head_kv * hp->head_dim;
    if ((st = bind(L, &m->tok_embd, "token_embd.weight", true, E, V, 0))) return st;
    if ((st = bind(L, &m->output_norm, "output_norm.weight", true, E, 1, 0))) return st;
    if ((st = need_f32(L, &m->output_norm))) return st;
    if (m->arch->bitnet && vx_gguf_find_tensor(m->gguf, "output.weight"))
        return vx_seterr(L->err, L->err_size, VX_EFORMAT,
                         "tensor 'output.weight' is not part of a bitnet model (its logits come from token_embd)");
    if ((st = bind(L, &m->output, "output.weight", false, E, V, 0))) return st;
    hp->tied_output = m->output.data == NULL;
    if (hp->tied_output) m->output = m->tok_embd;
    if ((st = bind(L, &m->rope_freqs, "rope_freqs.weight", false, hp->n_rot / 2, 1, 0))) return st;
    /* LongRoPE (Phi-3 128k): per-length factor sets plus an attention scale;
     * ignoring them would silently give wrong logits, so say so instead */
    if (vx_gguf_find_tensor(m->gguf, "rope_factors_long.weight") ||
        vx_gguf_find_tensor(m->gguf, "rope_factors_short.weight"))
        return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                         "LongRoPE scaling (rope_factors_long/short, e.g. Phi-3 128k models) is "
                         "not supported yet");
    if ((st = need_f32(L, &m->rope_freqs))) return st;
    /* RoPE divides the frequencies by these factors: zero, negative or
     * non-finite ones gave garbage, and --check-tensors lets zeros pass */
    for (int64_t i = 0; m->rope_freqs.data && i < hp->n_rot / 2; i++) {
        float f;
        memcpy(&f, (const float *)m->rope_freqs.data + i, sizeof f);
        if (!(f > 0 && isfinite(f)))
            return vx_seterr(L->err, L->err_size, VX_EFORMAT,
                             "tensor 'rope_freqs.weight': factor %lld is %g; RoPE factors must be positive and finite",
                             (long long)i, (double)f);
    }
    if ((st = start_layers(L))) return st;
    char nm[128];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d.%s", il, s), nm)
    for (int il = 0; il < hp->n_layer; il++) {
        vx_layer *l = &m->layers[il];
        if ((st = bind(L, &l->attn_norm, NAME("attn_norm.weight"), true, E, 1, 0))) return st;
        if ((st = bind(L, &l->wqkv, NAME("attn_qkv.weight"), false, E, QD + 2 * KD, 0))) return st;
        if (l->wqkv.data && !m->arch->fused_qkv_ok)
            return vx_seterr(L->err, L->err_size, VX_EUNSUPPORTED,
                             "fused attn_qkv is not expected for architecture %s", m->arch->name);
        if (il == 0) hp->fused_qkv = l->wqkv.data != NULL;
        if (hp->fused_qkv != (l->wqkv.data != NULL))
            return vx_seterr(L->err, L->err_size, VX_EFORMAT,
                             "layer %d: attn_qkv present in some layers only", il);
        if (!hp->fused_qkv) {
            if ((st = bind(L, &l->wq, NAME("attn_q.weight"), true, E, QD, 0))) return st;
            if ((st = bind(L, &l->wk, NAME("attn_k.weight"), true, E, KD, 0))) return st;
            if ((st = bind(L, &l->wv, NAME("attn_v.weight"), true, E, KD, 0))) return st;
            if ((st = bind(L, &l->bq, NAME("attn_q.bias"), false, QD, 1, 0))) return st;
            if ((st = bind(L, &l->bk, NAME("attn_k.bias"), false, KD, 1, 0))) return st;
            if ((st = bind(L, &l->bv, NAME("attn_v.bias"), false, KD, 1, 0))) return st;
        } else {
            if ((st = bind(L, &l->bqkv, NAME("attn_qkv.bias"), false, QD + 2 * KD, 1, 0)))
                return st;
        }
        if ((st = bind(L, &l->wo, NAME("attn_output.weight"), true, QD, E, 0))) return st;
        if ((st = bind(L, &l->bo, NAME("attn_output.bias"), false, E, 1, 0))) return st;
        if ((st = bind(L, &l->q_norm, NAME("attn_q_norm.weight"), m->arch->gemma3, hp->head_dim, 1, 0)))
            return st;
        if ((st = bind(L, &l->k_norm, NAME("attn_k_norm.weight"), m->arch->gemma3, hp->head_dim, 1, 0)))
            return st;
        /* gpt-oss: the FFN's input norm is post_attention_norm */
        const bool oss = m->arch->gpt_oss;
        if ((st = bind(L, &l->ffn_norm, NAME(oss ? "post_attention_norm.weight" : "ffn_norm.weight"), true, E, 1, 0)))
            return st;
        const bool g2 = m->arch->gemma2;
        if (!oss && ((st = bind(L, &l->attn_post_norm, NAME("post_attention_norm.weight"), g2, E, 1, 0)) ||
                     (st = bind(L, &l->ffn_post_norm, NAME("post_ffw_norm.weight"), g2, E, 1, 0))))
            return st;
        if (oss && ((st = bind(L, &l->attn_sinks, NAME("attn_sinks.weight"), true, hp->n_head, 1, 0)) ||
                    (st = need_f32(L, &l->attn_sinks))))
            return st;
        if (m->arch->bitnet) {
            /* the sub-norms, and the scales llama.cpp reads when a file has them */
            vx_weight *sc[7] = {&l->wq_s, &l->wk_s, &l->wv_s, &l->wo_s, &l->ffn_gate_s, &l->ffn_up_s, &l->ffn_down_s};
            static const char *const scn[7] = {"attn_q.scale", "attn_k.scale",   "attn_v.scale", "attn_output.scale",
                                               "ffn_gate.scale", "ffn_up.scale", "ffn_down.scale"};
            if ((st = bind(L, &l->attn_sub_norm, NAME("attn_sub_norm.weight"), true, QD, 1, 0)) ||
                (st = bind(L, &l->ffn_sub_norm, NAME("ffn_sub_norm.weight"), true, F, 1, 0)) ||
                (st = need_f32(L, &l->attn_sub_norm)) || (st = need_f32(L, &l->ffn_sub_norm)))
                return st;
            for (int i = 0; i < 7; i++) {
                if ((st = bind(L, sc[i], NAME(scn[i]), false, 1, 1, 0)) || (st = need_f32(L, sc[i]))) return st;
                if (sc[i]->data && !isfinite(vx_weight_scale(sc[i])))
                    return vx_seterr(L->err, L->err_size, VX_EFORMAT, "tensor '%s' is %g; a scale must be finite",
                                     sc[i]->name, (double)vx_weight_scale(sc[i]));
            }
        }
        const vx_weight *f32s[] = {&l->attn_norm, &l->bq, &l->bk,        &l->bv,        &l->bqkv,          &l->bo,
                                   &l->q_norm,    &l->k_norm, &l->ffn_norm, &l->attn_post_norm, &l->ffn_post_norm};
        for (size_t i = 0; i < sizeof f32s / sizeof f32s[0]; i++)
            if ((st = need_f32(L, f32s[i]))) return st;
        if (hp->n_expert > 0) {
            const int64_t X = hp->n_expert;
            if ((st = bind(L, &l->ffn_gate_inp, NAME("ffn_gate_inp.weight"), true, E, X, 0)))
                return st;
            if ((st = bind(L, &l->ffn_gate_exps, NAME("ffn_gate_exps.weight"), true, E, F, X)))
                return st;
            if ((st = bind(L, &l->ffn_up_exps, NAME("ffn_up_exps.weight"), true, E, F, X)))
                return st;
            if ((st = bind(L, &l->ffn_down_exps, NAME("ffn_down_exps.weight"), true, F, E, X)))
                return st;
            if (oss && ((st = bind(L, &l->ffn_gate_inp_b, NAME("ffn_gate_inp.bias"), true, X, 1, 0)) ||
                        (st = bind(L, &l->ffn_gate_exps_b, NAME("ffn_gate_exps.bias"), true, F, X, 0)) ||
                        (st = bind(L, &l->ffn_up_exps_b, NAME("ffn_up_exps.bias"), true, F, X, 0)) ||
                        (st = bind(L, &l->ffn_down_exps_b, NAME("ffn_down_exps.bias"), true, E, X, 0)) ||
                        (st = need_f32(L, &l->ffn_gate_inp_b)) || (st = need_f32(L, &l->ffn_gate_exps_b)) ||
                        (st = need_f32(L, &l->ffn_up_exps_b)) || (st = need_f32(L, &l->ffn_down_exps_b))))
                return st;
            const int64_t FS = hp->n_ff_shexp;
            /* Granite MoE's shared expert has no gate (a file with one is refused, as llama.cpp refuses it) */
            const bool gated = !strcmp(m->arch->name, "qwen2moe");
            if (FS > 0 && ((gated && ((st = bind(L, &l->ffn_gate_inp_shexp, NAME("ffn_gate_inp_shexp.weight"), true, E,
                                                 1, 0)) ||
                                      (st = need_f32(L, &l->ffn_gate_inp_shexp)))) ||
                           (st = bind(L, &l->ffn_gate_shexp, NAME("ffn_gate_shexp.weight"), true, E, FS, 0)) ||
                           (st = bind(L, &l->ffn_up_shexp, NAME("ffn_up_shexp.weight"), true, E, FS, 0)) ||
                           (st = bind(L, &l->ffn_down_shexp, NAME("ffn_down_shexp.weight"), true, FS, E, 0))))
                return st;
        } else {
            if ((st = bind(L, &l->ffn_gate, NAME("ffn_gate.weight"), false, E, F, 0))) return st;
            if (!l->ffn_gate.data && m->arch->fused_gate_up_ok) {
                if ((st = bind(L, &l->ffn_up, NAME("ffn_up.weight"), true, E, 2 * F, 0)))
                    return st;
                hp->fused_gate_up = true;
            } else {
                if (!l->ffn_gate.data)
                    return vx_seterr(L->err, L->err_size, VX_EFORMAT, "missing tensor '%s'",
                                     NAME("ffn_gate.weight"));
                if ((st = bind(L, &l->ffn_up, NAME("ffn_up.weight"), true, E, F, 0))) return st;
            }
            if ((st = bind(L, &l->ffn_down, NAME("ffn_down.weight"), true, F, E, 0))) return st;
        }
        const vx_weight *mats[] = {&l->wq,           &l->wk,          &l->wv,           &l->wqkv,
                                   &l->wo,           &l->ffn_gate,    &l->ffn_up,       &l->ffn_down,
                                   &l->ffn_gate_inp, &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps,
                                   &l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if ((st = need_matmul(L, mats[i]))) return st;
    }
#undef NAME
    /* the output matrix (token_embd itself when tied) */
    if ((st = need_matmul(L, &m->output))) return st;
    return unused_tensors(L);
}

/* Reads the whole file into memory (use_mmap = false), with progress. */
static vx_status read_whole(vx_model *m, const char *path, const vx_model_params *params,
                            char *err, size_t err_size) {
    FILE *f = fopen(path, "rb");
    if (!f) return vx_seterr(err, err_size, VX_EIO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return vx_seterr(err, err_size, VX_EIO, "%s: not a regular file", path);
    }
    const size_t size = (size_t)sb.st_size;
    if (posix_memalign(&m->file_buf, 64, size ? size : 64) != 0) {
        fclose(f);
        return vx_seterr(err, err_size, VX_ENOMEM, "%s: cannot allocate %zu bytes", path, size);
    }
    const size_t chunk = (size_t)64 << 20;
    for (size_t off = 0; off < size;) {
        size_t want = VX_MIN(chunk, size - off);
        size_t got = fread((uint8_t *)m->file_buf + off, 1, want, f);
        if (got != want) {
            fclose(f);
            return vx_seterr(err, err_size, VX_EIO, "%s: read failed at offset %zu", path, off + got);
        }
        off += got;
        if (params->progress && !params->progress((float)off / (float)size * 0.99f, params->progress_user_data)) {
            fclose(f);
            return vx_seterr(err, err_size, VX_ECANCELED, "load canceled");
        }
    }
    fclose(f);
    vx_status st = vx_gguf_open_mem(m->file_buf, size, &m->gguf, err, err_size);
    if (st && err && err_size) {
        char tmp[VX_ERRMSG_MAX];
        snprintf(tmp, sizeof tmp, "%s", err);
        snprintf(err, err_size, "%s: %s", path, tmp);
    }
    return st;
}

/* check_tensors: every weight must dequantize to finite values (a NaN scale
 * in one block would silently poison every output). */
static vx_status check_tensors(vx_model *m, char *err, size_t err_size) {
    float *buf = NULL;
    size_t cap = 0;
    for (int64_t i = 0; i < vx_gguf_n_tensors(m->gguf); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(m->gguf, i);
        const vx_type_traits *tr = vx_type_get_traits(t->type);
        const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        /* an empty tensor may still claim a huge row (the reader accepts
         * [2^40, 0]): nothing to check, and no row buffer to size by it */
        if (!tr || !tr->to_float || t->ne[0] <= 0 || rows <= 0) continue;
        const size_t ne0 = (size_t)t->ne[0], rs = vx_row_size((vx_type)t->type, t->ne[0]);
        if (ne0 > cap) {
            free(buf);
            cap = ne0;
            buf = malloc(cap * sizeof *buf);
            if (!buf) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        }
        for (int64_t r = 0; r < rows; r++) {
            tr->to_float((const uint8_t *)t->data + (size_t)r * rs, buf, (int64_t)ne0);
            for (size_t j = 0; j < ne0; j++)
                if (!isfinite(buf[j])) {
                    free(buf);
                    return vx_seterr(err, err_size, VX_EFORMAT,
                                     "tensor '%s' has a non-finite value at row %lld, column %zu",
                                     t->name, (long long)r, j);
                }
        }
    }
    free(buf);
    return VX_OK;
}

/* With a progress callback, reads every page of tensor data once (in file
 * order, with read-ahead advice) so the first forward does not stall on a
 * cold page cache and the user sees how far a large load has come. */
static vx_status prefault(vx_model *m, const vx_model_params *params, char *err,
                          size_t err_size) {
    /* tensor by tensor: an imported model's tensors lie in several
     * mappings (safetensors shards) and copies, not in one range */
    const int64_t nt = vx_gguf_n_tensors(m->gguf);
    uint64_t total = 0, done = 0, next = 0;
    for (int64_t i = 0; i < nt; i++) total += vx_gguf_tensor_at(m->gguf, i)->size;
    if (total == 0) return VX_OK;
    const size_t page = 4096;
    const uint64_t chunk = (uint64_t)64 << 20;
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < nt; i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(m->gguf, i);
        if (!t->size) continue;
        const uint8_t *p = t->data;
        uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
        madvise((void *)start, (size_t)((uintptr_t)(p + t->size) - start), MADV_WILLNEED);
        for (uint64_t o = 0; o < t->size; o += page) sink ^= p[o];
        sink ^= p[t->size - 1];
        done += t->size;
        if (done >= next || i == nt - 1) {
            next = done + chunk;
            if (!params->progress((float)done / (float)total * 0.99f, params->progress_user_data))
                return vx_seterr(err, err_size, VX_ECANCELED, "load canceled");
        }
    }
    (void)sink;
    return VX_OK;
}

static vx_status model_share(vx_model *m, const vx_model_params *params, int32_t *l0, int32_t *l1,
                             int32_t **first, char *err, size_t err_size);

/* Loads layers [l0, l1) of path (l1 < 0: process 0 of params->dist, or
 * the whole model: the shares are decided once n_layer is known). */
static vx_status model_load(const char *path, const vx_model_params *params, int32_t l0, int32_t l1,
                            vx_model **out, char *err, size_t err_size) {
    vx_model_params defp = vx_model_default_params();
    if (!params) params = &defp;
    if (!out || !path) return vx_seterr(err, err_size, VX_EINVAL, "path and out are required");
    *out = NULL;
    vx_model *m = calloc(1, sizeof *m);
    if (!m) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    m->dist_id = -1;
    int32_t *first = NULL; /* process 0 of a group: every process's first layer */
    /* a Hugging Face model directory is imported (mapped safetensors) */
    m->imported = vx_hf_is_model_dir(path);
    vx_status st = m->imported ? vx_hf_open(path, &m->gguf, err, err_size)
                   : params->use_mmap       ? vx_gguf_open(path, &m->gguf, err, err_size)
                                            : read_whole(m, path, params, err, err_size);
    if (st) goto fail;
    if (params->progress && !params->progress(0.0f, params->progress_user_data)) {
        st = vx_seterr(err, err_size, VX_ECANCELED, "load canceled");
        goto fail;
    }
    const char *arch = NULL;
    if (vx_gguf_get_str(m->gguf, "general.architecture", &arch) != 1) {
        st = vx_seterr(err, err_size, VX_EFORMAT,
                       "%s: missing or invalid general.architecture", path);
        goto fail;
    }
    const char *name = NULL;
    if (vx_gguf_get_str(m->gguf, "general.name", &name) == 1)
        snprintf(m->name, sizeof m->name, "%s", name);
    st = vx_vocab_load(m->gguf, &m->vocab, err, err_size);
    if (st) goto fail;
    m->arch = arch_find(arch);
    if (params->vocab_only) {
        *out = m;
        return VX_OK;
    }
    if (!m->arch) {
        st = vx_seterr(err, err_size, VX_EUNSUPPORTED,
                       "%s: architecture '%s' is not supported (supported: llama, mistral, "
                       "qwen2, qwen2moe, qwen3, qwen3moe, phi3, gemma, gemma2, gemma3, granite, granitemoe, bert, "
                       "nomic-bert)",
                       path, arch);
        goto fail;
    }
    loader L = {m, err, err_size, arch};
    m->hp.n_vocab = vx_vocab_n_tokens(m->vocab);
    if (!(st = load_hparams(&L))) st = model_share(m, params, &l0, &l1, &first, err, err_size);
    if (!st) st = load_weights(&L);
    if (st) {
        /* prefix the file name once */
        char tmp[VX_ERRMSG_MAX];
        if (err && err_size) {
            snprintf(tmp, sizeof tmp, "%s", err);
            snprintf(err, err_size, "%s: %s", path, tmp);
        }
        goto fail;
    }
    for (int64_t i = 0; i < vx_gguf_n_tensors(m->gguf); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(m->gguf, i);
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        m->n_bytes += t->size;
    }
    /* a share of the layers leaves the others' pages alone */
    const bool whole = m->l0 == 0 && m->l1 == m->hp.n_layer;
    if (params->progress && params->use_mmap && whole && (st = prefault(m, params, err, err_size))) goto fail;
    if (params->check_tensors && (st = check_tensors(m, err, err_size))) goto fail;
    if (params->repack && (st = vx_model_repack(m, err, err_size))) goto fail;
    if (params->progress && !params->progress(1.0f, params->progress_user_data)) {
        st = vx_seterr(err, err_size, VX_ECANCELED, "load canceled");
        goto fail;
    }
    /* process 0: the others load their shares */
    if (first && (st = vx_dist_model_load(params->dist, path, params, first, &m->dist_id, err, err_size)))
        goto fail;
    free(first);
    *out = m;
    return VX_OK;
fail:
    free(first);
    vx_model_free(m);
    return st;
}

/* Which layers this process holds: [l0, l1) as given, or process 0's
 * share of a group (first[]: every process's, for the others), or all. */
static vx_status model_share(vx_model *m, const vx_model_params *params, int32_t *l0, int32_t *l1,
                             int32_t **first, char *err, size_t err_size) {
    const int32_t n = m->hp.n_layer;
    vx_dist *d = params->dist;
    if (*l1 < 0 && vx_dist_multi(d)) {
        if (vx_dist_rank(d) != 0)
            return vx_seterr(err, err_size, VX_EINVAL, "process %d of the group cannot load models itself: "
                             "it runs process 0's (vx_dist_serve)", vx_dist_rank(d));
        if (m->arch->encoder)
            return vx_seterr(err, err_size, VX_EUNSUPPORTED, "%s is an encoder: pipeline parallelism runs "
                             "decoder models only", m->arch->name);
        *first = malloc(((size_t)vx_dist_size(d) + 1) * sizeof **first);
        if (!*first) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        vx_status st = vx_dist_split(d, n, params->layer_split, *first, err, err_size);
        if (st) return st;
        *l0 = (*first)[0], *l1 = (*first)[1];
        m->dist = d;
    } else if (*l1 < 0) {
        *l0 = 0, *l1 = n;
    } else {
        if (*l0 < 0 || *l0 >= *l1 || *l1 > n)
            return vx_seterr(err, err_size, VX_EINVAL, "layers [%d, %d) of a model of %d", *l0, *l1, n);
        m->dist = d;
    }
    m->l0 = *l0, m->l1 = *l1;
    return VX_OK;
}

vx_status vx_model_load(const char *path, const vx_model_params *params, vx_model **out, char *err,
                        size_t err_size) {
    return model_load(path, params, 0, -1, out, err, err_size);
}

vx_status vx_model_load_share(const char *path, const vx_model_params *params, int32_t l0, int32_t l1,
                              vx_model **out, char *err, size_t err_size) {
    return model_load(path, params, l0, l1, out, err, err_size);
}

void vx_model_free(vx_model *m) {
    if (!m) return;
    if (m->dist_id >= 0 && vx_dist_rank(m->dist) == 0) vx_dist_model_free(m->dist, m->dist_id);
    vx_vocab_free(m->vocab);
    vx_gguf_close(m->gguf);
    free(m->file_buf);
    if (m->pack_buf) munmap(m->pack_buf, m->pack_size);
    free(m->layers);
    free(m);
}

const vx_vocab *vx_model_get_vocab(const vx_model *m) { return m->vocab; }
const char *vx_model_arch(const vx_model *m) { return m->arch ? m->arch->name : "?"; }
int32_t vx_model_n_embd(const vx_model *m) { return m->hp.n_embd; }
int32_t vx_model_n_layer(const vx_model *m) { return m->hp.n_layer; }
int32_t vx_model_n_ctx_train(const vx_model *m) { return m->hp.n_ctx_train; }
vx_pooling vx_model_pooling(const vx_model *m) { return (vx_pooling)m->hp.pooling; }
uint64_t vx_model_n_params(const vx_model *m) { return m->n_params; }
uint64_t vx_model_size(const vx_model *m) { return m->n_bytes; }
bool vx_model_is_encoder(const vx_model *m) { return m->arch && m->arch->encoder; }
int32_t vx_model_n_repacked(const vx_model *m, uint64_t *bytes) {
    if (bytes) *bytes = m->pack_size;
    return m->n_packed;
}

void vx_weight_row_f32(const vx_weight *w, int64_t r, float *dst) {
    const vx_type_traits *tr = vx_type_get_traits(w->type);
    tr->to_float((const uint8_t *)w->data + (size_t)r * w->row_size, dst, w->ne[0]);
}

/* Float weights (F32/F16/BF16): their matmuls run on FMA (or AMX bf16),
 * not on int8 dot products. */
static bool float_weight(const vx_weight *w) {
    return w->type == VX_TYPE_F32 || w->type == VX_TYPE_F16 || w->type == VX_TYPE_BF16;
}

static void cost_add(const vx_weight *w, double frac, uint64_t *bytes, uint64_t *flops, uint64_t *fflops) {
    if (!w->data) return;
    const uint64_t f = (uint64_t)(2.0 * (double)w->ne[0] * (double)w->ne[1] * (double)w->ne[2] * frac);
    *bytes += (uint64_t)((double)w->mat_size * (double)w->ne[2] * frac);
    *flops += f;
    if (float_weight(w)) *fflops += f;
}

static void token_cost(const vx_model *m, uint64_t *bytes, uint64_t *flops, uint64_t *fflops) {
    uint64_t b = 0, f = 0, ff = 0;
    if (m->layers) {
        const double used = m->hp.n_expert ? (double)m->hp.n_expert_used / m->hp.n_expert : 1.0;
        for (int il = 0; il < m->hp.n_layer; il++) {
            const vx_layer *l = &m->layers[il];
            const vx_weight *dense[] = {&l->wq,         &l->wk,         &l->wv,           &l->wqkv,
                                        &l->wo,         &l->ffn_gate,   &l->ffn_up,       &l->ffn_down,
                                        &l->ffn_gate_inp, &l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp};
            for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) cost_add(dense[i], 1.0, &b, &f, &ff);
            cost_add(&l->ffn_gate_exps, used, &b, &f, &ff);
            cost_add(&l->ffn_up_exps, used, &b, &f, &ff);
            cost_add(&l->ffn_down_exps, used, &b, &f, &ff);
        }
        cost_add(&m->output, 1.0, &b, &f, &ff);
    }
    if (bytes) *bytes = b;
    if (flops) *flops = f;
    if (fflops) *fflops = ff;
}

void vx_model_token_cost(const vx_model *m, uint64_t *bytes, uint64_t *flops) { token_cost(m, bytes, flops, NULL); }

uint64_t vx_model_token_float_flops(const vx_model *m) {
    uint64_t ff;
    token_cost(m, NULL, NULL, &ff);
    return ff;
}

int32_t vx_model_meta_str(const vx_model *m, const char *key, char *buf, size_t size) {
    const vx_gguf_kv *kv = vx_gguf_find(m->gguf, key);
    if (!kv) return -1;
    switch (kv->type) {
    case VX_GGUF_STRING: return snprintf(buf, size, "%s", kv->v.str.s);
    case VX_GGUF_BOOL: return snprintf(buf, size, "%s", kv->v.b ? "true" : "false");
    case VX_GGUF_FLOAT32: case VX_GGUF_FLOAT64: return snprintf(buf, size, "%g", kv->v.f64);
    case VX_GGUF_INT8: case VX_GGUF_INT16: case VX_GGUF_INT32: case VX_GGUF_INT64:
        return snprintf(buf, size, "%" PRId64, kv->v.i64);
    case VX_GGUF_ARRAY:
        return snprintf(buf, size, "[%s x %" PRIu64 "]", vx_gguf_type_name(kv->v.arr.type),
                        kv->v.arr.n);
    default: return snprintf(buf, size, "%" PRIu64, kv->v.u64);
    }
}

/* snprintf-style appender: keeps counting past the end of buf. */
typedef struct sbuf {
    char *p;
    size_t size, len;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->len < b->size ? b->size - b->len : 0;
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) b->len += (size_t)n;
}

int32_t vx_model_describe(const vx_model *m, char *buf, size_t size) {
    sbuf b = {buf, size, 0};
    if (buf && size) buf[0] = 0;
    const vx_hparams *hp = &m->hp;
    const char *arch = "?";
    vx_gguf_get_str(m->gguf, "general.architecture", &arch);
    sb_printf(&b, "name            %s\n", m->name[0] ? m->name : "(none)");
    sb_printf(&b, "architecture    %s%s\n", arch, m->arch ? "" : " (not supported)");
    sb_printf(&b, "gguf version    %u, %" PRId64 " tensors, %" PRId64 " metadata keys\n",
              vx_gguf_version(m->gguf), vx_gguf_n_tensors(m->gguf), vx_gguf_n_kv(m->gguf));
    sb_printf(&b, "file size       %.2f MiB (tensor data %.2f MiB)\n",
              (double)vx_gguf_file_size(m->gguf) / (1 << 20), (double)m->n_bytes / (1 << 20));
    sb_printf(&b, "parameters      %.3f M (%.2f bits per weight)\n", (double)m->n_params / 1e6,
              m->n_params ? 8.0 * (double)m->n_bytes / (double)m->n_params : 0.0);
    if (m->layers) {
        sb_printf(&b, "n_vocab         %d\n", hp->n_vocab);
        sb_printf(&b, "n_embd          %d\n", hp->n_embd);
        sb_printf(&b, "n_layer         %d\n", hp->n_layer);
        sb_printf(&b, "n_head          %d (kv %d, head_dim %d, GQA group %d)\n", hp->n_head,
                  hp->n_head_kv, hp->head_dim, hp->n_head / hp->n_head_kv);
        sb_printf(&b, "n_ff            %d%s\n", hp->n_ff,
                  hp->fused_gate_up ? " (fused gate/up)" : hp->n_expert ? " (per expert)" : "");
        if (hp->n_expert) {
            sb_printf(&b, "experts         %d, %d used per token (weights %s)", hp->n_expert, hp->n_expert_used,
                      hp->moe_norm ? "renormalized" : "as the softmax gives them");
            if (hp->n_ff_shexp)
                sb_printf(&b, ", a shared expert of %d%s", hp->n_ff_shexp,
                          m->layers && m->layers[0].ffn_gate_inp_shexp.data ? " (sigmoid-gated)" : "");
            sb_printf(&b, "\n");
        }
        sb_printf(&b, "n_ctx_train     %d\n", hp->n_ctx_train);
        if (m->arch->abs_pos)
            sb_printf(&b, "positions       learned (position_embd)\n");
        else
            sb_printf(&b, "rope            %s, base %g, n_rot %d%s%s\n",
                      m->arch->rope == VX_ROPE_NEOX ? "neox" : "norm", hp->rope_base, hp->n_rot,
                      m->rope_freqs.data ? ", rope_freqs factors" : "",
                      hp->rope_scale != 1.0f ? ", linear scaling" : hp->yarn ? ", YaRN scaling" : "");
        if (hp->yarn)
            sb_printf(&b, "yarn            factor %g, ramp over pairs %g..%g, ext %g, cos/sin x%.4f\n",
                      (double)hp->yarn_factor, (double)hp->yarn_lo, (double)hp->yarn_hi, (double)hp->yarn_ext,
                      (double)hp->yarn_mscale);
        if (hp->n_swa > 0 && hp->swa_period > 1) {
            sb_printf(&b, "sliding window  %d tokens on %d of every %d layers", hp->n_swa, hp->swa_period - 1,
                      hp->swa_period);
            if (hp->rope_dual) sb_printf(&b, " (their rope: base %g, unscaled)", hp->rope_base_swa);
            sb_printf(&b, "\n");
        }
        sb_printf(&b, "%s  %g\n", m->arch->encoder ? "layer_norm_eps" : "rms_norm_eps  ", hp->rms_eps);
        if (!strncmp(m->arch->name, "granite", 7))
            sb_printf(&b, "multipliers     embeddings x%g, block outputs x%g, scores x%g, logits /%g\n",
                      hp->embd_scale != 0 ? hp->embd_scale : 1.0, hp->residual_scale, hp->attn_scale,
                      hp->logit_scale);
        sb_printf(&b, "attention       %s%s%s%s%s\n", hp->fused_qkv ? "fused qkv" : "separate q/k/v",
                  m->layers[0].bq.data || m->layers[0].bqkv.data ? ", biases" : "",
                  m->layers[0].q_norm.data ? ", q/k norm" : "",
                  m->layers[0].attn_sub_norm.data ? ", output sub-norm" : "",
                  m->layers[0].attn_sinks.data ? ", a learned sink per head" : "");
        if (hp->n_layer > 0 && (m->layers[0].ffn_gate.data || m->layers[0].ffn_gate_exps.data || hp->fused_gate_up))
            sb_printf(&b, "ffn             %s gated%s%s%s\n",
                      hp->ffn_act == VX_FFN_GELU          ? "GELU"
                      : hp->ffn_act == VX_FFN_RELU2       ? "squared-ReLU"
                      : hp->ffn_act == VX_FFN_SWIGLU_OAI ? "clamped SiLU (gpt-oss: +-7, sigmoid(1.702 g), u + 1)"
                                                          : "SiLU",
                      m->layers[0].ffn_gate_exps_b.data ? ", biased router and experts" : "",
                      m->layers[0].ffn_sub_norm.data ? ", sub-norm before ffn_down" : "",
                      m->layers[0].wq_s.data ? "; projection output scales" : "");
        if (m->arch->encoder)
            sb_printf(&b, "output          none: an encoder (embeddings only, attention over the whole text), "
                          "pooling %s%s\n",
                      hp->pooling >= 0 ? vx_pooling_name((vx_pooling)hp->pooling) : "unspecified",
                      m->cls.data ? ", ranking head (cls)" : "");
        else
            sb_printf(&b, "output          %s\n", hp->tied_output ? "tied to token_embd" : "output.weight");
    }
    /* tensor type histogram */
    int64_t count[VX_TYPE_COUNT] = {0};
    uint64_t bytes[VX_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < vx_gguf_n_tensors(m->gguf); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(m->gguf, i);
        if (t->type >= 0 && t->type < VX_TYPE_COUNT) {
            count[t->type]++;
            bytes[t->type] += t->size;
        }
    }
    sb_printf(&b, "tensor types   ");
    for (int t = 0; t < VX_TYPE_COUNT; t++)
        if (count[t])
            sb_printf(&b, " %s x%" PRId64 " (%.2f MiB)", vx_type_name(t), count[t],
                      (double)bytes[t] / (1 << 20));
    sb_printf(&b, "\n");
    return (int32_t)b.len;
}
