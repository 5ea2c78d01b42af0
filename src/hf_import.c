/*
 * hf_import.c - a Hugging Face model directory as a GGUF reader (see
 * hf_import.h): config.json to the architecture's metadata keys, the
 * safetensors tensors renamed (and Llama's Q/K permuted), the tokenizer
 * through hf_tokenizer.c; the result is a detached reader
 * (vx_gguf_writer_open_reader) whose tensors point into the mapped
 * safetensors files.
 *
 * Checkpoints: one model.safetensors, or the shards that
 * model.safetensors.index.json's weight_map names (other *.safetensors
 * files in the directory, such as Mistral's consolidated.safetensors, are
 * not read). Architectures (config.json "architectures"): LlamaForCausalLM
 * and MistralForCausalLM (GGUF "llama"), Qwen2ForCausalLM, Qwen3ForCausalLM,
 * Phi3ForCausalLM, MixtralForCausalLM ("llama" with experts: each layer's
 * experts are copied into the stacked 3-D tensors GGUF keeps),
 * GemmaForCausalLM (its norms stored as 1 + w, as the converter does), GraniteForCausalLM (Llama's
 * tensors, its multipliers as the converter's keys), Qwen2MoeForCausalLM (Qwen3-MoE's experts, a
 * shared expert and its gate), GptOssForCausalLM ("gpt-oss": its MXFP4 experts
 * repacked into GGUF's MXFP4, gpt_oss_expert). Weights: F32,
 * F16, BF16; FP8 (as BF16), GPTQ and AWQ int4 (as Q4_0 / Q4_1). Tokenizers: tokenizer.json
 * (byte-level BPE, or byte-fallback BPE as SentencePiece), or for Llama-family and Phi-3 models tokenizer.model
 * (SentencePiece), which the converter prefers where both exist; the chat
 * template of chat_template.jinja or chat_template.json over
 * tokenizer_config.json's.
 */
#include "hf_import.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "model.h"
#include "quant.h"
#include "safetensors.h"

#define HF_MAX_JSON ((size_t)1 << 30)

static const struct {
    const char *hf, *arch;
    bool permute_qk; /* GGUF "llama" rotates adjacent pairs: HF's halves are permuted */
    bool spm_first;  /* tokenizer.model before tokenizer.json, as the converter reads them */
    int gemma;       /* 1: Gemma (norms stored as 1 + w, tied by default, GELU FFN); 2: Gemma 2 (also caps,
                      * window, post norms); 3: Gemma 3 (Gemma 2's norms, q/k norms, a window pattern) */
} k_archs[] = {
    {"LlamaForCausalLM", "llama", true, true, 0},         {"MistralForCausalLM", "llama", true, true, 0},
    {"Qwen2ForCausalLM", "qwen2", false, false, 0},       {"Qwen3ForCausalLM", "qwen3", false, false, 0},
    {"Phi3ForCausalLM", "phi3", false, true, 0},          {"MixtralForCausalLM", "llama", true, true, 0},
    {"GemmaForCausalLM", "gemma", false, true, 1},        {"Gemma2ForCausalLM", "gemma2", false, true, 2},
    {"Gemma3ForCausalLM", "gemma3", false, true, 3},      {"Qwen3MoeForCausalLM", "qwen3moe", false, false, 0},
    {"GraniteForCausalLM", "granite", true, false, 0},    {"Qwen2MoeForCausalLM", "qwen2moe", false, false, 0},
    {"GptOssForCausalLM", "gpt-oss", false, false, 0},
    /* Gemma 3's 4B and larger checkpoints: the text model of a multimodal
     * one (text_config; its tensors under language_model, the vision tower
     * and projector left out, as for a GGUF file and its mmproj) */
    {"Gemma3ForConditionalGeneration", "gemma3", false, true, 3},
};

typedef struct hf_ctx {
    vx_gguf_writer *w;
    vx_safetensors **st;
    int n_st;
    void **bufs; /* copies the tensors point to */
    size_t n_bufs, cap_bufs;
    /* Mixtral: each layer's experts stacked into 3-D gate / down / up
     * tensors ([n_layer][3]), and which experts have arrived */
    struct moe_stack {
        uint8_t *data;
        int type;
        int64_t ne0, ne1;
        uint8_t *have;
    } *moe;
} hf_ctx;

static void hf_release(void *p) {
    hf_ctx *c = p;
    if (!c) return;
    vx_gguf_writer_free(c->w);
    for (int i = 0; i < c->n_st; i++) vx_st_close(c->st[i]);
    free(c->st);
    for (size_t i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
    free(c->bufs);
    free(c->moe); /* its data and flags are in bufs */
    free(c);
}

/* A buffer owned by the import (freed with the reader). */
static void *own(hf_ctx *c, size_t size) {
    if (c->n_bufs == c->cap_bufs) {
        size_t cap = c->cap_bufs ? 2 * c->cap_bufs : 64;
        void **b = realloc(c->bufs, cap * sizeof *b);
        if (!b) return NULL;
        c->bufs = b;
        c->cap_bufs = cap;
    }
    void *p = aligned_alloc(64, (size + 63) / 64 * 64 + 64);
    if (p) c->bufs[c->n_bufs++] = p;
    return p;
}

/* Adds the GGUF tensor name (from HF tensor hf_name; data borrowed). */
static vx_status put_tensor(hf_ctx *c, const char *hf_name, const char *name, int type, uint32_t n_dims,
                            const int64_t *ne, const void *data, uint64_t size, char *err, size_t err_size) {
    const vx_status st = vx_gguf_add_tensor(c->w, name, type, n_dims, ne, data, size, true);
    if (st == VX_EINVAL)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' (as %s) appears twice or is malformed", hf_name, name);
    return st ? vx_seterr(err, err_size, st, "adding tensor %s failed", name) : VX_OK;
}

/* The file dir/name as a NUL-terminated string; *missing (if given) set
 * instead of an error when it does not exist. vx_map_file refuses what is
 * not a regular file without waiting on it (a FIFO named config.json hung
 * the load). */
static vx_status read_text(const char *dir, const char *name, char **out, size_t *len, bool *missing, char *err,
                           size_t err_size) {
    char path[4096];
    *out = NULL;
    *len = 0;
    if (missing) *missing = false;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (missing && access(path, F_OK) != 0 && errno == ENOENT) {
        *missing = true;
        return VX_OK;
    }
    const void *p;
    uint64_t size;
    vx_status st = vx_map_file(path, 1, name, &p, &size, err, err_size);
    if (st) return st;
    char *buf = size <= HF_MAX_JSON ? malloc((size_t)size + 1) : NULL;
    if (buf) {
        memcpy(buf, p, (size_t)size);
        buf[size] = 0;
    }
    munmap((void *)p, (size_t)size);
    if (!buf)
        return size > HF_MAX_JSON ? vx_seterr(err, err_size, VX_EIO, "%s: larger than 1 GiB", path)
                                  : vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    *out = buf;
    *len = (size_t)size;
    return VX_OK;
}

bool vx_hf_is_model_dir(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* ------------------------------------------------------------ config */

typedef struct hf_hparams {
    const char *arch;
    bool permute_qk;
    int64_t n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim, n_ctx;
    int64_t n_expert, n_expert_used;
    int64_t n_ff_exp;     /* Qwen3-MoE: an expert's FFN length (moe_intermediate_size; 0: n_ff) */
    int64_t n_ff_shexp;   /* Qwen2-MoE: the shared expert's (shared_expert_intermediate_size) */
    int64_t fp8_block[2]; /* quantization_config.weight_block_size (rows, columns) */
    int64_t gptq_group;   /* GPTQ / AWQ int4: group size (0: neither) */
    bool gptq_v2;         /* zeros stored as they are (v1 stores zero - 1) */
    bool awq;             /* AWQ's layout (codes packed along the output) */
    bool spm_first;       /* k_archs' */
    bool norm_plus_one;   /* Gemma: RMSNorm scales by 1 + w; GGUF stores 1 + w */
    bool gemma2;          /* k_archs': Gemma 2's four norms per layer (Gemma 2 and 3) */
    bool gemma3;
    bool text_of_mm;      /* Gemma3ForConditionalGeneration: config.json's text_config, tensors' prefixes */
    bool gpt_oss;         /* GptOssForCausalLM: MXFP4 experts stacked, gate and up interleaved (gpt_oss_experts) */
    bool tie;
} hf_hparams;

/* config[key] as an integer in [lo, hi]: 1 found, 0 absent (or null), or an error */
static int cfg_int(const cJSON *cfg, const char *key, int64_t lo, int64_t hi, int64_t *out, vx_status *st,
                   char *err, size_t err_size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi) {
        *st = vx_seterr(err, err_size, VX_EFORMAT, "config.json: %s must be an integer in [%lld, %lld]", key,
                        (long long)lo, (long long)hi);
        return -1;
    }
    *out = (int64_t)v->valuedouble;
    return 1;
}

static vx_status need_int(const cJSON *cfg, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err,
                          size_t err_size) {
    vx_status st = VX_OK;
    const int r = cfg_int(cfg, key, lo, hi, out, &st, err, err_size);
    if (r < 0) return st;
    if (r == 0) return vx_seterr(err, err_size, VX_EFORMAT, "config.json: %s is missing", key);
    return VX_OK;
}

static vx_status set_u32(vx_gguf_writer *w, const char *arch, const char *suffix, int64_t v) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return vx_gguf_set_u32(w, key, (uint32_t)v);
}

static vx_status set_f32(vx_gguf_writer *w, const char *arch, const char *suffix, double v) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return vx_gguf_set_f32(w, key, (float)v);
}

static double cfg_num(const cJSON *o, const char *key, double def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* config[key] as a finite number (absent or null: def); a string or other
 * type is an error, not the default */
static vx_status cfg_real(const cJSON *o, const char *key, double def, double *out, char *err, size_t err_size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = def;
    if (!v || cJSON_IsNull(v)) return VX_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: %s must be a number", key);
    *out = v->valuedouble;
    return VX_OK;
}

/* Decimal digits only ("0" or no leading zero), at most max; *end past them. */
static bool parse_index(const char *s, unsigned max, unsigned *out, const char **end) {
    unsigned long v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return false;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((v = v * 10 + (unsigned long)(*p - '0')) > max) return false;
    *out = (unsigned)v;
    *end = p;
    return true;
}

/* Llama 3.1's frequency factors (Meta's published rule), as the converter
 * stores them in rope_freqs.weight. */
static vx_status llama3_factors(hf_ctx *c, const cJSON *rs, double base, int64_t n_rot, char *err,
                                size_t err_size) {
    const double factor = cfg_num(rs, "factor", 8.0), lo_f = cfg_num(rs, "low_freq_factor", 1.0),
                 hi_f = cfg_num(rs, "high_freq_factor", 4.0),
                 old_ctx = cfg_num(rs, "original_max_position_embeddings", 8192.0);
    if (!(factor > 0) || !(lo_f > 0) || !(hi_f > lo_f) || !(old_ctx > 0))
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: rope_scaling (llama3) has invalid factors");
    float *f = own(c, (size_t)n_rot / 2 * sizeof *f);
    if (!f) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    const double lo_wl = old_ctx / lo_f, hi_wl = old_ctx / hi_f;
    for (int64_t i = 0; i < n_rot / 2; i++) {
        const double freq = 1.0 / pow(base, (double)(2 * i) / (double)n_rot), wl = 2 * M_PI / freq;
        double r;
        if (wl < hi_wl) r = 1.0;
        else if (wl > lo_wl) r = factor;
        else {
            const double smooth = (old_ctx / wl - lo_f) / (hi_f - lo_f);
            r = 1.0 / ((1 - smooth) / factor + smooth);
        }
        f[i] = (float)r;
    }
    const int64_t ne[1] = {n_rot / 2};
    return put_tensor(c, "rope_scaling", "rope_freqs.weight", VX_TYPE_F32, 1, ne, f, (uint64_t)(n_rot / 2) * 4, err,
                      err_size);
}

/* Qwen3MoeConfig: num_experts of moe_intermediate_size rows, every layer
 * sparse (decoder_sparse_step 1, no mlp_only_layers), the top-k weights
 * renormalized (norm_topk_prob: what vx, as llama.cpp, computes).
 * Qwen2MoeConfig (qwen2): the same, but the weights as the softmax gives
 * them (norm_topk_prob false, its default) and a shared expert of
 * shared_expert_intermediate_size rows. */
static vx_status qwen_moe_keys(const cJSON *cfg, hf_hparams *hp, bool qwen2, char *err, size_t err_size) {
    vx_status st = VX_OK;
    int64_t step = 1;
    if (cfg_int(cfg, "num_experts", 1, 1024, &hp->n_expert, &st, err, err_size) < 0 ||
        cfg_int(cfg, "decoder_sparse_step", 0, 1 << 20, &step, &st, err, err_size) < 0 ||
        (st = need_int(cfg, "moe_intermediate_size", 1, 1 << 22, &hp->n_ff_exp, err, err_size)))
        return st;
    const cJSON *only = cJSON_GetObjectItemCaseSensitive(cfg, "mlp_only_layers");
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(cfg, "norm_topk_prob");
    if (step != 1 || (only && !cJSON_IsNull(only) && (!cJSON_IsArray(only) || cJSON_GetArraySize(only) > 0)))
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "config.json: %s with dense layers (decoder_sparse_step %lld, mlp_only_layers) is not "
                         "supported",
                         qwen2 ? "Qwen2-MoE" : "Qwen3-MoE", (long long)step);
    if (qwen2) {
        if (cJSON_IsTrue(norm))
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "config.json: Qwen2-MoE with norm_topk_prob is not supported (vx, as llama.cpp, takes "
                             "the chosen experts' weights as the softmax gives them)");
        return need_int(cfg, "shared_expert_intermediate_size", 1, 1 << 22, &hp->n_ff_shexp, err, err_size);
    }
    if (!cJSON_IsTrue(norm))
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "config.json: Qwen3-MoE without norm_topk_prob is not supported (vx renormalizes the chosen "
                         "experts' weights, as llama.cpp does)");
    return VX_OK;
}

/* Gemma3TextConfig's window: every layer sliding but every
 * sliding_window_pattern-th, or layer_types (newer transformers) spelling
 * the same; vx takes only such a period. *period: 0 for no window. */
static vx_status gemma3_pattern(const cJSON *cfg, const hf_hparams *hp, int64_t *period, char *err, size_t err_size) {
    vx_status st = VX_OK;
    *period = 6;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(cfg, "layer_types");
    if (!lt || cJSON_IsNull(lt))
        return cfg_int(cfg, "sliding_window_pattern", 1, 1 << 16, period, &st, err, err_size) < 0 ? st : VX_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != hp->n_layer)
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: layer_types must list the %lld layers",
                         (long long)hp->n_layer);
    int64_t first_full = -1, il = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, lt) {
        const bool full = cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention");
        if (!full && !(cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention")))
            return vx_seterr(err, err_size, VX_EFORMAT, "config.json: layer_types[%lld] is not a layer type vx knows",
                             (long long)il);
        if (full && first_full < 0) first_full = il;
        il++;
    }
    *period = first_full < 0 ? hp->n_layer + 1 : first_full + 1;
    il = 0;
    cJSON_ArrayForEach(e, lt) {
        if ((il % *period < *period - 1) != !strcmp(e->valuestring, "sliding_attention"))
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "config.json: layer_types without a period (a full-attention layer every %lld) is not "
                             "supported",
                             (long long)*period);
        il++;
    }
    return VX_OK;
}

/* GptOssConfig: a window on every other layer from the first (the
 * loader's, as llama.cpp's, period of 2), the SwiGLU clamp at 7 (vx's,
 * as llama.cpp's, fixed one). */
static vx_status gpt_oss_keys(vx_gguf_writer *w, const cJSON *cfg, const hf_hparams *hp, char *err, size_t err_size) {
    vx_status st = VX_OK;
    int64_t swa = 128;
    double limit;
    if (cfg_int(cfg, "sliding_window", 1, 1 << 30, &swa, &st, err, err_size) < 0 ||
        (st = cfg_real(cfg, "swiglu_limit", 7.0, &limit, err, err_size)))
        return st;
    if (limit != 7.0)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED, "config.json: gpt-oss with swiglu_limit %g is not supported (7 is)",
                         limit);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(cfg, "layer_types"), *e;
    int64_t il = 0;
    if (lt && !cJSON_IsNull(lt) && (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != hp->n_layer))
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: layer_types must list the %lld layers",
                         (long long)hp->n_layer);
    cJSON_ArrayForEach(e, lt) {
        if (!cJSON_IsString(e) || strcmp(e->valuestring, il % 2 ? "full_attention" : "sliding_attention"))
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "config.json: gpt-oss with layer_types[%lld] '%s' is not supported (sliding and full "
                             "attention alternate, from a sliding layer)",
                             (long long)il, cJSON_IsString(e) ? e->valuestring : "?");
        il++;
    }
    return set_u32(w, hp->arch, "attention.sliding_window", swa);
}

/* transformers' newer rope_parameters, in place of rope_theta and
 * rope_scaling: the object for layers of layer_type (Gemma 3 keys them
 * "full_attention" and "sliding_attention"), or with flat (one kind of
 * layer) parameters the whole object when flat; NULL when absent. */
static const cJSON *rope_params(const cJSON *cfg, const char *layer_type, bool flat) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(cfg, "rope_parameters");
    if (!cJSON_IsObject(rp)) return NULL;
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(rp, layer_type);
    return cJSON_IsObject(by) ? by : flat ? rp : NULL;
}

/* Gemma 3's keys: the window and its pattern, the local layers' RoPE
 * base, the final cap; no score cap, and the query scale vx computes */
static vx_status gemma3_keys(vx_gguf_writer *w, const cJSON *cfg, const hf_hparams *hp, char *err, size_t err_size) {
    double acap, fcap, qpas, local_base;
    int64_t swa = 4096, period;
    vx_status st = VX_OK;
    if ((st = cfg_real(cfg, "attn_logit_softcapping", 0.0, &acap, err, err_size)) ||
        (st = cfg_real(cfg, "final_logit_softcapping", 0.0, &fcap, err, err_size)) ||
        (st = cfg_real(cfg, "query_pre_attn_scalar", 256.0, &qpas, err, err_size)) ||
        cfg_int(cfg, "sliding_window", 1, 1 << 30, &swa, &st, err, err_size) < 0 ||
        (st = gemma3_pattern(cfg, hp, &period, err, err_size)))
        return st;
    const cJSON *lp = rope_params(cfg, "sliding_attention", false);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(lp, "rope_type");
    if ((st = lp ? cfg_real(lp, "rope_theta", 10000.0, &local_base, err, err_size)
                 : cfg_real(cfg, "rope_local_base_freq", 10000.0, &local_base, err, err_size)))
        return st;
    if (lt && !(cJSON_IsString(lt) && !strcmp(lt->valuestring, "default")))
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "config.json: Gemma 3's sliding_attention RoPE must be unscaled (rope_type \"default\")");
    const double want = vx_gemma_query_scalar(true, hp->n_layer, hp->n_embd, hp->n_head, hp->head_dim);
    if (acap != 0 || !(fcap >= 0) || qpas != want || !(local_base > 0))
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "config.json: Gemma 3 with attn_logit_softcapping %g, final_logit_softcapping %g, "
                         "query_pre_attn_scalar %g and rope_local_base_freq %g is not supported (no score cap, a "
                         "non-negative final cap, %g for this shape, a positive base)",
                         acap, fcap, qpas, local_base, want);
    const char *A = hp->arch;
    if ((fcap > 0 && (st = set_f32(w, A, "final_logit_softcapping", fcap))) ||
        (st = set_u32(w, A, "attention.sliding_window", swa)) ||
        (st = set_u32(w, A, "attention.sliding_window_pattern", period)) ||
        (st = set_f32(w, A, "rope.freq_base_swa", local_base)))
        return st;
    return VX_OK;
}

static vx_status config_keys(hf_ctx *c, const cJSON *cfg, const char *dir, hf_hparams *hp, char *err,
                             size_t err_size) {
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    const cJSON *a0 = cJSON_GetArrayItem(archs, 0);
    if (!cJSON_IsString(a0))
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: \"architectures\" names no model class");
    for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
        if (strcmp(a0->valuestring, k_archs[i].hf) == 0) {
            hp->arch = k_archs[i].arch;
            hp->permute_qk = k_archs[i].permute_qk;
            hp->spm_first = k_archs[i].spm_first;
            hp->norm_plus_one = k_archs[i].gemma > 0;
            hp->gemma2 = k_archs[i].gemma >= 2;
            hp->gemma3 = k_archs[i].gemma == 3;
            hp->text_of_mm = strstr(k_archs[i].hf, "ConditionalGeneration") != NULL;
        }
    if (!hp->arch)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "config.json: model class %s is not supported (LlamaForCausalLM, MistralForCausalLM, "
                         "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, Phi3ForCausalLM, MixtralForCausalLM, "
                         "GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration, "
                         "GraniteForCausalLM, Qwen2MoeForCausalLM and GptOssForCausalLM are)",
                         a0->valuestring);
    const cJSON *top = cfg;
    if (hp->text_of_mm && !cJSON_IsObject(cfg = cJSON_GetObjectItemCaseSensitive(top, "text_config")))
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: %s without a text_config object", a0->valuestring);
    vx_status st = VX_OK;
    if ((st = need_int(cfg, "hidden_size", 1, 1 << 20, &hp->n_embd, err, err_size)) ||
        (st = need_int(cfg, "num_hidden_layers", 1, 4096, &hp->n_layer, err, err_size)) ||
        (st = need_int(cfg, "intermediate_size", 1, 1 << 22, &hp->n_ff, err, err_size)))
        return st;
    /* Gemma3TextConfig's defaults (its checkpoints leave them out; the
     * converter assumes the same): 8 heads, 4 KV heads of 256, 131072
     * positions */
    hp->n_head = hp->gemma3 ? 8 : 0;
    if (hp->gemma3 ? cfg_int(cfg, "num_attention_heads", 1, 4096, &hp->n_head, &st, err, err_size) < 0
                   : (st = need_int(cfg, "num_attention_heads", 1, 4096, &hp->n_head, err, err_size)) != VX_OK)
        return st;
    hp->n_head_kv = hp->gemma3 ? 4 : hp->n_head;
    hp->head_dim = hp->gemma3 ? 256 : hp->n_embd / hp->n_head;
    hp->n_ctx = hp->gemma3 ? 131072 : 0;
    if (cfg_int(cfg, "num_key_value_heads", 1, 4096, &hp->n_head_kv, &st, err, err_size) < 0 ||
        cfg_int(cfg, "head_dim", 1, 1 << 16, &hp->head_dim, &st, err, err_size) < 0 ||
        cfg_int(cfg, "max_position_embeddings", 1, 1 << 24, &hp->n_ctx, &st, err, err_size) < 0 ||
        cfg_int(cfg, "num_local_experts", 1, 256, &hp->n_expert, &st, err, err_size) < 0 ||
        cfg_int(cfg, "num_experts_per_tok", 1, 256, &hp->n_expert_used, &st, err, err_size) < 0)
        return st;
    const bool mixtral = !strcmp(a0->valuestring, "MixtralForCausalLM"), phi3 = !strcmp(hp->arch, "phi3");
    const bool oss = hp->gpt_oss = !strcmp(hp->arch, "gpt-oss");
    const bool qwen2moe = !strcmp(hp->arch, "qwen2moe"), qwen3moe = !strcmp(hp->arch, "qwen3moe") || qwen2moe;
    if (qwen3moe && (st = qwen_moe_keys(cfg, hp, qwen2moe, err, err_size))) return st;
    if ((mixtral || qwen3moe || oss) &&
        (hp->n_expert < 1 || hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert))
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: a %s model needs %s >= num_experts_per_tok >= 1",
                         a0->valuestring, qwen3moe ? "num_experts" : "num_local_experts");
    if (!mixtral && !qwen3moe && !oss) hp->n_expert = hp->n_expert_used = 0;
    if (oss) hp->n_ff_exp = hp->n_ff; /* every layer's experts are intermediate_size long */
    /* RoPE turns pairs, and the Q/K permutation halves heads */
    if (hp->head_dim < 2 || hp->head_dim % 2)
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: the head dimension %lld is not a positive even number",
                         (long long)hp->head_dim);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie) && !cJSON_IsNull(tie))
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: tie_word_embeddings must be true or false");
    hp->tie = cJSON_IsTrue(tie);
    if (hp->norm_plus_one) { /* Gemma */
        /* GemmaConfig: tied unless it says otherwise; the FFN's GELU in its
         * tanh form (transformers runs gelu_pytorch_tanh for Gemma whatever
         * hidden_act says, as llama.cpp does) */
        hp->tie = !tie || cJSON_IsNull(tie) || cJSON_IsTrue(tie);
        static const char *const keys[] = {"hidden_activation", "hidden_act"};
        for (int i = 0; i < 2; i++) {
            const cJSON *act = cJSON_GetObjectItemCaseSensitive(cfg, keys[i]);
            if (cJSON_IsString(act) && strncmp(act->valuestring, "gelu", 4) != 0)
                return vx_seterr(err, err_size, VX_EUNSUPPORTED, "config.json: Gemma with %s '%s' is not supported",
                                 keys[i], act->valuestring);
        }
    }
    /* GPTQ int4 (AutoGPTQ / GPTQModel): 4 bits, groups along the input,
     * no act-order reordering across 32-element blocks (checked per tensor).
     * AWQ int4 (AutoAWQ's GEMM layout): the same values, w = s (q - z),
     * packed along the output instead. */
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(top, "quantization_config");
    const cJSON *qm = cJSON_GetObjectItemCaseSensitive(qc, "quant_method");
    const bool gptq = cJSON_IsString(qm) && !strcmp(qm->valuestring, "gptq");
    const bool awq = cJSON_IsString(qm) && !strcmp(qm->valuestring, "awq");
    if (gptq || awq) {
        int64_t bits = 0, group = 0;
        vx_status sq = VX_OK;
        /* AutoAWQ's own config names them w_bit and q_group_size */
        const char *kbits = awq && !cJSON_GetObjectItemCaseSensitive(qc, "bits") ? "w_bit" : "bits";
        const char *kgroup = awq && !cJSON_GetObjectItemCaseSensitive(qc, "group_size") ? "q_group_size" : "group_size";
        if (cfg_int(qc, kbits, 1, 16, &bits, &sq, err, err_size) != 1 || bits != 4 ||
            cfg_int(qc, kgroup, -1, 1 << 20, &group, &sq, err, err_size) != 1 || group == 0 ||
            (group > 0 && group % 32) || (awq && group < 0))
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "config.json: %s with bits %lld and group_size %lld is not supported (4 bits, groups of a "
                             "multiple of 32%s are)",
                             awq ? "AWQ" : "GPTQ", (long long)bits, (long long)group, awq ? "" : " or -1");
        hp->gptq_group = group;
        if (awq) {
            const cJSON *ver = cJSON_GetObjectItemCaseSensitive(qc, "version"),
                        *zp = cJSON_GetObjectItemCaseSensitive(qc, "zero_point");
            if (ver && !(cJSON_IsString(ver) && !strcasecmp(ver->valuestring, "gemm")))
                return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                                 "config.json: AWQ version '%s' is not supported (the GEMM layout is)",
                                 cJSON_IsString(ver) ? ver->valuestring : "?");
            if (zp && !cJSON_IsTrue(zp))
                return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                                 "config.json: AWQ without zero points is not supported");
            hp->awq = true;
        }
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(qc, "checkpoint_format");
        hp->gptq_v2 = awq || (cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "gptq_v2"));
    } else if (cJSON_IsString(qm) && strcmp(qm->valuestring, "fp8") != 0 && strcmp(qm->valuestring, "compressed-tensors") &&
               strcmp(qm->valuestring, "fbgemm_fp8")) {
        return vx_seterr(err, err_size, VX_EUNSUPPORTED, "config.json: quantization method '%s' is not supported",
                         qm->valuestring);
    }
    /* FP8 checkpoints with block scales ("fp8" method: Qwen3-FP8, DeepSeek) */
    hp->fp8_block[0] = hp->fp8_block[1] = 128;
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(qc, "weight_block_size");
    if (bs) {
        const cJSON *b0 = cJSON_GetArrayItem(bs, 0), *b1 = cJSON_GetArrayItem(bs, 1);
        if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2 || !cJSON_IsNumber(b0) || !cJSON_IsNumber(b1) ||
            !(b0->valuedouble >= 1 && b0->valuedouble <= 65536) || !(b1->valuedouble >= 1 && b1->valuedouble <= 65536))
            return vx_seterr(err, err_size, VX_EFORMAT, "config.json: weight_block_size must be two sizes");
        hp->fp8_block[0] = (int64_t)b0->valuedouble;
        hp->fp8_block[1] = (int64_t)b1->valuedouble;
    }

    vx_gguf_writer *w = c->w;
    const char *A = hp->arch;
    /* the directory's own name ("." and "dir/" resolved), as the model's name */
    char real[4096];
    const char *full = realpath(dir, real) ? real : dir;
    const char *base = strrchr(full, '/');
    base = base && base[1] ? base + 1 : full;
    if ((st = vx_gguf_set_str(w, "general.architecture", A)) || (st = vx_gguf_set_str(w, "general.name", base)) ||
        (st = set_u32(w, A, "embedding_length", hp->n_embd)) || (st = set_u32(w, A, "block_count", hp->n_layer)) ||
        (st = set_u32(w, A, "feed_forward_length", hp->n_ff)) ||
        (st = set_u32(w, A, "attention.head_count", hp->n_head)) ||
        (st = set_u32(w, A, "attention.head_count_kv", hp->n_head_kv)) ||
        (st = set_u32(w, A, "attention.key_length", hp->head_dim)) ||
        (st = set_u32(w, A, "attention.value_length", hp->head_dim)))
        return st;
    if (hp->n_ctx && (st = set_u32(w, A, "context_length", hp->n_ctx))) return st;
    if (hp->n_expert && ((st = set_u32(w, A, "expert_count", hp->n_expert)) ||
                         (st = set_u32(w, A, "expert_used_count", hp->n_expert_used))))
        return st;
    if (hp->n_ff_exp && (st = set_u32(w, A, "expert_feed_forward_length", hp->n_ff_exp))) return st;
    if (hp->n_ff_shexp && (st = set_u32(w, A, "expert_shared_feed_forward_length", hp->n_ff_shexp))) return st;
    /* transformers' defaults where a key is absent: 1e-6 (Llama, Mistral,
     * Qwen) or 1e-5 (Phi-3, Mixtral); rope_theta 1e4 (Mixtral 1e6) */
    double eps, theta, prf;
    const cJSON *rp = rope_params(cfg, "full_attention", true);
    if ((st = cfg_real(cfg, "rms_norm_eps", phi3 || mixtral || oss ? 1e-5 : 1e-6, &eps, err, err_size)) ||
        (st = cfg_real(rp ? rp : cfg, "rope_theta", mixtral || hp->gemma3 ? 1e6 : oss ? 150000 : 1e4, &theta, err,
                       err_size)) ||
        (st = cfg_real(cfg, "partial_rotary_factor", 1.0, &prf, err, err_size)))
        return st;
    if (!(eps >= 0) || eps > 1) return vx_seterr(err, err_size, VX_EFORMAT, "config.json: rms_norm_eps %g is invalid", eps);
    if ((st = set_f32(w, A, "attention.layer_norm_rms_epsilon", eps))) return st;
    if (!(theta > 0) || theta > 1e30)
        return vx_seterr(err, err_size, VX_EFORMAT, "config.json: rope_theta must be positive");
    if ((st = set_f32(w, A, "rope.freq_base", theta))) return st;
    int64_t n_rot = hp->head_dim;
    if (prf != 1.0) {
        if (!(prf > 0 && prf < 1) || (n_rot = (int64_t)(hp->head_dim * prf)) < 2 || n_rot % 2)
            return vx_seterr(err, err_size, VX_EFORMAT, "config.json: partial_rotary_factor %g is invalid", prf);
        /* the Q/K permutation would have to stop at the rotated part */
        if (hp->permute_qk)
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "config.json: partial_rotary_factor on a %s model is not supported", a0->valuestring);
    }
    if ((st = set_u32(w, A, "rope.dimension_count", n_rot))) return st;
    if (hp->gemma3 && (st = gemma3_keys(w, cfg, hp, err, err_size))) return st;
    if (oss && (st = gpt_oss_keys(w, cfg, hp, err, err_size))) return st;
    if (hp->gemma2 && !hp->gemma3) {
        /* Gemma2Config's defaults; a null cap is none. Queries are scaled by
         * 1/sqrt(query_pre_attn_scalar): vx (as llama.cpp) takes head_dim,
         * or n_embd / n_head for the 46-layer 27B model */
        double acap, fcap, qpas;
        int64_t swa = 4096;
        const cJSON *an = cJSON_GetObjectItemCaseSensitive(cfg, "attn_logit_softcapping");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cfg, "final_logit_softcapping");
        if ((st = cfg_real(cfg, "attn_logit_softcapping", 50.0, &acap, err, err_size)) ||
            (st = cfg_real(cfg, "final_logit_softcapping", 30.0, &fcap, err, err_size)) ||
            (st = cfg_real(cfg, "query_pre_attn_scalar", (double)hp->head_dim, &qpas, err, err_size)) ||
            cfg_int(cfg, "sliding_window", 1, 1 << 30, &swa, &st, err, err_size) < 0)
            return st;
        if (an && cJSON_IsNull(an)) acap = 0;
        if (fn && cJSON_IsNull(fn)) fcap = 0;
        const double want = vx_gemma_query_scalar(false, hp->n_layer, hp->n_embd, hp->n_head, hp->head_dim);
        if (!(acap >= 0) || !(fcap >= 0) || qpas != want)
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "config.json: Gemma 2 with soft caps %g / %g and query_pre_attn_scalar %g is not supported "
                             "(non-negative caps, and %g for this shape)",
                             acap, fcap, qpas, want);
        if ((st = set_f32(w, A, "attn_logit_softcapping", acap)) ||
            (st = set_f32(w, A, "final_logit_softcapping", fcap)) ||
            (st = set_u32(w, A, "attention.sliding_window", swa)))
            return st;
    }

    if (!strcmp(A, "granite")) {
        /* GraniteConfig's multipliers as the converter writes them: each
         * only when config.json has it (without attention_multiplier the
         * scores keep 1/sqrt(head_dim)); logits_scaling, which vx needs,
         * 1 (GraniteConfig's default) when absent */
        static const char *const gk[4][2] = {{"embedding_multiplier", "embedding_scale"},
                                             {"residual_multiplier", "residual_scale"},
                                             {"attention_multiplier", "attention.scale"},
                                             {"logits_scaling", "logit_scale"}};
        for (int i = 0; i < 4; i++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(cfg, gk[i][0]);
            double v;
            if ((st = cfg_real(cfg, gk[i][0], 1.0, &v, err, err_size))) return st;
            if (i == 3 && !(v > 0))
                return vx_seterr(err, err_size, VX_EFORMAT, "config.json: logits_scaling must be positive");
            if ((i == 3 || (x && !cJSON_IsNull(x))) && (st = set_f32(w, A, gk[i][1], v))) return st;
        }
    }
    /* rope_parameters carry the scaling too (no rope_type: none) */
    const cJSON *rs = rp ? rp : cJSON_GetObjectItemCaseSensitive(cfg, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) {
        const cJSON *tv = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!cJSON_IsString(tv)) tv = cJSON_GetObjectItemCaseSensitive(rs, "type");
        const char *type = cJSON_IsString(tv) ? tv->valuestring : rp ? "default" : NULL;
        if (!type) return vx_seterr(err, err_size, VX_EFORMAT, "config.json: rope_scaling has no type");
        if (strcmp(type, "linear") == 0) {
            const double f = cfg_num(rs, "factor", 0);
            if (!(f > 0)) return vx_seterr(err, err_size, VX_EFORMAT, "config.json: rope_scaling factor must be positive");
            char key[160];
            snprintf(key, sizeof key, "%s.rope.scaling.type", A);
            if ((st = vx_gguf_set_str(w, key, "linear")) || (st = set_f32(w, A, "rope.scaling.factor", f))) return st;
        } else if (strcmp(type, "llama3") == 0) {
            if ((st = llama3_factors(c, rs, theta, n_rot, err, err_size))) return st;
        } else if (strcmp(type, "yarn") == 0 && oss) { /* the loader's YaRN keys (model.c yarn_params) */
            const double f = cfg_num(rs, "factor", 0), fast = cfg_num(rs, "beta_fast", 32), slow = cfg_num(rs, "beta_slow", 1);
            int64_t orig = 4096;
            if (!(f > 0) || !(fast > 0) || !(slow > 0) ||
                cfg_int(rs, "original_max_position_embeddings", 1, 1 << 30, &orig, &st, err, err_size) < 0)
                return st ? st : vx_seterr(err, err_size, VX_EFORMAT, "config.json: rope_scaling (yarn) has invalid factors");
            char key[160];
            snprintf(key, sizeof key, "%s.rope.scaling.type", A);
            if ((st = vx_gguf_set_str(w, key, "yarn")) || (st = set_f32(w, A, "rope.scaling.factor", f)) ||
                (st = set_u32(w, A, "rope.scaling.original_context_length", orig)) ||
                (st = set_f32(w, A, "rope.scaling.yarn_beta_fast", fast)) ||
                (st = set_f32(w, A, "rope.scaling.yarn_beta_slow", slow)))
                return st;
        } else if (strcmp(type, "default") != 0) {
            return vx_seterr(err, err_size, VX_EUNSUPPORTED, "config.json: rope_scaling type '%s' is not supported yet",
                             type);
        }
    }
    return VX_OK;
}

/* ------------------------------------------------------------ tensors */

/* The GGUF name of an HF tensor name (NULL: not a tensor vx uses); *kind:
 * 'n' norm or bias (made F32), 'q' / 'k' (permuted for Llama), 'w' as is.
 * Gemma 2 names its four norms per layer input_layernorm,
 * post_attention_layernorm (after the attention, not before the FFN),
 * pre_feedforward_layernorm and post_feedforward_layernorm. */
static const char *map_name(const hf_hparams *hp, const char *hf, char *buf, size_t size, char *kind) {
    static const struct {
        const char *hf, *gguf;
        char kind;
    } top[] = {{"model.embed_tokens.weight", "token_embd.weight", 'w'},
               {"model.norm.weight", "output_norm.weight", 'n'},
               {"lm_head.weight", "output.weight", 'w'}};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (strcmp(hf, top[i].hf) == 0) {
            *kind = top[i].kind;
            return top[i].gguf;
        }
    static const struct {
        const char *hf, *gguf;
        char kind;
    } layer[] = {{"input_layernorm.weight", "attn_norm.weight", 'n'},
                 {"post_attention_layernorm.weight", "ffn_norm.weight", 'n'},
                 {"self_attn.q_proj.weight", "attn_q.weight", 'q'},
                 {"self_attn.k_proj.weight", "attn_k.weight", 'k'},
                 {"self_attn.v_proj.weight", "attn_v.weight", 'w'},
                 {"self_attn.o_proj.weight", "attn_output.weight", 'w'},
                 {"self_attn.q_proj.bias", "attn_q.bias", 'Q'},
                 {"self_attn.k_proj.bias", "attn_k.bias", 'K'},
                 {"self_attn.v_proj.bias", "attn_v.bias", 'n'},
                 {"self_attn.o_proj.bias", "attn_output.bias", 'n'},
                 {"self_attn.q_norm.weight", "attn_q_norm.weight", 'n'},
                 {"self_attn.k_norm.weight", "attn_k_norm.weight", 'n'},
                 {"self_attn.qkv_proj.weight", "attn_qkv.weight", 'w'},
                 {"mlp.gate_proj.weight", "ffn_gate.weight", 'w'},
                 {"mlp.up_proj.weight", "ffn_up.weight", 'w'},
                 {"mlp.down_proj.weight", "ffn_down.weight", 'w'},
                 {"mlp.gate_up_proj.weight", "ffn_up.weight", 'w'},
                 {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight", 'w'},
                 {"mlp.gate.weight", "ffn_gate_inp.weight", 'w'},
                 {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", 'w'},
                 {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", 'w'},
                 {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", 'w'},
                 {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", 'n'},
                 {"pre_feedforward_layernorm.weight", "ffn_norm.weight", 'n'},
                 {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", 'n'},
                 {"self_attn.rotary_emb.inv_freq", NULL, 0}};
    /* FP8 scales: read with their weights (add_tensor) */
    const size_t hl = strlen(hf);
    static const char *const scales[] = {".weight_scale_inv", ".weight_scale", ".input_scale", ".qzeros", ".scales",
                                         ".g_idx"};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        const size_t sl = strlen(scales[i]);
        if (hl > sl && !strcmp(hf + hl - sl, scales[i])) {
            *kind = 's';
            return NULL;
        }
    }
    unsigned il;
    const char *rest;
    if (!strncmp(hf, "model.layers.", 13) && parse_index(hf + 13, 1u << 20, &il, &rest) && *rest == '.') {
        static const char *const oss[][3] = {{"post_attention_layernorm.weight", "post_attention_norm.weight", "n"},
                                              {"self_attn.sinks", "attn_sinks.weight", "n"},
                                              {"mlp.router.weight", "ffn_gate_inp.weight", "w"},
                                              {"mlp.router.bias", "ffn_gate_inp.bias", "n"}};
        for (size_t i = 0; hp->gpt_oss && i < sizeof oss / sizeof *oss; i++)
            if (!strcmp(rest + 1, oss[i][0])) {
                *kind = oss[i][2][0];
                snprintf(buf, size, "blk.%u.%s", il, oss[i][1]);
                return buf;
            }
        if (hp->gemma2 && !strcmp(rest + 1, "post_attention_layernorm.weight")) {
            *kind = 'n';
            snprintf(buf, size, "blk.%u.post_attention_norm.weight", il);
            return buf;
        }
        for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
            if (strcmp(rest + 1, layer[i].hf) == 0) {
                *kind = layer[i].kind;
                if (!layer[i].gguf) return NULL;
                snprintf(buf, size, "blk.%u.%s", il, layer[i].gguf);
                return buf;
            }
    }
    *kind = '?';
    return NULL;
}

static int vx_type_of(vx_st_dtype d) {
    return d == VX_ST_F32 ? VX_TYPE_F32 : d == VX_ST_F16 ? VX_TYPE_F16 : d == VX_ST_BF16 ? VX_TYPE_BF16 : -1;
}

static float elem_f32(const uint8_t *p, vx_st_dtype d, size_t i) {
    if (d == VX_ST_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return d == VX_ST_F16 ? vx_fp16_to_fp32(h) : vx_bf16_to_fp32(h);
}

/* Rows of r (n_rows x row bytes) reordered within each head of hd rows:
 * GGUF row h hd + 2j + s is HF row h hd + s hd/2 + j (HF rotates the two
 * halves of a head, GGUF "llama" adjacent pairs). */
static void permute_rows(uint8_t *dst, const uint8_t *src, int64_t n_rows, int64_t hd, size_t row) {
    for (int64_t h = 0; h < n_rows / hd; h++)
        for (int64_t j = 0; j < hd / 2; j++)
            for (int64_t s = 0; s < 2; s++)
                memcpy(dst + (size_t)(h * hd + 2 * j + s) * row, src + (size_t)(h * hd + s * hd / 2 + j) * row, row);
}

/* Llama's Q (kind 'q' / bias 'Q') or K ('k' / 'K') rows of data (rows x
 * row bytes) in GGUF's order, as an owned copy in *out; other kinds and
 * architectures keep data. */
static vx_status permute_qk(hf_ctx *c, const hf_hparams *hp, char kind, const char *name, const void *data,
                            int64_t rows, size_t row, const void **out, char *err, size_t err_size) {
    *out = data;
    if (!hp->permute_qk || (kind != 'q' && kind != 'k' && kind != 'Q' && kind != 'K')) return VX_OK;
    const int64_t heads = kind == 'q' || kind == 'Q' ? hp->n_head : hp->n_head_kv;
    if (rows != heads * hp->head_dim)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' has %lld rows, not %lld heads x %lld", name,
                         (long long)rows, (long long)heads, (long long)hp->head_dim);
    uint8_t *p = own(c, row * (size_t)rows);
    if (!p) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    permute_rows(p, data, rows, hp->head_dim, row);
    *out = p;
    return VX_OK;
}

/* model.layers.<il>.block_sparse_moe.experts.<x>.w<wi>.weight (Mixtral),
 * or model.layers.<il>.mlp.experts.<x>.{gate,down,up}_proj.weight (Qwen3-MoE;
 * wi 1, 2, 3 as Mixtral's w1, w2, w3) */
static bool is_expert(const char *name, unsigned *il, unsigned *x, unsigned *wi) {
    static const char k_mid[] = ".block_sparse_moe.experts.", k_mlp[] = ".mlp.experts.";
    static const char *const k_proj[3] = {".gate_proj.weight", ".down_proj.weight", ".up_proj.weight"};
    const char *p;
    if (strncmp(name, "model.layers.", 13) != 0 || !parse_index(name + 13, 1u << 20, il, &p)) return false;
    if (!strncmp(p, k_mlp, sizeof k_mlp - 1)) {
        if (!parse_index(p + sizeof k_mlp - 1, 1u << 20, x, &p)) return false;
        for (unsigned i = 0; i < 3; i++)
            if (!strcmp(p, k_proj[i])) {
                *wi = i + 1;
                return true;
            }
        return false;
    }
    return !strncmp(p, k_mid, sizeof k_mid - 1) && parse_index(p + sizeof k_mid - 1, 1u << 20, x, &p) &&
           p[0] == '.' && p[1] == 'w' && parse_index(p + 2, 9, wi, &p) && !strcmp(p, ".weight");
}

/* Mixtral: expert x's w1 (gate), w2 (down) or w3 (up) of layer il, copied
 * into its slot of the layer's stacked tensor. */
static vx_status add_expert(hf_ctx *c, const hf_hparams *hp, const vx_st_tensor *t, unsigned il, unsigned x,
                            unsigned wi, char *err, size_t err_size) {
    if (!hp->n_expert || il >= hp->n_layer || x >= hp->n_expert || wi < 1 || wi > 3)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' does not fit the config (%lld layers, %lld experts)",
                         t->name, (long long)hp->n_layer, (long long)hp->n_expert);
    const int type = vx_type_of(t->dtype);
    if (type < 0)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED, "tensor '%s' is %s: experts must be F32, F16 or BF16 (FP8 "
                         "experts are not supported yet)", t->name, vx_st_dtype_name(t->dtype));
    const int64_t F = hp->n_ff_exp ? hp->n_ff_exp : hp->n_ff;
    const int64_t ne0 = wi == 2 ? F : hp->n_embd, ne1 = wi == 2 ? hp->n_embd : F;
    if (type < 0 || t->n_dims != 2 || t->shape[1] != ne0 || t->shape[0] != ne1)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' must be F32/F16/BF16 [%lld, %lld]", t->name,
                         (long long)ne1, (long long)ne0);
    if (!c->moe && !(c->moe = calloc((size_t)hp->n_layer * 3, sizeof *c->moe)))
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    struct moe_stack *m = &c->moe[il * 3 + (wi - 1)];
    const size_t one = (size_t)t->size;
    if (!m->data) {
        if (!(m->data = own(c, one * (size_t)hp->n_expert)) || !(m->have = own(c, (size_t)hp->n_expert)))
            return vx_seterr(err, err_size, VX_ENOMEM, "out of memory for the stacked experts");
        memset(m->have, 0, (size_t)hp->n_expert);
        m->type = type;
        m->ne0 = ne0;
        m->ne1 = ne1;
    }
    if (m->type != type || m->have[x])
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' %s", t->name,
                         m->have[x] ? "appears twice" : "has another type than the layer's other experts");
    memcpy(m->data + one * x, t->data, one);
    m->have[x] = 1;
    return VX_OK;
}

/* The stacked experts as ffn_{gate,down,up}_exps, once every one arrived. */
static vx_status add_experts(hf_ctx *c, const hf_hparams *hp, char *err, size_t err_size) {
    static const char *const names[3] = {"ffn_gate_exps", "ffn_down_exps", "ffn_up_exps"};
    for (int64_t il = 0; hp->n_expert && il < hp->n_layer; il++)
        for (int wi = 0; wi < 3; wi++) {
            const struct moe_stack *m = c->moe ? &c->moe[il * 3 + wi] : NULL;
            int64_t x = 0;
            while (m && m->data && x < hp->n_expert && m->have[x]) x++;
            if (!m || !m->data || x < hp->n_expert)
                return vx_seterr(err, err_size, VX_EFORMAT, "layer %lld: expert %lld's w%d is missing", (long long)il,
                                 (long long)x, wi + 1);
            char name[64];
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)il, names[wi]);
            const int64_t ne[3] = {m->ne0, m->ne1, hp->n_expert};
            const uint64_t size = (uint64_t)vx_row_size((vx_type)m->type, m->ne0) * (uint64_t)(m->ne1 * hp->n_expert);
            vx_status st = put_tensor(c, name, name, m->type, 3, ne, m->data, size, err, err_size);
            if (st) return st;
        }
    return VX_OK;
}

static const vx_st_tensor *find_any(const hf_ctx *c, const char *name) {
    for (int i = 0; i < c->n_st; i++) {
        const vx_st_tensor *t = vx_st_find(c->st[i], name);
        if (t) return t;
    }
    return NULL;
}

/* gpt-oss's experts (GptOssExperts), a layer's in one tensor each:
 * mlp.experts.gate_up_proj_{blocks,scales,bias}, gate and up rows
 * interleaved (gate the even ones, as the converter splits them), and
 * mlp.experts.down_proj_{blocks,scales,bias}. The weights are MXFP4:
 * blocks [E, rows, n/32, 16] of two codes a byte (element 2j in the low
 * nibble of byte j), scales [E, rows, n/32] of E8M0 exponents. They become
 * GGUF's MXFP4 ffn_{gate,up,down}_exps (per block the scale, then element
 * j in the low nibble of byte j and j + 16 in its high one; the codes and
 * exponents as they are) and F32 biases [rows, E]. Unquantized checkpoints
 * (BF16 conversions) hold gate_up_proj [E, n_embd, 2 n_ff] and down_proj
 * [E, n_ff, n_embd], the transposes: they keep their type. *handled: the
 * tensor was one of them (the scales are read with their blocks). */
static vx_status gpt_oss_expert(hf_ctx *c, const hf_hparams *hp, const vx_st_tensor *t, const char *name,
                                bool *handled, char *err, size_t err_size) {
    unsigned il;
    const char *rest;
    *handled = false;
    if (strncmp(name, "model.layers.", 13) || !parse_index(name + 13, 1u << 20, &il, &rest) ||
        strncmp(rest, ".mlp.experts.", 13))
        return VX_OK;
    const char *what = rest + 13;
    const bool gu = !strncmp(what, "gate_up_proj", 12), dn = !strncmp(what, "down_proj", 9);
    const char *part = gu ? what + 12 : dn ? what + 9 : NULL;
    if (!part) return VX_OK;
    *handled = true;
    if (!strcmp(part, "_scales")) return VX_OK;
    const int64_t E = hp->n_expert, F = hp->n_ff_exp, D = hp->n_embd;
    const int64_t rows = gu ? 2 * F : D, n_in = gu ? D : F, R = gu ? F : D;
    if (il >= hp->n_layer) return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s': no such layer", t->name);
    static const char *const gname[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    const int g0 = gu ? 0 : 2, n_out = gu ? 2 : 1;
    char gg[2][64];
    vx_status st = VX_OK;
    if (!strcmp(part, "_bias")) {
        if (vx_type_of(t->dtype) < 0 || t->n_dims != 2 || t->shape[0] != E || t->shape[1] != rows)
            return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' must be F32/F16/BF16 [%lld, %lld]", t->name,
                             (long long)E, (long long)rows);
        float *f[2] = {own(c, (size_t)(E * R) * 4), gu ? own(c, (size_t)(E * R) * 4) : NULL};
        if (!f[0] || (gu && !f[1])) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        for (int64_t x = 0; x < E; x++)
            for (int64_t r = 0; r < rows; r++) {
                const float v = elem_f32(t->data, t->dtype, (size_t)(x * rows + r));
                if (gu) f[r & 1][x * F + r / 2] = v;
                else f[0][x * D + r] = v;
            }
        const int64_t ne[2] = {R, E};
        for (int k = 0; k < n_out && !st; k++) {
            snprintf(gg[k], sizeof gg[k], "blk.%u.%s.bias", il, gname[g0 + k]);
            st = put_tensor(c, t->name, gg[k], VX_TYPE_F32, 2, ne, f[k], (uint64_t)(E * R) * 4, err, err_size);
        }
        return st;
    }
    if (!part[0]) { /* unquantized: [E, n_in, rows] (transformers multiplies x by it): transposed */
        const int type = vx_type_of(t->dtype);
        if (type < 0 || t->n_dims != 3 || t->shape[0] != E || t->shape[1] != n_in || t->shape[2] != rows)
            return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' must be F32/F16/BF16 [%lld, %lld, %lld]", t->name,
                             (long long)E, (long long)n_in, (long long)rows);
        const size_t es = vx_st_dtype_size(t->dtype), bytes = (size_t)(E * R * n_in) * es;
        uint8_t *o[2] = {own(c, bytes), gu ? own(c, bytes) : NULL};
        if (!o[0] || (gu && !o[1])) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory for the experts");
        const uint8_t *src = t->data;
        for (int64_t x = 0; x < E; x++)
            for (int64_t i = 0; i < n_in; i++)
                for (int64_t r = 0; r < rows; r++)
                    memcpy(o[gu ? r & 1 : 0] + (size_t)((x * R + (gu ? r / 2 : r)) * n_in + i) * es,
                           src + (size_t)((x * n_in + i) * rows + r) * es, es);
        const int64_t ne[3] = {n_in, R, E};
        for (int k = 0; k < n_out && !st; k++) {
            snprintf(gg[k], sizeof gg[k], "blk.%u.%s.weight", il, gname[g0 + k]);
            st = put_tensor(c, t->name, gg[k], type, 3, ne, o[k], bytes, err, err_size);
        }
        return st;
    }
    if (strcmp(part, "_blocks") != 0)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' is not one of gpt-oss's expert tensors", t->name);
    const int64_t nb = n_in / 32;
    if (n_in % 32 || t->dtype != VX_ST_U8 || t->n_dims != 4 || t->shape[0] != E || t->shape[1] != rows ||
        t->shape[2] != nb || t->shape[3] != 16)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' must be U8 [%lld, %lld, %lld, 16]", t->name,
                         (long long)E, (long long)rows, (long long)nb);
    char sname[512];
    snprintf(sname, sizeof sname, "%.*s_scales", (int)(strlen(t->name) - 7), t->name);
    const vx_st_tensor *sc = find_any(c, sname);
    if (!sc || sc->dtype != VX_ST_U8 || sc->n_dims != 3 || sc->shape[0] != E || sc->shape[1] != rows ||
        sc->shape[2] != nb)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' is %s (U8 [%lld, %lld, %lld])", sname,
                         sc ? "malformed" : "missing", (long long)E, (long long)rows, (long long)nb);
    const size_t bytes = (size_t)(E * R * nb) * sizeof(vx_block_mxfp4);
    vx_block_mxfp4 *o[2] = {own(c, bytes), gu ? own(c, bytes) : NULL};
    if (!o[0] || (gu && !o[1])) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory for the experts");
    const uint8_t *qb = t->data, *qs = sc->data;
    for (int64_t x = 0; x < E; x++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t b = 0; b < nb; b++) {
                const size_t src = (size_t)((x * rows + r) * nb + b);
                vx_block_mxfp4 *d = &o[gu ? r & 1 : 0][(x * R + (gu ? r / 2 : r)) * nb + b];
                const uint8_t *q = qb + 16 * src;
                d->e = qs[src];
                for (int j = 0; j < 16; j++) { /* elements j and j + 16: bytes j / 2 and 8 + j / 2 */
                    const int sh = 4 * (j & 1);
                    d->qs[j] = (uint8_t)(((q[j / 2] >> sh) & 0x0F) | (((q[8 + j / 2] >> sh) & 0x0F) << 4));
                }
            }
    const int64_t ne[3] = {n_in, R, E};
    for (int k = 0; k < n_out && !st; k++) {
        snprintf(gg[k], sizeof gg[k], "blk.%u.%s.weight", il, gname[g0 + k]);
        st = put_tensor(c, t->name, gg[k], VX_TYPE_MXFP4, 3, ne, o[k], bytes, err, err_size);
    }
    return st;
}

/* The value of an FP8 byte: e4m3fn (bias 7, no infinities, S.1111.111 NaN)
 * or e5m2 (bias 15, IEEE-like). */
static float fp8_value(uint8_t b, bool e5m2) {
    const int mb = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, emax = e5m2 ? 31 : 15;
    const int e = (b >> mb) & emax, m = b & ((1 << mb) - 1);
    const float sign = b & 0x80 ? -1.0f : 1.0f;
    if (e5m2 && e == 31) return m ? NAN : sign * INFINITY;
    if (!e5m2 && e == 15 && m == 7) return NAN;
    if (e == 0) return sign * ldexpf((float)m, 1 - bias - mb);
    return sign * ldexpf((float)(m | 1 << mb), e - bias - mb);
}

/* An FP8 weight (rows x cols) times its scales, as BF16: the scale tensor
 * <name>_scale_inv holds one factor per weight_block_size block (the "fp8"
 * method), <name>_scale one per tensor or per row (compressed-tensors,
 * fbgemm). Each value is the FP8 value times its factor in f32, rounded to
 * the nearest BF16. */
static vx_status fp8_to_bf16(hf_ctx *c, const hf_hparams *hp, const vx_st_tensor *t, uint16_t **out, char *err,
                             size_t err_size) {
    char sname[320];
    snprintf(sname, sizeof sname, "%s_scale_inv", t->name);
    const vx_st_tensor *sc = find_any(c, sname);
    const bool block = sc != NULL;
    if (!sc) {
        snprintf(sname, sizeof sname, "%s_scale", t->name);
        sc = find_any(c, sname);
    }
    if (!sc)
        return vx_seterr(err, err_size, VX_EFORMAT, "FP8 tensor '%s' has no %s_scale_inv or %s_scale", t->name, t->name,
                         t->name);
    const int64_t rows = t->shape[0], cols = t->shape[1];
    const int64_t br = hp->fp8_block[0], bc = hp->fp8_block[1];
    const int64_t sr = block ? (rows + br - 1) / br : 0, scn = block ? (cols + bc - 1) / bc : 0;
    const bool sdt = sc->dtype == VX_ST_F32 || sc->dtype == VX_ST_F16 || sc->dtype == VX_ST_BF16;
    int mode; /* 0 per tensor, 1 per row, 2 per block */
    if (sdt && sc->n_elem == 1) mode = 0;
    else if (sdt && !block && (int64_t)sc->n_elem == rows && (sc->n_dims == 1 || (sc->n_dims == 2 && sc->shape[1] == 1)))
        mode = 1;
    else if (sdt && block && sc->n_dims == 2 && sc->shape[0] == sr && sc->shape[1] == scn) mode = 2;
    else
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "'%s' (%s, %lld values) does not fit FP8 tensor '%s' [%lld, %lld] (blocks %lld x %lld)", sname,
                         vx_st_dtype_name(sc->dtype), (long long)sc->n_elem, t->name, (long long)rows, (long long)cols,
                         (long long)br, (long long)bc);
    float lut[256];
    for (int i = 0; i < 256; i++) lut[i] = fp8_value((uint8_t)i, t->dtype == VX_ST_F8_E5M2);
    uint16_t *o = own(c, (size_t)rows * (size_t)cols * 2);
    if (!o) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    const uint8_t *q = t->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) {
            const size_t si = mode == 0 ? 0 : mode == 1 ? (size_t)r : (size_t)(r / br * scn + j / bc);
            o[r * cols + j] = vx_fp32_to_bf16(lut[q[r * cols + j]] * elem_f32(sc->data, sc->dtype, si));
        }
    *out = o;
    return VX_OK;
}

/* A GPTQ int4 matrix (base.qweight [in/8, out] int32, 8 codes along the
 * input per word; base.qzeros [groups, out/8] int32, 8 zeros along the
 * output; base.scales [groups, out] F16; base.g_idx [in] optional) or an
 * AWQ one (GEMM layout: base.qweight [in, out/8] and base.qzeros
 * [groups, out/8], 8 codes or zeros along the output per word in the
 * order 0 2 4 6 1 3 5 7; no g_idx) as GGUF rows of 32-element blocks,
 * without requantizing: w = s (q - z) is Q4_0's d (q - 8) exactly when
 * every zero is 8 (symmetric), else Q4_1's d q + m with m = -s z rounded
 * to fp16. Act-order GPTQ (desc_act) becomes Q8_0 rows of those values.
 * *rows_out x *cols_out. */
static vx_status gptq_blocks(hf_ctx *c, const hf_hparams *hp, const vx_st_tensor *qw, const char *base, void **out,
                             int *type, int64_t *rows_out, int64_t *cols_out, char *err, size_t err_size) {
    char nz[320], ns[320], ng[320];
    const char *what = hp->awq ? "AWQ" : "GPTQ";
    snprintf(nz, sizeof nz, "%s.qzeros", base);
    snprintf(ns, sizeof ns, "%s.scales", base);
    snprintf(ng, sizeof ng, "%s.g_idx", base);
    const vx_st_tensor *qz = find_any(c, nz), *sc = find_any(c, ns), *gi = find_any(c, ng);
    if (qw->dtype != VX_ST_I32 || qw->n_dims != 2 || !qz || !sc)
        return vx_seterr(err, err_size, VX_EFORMAT, "%s tensor '%s.qweight' needs I32 [%s] with .qzeros and .scales",
                         what, base, hp->awq ? "in, out/8" : "in/8, out");
    const int64_t in = hp->awq ? qw->shape[0] : qw->shape[0] * 8, out_f = hp->awq ? qw->shape[1] * 8 : qw->shape[1];
    const int64_t group = hp->gptq_group > 0 ? hp->gptq_group : in, ng_ = (in + group - 1) / group;
    if (in % 32 || qz->dtype != VX_ST_I32 || qz->n_dims != 2 || qz->shape[0] != ng_ || qz->shape[1] * 8 != out_f ||
        sc->n_dims != 2 || sc->shape[0] != ng_ || sc->shape[1] != out_f ||
        (sc->dtype != VX_ST_F16 && sc->dtype != VX_ST_F32 && sc->dtype != VX_ST_BF16))
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "%s tensor '%s': qweight [%lld, %lld], qzeros and scales do not fit groups of %lld", what, base,
                         (long long)qw->shape[0], (long long)qw->shape[1], (long long)group);
    /* act-order (desc_act: g_idx not k / group): a 32-input block mixes
     * groups, so no Q4 block holds its values; they go to Q8_0 instead */
    bool act = false;
    if (gi) {
        if (hp->awq || gi->dtype != VX_ST_I32 || (int64_t)gi->n_elem != in)
            return vx_seterr(err, err_size, VX_EFORMAT, "%s tensor '%s.g_idx' is not I32 [%lld]", what, base,
                             (long long)in);
        for (int64_t k = 0; k < in; k++) {
            int32_t g;
            memcpy(&g, (const uint8_t *)gi->data + 4 * k, 4);
            if (g < 0 || g >= ng_)
                return vx_seterr(err, err_size, VX_EFORMAT, "GPTQ tensor '%s.g_idx': g_idx[%lld] = %d is not a group (0..%lld)",
                                 base, (long long)k, g, (long long)ng_ - 1);
            act = act || g != k / group;
        }
    }
    /* the nibble of a word that holds output n % 8 (AWQ) */
    static const int awq_nib[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    const int zoff = hp->gptq_v2 ? 0 : 1;
    const uint32_t *qzd = qz->data, *qwd = qw->data;
#define QZ(g, n) \
    ((int)(qzd[(g) * (out_f / 8) + (n) / 8] >> (4 * (hp->awq ? awq_nib[(n) % 8] : (int)((n) % 8))) & 15) + zoff)
/* the code of input k, output n */
#define QW(k, n)                                                                    \
    ((int)(hp->awq ? qwd[(k) * (out_f / 8) + (n) / 8] >> (4 * awq_nib[(n) % 8]) & 15 \
                   : qwd[((k) / 8) * out_f + (n)] >> (4 * ((k) % 8)) & 15))
    if (act) { /* w = s (q - z) of input k's own group (g_idx[k]), each row to Q8_0 */
        const size_t rs = vx_row_size(VX_TYPE_Q8_0, in);
        uint8_t *o = own(c, (size_t)out_f * rs);
        float *w = malloc((size_t)in * sizeof *w);
        if (!o || !w) {
            free(w);
            return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        }
        const vx_type_traits *q8 = vx_type_get_traits(VX_TYPE_Q8_0);
        for (int64_t n = 0; n < out_f; n++) {
            for (int64_t k = 0; k < in; k++) {
                int32_t g;
                memcpy(&g, (const uint8_t *)gi->data + 4 * k, 4);
                w[k] = elem_f32(sc->data, sc->dtype, (size_t)((int64_t)g * out_f + n)) * (float)(QW(k, n) - QZ(g, n));
            }
            q8->from_float(w, o + (size_t)n * rs, in);
        }
        free(w);
        *out = o;
        *type = VX_TYPE_Q8_0;
        *rows_out = out_f;
        *cols_out = in;
        return VX_OK;
    }
    bool sym = true;
    for (int64_t g = 0; g < ng_ && sym; g++)
        for (int64_t n = 0; n < out_f && sym; n++) sym = QZ(g, n) == 8;
    const int64_t nb = in / 32;
    const size_t bsz = sym ? sizeof(vx_block_q4_0) : sizeof(vx_block_q4_1);
    uint8_t *o = own(c, (size_t)out_f * (size_t)nb * bsz);
    if (!o) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    for (int64_t n = 0; n < out_f; n++)
        for (int64_t b = 0; b < nb; b++) {
            const int64_t g = b * 32 / group;
            const float s = elem_f32(sc->data, sc->dtype, (size_t)(g * out_f + n));
            uint8_t codes[32];
            for (int j = 0; j < 32; j++) {
                const int64_t k = b * 32 + j;
                codes[j] = (uint8_t)QW(k, n);
            }
            uint8_t *blk = o + ((size_t)n * (size_t)nb + (size_t)b) * bsz;
            uint8_t *qs;
            if (sym) {
                vx_block_q4_0 *q = (vx_block_q4_0 *)(void *)blk;
                q->d = vx_fp32_to_fp16(s);
                qs = q->qs;
            } else {
                vx_block_q4_1 *q = (vx_block_q4_1 *)(void *)blk;
                q->d = vx_fp32_to_fp16(s);
                q->m = vx_fp32_to_fp16(-s * (float)QZ(g, n));
                qs = q->qs;
            }
            for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(codes[j] | codes[j + 16] << 4);
        }
#undef QZ
#undef QW
    *out = o;
    *type = sym ? VX_TYPE_Q4_0 : VX_TYPE_Q4_1;
    *rows_out = out_f;
    *cols_out = in;
    return VX_OK;
}

/* GPTQ's or AWQ's base.qweight as the GGUF tensor of base.weight (Llama's Q/K rows
 * permuted as their blocks). */
/* tname: t's name as a text model's (text_name); its companions
 * (.qzeros, .scales, .g_idx) are found by t's own */
static vx_status add_gptq(hf_ctx *c, const hf_hparams *hp, const vx_st_tensor *t, const char *tname, char *err,
                          size_t err_size) {
    char base[300], wname[320], buf[160], kind;
    snprintf(base, sizeof base, "%.*s", (int)(strlen(t->name) - strlen(".qweight")), t->name);
    snprintf(wname, sizeof wname, "%.*s.weight", (int)(strlen(tname) - strlen(".qweight")), tname);
    const char *name = map_name(hp, wname, buf, sizeof buf, &kind);
    if (strstr(tname, ".experts."))
        return vx_seterr(err, err_size, VX_EUNSUPPORTED, "int4 tensor '%s': quantized experts are not supported yet",
                         t->name);
    if (!name || (kind != 'w' && kind != 'q' && kind != 'k'))
        return vx_seterr(err, err_size, VX_EUNSUPPORTED, "int4 tensor '%s' is not a weight matrix vx knows", t->name);
    if (!hp->gptq_group)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s', but config.json names no GPTQ or AWQ quantization",
                         t->name);
    void *blocks = NULL;
    int type = 0;
    int64_t rows = 0, cols = 0;
    vx_status st = gptq_blocks(c, hp, t, base, &blocks, &type, &rows, &cols, err, err_size);
    if (st) return st;
    const size_t row = vx_row_size((vx_type)type, cols);
    const void *data;
    if ((st = permute_qk(c, hp, kind, t->name, blocks, rows, row, &data, err, err_size))) return st;
    const int64_t ne[2] = {cols, rows};
    return put_tensor(c, t->name, name, type, 2, ne, data, (uint64_t)row * (uint64_t)rows, err, err_size);
}

/* A multimodal checkpoint's text model (text_of_mm): its tensor names as a
 * text model's (language_model.model.X or model.language_model.X as
 * model.X, language_model.lm_head as lm_head); NULL for the vision tower's
 * and the projector's, which vx leaves out. Other checkpoints: name. */
static const char *text_name(const hf_hparams *hp, const char *name, char *buf, size_t size) {
    static const char *const lm[] = {"language_model.model.", "model.language_model."};
    if (!hp->text_of_mm) return name;
    for (int i = 0; i < 2; i++)
        if (!strncmp(name, lm[i], strlen(lm[i]))) {
            snprintf(buf, size, "model.%s", name + strlen(lm[i]));
            return buf;
        }
    if (!strncmp(name, "language_model.", 15)) return name + 15;
    static const char *const vision[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                         "model.multi_modal_projector."};
    for (int i = 0; i < 4; i++)
        if (!strncmp(name, vision[i], strlen(vision[i]))) return NULL;
    return name;
}

static vx_status add_tensor(hf_ctx *c, const hf_hparams *hp, const vx_st_tensor *t, char *err, size_t err_size) {
    char buf[160], tbuf[512], kind;
    unsigned il, x, wi;
    const char *tname = text_name(hp, t->name, tbuf, sizeof tbuf);
    if (!tname) return VX_OK; /* a multimodal model's vision part */
    if (hp->gpt_oss) {
        bool handled;
        const vx_status so = gpt_oss_expert(c, hp, t, tname, &handled, err, err_size);
        if (so || handled) return so;
    }
    if (is_expert(tname, &il, &x, &wi)) return add_expert(c, hp, t, il, x, wi, err, err_size);
    const size_t nl = strlen(tname);
    if (nl > 8 && !strcmp(tname + nl - 8, ".qweight")) return add_gptq(c, hp, t, tname, err, err_size);
    const char *name = map_name(hp, tname, buf, sizeof buf, &kind);
    if (!name && kind != '?') return VX_OK; /* known, unused */
    if (!name)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED, "tensor '%s' is not one vx knows for %s models", t->name,
                         hp->arch);
    if (strcmp(name, "output.weight") == 0 && hp->tie) return VX_OK; /* the embedding's copy */
    vx_st_tensor deq; /* an FP8 weight, dequantized */
    if ((t->dtype == VX_ST_F8_E4M3 || t->dtype == VX_ST_F8_E5M2) && t->n_dims == 2 &&
        (kind == 'w' || kind == 'q' || kind == 'k')) {
        uint16_t *bf = NULL;
        vx_status s8 = fp8_to_bf16(c, hp, t, &bf, err, err_size);
        if (s8) return s8;
        deq = *t;
        deq.dtype = VX_ST_BF16;
        deq.size = t->n_elem * 2;
        deq.data = bf;
        t = &deq;
    }
    const int type = vx_type_of(t->dtype);
    if (type < 0)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED, "tensor '%s' is %s: only F32, F16, BF16 and FP8 weights are supported",
                         t->name, vx_st_dtype_name(t->dtype));
    const bool vec = kind == 'n' || kind == 'Q' || kind == 'K';
    /* a vector, but Qwen2-MoE's shared_expert_gate, which is one row [1, n_embd] */
    const bool row = t->n_dims == 2 && t->shape[0] == 1 && strstr(name, "ffn_gate_inp_shexp");
    if (vec ? !(t->n_dims == 1 || row) : t->n_dims != 2)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' has %d dimensions", t->name, t->n_dims);
    const void *data = t->data;
    vx_status st;
    if (vec) {
        /* norms and biases in F32 (the loader's need_f32) */
        float *f = own(c, (size_t)t->n_elem * sizeof *f);
        if (!f) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        for (uint64_t i = 0; i < t->n_elem; i++) f[i] = elem_f32(t->data, t->dtype, i);
        /* Gemma's norms: 1 + w, added in f32 as the converter does (and as
         * transformers' GemmaRMSNorm scales) */
        const size_t gl = strlen(name);
        if (hp->norm_plus_one && gl > 11 && !strcmp(name + gl - 11, "norm.weight"))
            for (uint64_t i = 0; i < t->n_elem; i++) f[i] += 1.0f;
        if ((st = permute_qk(c, hp, kind, t->name, f, (int64_t)t->n_elem, sizeof(float), &data, err, err_size)))
            return st;
        const int64_t ne[1] = {(int64_t)t->n_elem};
        return put_tensor(c, t->name, name, VX_TYPE_F32, 1, ne, data, t->n_elem * 4, err, err_size);
    }
    const int64_t ne[2] = {t->shape[1], t->shape[0]};
    const size_t es = vx_st_dtype_size(t->dtype);
    if ((st = permute_qk(c, hp, kind, t->name, t->data, ne[1], (size_t)ne[0] * es, &data, err, err_size))) return st;
    if ((uintptr_t)data % es != 0) { /* safetensors does not align data */
        uint8_t *p = own(c, (size_t)t->size);
        if (!p) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        memcpy(p, data, (size_t)t->size);
        data = p;
    }
    return put_tensor(c, t->name, name, type, 2, ne, data, t->size, err, err_size);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The checkpoint's files: the shards model.safetensors.index.json names
 * (each tensor it maps must be in its file), or model.safetensors. */
static vx_status open_shards(hf_ctx *c, const char *dir, char *err, size_t err_size) {
    char *text = NULL;
    size_t len = 0;
    bool missing;
    vx_status st = read_text(dir, "model.safetensors.index.json", &text, &len, &missing, err, err_size);
    if (st) return st;
    cJSON *idx = NULL;
    const cJSON *map = NULL;
    const char **files = NULL; /* the weight_map's values, then the distinct ones */
    int64_t n_map = 0, n = 0;
    if (!missing) {
        idx = cJSON_ParseWithLength(text, len);
        map = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
        if (!cJSON_IsObject(map))
            st = vx_seterr(err, err_size, VX_EFORMAT, "%s/model.safetensors.index.json: no weight_map object", dir);
        const cJSON *it;
        if (!st) cJSON_ArrayForEach(it, map) n_map++;
        if (!st && !(files = malloc(((size_t)n_map + 1) * sizeof *files)))
            st = vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        if (!st) cJSON_ArrayForEach(it, map) {
            if (!cJSON_IsString(it) || !it->valuestring[0] || strchr(it->valuestring, '/') ||
                !strcmp(it->valuestring, ".") || !strcmp(it->valuestring, "..")) {
                st = vx_seterr(err, err_size, VX_EFORMAT,
                               "%s/model.safetensors.index.json: tensor '%s' maps to no file name in the directory",
                               dir, it->string);
                break;
            }
            files[n++] = it->valuestring;
        }
        if (!st) { /* distinct names, sorted (a million entries naming a few files stay fast) */
            qsort(files, (size_t)n, sizeof *files, cmp_str);
            int64_t u = 0;
            for (int64_t i = 0; i < n; i++)
                if (u == 0 || strcmp(files[u - 1], files[i]) != 0) files[u++] = files[i];
            n = u;
            if (n > 4096) st = vx_seterr(err, err_size, VX_EUNSUPPORTED, "more than 4096 safetensors shards");
            if (n == 0) st = vx_seterr(err, err_size, VX_EFORMAT, "%s/model.safetensors.index.json maps no tensors", dir);
        }
    } else if (!(files = malloc(sizeof *files))) {
        st = vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    } else {
        files[n++] = "model.safetensors";
    }
    if (!st && !(c->st = calloc((size_t)n, sizeof *c->st))) st = vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    for (int64_t i = 0; !st && i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        st = vx_st_open(path, &c->st[i], err, err_size);
        if (!st) c->n_st++;
    }
    /* every mapped tensor in the file the index names */
    const cJSON *it;
    if (!st && map) cJSON_ArrayForEach(it, map) {
        const char **f = bsearch(&it->valuestring, files, (size_t)n, sizeof *files, cmp_str);
        if (!f || !vx_st_find(c->st[f - files], it->string)) {
            st = vx_seterr(err, err_size, VX_EFORMAT, "%s/model.safetensors.index.json maps '%s' to %s, which lacks it",
                           dir, it->string, it->valuestring);
            break;
        }
    }
    free(files);
    cJSON_Delete(idx);
    free(text);
    return st;
}

/* The chat template of a side file, over tokenizer_config.json's, as
 * transformers (4.47 on) and llama.cpp's converter take it:
 * chat_template.jinja (the template as it is), else chat_template.json's
 * "chat_template" string. */
static vx_status side_chat_template(hf_ctx *c, const char *dir, char *err, size_t err_size) {
    char *t = NULL;
    size_t n = 0;
    bool missing = false;
    vx_status st = read_text(dir, "chat_template.jinja", &t, &n, &missing, err, err_size);
    if (!st && !missing) {
        if (memchr(t, 0, n))
            st = vx_seterr(err, err_size, VX_EFORMAT, "chat_template.jinja holds a NUL byte");
        else st = vx_gguf_set_str(c->w, "tokenizer.chat_template", t);
        free(t);
        return st;
    }
    if (!st) st = read_text(dir, "chat_template.json", &t, &n, &missing, err, err_size);
    if (st || missing) return st;
    cJSON *j = cJSON_ParseWithLength(t, n);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
    if (!cJSON_IsString(ct))
        st = vx_seterr(err, err_size, VX_EFORMAT, "chat_template.json: no \"chat_template\" string");
    else st = vx_gguf_set_str(c->w, "tokenizer.chat_template", ct->valuestring);
    cJSON_Delete(j);
    free(t);
    return st;
}

static vx_status import(hf_ctx *c, const char *dir, char *err, size_t err_size) {
    char *text = NULL, *tok = NULL, *tcfg = NULL;
    size_t len = 0, tok_len = 0, tcfg_len = 0;
    bool missing;
    vx_status st = read_text(dir, "config.json", &text, &len, NULL, err, err_size);
    if (st) return st;
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    hf_hparams hp = {0};
    st = cJSON_IsObject(cfg) ? config_keys(c, cfg, dir, &hp, err, err_size)
                             : vx_seterr(err, err_size, VX_EFORMAT, "config.json is not a JSON object");
    cJSON_Delete(cfg);
    if (!st) st = open_shards(c, dir, err, err_size);
    if (st) {
        free(text);
        return st;
    }
    /* before anything is allocated: the embedding (its rows size the
     * vocabulary), the output matrix, the expert count */
    const vx_st_tensor *emb = NULL, *head = NULL;
    int64_t n_experts = 0;
    for (int i = 0; i < c->n_st; i++)
        for (int64_t j = 0; j < vx_st_n_tensors(c->st[i]); j++) {
            const vx_st_tensor *t = vx_st_tensor_at(c->st[i], j);
            unsigned il, x, wi;
            char tbuf[512];
            const char *tn = text_name(&hp, t->name, tbuf, sizeof tbuf);
            if (!tn) continue;
            if (!strcmp(tn, "model.embed_tokens.weight")) emb = t;
            if (!strcmp(tn, "lm_head.weight")) head = t;
            n_experts += is_expert(tn, &il, &x, &wi);
        }
    if (!emb || emb->n_dims != 2 || emb->shape[1] != hp.n_embd || emb->shape[0] < 1)
        st = vx_seterr(err, err_size, VX_EFORMAT, "model.embed_tokens.weight is %s, not [vocabulary, %lld]",
                       emb ? "malformed" : "missing", (long long)hp.n_embd);
    else if (!head && !hp.tie)
        st = vx_seterr(err, err_size, VX_EFORMAT,
                       "no lm_head.weight, and config.json does not tie it to the embedding (tie_word_embeddings)");
    else if (!hp.gpt_oss && n_experts != hp.n_layer * hp.n_expert * 3)
        st = vx_seterr(err, err_size, VX_EFORMAT, "the checkpoint has %lld expert tensors, not %lld layers x %lld x 3",
                       (long long)n_experts, (long long)hp.n_layer, (long long)hp.n_expert);
    if (st) {
        free(text);
        return st;
    }
    const int64_t n_vocab = emb->shape[0];
    for (int i = 0; !st && i < c->n_st; i++)
        for (int64_t j = 0; !st && j < vx_st_n_tensors(c->st[i]); j++)
            st = add_tensor(c, &hp, vx_st_tensor_at(c->st[i], j), err, err_size);
    if (!st && !hp.gpt_oss) st = add_experts(c, &hp, err, err_size);
    if (!st) st = read_text(dir, "tokenizer_config.json", &tcfg, &tcfg_len, &missing, err, err_size);
    /* Llama-family, Phi-3 and Gemma models: the SentencePiece model when
     * there is one, as the converter prefers it; then tokenizer.json */
    const bool spm_first = hp.spm_first;
    bool spm = false;
    if (!st && spm_first) {
        st = read_text(dir, "tokenizer.model", &tok, &tok_len, &missing, err, err_size);
        spm = !st && !missing;
    }
    if (spm) {
        char *added = NULL;
        size_t added_len = 0;
        st = read_text(dir, "added_tokens.json", &added, &added_len, &missing, err, err_size);
        if (!st)
            st = vx_hf_spm_to_gguf((const uint8_t *)tok, tok_len, tcfg, tcfg_len, text, len, added, added_len, n_vocab,
                                   c->w, err, err_size);
        free(added);
        /* not a SentencePiece model (Llama 3 ships a tiktoken file under
         * that name in some repositories): tokenizer.json, if there is one */
        char path[4096];
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        if (st == VX_EFORMAT && err && strstr(err, "not a SentencePiece model") && access(path, F_OK) == 0) {
            free(tok);
            tok = NULL;
            st = VX_OK;
            spm = false;
        }
    }
    if (!st && !spm) {
        st = read_text(dir, "tokenizer.json", &tok, &tok_len, &missing, err, err_size);
        if (!st && missing)
            st = vx_seterr(err, err_size, VX_EUNSUPPORTED, "%s has no tokenizer.json%s", dir,
                           spm_first ? " or tokenizer.model" : "");
        if (!st) st = vx_hf_tokenizer_to_gguf(tok, tok_len, tcfg, tcfg_len, text, len, n_vocab, c->w, err, err_size);
    }
    if (!st) st = side_chat_template(c, dir, err, err_size);
    free(tok);
    free(tcfg);
    free(text);
    return st;
}

vx_status vx_hf_open(const char *dir, vx_gguf **out, char *err, size_t err_size) {
    *out = NULL;
    hf_ctx *c = calloc(1, sizeof *c);
    if (!c || !(c->w = vx_gguf_writer_init())) {
        free(c);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    vx_status st = import(c, dir, err, err_size);
    if (!st) st = vx_gguf_writer_open_reader(c->w, hf_release, c, out, err, err_size);
    if (st) {
        hf_release(c);
        if (err && err_size) {
            char tmp[VX_ERRMSG_MAX];
            snprintf(tmp, sizeof tmp, "%s", err);
            if (strncmp(tmp, dir, strlen(dir)) != 0) snprintf(err, err_size, "%s: %s", dir, tmp);
        }
    }
    return st;
}
