/*
 * cmd_synth.c - `vx synth`: writes GGUF files with real model shapes and
 * random weights, so anyone can reproduce the benchmark figures without
 * downloads (speed does not depend on the weight values).
 *
 * Tensor names, metadata keys and quantization mixes are the standard ones
 * (the mixes come from the same plan as `vx quantize`), so llama.cpp loads
 * these files too. Weights: rows drawn from a pool of random N(0, 0.02)
 * rows quantized with the reference quantizers, tiled in a shuffled order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "gguf.h"
#include "model_quantize.h"
#include "quant.h"
#include "quant_iq.h"

typedef struct preset {
    const char *name, *arch, *title;
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    double rope_base, eps;
    bool tied, qkv_bias;
    int64_t head_dim; /* 0: n_embd / n_head */
    double attn_cap, final_cap; /* Gemma 2's logit soft caps */
    int64_t swa;                /* Gemma 2/3's sliding window */
    double rope_linear;         /* linear RoPE scaling factor (0: none; Gemma 3: its global layers') */
    bool qk_norm;               /* per-head q/k RMSNorms (Qwen3, Gemma 3) */
    int64_t n_expert, n_expert_used, n_ff_exp; /* Qwen3-MoE's experts (0: dense) */
    const double *granite; /* Granite's embedding, residual, attention and logit scales (NULL: none) */
    /* BitNet: {arch}.hidden_activation ("" for none: SiLU) and output
     * scales of the seven projections (blk.N.<name>.scale) */
    const char *act;
    bool proj_scales;
    /* YaRN RoPE scaling: factor (0: none) and original context (gpt-oss) */
    double yarn;
    int64_t yarn_orig;
} preset;

/* Granite 3.x's multipliers (embedding 12, residual 0.22, attention 1/64, logits 8) */
static const double granite_scales[4] = {12.0, 0.22, 0.015625, 8.0};

static const preset presets[] = {
    {"llama-1b", "llama", "Llama-3.2-1B shape (random weights)", 2048, 16, 32, 8, 8192, 128256,
     131072, 500000.0, 1e-5, true, false, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"llama-8b", "llama", "Llama-3-8B shape (random weights)", 4096, 32, 32, 8, 14336, 128256,
     8192, 500000.0, 1e-5, false, false, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"qwen-0.5b", "qwen2", "Qwen2.5-0.5B shape (random weights)", 896, 24, 14, 2, 4864, 151936,
     32768, 1000000.0, 1e-6, true, true, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"tiny", "llama", "tiny llama shape (random weights, for tests)", 256, 2, 4, 2, 512, 1024,
     2048, 10000.0, 1e-5, false, false, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"gemma-2b", "gemma", "Gemma-2B shape (random weights)", 2048, 18, 8, 1, 16384, 256000, 8192, 10000.0, 1e-6,
     true, false, 256, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"gemma-tiny", "gemma", "tiny Gemma shape (random weights, for tests: head_dim 128 x 4 heads over 256)", 256, 2,
     4, 1, 512, 1024, 2048, 10000.0, 1e-6, true, false, 128, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"gemma2-2b", "gemma2", "Gemma-2-2B shape (random weights)", 2304, 26, 8, 4, 9216, 256000, 8192, 10000.0, 1e-6,
     true, false, 256, 50.0, 30.0, 4096, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    /* 26 layers: llama.cpp takes Gemma 2 models of 26, 42 or 46 layers only */
    {"gemma2-tiny", "gemma2", "tiny Gemma 2 shape (random weights, for tests: 26 layers, caps 0.5 / 1, window 6)", 128,
     26, 4, 2, 256, 1024, 2048, 10000.0, 1e-6, true, false, 64, 0.5, 1.0, 6, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    /* Gemma 3: a 512 window on 5 of every 6 layers, q/k norms; the tiny
     * one has a window of 5 tokens, and linear RoPE scaling on its global
     * layer (as the 4B and larger models) */
    {"gemma3-1b", "gemma3", "Gemma-3-1B shape (random weights)", 1152, 26, 4, 1, 6912, 262144, 32768, 1000000.0,
     1e-6, true, false, 256, 0, 0, 512, 0, true, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"gemma3-4b", "gemma3", "Gemma-3-4B shape (random weights; text model)", 2560, 34, 8, 4, 10240, 262208, 131072,
     1000000.0, 1e-6, true, false, 256, 0, 0, 1024, 8.0, true, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"gemma3-tiny", "gemma3", "tiny Gemma 3 shape (random weights, for tests: 8 layers, window 5, RoPE x8 global)",
     128, 8, 4, 2, 256, 1024, 2048, 1000000.0, 1e-6, true, false, 64, 0, 0, 5, 8.0, true, 0, 0, 0, NULL, NULL, false, 0, 0},
    /* Qwen3-MoE: 128 experts of 768, 8 used; the tiny one 8 of 64, 2 used */
    {"qwen3-30b-a3b", "qwen3moe", "Qwen3-30B-A3B shape (random weights)", 2048, 48, 32, 4, 6144, 151936, 40960,
     1000000.0, 1e-6, false, false, 128, 0, 0, 0, 0, true, 128, 8, 768, NULL, NULL, false, 0, 0},
    {"qwen3moe-tiny", "qwen3moe", "tiny Qwen3-MoE shape (random weights, for tests: 8 experts, 2 used)", 128, 2, 4,
     2, 256, 1024, 2048, 1000000.0, 1e-6, false, false, 0, 0, 0, 0, 0, true, 8, 2, 64, NULL, NULL, false, 0, 0},
    /* Qwen2-MoE (Qwen1.5-MoE-A2.7B): 60 experts of 1408, 4 used, a shared
     * expert of 5632 (feed_forward_length); the tiny one 8 of 64, 2 used,
     * a shared one of 256 */
    {"qwen2moe-a2.7b", "qwen2moe", "Qwen1.5-MoE-A2.7B shape (random weights)", 2048, 24, 16, 16, 5632, 151936, 8192,
     1000000.0, 1e-6, false, true, 0, 0, 0, 0, 0, false, 60, 4, 1408, NULL, NULL, false, 0, 0},
    {"qwen2moe-tiny", "qwen2moe", "tiny Qwen2-MoE shape (random weights, for tests: 8 experts, 2 used, 1 shared)", 128,
     2, 4, 2, 256, 1024, 2048, 1000000.0, 1e-6, false, true, 0, 0, 0, 0, 0, false, 8, 2, 64, NULL, NULL, false, 0, 0},
    /* IBM Granite 3.1 2B: Llama's blocks with multipliers */
    {"granite-2b", "granite", "Granite-3.1-2B shape (random weights)", 2048, 40, 32, 8, 8192, 49155, 131072,
     5000000.0, 1e-5, true, false, 0, 0, 0, 0, 0, false, 0, 0, 0, granite_scales, NULL, false, 0, 0},
    {"granite-tiny", "granite", "tiny Granite shape (random weights, for tests: Granite 3's multipliers)", 128, 2, 4,
     2, 256, 1024, 2048, 10000.0, 1e-5, true, false, 0, 0, 0, 0, 0, false, 0, 0, 0, granite_scales, NULL, false, 0, 0},
    /* Granite MoE with a shared expert (granitemoeshared's layout): 8 experts
     * of 64, 2 used, an ungated shared one of 256 (feed_forward_length) */
    {"granitemoe-tiny", "granitemoe", "tiny Granite MoE shape (random weights, for tests: 8 experts, 1 shared)", 128,
     2, 4, 2, 256, 1024, 2048, 10000.0, 1e-5, true, false, 0, 0, 0, 0, 0, false, 8, 2, 64, granite_scales, NULL, false, 0, 0},
    /* encoders (embedding models): a WordPiece vocabulary of the same
     * layout as BERT's ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102) */
    {"bge-small", "bert", "bge-small-en-v1.5 shape (random weights)", 384, 12, 12, 12, 1536, 30522, 512, 10000.0,
     1e-12, false, true, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"bert-tiny", "bert", "tiny BERT shape (random weights, for tests)", 128, 2, 4, 4, 512, 2048, 512, 10000.0, 1e-12,
     false, true, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"nomic-embed", "nomic-bert", "nomic-embed-text-v1.5 shape (random weights)", 768, 12, 12, 12, 3072, 30522, 2048,
     1000.0, 1e-12, false, false, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    {"nomic-tiny", "nomic-bert", "tiny nomic-bert shape (random weights, for tests)", 128, 2, 4, 4, 512, 2048, 2048,
     1000.0, 1e-12, false, false, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, false, 0, 0},
    /* BitNet b1.58 2B4T (bitnet_b1_58 layout as llama.cpp converts it:
     * sub-norms, tied output; "relu2" FFN); the tiny ones for tests: SiLU
     * (llama.cpp's default) and relu2, with projection scales */
    {"bitnet-2b", "bitnet", "BitNet b1.58 2B4T shape (random weights)", 2560, 30, 20, 5, 6912, 128256, 4096,
     500000.0, 1e-5, true, false, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, "relu2", false, 0, 0},
    {"bitnet-tiny", "bitnet", "tiny BitNet shape (random weights, for tests: SiLU, projection scales)", 256, 2, 4, 2,
     512, 1024, 2048, 10000.0, 1e-5, true, false, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, NULL, true, 0, 0},
    {"bitnet-relu2-tiny", "bitnet", "tiny BitNet shape (random weights, for tests: relu2, projection scales)", 256, 2,
     4, 2, 512, 1024, 2048, 10000.0, 1e-5, true, false, 0, 0, 0, 0, 0, false, 0, 0, 0, NULL, "relu2", true, 0, 0},
    /* gpt-oss-20b: 32 experts of 2880 (MXFP4 in OpenAI's release), 4
     * used, a 128-token window on the even layers, YaRN x32 over 4096; the
     * tiny one: 8 experts of 64, 2 used, window 5, YaRN x4 over 256 */
    {"gpt-oss-20b", "gpt-oss", "gpt-oss-20b shape (random weights)", 2880, 24, 64, 8, 2880, 201088, 131072, 150000.0,
     1e-5, false, true, 64, 0, 0, 128, 0, false, 32, 4, 2880, NULL, NULL, false, 32.0, 4096},
    {"gpt-oss-tiny", "gpt-oss", "tiny gpt-oss shape (random weights, for tests: 8 experts, 2 used, window 5, YaRN)",
     128, 4, 4, 2, 64, 1024, 2048, 150000.0, 1e-5, false, true, 32, 0, 0, 5, 0, false, 8, 2, 64, NULL, NULL, false,
     4.0, 256},
};

/* The encoder presets (bert, nomic-bert) */
static bool is_encoder(const preset *p) { return !strcmp(p->arch, "bert") || !strcmp(p->arch, "nomic-bert"); }

#define N_PRESETS (sizeof presets / sizeof presets[0])
#define POOL_ROWS 64

static uint64_t rng_u64(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A row of a type with no quantizer (the grid i-quants): random codes,
 * each block's scale set so its values have an RMS of rms. */
static void random_codes(int type, uint8_t *row, int64_t ne0, float rms, uint64_t *rng) {
    const vx_type_traits *tr = vx_type_get_traits(type);
    const size_t rs = vx_row_size((vx_type)type, ne0);
    for (size_t i = 0; i < rs; i += 8) {
        const uint64_t v = rng_u64(rng);
        memcpy(row + i, &v, rs - i < 8 ? rs - i : 8);
    }
    float vals[VX_QK_K];
    for (int64_t b = 0; b < ne0 / tr->blck_size; b++) {
        uint8_t *blk = row + (size_t)b * tr->type_size;
        vx_iq_set_scale(type, blk, 0x3C00); /* 1.0 */
        tr->to_float(blk, vals, tr->blck_size);
        double ss = 0;
        for (int64_t j = 0; j < tr->blck_size; j++) ss += (double)vals[j] * vals[j];
        const double r = sqrt(ss / (double)tr->blck_size);
        vx_iq_set_scale(type, blk, vx_fp32_to_fp16(r > 0 ? (float)(rms / r) : 1.0f));
    }
}

static float rng_normal(uint64_t *s) {
    double u1 = ((double)(rng_u64(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(rng_u64(s) >> 11) + 0.5) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

typedef struct tensor_spec {
    char name[64];
    uint32_t n_dims;
    int64_t ne[4];
    bool vector; /* norms and biases: F32, filled with ~1 or ~0 */
} tensor_spec;

#define MAT(nm, a, b) (snprintf(ts[n].name, 64, "%s", nm), ts[n].n_dims = 2, ts[n].ne[0] = a, \
                       ts[n].ne[1] = b, ts[n].ne[2] = ts[n].ne[3] = 1, ts[n].vector = false, n++)
#define MAT3(nm, a, b, c) (MAT(nm, a, b), ts[n - 1].n_dims = 3, ts[n - 1].ne[2] = c)
#define VEC(nm, a) (snprintf(ts[n].name, 64, "%s", nm), ts[n].n_dims = 1, ts[n].ne[0] = a, \
                    ts[n].ne[1] = ts[n].ne[2] = ts[n].ne[3] = 1, ts[n].vector = true, n++)
#define VEC2(nm, a, b) (VEC(nm, a), ts[n - 1].n_dims = 2, ts[n - 1].ne[1] = b)
#define L(s) (snprintf(nm, sizeof nm, "blk.%lld.%s", (long long)il, s), nm)

/* An encoder's tensors after token_embd (llama.cpp's names): BERT's
 * biased q/k/v and GELU FFN with absolute positions, or nomic-bert's fused
 * qkv and SwiGLU without biases. */
static int build_encoder_specs(const preset *p, tensor_spec *ts) {
    int n = 0;
    const int64_t E = p->n_embd, F = p->n_ff;
    const bool bert = !strcmp(p->arch, "bert");
    char nm[64];
    MAT("token_types.weight", E, 2);
    if (bert) MAT("position_embd.weight", E, p->n_ctx);
    VEC("token_embd_norm.weight", E);
    VEC("token_embd_norm.bias", E);
    for (int64_t il = 0; il < p->n_layer; il++) {
        if (bert) {
            MAT(L("attn_q.weight"), E, E);
            VEC(L("attn_q.bias"), E);
            MAT(L("attn_k.weight"), E, E);
            VEC(L("attn_k.bias"), E);
            MAT(L("attn_v.weight"), E, E);
            VEC(L("attn_v.bias"), E);
        } else {
            MAT(L("attn_qkv.weight"), E, 3 * E);
        }
        MAT(L("attn_output.weight"), E, E);
        if (bert) VEC(L("attn_output.bias"), E);
        VEC(L("attn_output_norm.weight"), E);
        VEC(L("attn_output_norm.bias"), E);
        if (!bert) MAT(L("ffn_gate.weight"), E, F);
        MAT(L("ffn_up.weight"), E, F);
        if (bert) VEC(L("ffn_up.bias"), F);
        MAT(L("ffn_down.weight"), F, E);
        if (bert) VEC(L("ffn_down.bias"), E);
        VEC(L("layer_output_norm.weight"), E);
        VEC(L("layer_output_norm.bias"), E);
    }
    return n;
}

static int build_specs(const preset *p, tensor_spec *ts) {
    int n = 0;
    const int64_t E = p->n_embd, hd = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    const int64_t QD = p->n_head * hd, KD = p->n_head_kv * hd;
    char nm[64];
    MAT("token_embd.weight", E, p->n_vocab);
    if (is_encoder(p)) return n + build_encoder_specs(p, ts + n);
    for (int64_t il = 0; il < p->n_layer; il++) {
        VEC(L("attn_norm.weight"), E);
        MAT(L("attn_q.weight"), E, QD);
        MAT(L("attn_k.weight"), E, KD);
        MAT(L("attn_v.weight"), E, KD);
        if (p->qkv_bias) {
            VEC(L("attn_q.bias"), QD);
            VEC(L("attn_k.bias"), KD);
            VEC(L("attn_v.bias"), KD);
        }
        MAT(L("attn_output.weight"), QD, E);
        const bool oss = !strcmp(p->arch, "gpt-oss");
        if (oss) {
            VEC(L("attn_output.bias"), E);
            VEC(L("attn_sinks.weight"), p->n_head);
        }
        if (p->qk_norm) {
            VEC(L("attn_q_norm.weight"), hd);
            VEC(L("attn_k_norm.weight"), hd);
        }
        VEC(L(oss ? "post_attention_norm.weight" : "ffn_norm.weight"), E);
        if (p->n_expert) {
            MAT(L("ffn_gate_inp.weight"), E, p->n_expert);
            MAT3(L("ffn_gate_exps.weight"), E, p->n_ff_exp, p->n_expert);
            MAT3(L("ffn_up_exps.weight"), E, p->n_ff_exp, p->n_expert);
            MAT3(L("ffn_down_exps.weight"), p->n_ff_exp, E, p->n_expert);
            if (oss) {
                VEC(L("ffn_gate_inp.bias"), p->n_expert);
                VEC2(L("ffn_gate_exps.bias"), p->n_ff_exp, p->n_expert);
                VEC2(L("ffn_up_exps.bias"), p->n_ff_exp, p->n_expert);
                VEC2(L("ffn_down_exps.bias"), E, p->n_expert);
            }
            if (!strcmp(p->arch, "qwen2moe") || !strcmp(p->arch, "granitemoe")) { /* the shared expert */
                if (!strcmp(p->arch, "qwen2moe")) VEC(L("ffn_gate_inp_shexp.weight"), E);
                MAT(L("ffn_gate_shexp.weight"), E, p->n_ff);
                MAT(L("ffn_up_shexp.weight"), E, p->n_ff);
                MAT(L("ffn_down_shexp.weight"), p->n_ff, E);
            }
        } else {
            MAT(L("ffn_gate.weight"), E, p->n_ff);
            MAT(L("ffn_up.weight"), E, p->n_ff);
            MAT(L("ffn_down.weight"), p->n_ff, E);
        }
        if (!strcmp(p->arch, "bitnet")) {
            VEC(L("attn_sub_norm.weight"), QD);
            VEC(L("ffn_sub_norm.weight"), p->n_ff);
            static const char *const sc[7] = {"attn_q.scale", "attn_k.scale",   "attn_v.scale", "attn_output.scale",
                                              "ffn_gate.scale", "ffn_up.scale", "ffn_down.scale"};
            for (int k = 0; p->proj_scales && k < 7; k++) VEC(L(sc[k]), 1);
        }
        if (!strncmp(p->arch, "gemma", 5) && strcmp(p->arch, "gemma")) { /* gemma2, gemma3 */
            VEC(L("post_attention_norm.weight"), E);
            VEC(L("post_ffw_norm.weight"), E);
        }
    }
    VEC("output_norm.weight", E);
    if (!p->tied) MAT("output.weight", E, p->n_vocab);
    return n;
}

#undef MAT
#undef MAT3
#undef VEC
#undef VEC2
#undef L

/* Token i of the WordPiece vocabulary (BERT's layout, llama.cpp's spelling:
 * word starts with U+2581, continuations bare): [PAD] 0, [unused*] 1-99,
 * [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, then each printable ASCII
 * character as a word start and as a continuation, then words "t<i>". */
static void wpm_entry(int64_t i, char *buf, int32_t *type) {
    static const char *const special[] = {"[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    const int64_t nc = 126 - 33 + 1; /* '!' .. '~' */
    *type = 1; /* normal */
    if (i == 0) snprintf(buf, 24, "[PAD]"), *type = 3;
    else if (i < 100) snprintf(buf, 24, "[unused%lld]", (long long)(i - 1)), *type = 5;
    else if (i < 104) snprintf(buf, 24, "%s", special[i - 100]), *type = 3;
    else if (i < 104 + nc) snprintf(buf, 24, "\xe2\x96\x81%c", (char)(33 + i - 104));
    else if (i < 104 + 2 * nc) snprintf(buf, 24, "%c", (char)(33 + i - 104 - nc));
    else snprintf(buf, 24, "\xe2\x96\x81t%lld", (long long)i);
}

static void synth_usage(void) {
    printf("usage: vx synth --preset NAME --type TYPE -o FILE.gguf [--seed N] [--std X]\n"
           "\n"
           "Writes a GGUF file with a real model's shapes and random weights (matrices Gaussian with\n"
           "standard deviation --std, default 0.02; larger values drive activations into ranges such as\n"
           "gpt-oss's SwiGLU clamp).\n"
           "presets:\n");
    for (size_t i = 0; i < N_PRESETS; i++) printf("  %-10s %s\n", presets[i].name, presets[i].title);
    printf("types: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M\n"
           "       Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS TQ1_0 TQ2_0 MXFP4_MOE (mixes follow llama-quantize's policy)\n"
           "       IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_M IQ3_XXS IQ3_S (every matrix, random codes)\n");
}

int vx_cmd_synth(int argc, char **argv) {
    const char *pname = NULL, *tname = NULL, *out = NULL;
    uint64_t seed = 1;
    float wstd = 0.02f;
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            synth_usage();
            return 0;
        } else if (!strcmp(o, "--preset")) pname = cli_value(&a);
        else if (!strcmp(o, "--type")) tname = cli_value(&a);
        else if (!strcmp(o, "-o") || !strcmp(o, "--output")) out = cli_value(&a);
        else if (!strcmp(o, "--seed")) cli_u64(&a, &seed);
        else if (!strcmp(o, "--std")) cli_float(&a, 1e-6, 100.0, &wstd);
        else {
            fprintf(stderr, "error: unknown option '%s' (see vx synth --help)\n", o);
            return 2;
        }
    }
    if (a.error) return 2;
    if (!pname || !tname || !out) {
        fprintf(stderr, "error: --preset, --type and -o are required\n");
        return 2;
    }
    const preset *p = NULL;
    for (size_t i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].name, pname)) p = &presets[i];
    if (!p) {
        fprintf(stderr, "error: unknown preset '%s' (see vx synth --help)\n", pname);
        return 2;
    }
    const vx_quant_mix *mix = vx_quant_mix_find(tname);
    if (!mix) {
        fprintf(stderr, "error: unknown type '%s' (see vx synth --help)\n", tname);
        return 2;
    }
    tensor_spec *ts = calloc((size_t)(p->n_layer * 24 + 8), sizeof *ts);
    if (!ts) return 1;
    const int nt = build_specs(p, ts);
    vx_quant_shape *shapes = calloc((size_t)nt, sizeof *shapes);
    int *types = calloc((size_t)nt, sizeof *types);
    void **bufs = calloc((size_t)nt, sizeof *bufs);
    vx_gguf_writer *w = vx_gguf_writer_init();
    char err[VX_ERRMSG_MAX];
    int rc = 1;
    if (!shapes || !types || !bufs || !w) goto done;
    for (int i = 0; i < nt; i++) {
        shapes[i].name = ts[i].name;
        shapes[i].n_dims = ts[i].n_dims;
        memcpy(shapes[i].ne, ts[i].ne, sizeof ts[i].ne);
        shapes[i].type = VX_TYPE_F32;
    }
    vx_quant_hparams qh = {p->arch, p->n_layer, p->n_head, p->n_head_kv, p->n_expert};
    if (vx_quantize_plan_shapes(shapes, nt, &qh, mix, false, true, types, NULL, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }

    /* metadata */
    const bool enc = is_encoder(p);
    char key[128];
#define K(s) (snprintf(key, sizeof key, "%s.%s", p->arch, s), key)
    vx_gguf_set_str(w, "general.architecture", p->arch);
    vx_gguf_set_str(w, "general.name", p->title);
    vx_gguf_set_u32(w, "general.file_type", (uint32_t)mix->ftype);
    vx_gguf_set_u32(w, "general.quantization_version", 2);
    vx_gguf_set_u32(w, K("context_length"), (uint32_t)p->n_ctx);
    vx_gguf_set_u32(w, K("embedding_length"), (uint32_t)p->n_embd);
    vx_gguf_set_u32(w, K("block_count"), (uint32_t)p->n_layer);
    /* Granite MoE's experts are feed_forward_length long (llama.cpp reads no other key), its shared one the preset's n_ff */
    const bool gmoe = !strcmp(p->arch, "granitemoe");
    vx_gguf_set_u32(w, K("feed_forward_length"), (uint32_t)(gmoe ? p->n_ff_exp : p->n_ff));
    vx_gguf_set_u32(w, K("attention.head_count"), (uint32_t)p->n_head);
    vx_gguf_set_u32(w, K("attention.head_count_kv"), (uint32_t)p->n_head_kv);
    const int64_t hd = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    vx_gguf_set_u32(w, K("rope.dimension_count"), (uint32_t)hd);
    if (p->attn_cap > 0) vx_gguf_set_f32(w, K("attn_logit_softcapping"), (float)p->attn_cap);
    if (p->final_cap > 0) vx_gguf_set_f32(w, K("final_logit_softcapping"), (float)p->final_cap);
    if (p->swa) vx_gguf_set_u32(w, K("attention.sliding_window"), (uint32_t)p->swa);
    if (p->yarn > 0) {
        vx_gguf_set_str(w, K("rope.scaling.type"), "yarn");
        vx_gguf_set_f32(w, K("rope.scaling.factor"), (float)p->yarn);
        vx_gguf_set_u32(w, K("rope.scaling.original_context_length"), (uint32_t)p->yarn_orig);
    }
    if (p->rope_linear > 0) {
        vx_gguf_set_str(w, K("rope.scaling.type"), "linear");
        vx_gguf_set_f32(w, K("rope.scaling.factor"), (float)p->rope_linear);
    }
    if (p->n_expert) {
        vx_gguf_set_u32(w, K("expert_count"), (uint32_t)p->n_expert);
        vx_gguf_set_u32(w, K("expert_used_count"), (uint32_t)p->n_expert_used);
        if (!strcmp(p->arch, "qwen2moe") || !strcmp(p->arch, "granitemoe"))
            vx_gguf_set_u32(w, K("expert_shared_feed_forward_length"), (uint32_t)p->n_ff);
        if (!gmoe) vx_gguf_set_u32(w, K("expert_feed_forward_length"), (uint32_t)p->n_ff_exp);
    }
    if (p->head_dim) {
        vx_gguf_set_u32(w, K("attention.key_length"), (uint32_t)hd);
        vx_gguf_set_u32(w, K("attention.value_length"), (uint32_t)hd);
    }
    vx_gguf_set_f32(w, K("rope.freq_base"), (float)p->rope_base);
    if (p->act) vx_gguf_set_str(w, K("hidden_activation"), p->act);
    if (p->granite) {
        vx_gguf_set_f32(w, K("embedding_scale"), (float)p->granite[0]);
        vx_gguf_set_f32(w, K("residual_scale"), (float)p->granite[1]);
        vx_gguf_set_f32(w, K("attention.scale"), (float)p->granite[2]);
        vx_gguf_set_f32(w, K("logit_scale"), (float)p->granite[3]);
    }
    if (enc) { /* bge pools by CLS, nomic-embed-text by the mean */
        vx_gguf_set_f32(w, K("attention.layer_norm_epsilon"), (float)p->eps);
        vx_gguf_set_bool(w, K("attention.causal"), false);
        vx_gguf_set_u32(w, K("pooling_type"), strcmp(p->arch, "bert") ? 1 : 2);
        vx_gguf_set_u32(w, "tokenizer.ggml.token_type_count", 2);
    } else {
        vx_gguf_set_f32(w, K("attention.layer_norm_rms_epsilon"), (float)p->eps);
    }
    vx_gguf_set_u32(w, K("vocab_size"), (uint32_t)p->n_vocab);
#undef K
    /* a SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte tokens,
     * pieces; or (encoders) a WordPiece one */
    {
        const int64_t V = p->n_vocab;
        char **toks = calloc((size_t)V, sizeof *toks);
        float *scores = calloc((size_t)V, sizeof *scores);
        int32_t *ttype = calloc((size_t)V, sizeof *ttype);
        char *pool = calloc((size_t)V, 24);
        if (!toks || !scores || !ttype || !pool) {
            free(toks); free(scores); free(ttype); free(pool);
            goto done;
        }
        for (int64_t i = 0; i < V; i++) {
            toks[i] = pool + i * 24;
            if (enc) {
                wpm_entry(i, toks[i], &ttype[i]);
                continue;
            }
            if (i == 0) snprintf(toks[i], 24, "<unk>");
            else if (i == 1) snprintf(toks[i], 24, "<s>");
            else if (i == 2) snprintf(toks[i], 24, "</s>");
            else if (i < 259) snprintf(toks[i], 24, "<0x%02X>", (unsigned)(i - 3));
            else snprintf(toks[i], 24, "\xe2\x96\x81t%lld", (long long)i);
            ttype[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
            scores[i] = i < 259 ? 0.0f : -(float)i;
        }
        vx_gguf_set_str(w, "tokenizer.ggml.model", enc ? "bert" : "llama");
        vx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)V);
        vx_gguf_set_arr(w, "tokenizer.ggml.scores", VX_GGUF_FLOAT32, scores, (uint64_t)V);
        vx_gguf_set_arr(w, "tokenizer.ggml.token_type", VX_GGUF_INT32, ttype, (uint64_t)V);
        vx_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", enc ? 101 : 1);
        if (enc) {
            vx_gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", 102);
            vx_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 0);
            vx_gguf_set_u32(w, "tokenizer.ggml.mask_token_id", 103);
        } else {
            vx_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
        }
        vx_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", enc ? 100 : 0);
        free(toks); free(scores); free(ttype); free(pool);
    }

    /* tensors */
    uint64_t rng = seed * 0x2545F4914F6CDD1Dull + 1, total = 0;
    for (int i = 0; i < nt; i++) {
        const tensor_spec *t = &ts[i];
        const int type = t->vector ? VX_TYPE_F32 : types[i];
        const vx_type_traits *tr = vx_type_get_traits(type);
        const int64_t ne0 = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
        const size_t rs = vx_row_size((vx_type)type, ne0);
        const size_t bytes = rs * (size_t)rows;
        uint8_t *data = malloc(bytes);
        float *row = malloc((size_t)ne0 * sizeof(float));
        const int64_t npool = rows < POOL_ROWS ? rows : POOL_ROWS;
        uint8_t *pool = malloc(rs * (size_t)npool);
        if (!data || !row || !pool) {
            free(data); free(row); free(pool);
            fprintf(stderr, "error: out of memory for %s\n", t->name);
            goto done;
        }
        for (int64_t r = 0; r < npool; r++) {
            if (!tr->from_float) {
                random_codes(type, pool + (size_t)r * rs, ne0, wstd, &rng);
                continue;
            }
            for (int64_t j = 0; j < ne0; j++)
                row[j] = strstr(t->name, ".scale") ? 1.0f + 0.25f * fabsf(rng_normal(&rng)) /* BitNet's */
                         : strstr(t->name, "attn_sinks") ? 1.0f + 0.5f * rng_normal(&rng) /* gpt-oss's, ~1 */
                         : t->vector ? (strstr(t->name, "norm.weight") ? 1.0f : 0.0f) + 0.02f * rng_normal(&rng)
                                     : wstd * rng_normal(&rng);
            tr->from_float(row, pool + (size_t)r * rs, ne0);
        }
        for (int64_t r = 0; r < rows; r++)
            memcpy(data + (size_t)r * rs, pool + (size_t)(rng_u64(&rng) % (uint64_t)npool) * rs, rs);
        free(row);
        free(pool);
        bufs[i] = data;
        if (vx_gguf_add_tensor(w, t->name, type, t->n_dims, t->ne, data, bytes, true) != VX_OK) {
            fprintf(stderr, "error: cannot add tensor %s\n", t->name);
            goto done;
        }
        total += bytes;
        if (isatty(2))
            fprintf(stderr, "\r[%3d/%3d] %-28s %-6s %8.2f MiB\033[K", i + 1, nt, t->name, tr->name,
                    (double)bytes / (1 << 20));
    }
    if (isatty(2)) fprintf(stderr, "\r\033[K");
    if (vx_gguf_write_file(w, out, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    printf("%s: %s, %s, %d tensors, %.2f MiB\n", out, p->title, mix->name, nt, (double)total / (1 << 20));
    rc = 0;
done:
    if (bufs)
        for (int i = 0; i < nt; i++) free(bufs[i]);
    free(bufs);
    vx_gguf_writer_free(w);
    free(types);
    free(shapes);
    free(ts);
    return rc;
}
