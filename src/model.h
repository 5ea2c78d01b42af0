/*
 * model.h - the loaded model: hyperparameters, architecture description and
 * weight views into the mapped GGUF file. Read-only after load, so one model
 * can serve any number of contexts and threads.
 */
#ifndef VX_MODEL_H
#define VX_MODEL_H

#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "vortex.h"

#define VX_MAX_LAYERS 512

typedef enum vx_rope_kind {
    VX_ROPE_NORM = 0, /* rotates adjacent pairs (2i, 2i+1): Llama */
    VX_ROPE_NEOX = 1  /* rotates (i, i + n_rot/2): GPT-NeoX, Qwen, Phi-3 */
} vx_rope_kind;

/* What differs between architectures; the forward pass reads only this.
 * Optional tensors (biases, q/k norms, fused projections) are detected from
 * the file, so the table holds just what cannot be. */
typedef struct vx_arch {
    const char *name; /* general.architecture */
    vx_rope_kind rope;
    bool fused_qkv_ok;     /* attn_qkv may replace attn_q/k/v */
    bool fused_gate_up_ok; /* ffn_up may hold [gate; up] without ffn_gate */
    bool gelu;             /* GeGLU feed-forward (GELU's tanh form) instead of SwiGLU */
    bool embed_scale;      /* embeddings times sqrt(n_embd) (Gemma) */
    bool gemma2;           /* post-attention / post-FFN norms, soft caps, sliding window on even layers */
    /* BERT-style encoder (bert, nomic-bert): embeddings plus token type 0
     * through a LayerNorm, attention over the whole sequence (not causal),
     * LayerNorms (with biases) after each block's residual add, no output
     * head: embeddings only, and a sequence comes whole in one batch */
    bool encoder;
    bool abs_pos; /* learned absolute positions (position_embd) instead of RoPE */
    /* Gemma 3 (with gemma2 set): q/k norms, no score cap, a sliding window
     * on all layers but every sliding_window_pattern-th (6), whose RoPE has
     * its own base (rope.freq_base_swa, 10000) and no scaling */
    bool gemma3;
    /* BitNet b1.58 (llama.cpp's "bitnet"): Llama's blocks with an RMSNorm
     * of the attention's output before wo (attn_sub_norm) and of the gated
     * activation before ffn_down (ffn_sub_norm), optional scalar scales of
     * the seven projections' outputs (blk.N.<name>.scale), the activation
     * from {arch}.hidden_activation (SiLU unless "relu2"), and the logits
     * from token_embd always */
    bool bitnet;
    /* OpenAI's gpt-oss (llama.cpp's "gpt-oss"): q/k/v/o biases, a learned
     * sink logit per head in every softmax (attn_sinks), a sliding window
     * on every layer but each sliding_window_pattern-th (2: the even ones),
     * YaRN RoPE, and an MoE FFN after post_attention_norm (its ffn_norm)
     * with biased router and experts and the clamped SwiGLU
     * (VX_FFN_SWIGLU_OAI) */
    bool gpt_oss;
} vx_arch;

/* A 2-D (or 3-D, for stacked experts) weight matrix: ne0 elements per row,
 * ne1 rows, ne2 matrices. Rows are row_size bytes apart. */
typedef struct vx_weight {
    const void *data;
    int type;
    int64_t ne[3];
    size_t row_size; /* bytes per row */
    size_t mat_size; /* bytes per ne0 x ne1 matrix */
    const char *name;
    /* load-time packed copy for the matmul kernels (quant.h), or NULL; data
     * stays the file's layout for row lookups and the f32 reference path */
    const void *pdata;
    int ptype;
    size_t prow_size, pmat_size;
} vx_weight;

typedef struct vx_layer {
    vx_weight attn_norm;
    vx_weight wq, wk, wv, wqkv, wo;
    vx_weight bq, bk, bv, bqkv, bo; /* optional biases (data == NULL when absent) */
    vx_weight q_norm, k_norm;       /* optional per-head RMSNorm weights [head_dim] */
    vx_weight ffn_norm;
    vx_weight attn_post_norm, ffn_post_norm; /* Gemma 2: RMSNorm of the block outputs before the residual add */
    vx_weight ffn_gate, ffn_up, ffn_down; /* dense FFN */
    vx_weight ffn_gate_inp;               /* MoE router [n_embd -> n_expert] */
    /* encoders: attn_norm and ffn_norm are the LayerNorms after the
     * attention's and the FFN's residual adds (attn_output_norm,
     * layer_output_norm), with these biases; the FFN's biases */
    vx_weight attn_norm_b, ffn_norm_b, ffn_up_b, ffn_down_b;
    vx_weight ffn_gate_exps, ffn_up_exps, ffn_down_exps;
    /* MoE layers' shared expert (Qwen2-MoE, Granite MoE): a SwiGLU FFN
     * every token runs, its output times sigmoid(gate_inp_shexp . x) when
     * there is that gate (Qwen2-MoE's) */
    vx_weight ffn_gate_inp_shexp; /* [n_embd] */
    vx_weight ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
    /* BitNet: the sub-norms [n_head head_dim], [n_ff] and the projections'
     * output scales (one F32 value each; data NULL: none, 1) */
    vx_weight attn_sub_norm, ffn_sub_norm;
    vx_weight wq_s, wk_s, wv_s, wo_s, ffn_gate_s, ffn_up_s, ffn_down_s;
    /* gpt-oss: the sinks [n_head], the router's bias [n_expert] and the
     * experts' biases [n_ff or n_embd][n_expert] (data NULL: none) */
    vx_weight attn_sinks, ffn_gate_inp_b, ffn_gate_exps_b, ffn_up_exps_b, ffn_down_exps_b;
} vx_layer;

/* A projection's output scale (vx_layer's *_s): its value, or 1 without. */
static inline float vx_weight_scale(const vx_weight *s) {
    float v = 1.0f;
    if (s->data) memcpy(&v, s->data, sizeof v);
    return v;
}

typedef struct vx_hparams {
    int32_t n_vocab;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim; /* key/value length per head */
    int32_t n_ff;
    int32_t n_ctx_train;
    int32_t n_rot; /* rotary dimensions (<= head_dim) */
    int32_t n_expert;
    int32_t n_expert_used;
    bool moe_norm;      /* the used experts' weights renormalized to sum to 1 (all but Qwen2-MoE) */
    int32_t n_ff_shexp; /* the shared expert's FFN length (0: none) */
    float rms_eps; /* the norms' epsilon (encoders: their LayerNorms') */
    float rope_base;
    float rope_scale; /* linear scaling: positions are divided by this (1 = none) */
    /* YaRN (rope.scaling.type yarn, llama.cpp's arithmetic): pair i's angle
     * mixes the interpolated p theta_i / yarn_factor and the extrapolated
     * p theta_i by ramp(i) ext, ramp 1 below pair yarn_lo falling to 0 at
     * yarn_hi (the correction dims of beta_fast and beta_slow over the
     * original context), and cos and sin are times yarn_mscale (0.1 ln
     * factor + 1, times rope.scaling.attn_factor) */
    bool yarn;
    float yarn_factor, yarn_ext, yarn_mscale, yarn_lo, yarn_hi;
    float attn_scale; /* scores q.k times this (1/sqrt(head_dim); Gemma 2 27B: 1/sqrt(n_embd / n_head)) */
    float attn_softcap, final_softcap; /* Gemma 2: tanh caps of the scores and the logits (0: none) */
    /* Granite's multipliers: the embeddings times embd_scale (any value
     * but 0, as llama.cpp; 0: the arch's rule, Gemma's sqrt(n_embd) or 1),
     * each block's output (all experts' for MoE) times residual_scale
     * before the residual add, the logits divided by logit_scale (1: none) */
    float embd_scale, residual_scale, logit_scale;
    int32_t n_swa;                     /* Gemma 2/3: sliding window of the local layers (0: none) */
    /* layer il is local (windowed) when il % swa_period < swa_period - 1
     * (llama.cpp's rule: Gemma 2's period 2 makes its even layers local) */
    int32_t swa_period;
    float rope_base_swa; /* the local layers' RoPE base, unscaled (rope_dual) */
    bool rope_dual;      /* local layers rotate by their own table (Gemma 3) */
    int32_t pooling;                   /* {arch}.pooling_type (vx_pooling), -1 without one */
    bool fused_qkv, fused_gate_up, tied_output;
    int32_t ffn_act; /* the FFN's gated activation (vx_ffn_act) */
} vx_hparams;

/* g = act(g) u of the gated FFNs: SiLU (SwiGLU), GELU's tanh form (GeGLU:
 * Gemma, BERT), squared ReLU (BitNet b1.58 2B4T's "relu2"), */
/* gpt-oss's clamped SwiGLU: g = min(g, 7), u = clamp(u, -7, 7), then
 * g sigmoid(1.702 g) (u + 1) */
typedef enum vx_ffn_act { VX_FFN_SILU = 0, VX_FFN_GELU = 1, VX_FFN_RELU2 = 2, VX_FFN_SWIGLU_OAI = 3 } vx_ffn_act;

/* Gemma 2 and 3 scale queries by 1/sqrt of this: head_dim, or n_embd /
 * n_head for their 27B models (46 and 62 layers), llama.cpp's rule (the
 * loader applies it, the Hugging Face import checks query_pre_attn_scalar
 * against it) */
static inline double vx_gemma_query_scalar(bool gemma3, int64_t n_layer, int64_t n_embd, int64_t n_head,
                                           int64_t head_dim) {
    return n_layer == (gemma3 ? 62 : 46) ? (double)n_embd / (double)n_head : (double)head_dim;
}

struct vx_model {
    vx_gguf *gguf;
    void *file_buf; /* the whole file when loaded without mmap */
    bool imported;  /* a Hugging Face directory: some weights are heap copies (hf_import.c) */
    vx_vocab *vocab;
    const vx_arch *arch;
    vx_hparams hp;
    char name[128];
    vx_weight tok_embd, output_norm, output, rope_freqs;
    /* encoders: token type and position embeddings, the embeddings'
     * LayerNorm, and the ranking head of rerankers (cls, cls.output) */
    vx_weight type_embd, pos_embd, tok_norm, tok_norm_b, cls, cls_b, cls_out, cls_out_b;
    vx_layer *layers; /* [n_layer] */
    uint64_t n_params, n_bytes;
    /* pipeline parallelism: this process's layers [l0, l1) (all of them
     * alone), the group and the model's id in it (-1: none) */
    int32_t l0, l1;
    vx_dist *dist;
    int32_t dist_id;
    void *pack_buf; /* the packed copies (model_repack.c) */
    size_t pack_size;
    int n_packed;   /* weights with a packed copy */
};

/* Loads layers [l0, l1) of a model, for process l of a group (dist.c). */
vx_status vx_model_load_share(const char *path, const vx_model_params *params, int32_t l0, int32_t l1,
                              vx_model **out, char *err, size_t err_size);

/* Packs every matmul weight whose type has an 8-row layout (quant.h) and
 * whose row count is a multiple of 8 into a copy the batch kernels read. */
vx_status vx_model_repack(vx_model *m, char *err, size_t err_size);

/* Row r of a weight as float (any type); dst has ne[0] floats. */
void vx_weight_row_f32(const vx_weight *w, int64_t r, float *dst);

#endif
