/*
 * forward.c - the context (KV cache, scratch, thread pool) and the
 * batch-first forward pass: a list of tokens, each with a position and a
 * sequence id, runs through every layer together. Decode, prefill and mixed
 * batches of many sequences are the same code path.
 *
 * All threads run forward_worker(); each op splits its work by (ith, nth)
 * and ends at a barrier. Nothing here allocates: buffers are sized at
 * context init for n_batch tokens.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention.h"
#include "common.h"
#include "dist.h"
#include "embed.h"
#include "kv_cache.h"
#include "matmul.h"
#include "model.h"
#include "ops.h"
#include "threadpool.h"

/* Matmuls of at least this many tokens take the AMX GEMM: below, building
 * the weight panels costs more than the VNNI kernels' whole work on them.
 * Sapphire Rapids, 2 threads, pp t/s with AMX from 16 or 32 tokens against
 * VNNI only (3 runs each, session 19, after the AVX-512 small-batch GEMMs):
 * Llama-1B Q4_K_M pp24 99-157 vs 149-233, pp32 161-220 vs 138-183, pp48
 * 228-275 vs 127-207; Q8_0 pp24 123-134 vs 97-106, pp32 142-163 vs
 * 106-126, pp48 148-188 vs 116-123; Q4_0 pp48 145-238 vs 123-125;
 * Qwen2.5-0.5B Q4_K_M pp28 291-357 vs 310-390, pp48 463-524 vs 300-368.
 * (Before those GEMMs, with slower panels, the crossover was ~64.)
 * BF16 and F16 weights have no int8 kernels: below the threshold they run
 * the AVX2 fp32 GEMM, and their panels are cheap (BF16: a transpose), so
 * the tiles win much earlier. BF16 pp2 10-14 vs 13-16, pp4 22-28 vs
 * 12-14, pp8 43-53 vs 17-23, pp16 74-103 vs 28-36; F16 (split panels,
 * three products) pp8 16-24 vs 20-22, pp12 24-29 vs 33-36, pp16 31-50 vs
 * 28-36, pp24 46-78 vs 38-50 (2-3 runs each, AMX from 2-16 vs from 32).
 * Q8_0 and Q4_0 (the cheapest panels of the quantized types) from 24:
 * Q8_0 pp24 130-138 vs 100-126, pp28 147-162 vs 94-127; Q4_0 pp24
 * 111-143 vs 111-134, pp28 152-166 vs 104-141 (3 runs each); against
 * the binary with 32 for them, alternated medians: pp24 even, pp28 Q8_0
 * 123.2 -> 145.5, Q4_0 138.8 -> 173.7.
 * Session 21: BF16 from 5, since the AVX-512 tier's 2-15 token GEMV
 * passes (avx512_half.c) beat the tiles at 4 tokens: batched decode
 * aggregate t/s, tiles vs passes, x4 15.6 vs 21.7, x5 25.3 vs 21.1, x6
 * 30.2 vs 27.4, x8 36.7 vs 24.9; F16 stays at 16 (tiles x14 27.9 vs
 * passes 29.8, x16 36-38 vs the AVX2 GEMM's 24).
 * Session 29: below these counts the packed 32-element types take the
 * int8 tile GEMM (amx_gemm_i8.c, the VNNI GEMM's bits) rather than the
 * VNNI one, which moved the crossovers: Q8_0 to 40 (int8 tiles / bf16
 * tiles, Llama-1B pp t/s: pp32 330 / 303, pp40 308 / 302, pp48 326 /
 * 357), Q4_0 to 32 (pp24 343 / 294, pp32 345 / 351, pp40 315 / 376). */
#define AMX_MIN_TOK 32
#define AMX_MIN_TOK_Q8_0 40
#define AMX_MIN_TOK_Q4_0 32
#define AMX_MIN_TOK_BF16 5
#define AMX_MIN_TOK_F16 16

struct vx_context {
    const vx_model *model;
    vx_context_params params;
    vx_kernels kern;
    void (*glu)(float *g, const float *u, int64_t n); /* the FFN's activation: kern.swiglu or kern.geglu */
    float embed_scale;                               /* embeddings times this (1, or Gemma's sqrt(n_embd)) */
    vx_pool *pool;
    vx_kv_cache *kv;
    char errmsg[VX_ERRMSG_MAX];

    /* activations, [n_batch][...] */
    float *x;      /* [nb][E] residual stream */
    float *xn;     /* [nb][E] normed input of the current block */
    float *q;      /* [nb][QD] */
    float *k;      /* [nb][KD] */
    float *v;      /* [nb][KD] */
    float *qkv;    /* [nb][QD + 2 KD] fused projection output */
    float *att;    /* [nb][QD] attention output */
    float *gate;   /* [nb][FF] (FF = 2 n_ff when fused gate/up) */
    float *up;     /* [nb][FF] */
    float *rope;   /* [nb][n_rot/2][2] cos, sin */
    float *rope_local; /* the local layers' own table (hp.rope_dual), else rope */
    float *logits; /* [nb][V] rows of tokens that asked for logits */
    int32_t *out_row; /* [nb] logits row of each batch token, -1 if none */
    int32_t *out_tok; /* [nb] batch index of each logits row */
    int32_t *seq_next; /* [n_seq_max] next position per sequence, during vx_decode */
    int32_t n_out;
    float *embd;      /* [nb][E] output norms of the tokens that asked for embeddings */
    float *ones;      /* encoders without a gate: [n_ff] ones, GELU as GeGLU */
    int32_t *emb_row; /* [nb] embd row of each batch token, -1 if none */
    int32_t *emb_tok; /* [nb] batch index of each embd row */
    int32_t n_emb;

    /* MoE routing, [nb][n_expert_used] and per-expert token lists */
    float *router;       /* [nb][X] */
    int32_t *sel;        /* [nb][K] */
    float *sel_w;        /* [nb][K] */
    int32_t *exp_tok;    /* [X][nb] token index */
    float *exp_w;        /* [X][nb] weight */
    int32_t *exp_n;      /* [X] */
    float *moe_in;       /* [nb][E] gathered inputs */
    float *moe_out;      /* [nb][E] */

    /* activation rows converted for the weights' dot products, per
     * activation type [nb][row]; act_src/act_stride say what they hold */
    void *act_buf[VX_TYPE_COUNT];
    const float *act_src[VX_TYPE_COUNT];
    size_t act_stride[VX_TYPE_COUNT];
    /* the Q8_0 rows as the tile table of the kernels' gemm_tab (matmul.h),
     * made with them by prep when a packed weight they feed has one
     * (tab.act NULL: it holds none); tab_mem: its buffers, NULL without
     * such kernels */
    vx_act_tab tab;
    void *tab_mem;

    /* bf16 activation rows for the AMX GEMM ([nb rounded up to 32][bf16_ld]),
     * converted from bf16_src; per-thread panel scratch */
    uint16_t *act_bf16, *act_bf16_lo; /* the latter: x - bf16(x), for F16 weights */
    /* the fused gate/up/SwiGLU's output rows (mm_glu), the down
     * projection's input, apart from its own input in act_bf16 */
    uint16_t *glu_bf16, *glu_bf16_lo;
    /* the rows the next AMX GEMM reads (act_bf16's or glu_bf16's pair),
     * converted from bf16_src */
    const uint16_t *bf16_in, *bf16_in_lo;
    const float *bf16_src, *bf16_lo_src;
    size_t bf16_ld;
    uint8_t *amx_scratch; /* [nth][amx_scratch_per] */
    int64_t amx_min_tok;  /* $VX_AMX_MIN_TOK (tests: every type), or 0: AMX_MIN_TOK* per type */
    size_t amx_scratch_per;
    /* per-thread scratch of the kernel table's GEMMs (kern.gemm_scratch) */
    uint8_t *gemm_scratch; /* [nth][gemm_scratch_per] */
    size_t gemm_scratch_per;

    /* per-thread scratch */
    float *scratch;      /* [nth][scratch_per] */
    int64_t scratch_per;
    int64_t att_scratch_off; /* attention tiles start after the dequantized row */

    /* dynamic row split of the matmuls (mm): one counter of handed-out
     * row chunks per matmul call of a forward, and each thread's count of
     * calls so far (a cache line apart); zeroed before every forward */
    atomic_int *mm_next;   /* [n_mm] */
    int32_t n_mm;
    int32_t *mm_seq;       /* [nth * 16] */

    /* the attention's segments (vx_attn_args seg): one length for every
     * path of this context; with fewer kv heads than threads, the split
     * decodes' segment states and counters */
    int32_t att_seg, att_seg_groups, att_seg_max;
    float *att_seg_buf;
    atomic_int *att_seg_done;

    /* the batch being run */
    const vx_batch *batch;
    int32_t n_tok;

    /* vx_context_perf's counters; perf_t: thread 0's clock at its last
     * step boundary (params.profile) */
    vx_perf perf;
    int64_t perf_t;

    /* pipeline parallelism: the context's id in the model's group (process
     * 0 only; -1: none), and what a forward_worker run does: embed the
     * batch, run layers [il0, il1), compute the outputs */
    int32_t dist_id;
    bool do_embed, do_out;
    int32_t il0, il1;
};

vx_context_params vx_context_default_params(void) {
    vx_context_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 4096;
    p.n_batch = 512;
    p.n_seq_max = 1;
    p.n_threads = 0;
    p.kv_type = VX_KV_F16;
    return p;
}

/* g = relu(g)^2 u (BitNet b1.58 2B4T's "relu2" gated FFN; llama.cpp's
 * relu, sqr and mul, each rounded to float) */
static void relu2_glu(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float r = g[i] > 0.0f ? g[i] : 0.0f;
        g[i] = r * r * u[i];
    }
}

/* gpt-oss's clamped SwiGLU (VX_FFN_SWIGLU_OAI): g = min(g, 7),
 * g / (1 + exp(-1.702 g)) (clamp(u, -7, 7) + 1), ggml's float steps */
static void swiglu_oai_glu(float *g, const float *u, int64_t n) {
    const float alpha = 1.702f, limit = 7.0f;
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i] < limit ? g[i] : limit;
        const float y = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        g[i] = x / (1.0f + expf(alpha * -x)) * (y + 1.0f);
    }
}

static void *xalloc(size_t n, bool *ok) {
    void *p = NULL;
    if (n == 0) n = 64;
    if (posix_memalign(&p, 64, (n + 63) & ~(size_t)63) != 0) {
        *ok = false;
        return NULL;
    }
    return p;
}

void vx_context_free(vx_context *c) {
    if (!c) return;
    if (c->dist_id >= 0) vx_dist_ctx_free(c->model->dist, c->dist_id);
    vx_pool_free(c->pool);
    vx_kv_free(c->kv);
    void *bufs[] = {c->x, c->xn, c->q, c->k, c->v, c->qkv, c->att, c->gate, c->up, c->rope,
                    c->logits, c->out_row, c->out_tok, c->embd, c->emb_row, c->emb_tok, c->ones, c->seq_next, c->router, c->sel, c->sel_w, c->exp_tok,
                    c->exp_w, c->exp_n, c->moe_in, c->moe_out, c->scratch, (void *)c->mm_next,
                    c->mm_seq, c->act_bf16, c->act_bf16_lo, c->glu_bf16, c->glu_bf16_lo, c->amx_scratch,
                    c->gemm_scratch, c->att_seg_buf, (void *)c->att_seg_done, c->tab_mem};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    for (int t = 0; t < VX_TYPE_COUNT; t++) free(c->act_buf[t]);
    free(c);
}

vx_status vx_context_init(const vx_model *model, const vx_context_params *params,
                          vx_context **out, char *err, size_t err_size) {
    vx_context_params defp = vx_context_default_params();
    if (!params) params = &defp;
    if (!model || !out) return vx_seterr(err, err_size, VX_EINVAL, "model and out are required");
    *out = NULL;
    if (!model->layers)
        return vx_seterr(err, err_size, VX_EINVAL, "model was loaded vocab-only");
    const vx_hparams *hp = &model->hp;
    vx_context *c = calloc(1, sizeof *c);
    if (!c) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    c->model = model;
    c->params = *params;
    c->dist_id = -1;
    vx_context_params *p = &c->params;
    if (p->n_ctx == 0) p->n_ctx = (uint32_t)hp->n_ctx_train;
    if (p->n_batch == 0) p->n_batch = 512;
    /* n_batch may exceed n_ctx: a batch can hold many sequences */
    if (p->n_seq_max == 0) p->n_seq_max = 1;
    if (p->n_ctx > (1u << 24) || p->n_batch > (1u << 16) || p->n_seq_max > 4096) {
        vx_context_free(c);
        return vx_seterr(err, err_size, VX_EINVAL, "n_ctx/n_batch/n_seq_max out of range");
    }
    if (model->pos_embd.data && p->n_ctx > (uint64_t)model->pos_embd.ne[1]) {
        const int64_t np = model->pos_embd.ne[1];
        const uint32_t n_ctx = p->n_ctx; /* p is inside c */
        vx_context_free(c);
        return vx_seterr(err, err_size, VX_EINVAL, "n_ctx %u exceeds the model's %lld learned positions", n_ctx,
                         (long long)np);
    }
    vx_kernels_init_best(&c->kern);
    if ((p->batch_invariant || p->f32_matmul) && c->kern.gemm_bf16_f32) /* no bf16-rounded activations */
        c->kern.gemm[VX_TYPE_BF16] = c->kern.gemm_bf16_f32;
    c->glu = model->hp.ffn_act == VX_FFN_GELU ? c->kern.geglu
             : model->hp.ffn_act == VX_FFN_RELU2 ? relu2_glu
             : model->hp.ffn_act == VX_FFN_SWIGLU_OAI ? swiglu_oai_glu
                                                 : c->kern.swiglu;
    c->embed_scale = hp->embd_scale != 0 ? hp->embd_scale : model->arch->embed_scale ? sqrtf((float)hp->n_embd) : 1.0f;
    if (vx_pool_init(p->n_threads, &c->pool) != VX_OK) {
        vx_context_free(c);
        return vx_seterr(err, err_size, VX_ENOMEM, "cannot start %d threads", p->n_threads);
    }
    p->n_threads = vx_pool_n_threads(c->pool);
    if (p->kv_type == VX_KV_Q8_0 && hp->head_dim % 32 != 0) {
        vx_context_free(c);
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "a Q8_0 KV cache needs head_dim to be a multiple of 32 (it is %d)",
                         hp->head_dim);
    }
    if (p->kv_type != VX_KV_F32 && p->kv_type != VX_KV_F16 && p->kv_type != VX_KV_Q8_0) {
        vx_context_free(c);
        return vx_seterr(err, err_size, VX_EINVAL, "unknown KV cache type %d", (int)p->kv_type);
    }
    if (p->kv_size > (1u << 26)) {
        vx_context_free(c);
        return vx_seterr(err, err_size, VX_EINVAL, "kv_size out of range");
    }
    /* this process's layers only (pipeline parallelism) */
    vx_kv_params kp = {model->l1 - model->l0, hp->n_head_kv * hp->head_dim, (int32_t)p->n_seq_max,
                       (int32_t)p->n_ctx, (int32_t)p->kv_size, VX_KV_BLOCK, p->kv_type, model->l0, hp->head_dim};
    if (vx_kv_init(&kp, &c->kv) != VX_OK) {
        vx_context_free(c);
        return vx_seterr(err, err_size, VX_ENOMEM, "cannot allocate the KV cache (%u positions)",
                         p->kv_size ? p->kv_size : p->n_ctx);
    }
    const size_t nb = p->n_batch, E = (size_t)hp->n_embd;
    const size_t QD = (size_t)hp->n_head * (size_t)hp->head_dim;
    const size_t KD = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    const size_t FF = (size_t)VX_MAX(hp->n_ff, hp->n_ff_shexp) * (hp->fused_gate_up ? 2 : 1);
    const size_t V = (size_t)hp->n_vocab, X = (size_t)hp->n_expert, K = (size_t)hp->n_expert_used;
    const size_t F = sizeof(float);
    bool ok = true;
    c->x = xalloc(nb * E * F, &ok);
    c->xn = xalloc(nb * E * F, &ok);
    c->q = xalloc(nb * QD * F, &ok);
    c->k = xalloc(nb * KD * F, &ok);
    c->v = xalloc(nb * KD * F, &ok);
    c->qkv = hp->fused_qkv ? xalloc(nb * (QD + 2 * KD) * F, &ok) : NULL;
    c->att = xalloc(nb * QD * F, &ok);
    c->gate = xalloc(nb * FF * F, &ok);
    c->up = xalloc(nb * FF * F, &ok);
    c->rope = xalloc(nb * (size_t)hp->n_rot * F * (hp->rope_dual ? 2 : 1), &ok);
    c->rope_local = c->rope && hp->rope_dual ? c->rope + nb * (size_t)hp->n_rot : c->rope;
    /* an encoder has no logits, nor do the processes of a group after the first */
    c->logits = xalloc(model->arch->encoder || model->l0 > 0 ? 0 : nb * V * F, &ok);
    c->out_row = xalloc(nb * sizeof(int32_t), &ok);
    c->out_tok = xalloc(nb * sizeof(int32_t), &ok);
    c->embd = xalloc(nb * E * F, &ok);
    c->emb_row = xalloc(nb * sizeof(int32_t), &ok);
    c->emb_tok = xalloc(nb * sizeof(int32_t), &ok);
    c->seq_next = xalloc((size_t)p->n_seq_max * sizeof(int32_t), &ok);
    if (model->arch->encoder) {
        c->ones = xalloc((size_t)hp->n_ff * F, &ok);
        for (int64_t i = 0; c->ones && i < hp->n_ff; i++) c->ones[i] = 1.0f;
    }
    if (X) {
        c->router = xalloc(nb * X * F, &ok);
        c->sel = xalloc(nb * K * sizeof(int32_t), &ok);
        c->sel_w = xalloc(nb * K * F, &ok);
        c->exp_tok = xalloc(X * nb * sizeof(int32_t), &ok);
        c->exp_w = xalloc(X * nb * F, &ok);
        c->exp_n = xalloc(X * sizeof(int32_t), &ok);
        c->moe_in = xalloc(nb * E * F, &ok);
        c->moe_out = xalloc(nb * E * F, &ok);
    }
    {
        const size_t maxin = VX_MAX(VX_MAX(E, FF), QD);
        const int acts[] = {VX_TYPE_Q8_0, VX_TYPE_Q8_1, VX_TYPE_Q8_K};
        for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
            /* Q8_K rows need a multiple of 256: round up, unused tails are never read */
            size_t rs = vx_row_size((vx_type)acts[i], (int64_t)((maxin + 255) / 256 * 256));
            c->act_buf[acts[i]] = xalloc(nb * rs, &ok);
        }
        bool tabs = false;
        for (int t = 0; t < VX_TYPE_COUNT; t++) tabs |= c->kern.gemm_tab[t] != NULL;
        if (tabs && !p->f32_matmul) {
            const size_t ne = vx_act_tab_entries((int64_t)((maxin + 31) / 32 * 32), (int64_t)nb);
            c->tab_mem = xalloc(vx_act_tab_bytes(ne), &ok);
            if (c->tab_mem) vx_act_tab_bind(&c->tab, c->tab_mem, ne);
        }
    }
    if (c->kern.gemm_amx) {
        const size_t maxin = VX_MAX(VX_MAX(E, FF), QD);
        /* rows 64 bytes longer than a multiple of 128: the 16 rows of an AMX A
         * tile then fall in different L1 sets (a stride of a multiple of 4 KiB
         * put them all in one set, and every A tile load missed L1) */
        c->bf16_ld = (maxin + 63) / 64 * 64 + 32;
        const size_t rows = (nb + 31) / 32 * 32;
        /* zeroed: a tile reads the rows up to the next multiple of 32 */
        uint16_t **bufs[] = {&c->act_bf16, &c->act_bf16_lo, &c->glu_bf16, &c->glu_bf16_lo};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
            *bufs[i] = xalloc(rows * c->bf16_ld * sizeof(uint16_t), &ok);
            if (*bufs[i]) memset(*bufs[i], 0, rows * c->bf16_ld * sizeof(uint16_t));
        }
        c->amx_scratch_per = (c->kern.gemm_amx_scratch((int64_t)c->bf16_ld) + 63) & ~(size_t)63;
        c->amx_scratch = xalloc((size_t)p->n_threads * c->amx_scratch_per, &ok);
        const char *mt = getenv("VX_AMX_MIN_TOK");
        c->amx_min_tok = mt && atoi(mt) > 0 ? atoi(mt) : 0;
    }
    if (c->kern.gemm_scratch && !p->f32_matmul) {
        const size_t maxin = VX_MAX(VX_MAX(E, FF), QD);
        c->gemm_scratch_per = (c->kern.gemm_scratch((int64_t)maxin) + 63) & ~(size_t)63;
        c->gemm_scratch = xalloc((size_t)p->n_threads * c->gemm_scratch_per, &ok);
    }
    /* matmul calls per forward: q, k, v, o, gate, up, down (or fused) per
     * layer, the router and three per expert in MoE layers, the output;
     * and the attention's units, once per layer; calls past the table fall
     * back to the static split */
    c->n_mm = hp->n_layer * (9 + 3 * (int32_t)X + (hp->n_ff_shexp > 0 ? 3 : 0)) + 4;
    c->mm_next = xalloc((size_t)c->n_mm * sizeof(atomic_int), &ok);
    c->mm_seq = xalloc((size_t)p->n_threads * 16 * sizeof(int32_t), &ok);
    c->att_seg = vx_attn_seg_len(p->n_ctx);
    if (p->n_threads > 1) {
        /* a decode of fewer tiles than threads is split by segments: at
         * most nth - 1 tiles of n_head_kv slots */
        c->att_seg_groups = ((int32_t)p->n_threads - 1) * hp->n_head_kv;
        c->att_seg_max = (int32_t)((p->n_ctx - 1) / (uint32_t)c->att_seg) + 2;
        c->att_seg_buf = xalloc((size_t)c->att_seg_groups *
                                    vx_attn_seg_floats(c->att_seg_max, hp->n_head / hp->n_head_kv, hp->head_dim) * F,
                                &ok);
        c->att_seg_done = xalloc((size_t)c->att_seg_groups * sizeof(atomic_int), &ok);
        for (int32_t i = 0; c->att_seg_done && i < c->att_seg_groups; i++) atomic_init(&c->att_seg_done[i], 0);
    }
    /* per thread: a dequantized row, plus the attention scratch */
    size_t row = VX_MAX(VX_MAX(E, FF), VX_MAX(QD, (size_t)hp->n_ff));
    size_t att = vx_attn_scratch_floats(hp->n_head, hp->n_head_kv, hp->head_dim);
    c->att_scratch_off = (int64_t)((row + 15) & ~(size_t)15);
    c->scratch_per = c->att_scratch_off + (int64_t)((att + 15) & ~(size_t)15);
    c->scratch = xalloc((size_t)p->n_threads * (size_t)c->scratch_per * F, &ok);
    if (!ok) {
        vx_context_free(c);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory for activations (n_batch %u)",
                         p->n_batch);
    }
    /* process 0 of a group: the others make theirs */
    if (model->dist_id >= 0) {
        const vx_status st = vx_dist_ctx_init(model->dist, model->dist_id, params, &c->dist_id, err, err_size);
        if (st) {
            c->dist_id = -1; /* nothing to free there */
            vx_context_free(c);
            return st;
        }
    }
    *out = c;
    return VX_OK;
}

const char *vx_context_errmsg(const vx_context *c) { return c->errmsg; }
const vx_model *vx_context_get_model(const vx_context *c) { return c->model; }
uint32_t vx_context_n_ctx(const vx_context *c) { return c->params.n_ctx; }
int32_t vx_context_n_threads(const vx_context *c) { return c->params.n_threads; }
int32_t vx_context_n_vocab(const vx_context *c) { return c->model->hp.n_vocab; }

/* ------------------------------------------------------------ profile */

/* Thread 0's time since its last step boundary goes to step s. */
static inline void perf_step(vx_context *c, int ith, vx_perf_step s) {
    if (ith != 0 || !c->params.profile) return;
    const int64_t t = vx_time_ns();
    c->perf.ns[s] += (uint64_t)(t - c->perf_t);
    c->perf_t = t;
}

/* The sliding window of layer il, 0 for a global layer (llama.cpp's rule:
 * Gemma 2's even layers, all of Gemma 3's but every 6th) */
static int32_t swa_of(const vx_hparams *hp, int32_t il) {
    return hp->n_swa > 0 && hp->swa_period > 0 && il % hp->swa_period < hp->swa_period - 1 ? hp->n_swa : 0;
}

/* The barrier ending step s: thread 0's wait there counted apart. */
static void sync_after(vx_context *c, int ith, vx_perf_step s) {
    perf_step(c, ith, s);
    vx_pool_barrier(c->pool);
    perf_step(c, ith, VX_PERF_WAIT);
}

void vx_context_perf(const vx_context *c, vx_perf *out) { *out = c->perf; }

void vx_context_perf_reset(vx_context *c) { memset(&c->perf, 0, sizeof c->perf); }

const char *vx_perf_step_name(vx_perf_step s) {
    static const char *const names[VX_PERF_COUNT] = {
        "embed", "norm", "q/k/v", "rope+kv", "attention", "out-proj", "ffn-up", "ffn-act", "ffn-down", "moe",
        "logits", "wait", "other"};
    return (unsigned)s < VX_PERF_COUNT ? names[s] : "?";
}

/* ------------------------------------------------------------ forward */

/* Whether query tiles of 16+ rows may take the AMX attention
 * (attention.h): with AMX, unless the context wants exact f32 matmuls or
 * batch-invariant bits. */
static bool tiles_attn(const vx_context *c) {
    return c->kern.attn_tiles_step && !c->params.f32_matmul && !c->params.batch_invariant;
}

/* Tokens from which a weight of this file type takes the AMX GEMM. */
static int64_t amx_min_tok(const vx_context *c, vx_type type) {
    if (c->amx_min_tok) return c->amx_min_tok;
    switch (type) {
    case VX_TYPE_BF16: return AMX_MIN_TOK_BF16;
    case VX_TYPE_F16: return AMX_MIN_TOK_F16;
    case VX_TYPE_Q8_0: return AMX_MIN_TOK_Q8_0;
    case VX_TYPE_Q4_0: return AMX_MIN_TOK_Q4_0;
    default: return AMX_MIN_TOK;
    }
}

/* Whether the matmul of w over ntok tokens runs on the AMX GEMM: weight
 * types whose panels are built with SIMD (F16, BF16, and every packed
 * layout, which amx_gemm.c reads straight from its records). Other types
 * would be dequantized row by row in plain C there; they keep their int8
 * GEMM. */
static bool amx_for(const vx_context *c, const vx_weight *w, int64_t ntok) {
    /* never a single token: that is the solo path's, whose activation rows
     * are per thread and never converted to bf16 (prep_solo) */
    if (!c->kern.gemm_amx || c->params.f32_matmul || c->params.batch_invariant || ntok < 2 ||
        ntok < amx_min_tok(c, w->type) || w->ne[0] % 32 != 0)
        return false;
    if (w->type == VX_TYPE_F16 || w->type == VX_TYPE_BF16) return true;
    if (!w->pdata) return false;
    switch (w->ptype) {
    case VX_TYPE_Q2_K_R8: case VX_TYPE_Q3_K_R8: case VX_TYPE_Q4_K_R8: case VX_TYPE_Q5_K_R8: case VX_TYPE_Q6_K_R8:
    case VX_TYPE_Q4_0_R8: case VX_TYPE_Q4_1_R8: case VX_TYPE_Q5_0_R8: case VX_TYPE_Q5_1_R8: case VX_TYPE_Q8_0_R8:
    case VX_TYPE_IQ4_NL_R8: case VX_TYPE_TQ2_0_R8:
        return true;
    default: return false;
    }
}

/* Converts elements [e0, e1) of rows [t0, t1) of x (ld floats apart, rows
 * of n elements) into the activation types the given weights pair with;
 * e0 and e1 are multiples of every activation block (256) or the row's
 * ends. Run by the thread that produced those elements; a barrier must
 * follow before the matmuls. */
static void prep_range(vx_context *c, int64_t t0, int64_t t1, int64_t e0, int64_t e1, const float *x,
                       int64_t ld, int64_t n, int64_t ntok, const vx_weight *w0, const vx_weight *w1,
                       const vx_weight *w2) {
    if (c->params.f32_matmul) return;
    const vx_weight *ws[3] = {w0, w1, w2};
    int done = -1;
    bool bf16_done = false, lo = false;
    for (int i = 0; i < 3; i++)
        lo |= ws[i] && ws[i]->data && ws[i]->type == VX_TYPE_F16 && amx_for(c, ws[i], ntok);
    for (int i = 0; i < 3; i++) {
        if (!ws[i] || !ws[i]->data) continue;
        if (amx_for(c, ws[i], ntok)) {
            if (bf16_done) continue;
            for (int64_t t = t0; t < t1; t++) {
                const size_t o = (size_t)t * c->bf16_ld + (size_t)e0;
                c->kern.f32_to_bf16(x + t * ld + e0, c->act_bf16 + o, lo ? c->act_bf16_lo + o : NULL, e1 - e0);
            }
            c->bf16_src = x; /* every thread writes the same values */
            c->bf16_lo_src = lo ? x : NULL;
            c->bf16_in = c->act_bf16;
            c->bf16_in_lo = c->act_bf16_lo;
            bf16_done = true;
            continue;
        }
        const int at = vx_act_type(ws[i]->type);
        if (at == VX_TYPE_F32 || at == done) continue;
        const size_t rs = vx_row_size((vx_type)at, n), off = e0 ? vx_row_size((vx_type)at, e0) : 0;
        for (int64_t t = t0; t < t1; t++)
            c->kern.act[at](x + t * ld + e0, (uint8_t *)c->act_buf[at] + (size_t)t * rs + off, e1 - e0);
        c->act_src[at] = x; /* every thread writes the same values */
        c->act_stride[at] = rs;
        done = at;
        if (at == VX_TYPE_Q8_0) { /* and the table of its rows, where a GEMM reads one */
            bool tab = false;
            for (int j = 0; j < 3; j++)
                tab |= c->tab_mem && ntok >= 2 && ws[j] && ws[j]->data && ws[j]->pdata &&
                       vx_act_type(ws[j]->type) == VX_TYPE_Q8_0 && c->kern.gemm_tab[ws[j]->ptype] &&
                       !amx_for(c, ws[j], ntok);
            c->tab.act = tab ? c->act_buf[at] : NULL;
            c->tab.stride = rs;
            c->tab.n = n;
            c->tab.ntok = ntok;
            if (tab) vx_act_tab_fill(&c->tab, t0, t1, e0 / 32, e1 / 32);
        }
    }
}

/* Rows [t0, t1) of x for matmuls over ntok tokens. */
static void prep(vx_context *c, int64_t t0, int64_t t1, int64_t ntok, const float *x, int64_t ld, int64_t n,
                 const vx_weight *w0, const vx_weight *w1, const vx_weight *w2) {
    prep_range(c, t0, t1, 0, n, x, ld, n, ntok, w0, w1, w2);
}

/* Decode of a single token ("solo"): the row-wise steps between two
 * matmuls (RMSNorm, SwiGLU, the activation quantization) are too short to
 * split, and a barrier costs more than doing them: every thread does them
 * itself, for the whole row, into its own scratch row (solo_row) and its
 * own activation slot (row ith of act_buf), which its matmul rows then
 * read (mm_rows tells by x == solo_row). Same functions on the same
 * input: the same bits as the split path. Four of a layer's ten barriers
 * go, and two more where the attention block splits by kv heads
 * (attn_heads): four are left, after the attention, the output
 * projection, gate/up and down. */
static float *solo_row(const vx_context *c, int ith) { return c->scratch + (size_t)ith * (size_t)c->scratch_per; }

/* The activation rows of x (n elements) for w0..w2 into slot ith. */
static void prep_solo(vx_context *c, int ith, const float *x, int64_t n, const vx_weight *w0,
                      const vx_weight *w1, const vx_weight *w2) {
    const vx_weight *ws[3] = {w0, w1, w2};
    int done = -1;
    for (int i = 0; i < 3; i++) {
        if (!ws[i] || !ws[i]->data) continue;
        const int at = vx_act_type(ws[i]->type);
        if (at == VX_TYPE_F32 || at == done) continue;
        const size_t rs = vx_row_size((vx_type)at, n);
        c->kern.act[at](x, (uint8_t *)c->act_buf[at] + (size_t)ith * rs, n);
        done = at;
    }
}

/* The gated activation of n rows (g = silu(g) * u or gelu(g) * u: c->glu;
 * F elements; dst: where the results
 * go, g itself or another buffer) and their activation rows for w. With
 * fewer rows than threads (decode) the rows are split in 256-element
 * pieces, so every thread takes a share of a single token's work. */
static void glu_prep(vx_context *c, int ith, int nth, int64_t n, float *g, const float *u, int64_t ld,
                        float *dst, int64_t F, const vx_weight *w) {
    const int64_t per = n >= nth || F % VX_QK_K ? F : VX_QK_K, pieces = F / per;
    int64_t p0, p1;
    vx_split(n * pieces, ith, nth, 1, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        const int64_t t = p / pieces, e0 = p % pieces * per;
        c->glu(g + t * ld + e0, u + t * ld + e0, per);
        if (dst != g) memcpy(dst + t * F + e0, g + t * ld + e0, (size_t)per * sizeof(float));
        prep_range(c, t, t + 1, e0, e0 + per, dst, F, F, n, w, NULL, NULL);
    }
}

/* Rows per gemv call of a single token (a multiple of 16). */
#define MM_GEMV_ROWS 512

/* The matrix at mat_off of a weight as the AMX GEMM reads it: the packed
 * copy when there is one (amx_for), its type and row size. */
static const uint8_t *amx_matrix(const vx_weight *w, size_t mat_off, int *type, size_t *rs) {
    const bool pk = w->pdata != NULL;
    *type = pk ? w->ptype : w->type;
    *rs = pk ? w->prow_size : w->row_size;
    const size_t moff = pk && mat_off ? mat_off / w->mat_size * w->pmat_size : mat_off;
    return (const uint8_t *)(pk ? w->pdata : w->data) + moff;
}

/* Rows [r0, r1) of y = W x for n tokens. x must have been prepared (prep)
 * for W's activation type. */
static void mm_rows(vx_context *c, int ith, const vx_weight *w, size_t mat_off, const float *x, int64_t n,
                    int64_t ldx, float *y, int64_t ldy, bool acc, int64_t r0, int64_t r1) {
    if (c->params.f32_matmul) {
        c->kern.matmul(&c->kern, w, mat_off, r0, r1, x, n, ldx, y, ldy, acc,
                       c->scratch + (size_t)ith * (size_t)c->scratch_per);
        return;
    }
    if (amx_for(c, w, n)) {
        const bool lo = w->type == VX_TYPE_F16;
        VX_ASSERT(c->bf16_src == x && (!lo || c->bf16_lo_src == x));
        int type;
        size_t rs;
        const uint8_t *base = amx_matrix(w, mat_off, &type, &rs) + (size_t)r0 * rs;
        c->kern.gemm_amx(type, w->ne[0], base, rs, (int)(r1 - r0), c->bf16_in,
                         lo ? c->bf16_in_lo : NULL, c->bf16_ld * sizeof(uint16_t), (int)n, y + r0, ldy, acc,
                         c->amx_scratch + (size_t)ith * c->amx_scratch_per);
        return;
    }
    const int at = vx_act_type(w->type);
    const uint8_t *act;
    size_t stride;
    if (at == VX_TYPE_F32) {
        act = (const uint8_t *)x;
        stride = (size_t)ldx * sizeof(float);
    } else if (x == solo_row(c, ith)) { /* prep_solo's slot */
        stride = vx_row_size((vx_type)at, w->ne[0]);
        act = (const uint8_t *)c->act_buf[at] + (size_t)ith * stride;
    } else {
        VX_ASSERT(c->act_src[at] == x);
        act = c->act_buf[at];
        stride = c->act_stride[at];
    }
    /* the packed copy when there is one (rows split in groups of 8) and
     * these kernels have a GEMM for it: then both layouts give the same
     * bits (the canonical order). The generic kernels' plain-layout order
     * differs, so they keep to the file layout (no copy is made when the
     * generic kernels are forced at load). */
    const bool packed = w->pdata != NULL && c->kern.gemm[w->ptype] != NULL;
    const int wt = packed ? w->ptype : w->type;
    const size_t rs = packed ? w->prow_size : w->row_size;
    const size_t moff = packed && mat_off ? mat_off / w->mat_size * w->pmat_size : mat_off;
    const vx_gemv_fn gemv = c->kern.gemv[wt];
    const uint8_t *base = (const uint8_t *)(packed ? w->pdata : w->data) + moff + (size_t)r0 * rs;
    const int64_t ne0 = w->ne[0];
    /* gemm unpacks each weight block once for all the tokens; on the
     * table of the activations prep made, where there is one */
    if (n >= 2 && packed && c->kern.gemm_tab[wt] && c->tab.act == act && c->tab.stride == stride && c->tab.n == ne0 &&
        c->tab.ntok == n) {
        c->kern.gemm_tab[wt](base, rs, (int)(r1 - r0), &c->tab, y + r0, ldy, acc);
        return;
    }
    const vx_gemm_fn gemm = n >= 2 ? c->kern.gemm[wt] : NULL;
    if (gemm) {
        gemm(ne0, base, rs, (int)(r1 - r0), act, stride, (int)n, y + r0, ldy, acc,
             c->gemm_scratch ? c->gemm_scratch + (size_t)ith * c->gemm_scratch_per : NULL);
        return;
    }
    /* token tiles x blocks of 64 rows: the rows stay in L2 for the tile;
     * a single token takes blocks of up to MM_GEMV_ROWS rows, so that the
     * gemv's row streams (avx2_quant_util.h) run long */
    float out[MM_GEMV_ROWS];
    const int64_t rb = n == 1 ? MM_GEMV_ROWS : 64;
    for (int64_t tt = 0; tt < n; tt += 64) {
        const int64_t te = VX_MIN(n, tt + 64);
        for (int64_t r = r0; r < r1; r += rb) {
            const int nr = (int)VX_MIN(rb, r1 - r);
            for (int64_t t = tt; t < te; t++) {
                gemv(ne0, base + (size_t)(r - r0) * rs, rs, nr, act + (size_t)t * stride, out);
                float *yt = y + t * ldy + r;
                if (acc)
                    for (int i = 0; i < nr; i++) yt[i] += out[i];
                else
                    for (int i = 0; i < nr; i++) yt[i] = out[i];
            }
        }
    }
}

/* Chunks of a matmul's rows per thread: several, so a thread that got a
 * slower share of the memory system (or of the CPU) does less of the work
 * instead of making the other wait at the next barrier. */
#define MM_CHUNKS_PER_THREAD 6

/* Calls over at least this many tokens (compute-bound GEMMs) hand out
 * shrinking chunks (guided): the last ones are small, so the threads end
 * a matmul together. With equal chunks (a twelfth of the rows) one thread
 * waited up to a chunk at every barrier: 2.7% of Llama-1B's pp512 in
 * barrier waits, the gate/up pass's chunks 704 rows long. Decode keeps
 * equal chunks, whose GEMVs read long record streams within each. */
#define MM_GUIDED_MIN_TOK 32

/* Chunk idx of a guided split of rows: each a 2 nth-th of the rows left
 * (a multiple of align), so chunk sizes fall geometrically down to align.
 * The same boundaries for every thread and call. */
static bool guided_chunk(int64_t rows, int nth, int64_t align, int64_t idx, int64_t *r0, int64_t *r1) {
    int64_t r = 0;
    for (int64_t i = 0;; i++) {
        if (r >= rows) return false;
        int64_t size = (rows - r + 2 * (int64_t)nth - 1) / (2 * (int64_t)nth);
        size = (size + align - 1) / align * align;
        if (i == idx) {
            *r0 = r;
            *r1 = VX_MIN(rows, r + size);
            return true;
        }
        r += size;
    }
}

/* The next chunk [*r0, *r1) of the rows of a matmul call (seq: its slot)
 * over ntok tokens for this thread, false when none is left; *k counts
 * the calls (start at 0). Chunks of a multiple of align rows come from the
 * call's atomic counter (guided from MM_GUIDED_MIN_TOK tokens); with one
 * thread, or past the counter table, each thread takes one static share.
 * A row's result does not depend on the chunk it falls in. */
static bool next_rows(vx_context *c, int32_t seq, int ith, int nth, int64_t rows, int64_t align, int64_t ntok, int *k,
                      int64_t *r0, int64_t *r1) {
    if (nth == 1 || seq >= c->n_mm) {
        if ((*k)++) return false;
        vx_split(rows, ith, nth, 8, r0, r1);
        return *r0 < *r1;
    }
    const int64_t idx = atomic_fetch_add_explicit(&c->mm_next[seq], 1, memory_order_relaxed);
    if (ntok >= MM_GUIDED_MIN_TOK) return guided_chunk(rows, nth, align, idx, r0, r1);
    int64_t chunk = (rows + (int64_t)nth * MM_CHUNKS_PER_THREAD - 1) / ((int64_t)nth * MM_CHUNKS_PER_THREAD);
    chunk = (chunk + align - 1) / align * align;
    *r0 = idx * chunk;
    if (*r0 >= rows) return false;
    *r1 = VX_MIN(rows, *r0 + chunk);
    return true;
}

/* Rows of y = W x for n tokens, handed out to the threads in chunks of a
 * multiple of 16 rows (next_rows: every row's result is the same whoever
 * computes it). */
static void mm(vx_context *c, int ith, int nth, const vx_weight *w, size_t mat_off, const float *x,
               int64_t n, int64_t ldx, float *y, int64_t ldy, bool acc) {
    const int32_t seq = c->mm_seq[16 * ith]++;
    /* the AMX GEMM builds weight panels of 32 rows */
    const int64_t align = amx_for(c, w, n) ? 32 : 16;
    int k = 0;
    int64_t r0, r1;
    while (next_rows(c, seq, ith, nth, w->ne[1], align, n, &k, &r0, &r1))
        mm_rows(c, ith, w, mat_off, x, n, ldx, y, ldy, acc, r0, r1);
}

/* An FFN (dense, or one expert's) whose three projections all take the
 * AMX GEMM, gate and up in the same layout: gate, up and SwiGLU go in
 * one pass (mm_glu). */
static bool glu_fused(const vx_context *c, const vx_weight *g, const vx_weight *u, const vx_weight *d, int64_t n) {
    if (!c->kern.gemm_amx_glu || !amx_for(c, g, n) || !amx_for(c, u, n) || !amx_for(c, d, n)) return false;
    if (g->type != u->type || g->ne[0] != u->ne[0] || g->ne[1] != u->ne[1] || (g->pdata == NULL) != (u->pdata == NULL))
        return false;
    return g->pdata ? g->ptype == u->ptype && g->prow_size == u->prow_size && g->pmat_size == u->pmat_size
                    : g->row_size == u->row_size && g->mat_size == u->mat_size;
}

/* gate/up/SwiGLU for n tokens (glu_fused; their input prepared by prep,
 * mat_off: the expert's matrix as for mm): the down projection's bf16
 * input rows straight from the tiles into glu_bf16, never the floats
 * (c->gate, c->up hold only partial sums when K > 2048). Chunks of 32
 * rows of both weights per call. */
static void mm_glu(vx_context *c, int ith, int nth, const vx_weight *wg, const vx_weight *wu, const vx_weight *wd,
                   size_t mat_off, int64_t n) {
    const int64_t F = wg->ne[1];
    const bool lo_in = wg->type == VX_TYPE_F16, lo_out = wd->type == VX_TYPE_F16;
    int type;
    size_t rs;
    const uint8_t *bg = amx_matrix(wg, mat_off, &type, &rs), *bu = amx_matrix(wu, mat_off, &type, &rs);
    const int32_t seq = c->mm_seq[16 * ith]++;
    int k = 0;
    int64_t r0, r1;
    while (next_rows(c, seq, ith, nth, F, 32, n, &k, &r0, &r1))
        c->kern.gemm_amx_glu(type, wg->ne[0], bg + (size_t)r0 * rs, bu + (size_t)r0 * rs, rs,
                             (int)(r1 - r0), c->act_bf16, lo_in ? c->act_bf16_lo : NULL,
                             c->bf16_ld * sizeof(uint16_t), (int)n, c->gate + r0, c->up + r0, F, c->glu,
                             c->glu_bf16 + r0, lo_out ? c->glu_bf16_lo + r0 : NULL, c->bf16_ld,
                             c->amx_scratch + (size_t)ith * c->amx_scratch_per);
    /* what the down projection reads (every thread writes the same
     * values; no thread reads them before the barrier that follows) */
    c->bf16_src = c->gate;
    c->bf16_lo_src = lo_out ? c->gate : NULL;
    c->bf16_in = c->glu_bf16;
    c->bf16_in_lo = c->glu_bf16_lo;
}

/* y times a projection's output scale (BitNet's *_s; none: unchanged) */
static void scale_row(float *y, const vx_weight *s, int64_t n) {
    if (!s->data) return;
    const float v = vx_weight_scale(s);
    for (int64_t i = 0; i < n; i++) y[i] *= v;
}

static void add_bias(float *y, const vx_weight *b, int64_t n) {
    if (!b->data) return;
    const float *bb = b->data;
    for (int64_t i = 0; i < n; i++) y[i] += bb[i];
}

/* y += expert e's row of a stacked bias b [n][n_expert] (none: unchanged) */
static void exp_bias(float *y, const vx_weight *b, int64_t e, int64_t n) {
    if (!b->data) return;
    const float *bb = (const float *)b->data + e * n;
    for (int64_t i = 0; i < n; i++) y[i] += bb[i];
}

static inline void kv_store(const vx_context *c, void *dst, const float *src, int64_t n) {
    switch (vx_kv_type_of(c->kv)) {
    case VX_KV_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case VX_KV_F16: c->kern.f32_to_f16(src, dst, n); break;
    case VX_KV_Q8_0: c->kern.act[VX_TYPE_Q8_0](src, dst, n); break;
    }
}

/* Head h of token t after the q/k/v projections (h < n_head: a query head,
 * else kv head h - n_head): fused slices, biases, q/k norms, RoPE, and
 * k and v into the cache. */
static void qkv_unit(vx_context *c, const vx_layer *L, int il, int64_t t, int64_t h) {
    const vx_model *M = c->model;
    const vx_hparams *hp = &M->hp;
    const vx_batch *b = c->batch;
    const int64_t hd = hp->head_dim;
    const int64_t QD = (int64_t)hp->n_head * hd, KD = (int64_t)hp->n_head_kv * hd;
    const float *cs = (swa_of(hp, il) ? c->rope_local : c->rope) + t * hp->n_rot;
    const bool isq = h < hp->n_head;
    const int64_t hh = isq ? h : h - hp->n_head; /* head index within q, or within k and v */
    float *q = c->q + t * QD + hh * hd, *k = c->k + t * KD + hh * hd, *v = c->v + t * KD + hh * hd;
    if (hp->fused_qkv) { /* this head's slices of the fused output, bias added */
        const float *src = c->qkv + t * (QD + 2 * KD);
        const float *bq = L->bqkv.data;
        const int64_t parts = isq ? 1 : 2;
        for (int64_t p = 0; p < parts; p++) {
            const int64_t off = isq ? hh * hd : QD + p * KD + hh * hd;
            float *dst = isq ? q : p == 0 ? k : v;
            if (bq)
                for (int64_t i = 0; i < hd; i++) dst[i] = src[off + i] + bq[off + i];
            else
                memcpy(dst, src + off, (size_t)hd * sizeof(float));
        }
    }
    if (isq) {
        scale_row(q, &L->wq_s, hd);
        if (L->bq.data) for (int64_t i = 0; i < hd; i++) q[i] += ((const float *)L->bq.data)[hh * hd + i];
        if (L->q_norm.data) c->kern.rmsnorm(q, q, L->q_norm.data, hd, hp->rms_eps);
        if (!M->arch->abs_pos) c->kern.rope(q, cs, hp->n_rot, M->arch->rope);
        return;
    }
    scale_row(k, &L->wk_s, hd);
    scale_row(v, &L->wv_s, hd);
    if (L->bk.data) for (int64_t i = 0; i < hd; i++) k[i] += ((const float *)L->bk.data)[hh * hd + i];
    if (L->bv.data) for (int64_t i = 0; i < hd; i++) v[i] += ((const float *)L->bv.data)[hh * hd + i];
    if (L->k_norm.data) c->kern.rmsnorm(k, k, L->k_norm.data, hd, hp->rms_eps);
    if (!M->arch->abs_pos) c->kern.rope(k, cs, hp->n_rot, M->arch->rope);
    kv_store(c, vx_kv_k_head(c->kv, il, b->seq_id[t], b->pos[t], (int32_t)hh), k, hd);
    kv_store(c, vx_kv_v_head(c->kv, il, b->seq_id[t], b->pos[t], (int32_t)hh), v, hd);
}

/* After the q/k/v matmuls: biases, per-head norms (Qwen3), RoPE, and K/V
 * into the cache. Work units are (token, head): query heads, then kv heads
 * (K and V of a kv head together). Whole tokens per thread when there are
 * enough; for decode the heads of one token are split across threads. */
static void qkv_post(vx_context *c, const vx_layer *L, int il, int ith, int nth) {
    const vx_hparams *hp = &c->model->hp;
    const int64_t n = c->n_tok;
    const int64_t H = hp->n_head + hp->n_head_kv; /* units per token */
    int64_t u0, u1;
    if (n >= nth) {
        vx_split(n, ith, nth, 1, &u0, &u1);
        u0 *= H;
        u1 *= H;
    } else {
        vx_split(n * H, ith, nth, 1, &u0, &u1);
    }
    for (int64_t u = u0; u < u1; u++) qkv_unit(c, L, il, u / H, u % H);
}

/* The q/k/v rows of a single token for kv heads [h0, h1) alone (xa:
 * prep_solo'd) and their qkv_unit: K/V into the cache. */
static void qkv_heads(vx_context *c, const vx_layer *L, int il, int ith, const float *xa, int32_t h0, int32_t h1) {
    const vx_hparams *hp = &c->model->hp;
    const int64_t hd = hp->head_dim, E = hp->n_embd, g = hp->n_head / hp->n_head_kv;
    const int64_t QD = (int64_t)hp->n_head * hd, KD = (int64_t)hp->n_head_kv * hd;
    const int64_t q0 = h0 * g * hd, q1 = h1 * g * hd, k0 = h0 * hd, k1 = h1 * hd;
    if (hp->fused_qkv) {
        const int64_t ld = QD + 2 * KD;
        mm_rows(c, ith, &L->wqkv, 0, xa, 1, E, c->qkv, ld, false, q0, q1);
        mm_rows(c, ith, &L->wqkv, 0, xa, 1, E, c->qkv, ld, false, QD + k0, QD + k1);
        mm_rows(c, ith, &L->wqkv, 0, xa, 1, E, c->qkv, ld, false, QD + KD + k0, QD + KD + k1);
    } else {
        mm_rows(c, ith, &L->wq, 0, xa, 1, E, c->q, QD, false, q0, q1);
        mm_rows(c, ith, &L->wk, 0, xa, 1, E, c->k, KD, false, k0, k1);
        mm_rows(c, ith, &L->wv, 0, xa, 1, E, c->v, KD, false, k0, k1);
    }
    perf_step(c, ith, VX_PERF_QKV);
    for (int64_t h = h0 * g; h < h1 * g; h++) qkv_unit(c, L, il, 0, h);
    for (int64_t h = h0; h < h1; h++) qkv_unit(c, L, il, 0, hp->n_head + h);
}

/* The attention block of a single token for kv heads [h0, h1) alone:
 * qkv_heads, then their attention. With the kv heads split evenly over the
 * threads this needs no barrier until the output projection: the heads'
 * work is independent (same bits as the split steps). */
static void attn_heads(vx_context *c, const vx_layer *L, int il, int ith, const float *xa, int32_t h0, int32_t h1,
                       float *scr) {
    const vx_hparams *hp = &c->model->hp;
    qkv_heads(c, L, il, ith, xa, h0, h1);
    perf_step(c, ith, VX_PERF_ROPE);
    const vx_attn_args aa = {c->kv, il, hp->n_head, hp->n_head_kv, hp->head_dim, hp->attn_scale,
                             c->q, c->att, c->batch->pos, c->batch->seq_id, 1, false, NULL,
                             hp->attn_softcap, swa_of(hp, il), c->att_seg, NULL, NULL, 0, 0, NULL,
                             L->attn_sinks.data};
    vx_attention_heads(&c->kern, &aa, h0, h1, scr);
}

/* Mixtral-style routing: softmax over experts, top-k, renormalized (the
 * router's bias first: gpt-oss). Run by one thread; fills the per-expert
 * token lists. */
static void moe_route(vx_context *c, const vx_layer *L) {
    const vx_hparams *hp = &c->model->hp;
    const int32_t X = hp->n_expert, K = hp->n_expert_used, n = c->n_tok;
    for (int32_t e = 0; e < X; e++) c->exp_n[e] = 0;
    for (int32_t t = 0; t < n; t++) {
        float *r = c->router + (size_t)t * X;
        add_bias(r, &L->ffn_gate_inp_b, X);
        vx_softmax(r, X);
        int32_t *sel = c->sel + (size_t)t * K;
        float *w = c->sel_w + (size_t)t * K;
        float wsum = 0;
        for (int32_t k = 0; k < K; k++) {
            int32_t best = -1;
            for (int32_t e = 0; e < X; e++) {
                bool taken = false;
                for (int32_t j = 0; j < k; j++) taken |= sel[j] == e;
                if (!taken && (best < 0 || r[e] > r[best])) best = e;
            }
            sel[k] = best;
            w[k] = r[best];
            wsum += r[best];
        }
        for (int32_t k = 0; k < K; k++) {
            const int32_t e = sel[k];
            c->exp_tok[(size_t)e * c->params.n_batch + c->exp_n[e]] = t;
            /* Granite's residual scale rides on the weights */
            c->exp_w[(size_t)e * c->params.n_batch + c->exp_n[e]] =
                (hp->moe_norm ? w[k] / wsum : w[k]) * hp->residual_scale;
            c->exp_n[e]++;
        }
    }
}

static void ffn_moe(vx_context *c, const vx_layer *L, int ith, int nth) {
    const vx_hparams *hp = &c->model->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff, n = c->n_tok;
    int64_t t0, t1;
    mm(c, ith, nth, &L->ffn_gate_inp, 0, c->xn, n, E, c->router, hp->n_expert, false);
    sync_after(c, ith, VX_PERF_MOE);
    if (ith == 0) moe_route(c, L);
    sync_after(c, ith, VX_PERF_MOE);
    for (int32_t e = 0; e < hp->n_expert; e++) {
        const int32_t ne = c->exp_n[e];
        if (ne == 0) continue;
        const int32_t *toks = c->exp_tok + (size_t)e * c->params.n_batch;
        const float *ws = c->exp_w + (size_t)e * c->params.n_batch;
        vx_split(ne, ith, nth, 1, &t0, &t1);
        for (int64_t i = t0; i < t1; i++)
            memcpy(c->moe_in + i * E, c->xn + (size_t)toks[i] * E, (size_t)E * sizeof(float));
        prep(c, t0, t1, ne, c->moe_in, E, E, &L->ffn_gate_exps, &L->ffn_up_exps, NULL);
        sync_after(c, ith, VX_PERF_MOE);
        /* (the fused pass has no place for the experts' biases) */
        if (!L->ffn_gate_exps_b.data && glu_fused(c, &L->ffn_gate_exps, &L->ffn_up_exps, &L->ffn_down_exps, ne)) {
            mm_glu(c, ith, nth, &L->ffn_gate_exps, &L->ffn_up_exps, &L->ffn_down_exps,
                   (size_t)e * L->ffn_gate_exps.mat_size, ne);
        } else {
            mm(c, ith, nth, &L->ffn_gate_exps, (size_t)e * L->ffn_gate_exps.mat_size, c->moe_in, ne, E,
               c->gate, F, false);
            mm(c, ith, nth, &L->ffn_up_exps, (size_t)e * L->ffn_up_exps.mat_size, c->moe_in, ne, E,
               c->up, F, false);
            sync_after(c, ith, VX_PERF_MOE);
            for (int64_t i = t0; i < t1; i++) {
                exp_bias(c->gate + i * F, &L->ffn_gate_exps_b, e, F);
                exp_bias(c->up + i * F, &L->ffn_up_exps_b, e, F);
                c->glu(c->gate + i * F, c->up + i * F, F);
            }
            prep(c, t0, t1, ne, c->gate, F, F, &L->ffn_down_exps, NULL, NULL);
        }
        sync_after(c, ith, VX_PERF_MOE);
        mm(c, ith, nth, &L->ffn_down_exps, (size_t)e * L->ffn_down_exps.mat_size, c->gate, ne, F,
           c->moe_out, E, false);
        sync_after(c, ith, VX_PERF_MOE);
        /* tokens are distinct within one expert, so threads never add to
         * the same residual row concurrently */
        for (int64_t i = t0; i < t1; i++) {
            exp_bias(c->moe_out + i * E, &L->ffn_down_exps_b, e, E);
            c->kern.axpy_f32(c->x + (size_t)toks[i] * E, ws[i], c->moe_out + i * E, E);
        }
        sync_after(c, ith, VX_PERF_MOE);
    }
}

/* ffn_moe for a single token on several threads (solo): the K experts
 * split between the threads, each running its experts' matrices whole
 * (long row streams; a split of each expert's few hundred rows gave every
 * GEMV call 64 of them). Each thread prepares its inputs in its own slot
 * (prep_solo; slots lie n elements apart, so all threads prepare rows of
 * one length between two barriers): gate/up of expert k to row k of
 * c->gate / c->up, then its SwiGLU and down projection to row k of
 * moe_out, and thread 0 adds them to x, in ffn_moe's order with its axpy:
 * the same bits as ffn_moe. 5 barriers a layer, not 2 + 5 K. */
static void ffn_moe_solo(vx_context *c, const vx_layer *L, int ith, int nth) {
    const vx_hparams *hp = &c->model->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff, K = hp->n_expert_used;
    float *xs = solo_row(c, ith);
    mm(c, ith, nth, &L->ffn_gate_inp, 0, c->xn, 1, E, c->router, hp->n_expert, false);
    sync_after(c, ith, VX_PERF_MOE);
    if (ith == 0) moe_route(c, L);
    sync_after(c, ith, VX_PERF_MOE);
    int64_t k0, k1;
    vx_split(K, ith, nth, 1, &k0, &k1);
    memcpy(xs, c->xn, (size_t)E * sizeof(float));
    prep_solo(c, ith, xs, E, &L->ffn_gate_exps, &L->ffn_up_exps, NULL);
    for (int64_t k = k0; k < k1; k++) {
        const size_t e = (size_t)c->sel[k];
        mm_rows(c, ith, &L->ffn_gate_exps, e * L->ffn_gate_exps.mat_size, xs, 1, E, c->gate + k * F, F, false, 0, F);
        mm_rows(c, ith, &L->ffn_up_exps, e * L->ffn_up_exps.mat_size, xs, 1, E, c->up + k * F, F, false, 0, F);
    }
    sync_after(c, ith, VX_PERF_MOE);
    for (int64_t k = k0; k < k1; k++) {
        const size_t e = (size_t)c->sel[k];
        memcpy(xs, c->gate + k * F, (size_t)F * sizeof(float));
        exp_bias(xs, &L->ffn_gate_exps_b, (int64_t)e, F);
        exp_bias(c->up + k * F, &L->ffn_up_exps_b, (int64_t)e, F);
        c->glu(xs, c->up + k * F, F);
        prep_solo(c, ith, xs, F, &L->ffn_down_exps, NULL, NULL);
        mm_rows(c, ith, &L->ffn_down_exps, e * L->ffn_down_exps.mat_size, xs, 1, F, c->moe_out + k * E, E, false, 0,
                E);
        exp_bias(c->moe_out + k * E, &L->ffn_down_exps_b, (int64_t)e, E);
    }
    sync_after(c, ith, VX_PERF_MOE);
    if (ith == 0) /* ffn_moe's order: by expert index, each with its weight */
        for (int32_t e = 0; e < hp->n_expert; e++)
            for (int64_t k = 0; k < K && c->exp_n[e]; k++)
                if (c->sel[k] == e)
                    c->kern.axpy_f32(c->x, c->exp_w[(size_t)e * c->params.n_batch], c->moe_out + k * E, E);
    sync_after(c, ith, VX_PERF_MOE);
}

/* The shared expert of an MoE layer, after the routed ones: x += s
 * SwiGLU-FFN(xn) for every token, s = sigmoid(gate_inp_shexp . xn)
 * (Qwen2-MoE; 1 without that gate) times the residual scale (Granite), xn
 * still the FFN block's normed input (the experts write only x and their
 * own buffers). s scales the up projection's row before the GLU:
 * silu(g) (s u) = s (silu(g) u), so the down projection adds it scaled. */
static void ffn_shared(vx_context *c, const vx_layer *L, int ith, int nth) {
    const vx_hparams *hp = &c->model->hp;
    const int64_t E = hp->n_embd, FS = hp->n_ff_shexp, n = c->n_tok;
    const float *gi = L->ffn_gate_inp_shexp.data;
    int64_t t0, t1;
    vx_split(n, ith, nth, 1, &t0, &t1);
    prep(c, t0, t1, n, c->xn, E, E, &L->ffn_gate_shexp, &L->ffn_up_shexp, NULL);
    sync_after(c, ith, VX_PERF_MOE);
    mm(c, ith, nth, &L->ffn_gate_shexp, 0, c->xn, n, E, c->gate, FS, false);
    mm(c, ith, nth, &L->ffn_up_shexp, 0, c->xn, n, E, c->up, FS, false);
    sync_after(c, ith, VX_PERF_MOE);
    for (int64_t t = t0; t < t1; t++) {
        double dot = 0;
        for (int64_t e = 0; gi && e < E; e++) dot += (double)c->xn[t * E + e] * gi[e];
        const float s = (gi ? (float)(1.0 / (1.0 + exp(-dot))) : 1.0f) * hp->residual_scale;
        for (int64_t f = 0; s != 1.0f && f < FS; f++) c->up[t * FS + f] *= s;
    }
    sync_after(c, ith, VX_PERF_MOE);
    glu_prep(c, ith, nth, n, c->gate, c->up, FS, c->gate, FS, &L->ffn_down_shexp);
    sync_after(c, ith, VX_PERF_MOE);
    mm(c, ith, nth, &L->ffn_down_shexp, 0, c->gate, n, FS, c->x, E, true);
    sync_after(c, ith, VX_PERF_MOE);
}

/* BitNet's FFN activation of one row, g (F floats) in place: the gate
 * times its scale, the gated activation with u, times up's scale (one
 * rounding off llama.cpp's act(g) (u s), which scales u first), then the
 * RMSNorm of ffn_sub_norm */
static void sub_glu(vx_context *c, const vx_layer *L, float *g, const float *u, int64_t F) {
    scale_row(g, &L->ffn_gate_s, F);
    c->glu(g, u, F);
    scale_row(g, &L->ffn_up_s, F);
    c->kern.rmsnorm(g, g, L->ffn_sub_norm.data, F, c->model->hp.rms_eps);
}

/* Block outputs in xn into the residual stream, this thread's tokens:
 * x += RMSNorm(xn) w (Gemma 2's post norms; w without data: no norm),
 * times Granite's residual_scale */
static void post_norm_add(vx_context *c, int ith, int nth, int64_t n, const vx_weight *w, float ws) {
    const int64_t E = c->model->hp.n_embd;
    const float rs = c->model->hp.residual_scale * ws;
    int64_t t0, t1;
    vx_split(n, ith, nth, 1, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        float *xn = c->xn + t * E, *x = c->x + t * E;
        if (w->data) c->kern.rmsnorm(xn, xn, w->data, E, c->model->hp.rms_eps);
        c->kern.axpy_f32(x, rs, xn, E); /* rs 1: exactly x + xn */
    }
}

/* A block's output projection w (K inputs x of n tokens) added to the
 * residual stream x: straight into it, or (Gemma 2, post a norm; Granite,
 * scaled; BitNet, times the projection's scale ws) into xn first, then
 * post_norm_add */
static void block_out(vx_context *c, int ith, int nth, const vx_weight *w, const float *x, int64_t n, int64_t K,
                      const vx_weight *post, const vx_weight *ws, vx_perf_step s) {
    const int64_t E = c->model->hp.n_embd;
    if (!post->data && c->model->hp.residual_scale == 1.0f && !ws->data) {
        mm(c, ith, nth, w, 0, x, n, K, c->x, E, true);
        sync_after(c, ith, s);
        return;
    }
    mm(c, ith, nth, w, 0, x, n, K, c->xn, E, false);
    sync_after(c, ith, s);
    post_norm_add(c, ith, nth, n, post, vx_weight_scale(ws));
    sync_after(c, ith, VX_PERF_NORM);
}

/* The output norm of residual row x into dst, the input of the logits:
 * divided by Granite's logit_scale there, W (x / s) being W x / s */
static void out_norm(vx_context *c, float *dst, const float *x) {
    const vx_hparams *hp = &c->model->hp;
    c->kern.rmsnorm(dst, x, c->model->output_norm.data, hp->n_embd, hp->rms_eps);
    if (hp->logit_scale != 1.0f)
        for (int64_t e = 0; e < hp->n_embd; e++) dst[e] /= hp->logit_scale;
}

/* Gemma 2's final soft cap, cap tanh(logit / cap), over n_out rows of
 * logits, split between the threads (after the barrier that ends the
 * logits matmul) */
static void final_softcap(vx_context *c, int ith, int nth, int64_t n_out) {
    const float cap = c->model->hp.final_softcap, in = 1.0f / cap;
    int64_t i0, i1;
    vx_split(n_out * c->model->hp.n_vocab, ith, nth, 1, &i0, &i1);
    c->kern.softcap(c->logits + i0, i1 - i0, in, cap); /* the tier's tanh: 2.6 ms a token as tanhf (Gemma 2) */
}

/* n_rot / 2 (cos, sin) pairs of position p / scale, base's frequencies
 * (divided by the file's rope_freqs factors ff, when it has them), with
 * YaRN's mix of interpolated and extrapolated angles when yarn (model.h) */
static void rope_fill(float *cs, int32_t n_rot, double p, float base, const float *ff, const vx_hparams *yarn) {
    for (int32_t i = 0; i < n_rot / 2; i++) {
        double theta = p * pow((double)base, -2.0 * i / n_rot), ms = 1.0;
        if (ff) theta /= ff[i];
        if (yarn) {
            const double y = ((double)i - yarn->yarn_lo) / VX_MAX(0.001, (double)yarn->yarn_hi - yarn->yarn_lo);
            const double mix = (1.0 - VX_MIN(1.0, VX_MAX(0.0, y))) * yarn->yarn_ext;
            theta = theta / yarn->yarn_factor * (1.0 - mix) + theta * mix;
            ms = yarn->yarn_mscale;
        }
        cs[2 * i] = (float)(cos(theta) * ms);
        cs[2 * i + 1] = (float)(sin(theta) * ms);
    }
}

/* Batch token t's rotary tables: the global one, and the local layers'
 * (base rope_base_swa, no scaling) when they have their own. */
static void rope_table(vx_context *c, int64_t t) {
    const vx_hparams *hp = &c->model->hp;
    const double pos = (double)c->batch->pos[t];
    rope_fill(c->rope + t * hp->n_rot, hp->n_rot, pos / hp->rope_scale, hp->rope_base, c->model->rope_freqs.data,
              hp->yarn ? hp : NULL);
    if (hp->rope_dual) rope_fill(c->rope_local + t * hp->n_rot, hp->n_rot, pos, hp->rope_base_swa, NULL, NULL);
}

/* ------------------------------------------------------------ encoders */

/* Rows [t0, t1): x = LayerNorm(y + b + x) with w, wb (y, b may be NULL:
 * none), and their activation rows for the next matmuls' weights w0..w2. */
static void enc_norm_rows(vx_context *c, int64_t t0, int64_t t1, const float *y, const vx_weight *bias,
                          const vx_weight *w, const vx_weight *wb, const vx_weight *const next[3]) {
    const int64_t E = c->model->hp.n_embd;
    for (int64_t t = t0; t < t1; t++) {
        float *x = c->x + t * E;
        if (y)
            for (int64_t e = 0; e < E; e++) x[e] += y[t * E + e];
        if (bias) add_bias(x, bias, E);
        vx_layernorm(x, x, w->data, wb->data, E, c->model->hp.rms_eps);
    }
    if (next) prep(c, t0, t1, c->n_tok, c->x, E, E, next[0], next[1], next[2]);
}

/* The attention's matmul weights of layer L (q, k, v or the fused one). */
static void enc_qkv(const vx_layer *L, const vx_weight *out[3]) {
    out[0] = L->wqkv.data ? &L->wqkv : &L->wq;
    out[1] = L->wqkv.data ? NULL : &L->wk;
    out[2] = L->wqkv.data ? NULL : &L->wv;
}

/* A BERT-style encoder's forward (arch->encoder): embeddings (token, type
 * 0, absolute position or none) through a LayerNorm; per layer the
 * attention over whole sequences, x = LN(x + out-proj), the FFN (GELU
 * with biases, or SwiGLU), x = LN(x + FFN); the last layer's x are the
 * embeddings. No final norm, no logits (vx_decode refuses to ask). */
static void encoder_worker(vx_context *c, int ith, int nth) {
    const vx_model *M = c->model;
    const vx_hparams *hp = &M->hp;
    const vx_batch *b = c->batch;
    const int64_t n = c->n_tok, E = hp->n_embd, F = hp->n_ff;
    const int64_t QD = (int64_t)hp->n_head * hp->head_dim, KD = (int64_t)hp->n_head_kv * hp->head_dim;
    const bool gated = M->layers[0].ffn_gate.data != NULL;
    int64_t t0, t1;
    vx_split(n, ith, nth, 1, &t0, &t1);
    if (ith == 0 && c->params.profile) c->perf_t = vx_time_ns();
    float *scr = c->scratch + (size_t)ith * (size_t)c->scratch_per + (size_t)c->att_scratch_off;
    float *row = c->scratch + (size_t)ith * (size_t)c->scratch_per;
    for (int64_t t = t0; t < t1; t++) {
        float *x = c->x + t * E;
        vx_weight_row_f32(&M->tok_embd, b->token[t], x);
        vx_weight_row_f32(&M->type_embd, 0, row); /* token type 0, as llama.cpp */
        for (int64_t e = 0; e < E; e++) x[e] += row[e];
        if (M->arch->abs_pos) {
            vx_weight_row_f32(&M->pos_embd, b->pos[t], row);
            for (int64_t e = 0; e < E; e++) x[e] += row[e];
        } else {
            rope_table(c, t);
        }
    }
    const vx_weight *next[3];
    enc_qkv(&M->layers[0], next);
    enc_norm_rows(c, t0, t1, NULL, NULL, &M->tok_norm, &M->tok_norm_b, next);
    sync_after(c, ith, VX_PERF_EMBED);
    for (int il = 0; il < hp->n_layer; il++) {
        const vx_layer *L = &M->layers[il];
        if (hp->fused_qkv) {
            mm(c, ith, nth, &L->wqkv, 0, c->x, n, E, c->qkv, QD + 2 * KD, false);
        } else {
            mm(c, ith, nth, &L->wq, 0, c->x, n, E, c->q, QD, false);
            mm(c, ith, nth, &L->wk, 0, c->x, n, E, c->k, KD, false);
            mm(c, ith, nth, &L->wv, 0, c->x, n, E, c->v, KD, false);
        }
        sync_after(c, ith, VX_PERF_QKV);
        qkv_post(c, L, il, ith, nth);
        sync_after(c, ith, VX_PERF_ROPE);
        const int32_t seq = c->mm_seq[16 * ith]++;
        const vx_attn_args aa = {.kv = c->kv, .layer = il, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
                                 .head_dim = hp->head_dim, .scale = hp->attn_scale, .q = c->q, .out = c->att,
                                 .pos = b->pos, .seq_id = b->seq_id, .n_tok = (int32_t)n,
                                 .next = nth > 1 && seq < c->n_mm ? &c->mm_next[seq] : NULL,
                                 .seq_len = c->seq_next};
        vx_attention(&c->kern, &aa, ith, nth, scr);
        sync_after(c, ith, VX_PERF_ATTN);
        /* the attention's rows come from every thread's units */
        prep(c, t0, t1, n, c->att, QD, QD, &L->wo, NULL, NULL);
        sync_after(c, ith, VX_PERF_NORM);
        mm(c, ith, nth, &L->wo, 0, c->att, n, QD, c->xn, E, false);
        sync_after(c, ith, VX_PERF_OUT_PROJ);
        const vx_weight *ffn[3] = {gated ? &L->ffn_gate : &L->ffn_up, gated ? &L->ffn_up : NULL, NULL};
        enc_norm_rows(c, t0, t1, c->xn, &L->bo, &L->attn_norm, &L->attn_norm_b, ffn);
        sync_after(c, ith, VX_PERF_NORM);
        if (gated) {
            mm(c, ith, nth, &L->ffn_gate, 0, c->x, n, E, c->gate, F, false);
            mm(c, ith, nth, &L->ffn_up, 0, c->x, n, E, c->up, F, false);
            sync_after(c, ith, VX_PERF_FFN_UP);
            glu_prep(c, ith, nth, n, c->gate, c->up, F, c->gate, F, &L->ffn_down);
        } else {
            mm(c, ith, nth, &L->ffn_up, 0, c->x, n, E, c->gate, F, false);
            sync_after(c, ith, VX_PERF_FFN_UP);
            for (int64_t t = t0; t < t1; t++) { /* gelu(h + b): GeGLU over a row of ones */
                add_bias(c->gate + t * F, &L->ffn_up_b, F);
                c->kern.geglu(c->gate + t * F, c->ones, F);
            }
            prep(c, t0, t1, n, c->gate, F, F, &L->ffn_down, NULL, NULL);
        }
        sync_after(c, ith, VX_PERF_FFN_ACT);
        mm(c, ith, nth, &L->ffn_down, 0, c->gate, n, F, c->xn, E, false);
        sync_after(c, ith, VX_PERF_FFN_DOWN);
        if (il + 1 < hp->n_layer) enc_qkv(&M->layers[il + 1], next);
        enc_norm_rows(c, t0, t1, c->xn, &L->ffn_down_b, &L->ffn_norm, &L->ffn_norm_b,
                      il + 1 < hp->n_layer ? next : NULL);
        sync_after(c, ith, VX_PERF_NORM);
    }
    int64_t e0, e1;
    vx_split(c->n_emb, ith, nth, 1, &e0, &e1);
    for (int64_t o = e0; o < e1; o++)
        memcpy(c->embd + o * E, c->x + (size_t)c->emb_tok[o] * E, (size_t)E * sizeof(float));
}

static void forward_worker(void *arg, int ith, int nth) {
    vx_context *c = arg;
    const vx_model *M = c->model;
    if (M->arch->encoder) {
        encoder_worker(c, ith, nth);
        return;
    }
    const vx_hparams *hp = &M->hp;
    const vx_batch *b = c->batch;
    const int64_t n = c->n_tok, E = hp->n_embd, hd = hp->head_dim;
    const int64_t QD = (int64_t)hp->n_head * hd, KD = (int64_t)hp->n_head_kv * hd;
    const int64_t F = hp->n_ff;
    int64_t t0, t1;
    vx_split(n, ith, nth, 1, &t0, &t1);
    /* a single token: the row-wise steps run in every thread (solo_row) */
    const bool solo = n == 1 && nth > 1 && c->params.n_batch >= (uint32_t)nth && !c->params.f32_matmul;
    float *const xs = solo_row(c, ith);
    /* ... and the attention block's q/k/v by kv heads, when they split
     * evenly; so is the attention itself when the context is short. From
     * 2 nth segments of positions on, the attention splits the positions
     * instead (vx_attention's segments: whole cache blocks per thread,
     * ~4.2 against 5.5-6.4 ms a token for Llama-3.2-1B at 3584 positions
     * on two threads), for one barrier more a layer */
    const int32_t nkv = hp->n_head_kv;
    const bool long_ctx = c->att_seg_buf && (int64_t)b->pos[0] + 1 >= 2 * (int64_t)nth * c->att_seg;
    const bool hsolo = solo && nkv % nth == 0 && hd % 16 == 0;
    const int32_t kvh0 = nkv / nth * ith, kvh1 = kvh0 + nkv / nth;
    if (ith == 0 && c->params.profile) c->perf_t = vx_time_ns();

    /* embeddings (unless they come from the process before) and per-token
     * rotary tables */
    for (int64_t t = t0; t < t1; t++) {
        if (c->do_embed) {
            vx_weight_row_f32(&M->tok_embd, b->token[t], c->x + t * E);
            if (c->embed_scale != 1.0f)
                for (int64_t e = 0; e < E; e++) c->x[t * E + e] *= c->embed_scale;
        }
        if (c->il0 < c->il1) rope_table(c, t);
    }
    sync_after(c, ith, VX_PERF_EMBED);

    for (int il = c->il0; il < c->il1; il++) {
        const vx_layer *L = &M->layers[il];
        const float *xa = c->xn; /* the attention block's input */
        if (solo) {
            c->kern.rmsnorm(xs, c->x, L->attn_norm.data, E, hp->rms_eps);
            if (hp->fused_qkv) prep_solo(c, ith, xs, E, &L->wqkv, NULL, NULL);
            else prep_solo(c, ith, xs, E, &L->wq, &L->wk, &L->wv);
            xa = xs;
            perf_step(c, ith, VX_PERF_NORM);
        } else {
            for (int64_t t = t0; t < t1; t++)
                c->kern.rmsnorm(c->xn + t * E, c->x + t * E, L->attn_norm.data, E, hp->rms_eps);
            if (hp->fused_qkv) prep(c, t0, t1, n, c->xn, E, E, &L->wqkv, NULL, NULL);
            else prep(c, t0, t1, n, c->xn, E, E, &L->wq, &L->wk, &L->wv);
            sync_after(c, ith, VX_PERF_NORM);
        }
        float *scr = c->scratch + (size_t)ith * (size_t)c->scratch_per + (size_t)c->att_scratch_off;
        if (hsolo && !long_ctx) {
            attn_heads(c, L, il, ith, xa, kvh0, kvh1, scr);
        } else {
            if (hsolo) {
                qkv_heads(c, L, il, ith, xa, kvh0, kvh1);
            } else {
                if (hp->fused_qkv) {
                    mm(c, ith, nth, &L->wqkv, 0, xa, n, E, c->qkv, QD + 2 * KD, false);
                } else {
                    mm(c, ith, nth, &L->wq, 0, xa, n, E, c->q, QD, false);
                    mm(c, ith, nth, &L->wk, 0, xa, n, E, c->k, KD, false);
                    mm(c, ith, nth, &L->wv, 0, xa, n, E, c->v, KD, false);
                }
                sync_after(c, ith, VX_PERF_QKV);
                qkv_post(c, L, il, ith, nth);
            }
            sync_after(c, ith, VX_PERF_ROPE);
            /* the units from a shared counter (the same slot in every
             * thread: all of them take this branch) */
            const int32_t seq = c->mm_seq[16 * ith]++;
            const vx_attn_args aa = {c->kv,        il,     hp->n_head, hp->n_head_kv, hp->head_dim,
                                     hp->attn_scale, c->q, c->att, b->pos, b->seq_id,
                                     (int32_t)n, tiles_attn(c), nth > 1 && seq < c->n_mm ? &c->mm_next[seq] : NULL,
                                     hp->attn_softcap, swa_of(hp, il), c->att_seg, c->att_seg_buf,
                                     c->att_seg_done, c->att_seg_groups, c->att_seg_max, NULL,
                                     L->attn_sinks.data};
            vx_attention(&c->kern, &aa, ith, nth, scr);
        }
        sync_after(c, ith, VX_PERF_ATTN);
        const float *xo = c->att; /* the output projection's input */
        const bool sub = L->attn_sub_norm.data != NULL; /* BitNet: RMSNorm(attention) into wo */
        if (solo) {
            if (sub) c->kern.rmsnorm(xs, c->att, L->attn_sub_norm.data, QD, hp->rms_eps);
            prep_solo(c, ith, sub ? xs : c->att, QD, &L->wo, NULL, NULL);
            if (sub || vx_act_type(L->wo.type) != VX_TYPE_F32) xo = xs; /* its slot, or the normed row */
            perf_step(c, ith, VX_PERF_NORM);
        } else {
            const bool wprep =
                (vx_act_type(L->wo.type) != VX_TYPE_F32 || amx_for(c, &L->wo, n)) && !c->params.f32_matmul;
            if (sub)
                for (int64_t t = t0; t < t1; t++)
                    c->kern.rmsnorm(c->att + t * QD, c->att + t * QD, L->attn_sub_norm.data, QD, hp->rms_eps);
            if (wprep) prep(c, t0, t1, n, c->att, QD, QD, &L->wo, NULL, NULL);
            if (sub || wprep) sync_after(c, ith, VX_PERF_NORM);
        }
        block_out(c, ith, nth, &L->wo, xo, n, QD, &L->attn_post_norm, &L->wo_s, VX_PERF_OUT_PROJ);
        /* solo FFN: not with an output bias (it is added to x in place) or
         * experts (ffn_moe splits its own steps) */
        const bool fsolo = solo && !L->bo.data && hp->n_expert == 0;
        const float *xf = c->xn; /* the FFN block's input */
        if (fsolo) {
            c->kern.rmsnorm(xs, c->x, L->ffn_norm.data, E, hp->rms_eps);
            prep_solo(c, ith, xs, E, &L->ffn_gate, &L->ffn_up, NULL);
            xf = xs;
            perf_step(c, ith, VX_PERF_NORM);
        } else {
            for (int64_t t = t0; t < t1; t++) {
                if (L->bo.data) /* part of the block's output: Granite's residual scale too */
                    c->kern.axpy_f32(c->x + t * E, hp->residual_scale, L->bo.data, E);
                c->kern.rmsnorm(c->xn + t * E, c->x + t * E, L->ffn_norm.data, E, hp->rms_eps);
            }
            if (hp->n_expert > 0) prep(c, t0, t1, n, c->xn, E, E, &L->ffn_gate_inp, NULL, NULL);
            else prep(c, t0, t1, n, c->xn, E, E, &L->ffn_gate, &L->ffn_up, NULL);
            sync_after(c, ith, VX_PERF_NORM);
        }
        if (hp->n_expert > 0) {
            if (solo && c->params.n_batch >= (uint32_t)hp->n_expert_used) ffn_moe_solo(c, L, ith, nth);
            else ffn_moe(c, L, ith, nth);
            if (hp->n_ff_shexp > 0) ffn_shared(c, L, ith, nth);
            continue;
        }
        const float *xd = c->gate; /* the down projection's input */
        const bool fsub = L->ffn_sub_norm.data != NULL; /* BitNet: scales, activation, RMSNorm, then ffn_down */
        if (!fsolo && !hp->fused_gate_up && !fsub && glu_fused(c, &L->ffn_gate, &L->ffn_up, &L->ffn_down, n)) {
            mm_glu(c, ith, nth, &L->ffn_gate, &L->ffn_up, &L->ffn_down, 0, n);
            sync_after(c, ith, VX_PERF_FFN_UP);
        } else {
            const float *g, *u;
            int64_t ld;
            if (hp->fused_gate_up) {
                mm(c, ith, nth, &L->ffn_up, 0, xf, n, E, c->up, 2 * F, false);
                g = c->up, u = c->up + F, ld = 2 * F;
            } else {
                mm(c, ith, nth, &L->ffn_gate, 0, xf, n, E, c->gate, F, false);
                mm(c, ith, nth, &L->ffn_up, 0, xf, n, E, c->up, F, false);
                g = c->gate, u = c->up, ld = F;
            }
            sync_after(c, ith, VX_PERF_FFN_UP);
            if (fsolo) {
                memcpy(xs, g, (size_t)F * sizeof(float));
                if (fsub) sub_glu(c, L, xs, u, F);
                else c->glu(xs, u, F);
                prep_solo(c, ith, xs, F, &L->ffn_down, NULL, NULL);
                xd = xs;
                perf_step(c, ith, VX_PERF_FFN_ACT);
            } else if (fsub) {
                for (int64_t t = t0; t < t1; t++) { /* into c->gate, as glu_prep (g: c->up's first half when fused) */
                    if (g != c->gate) memcpy(c->gate + t * F, g + t * ld, (size_t)F * sizeof(float));
                    sub_glu(c, L, c->gate + t * F, u + t * ld, F);
                }
                prep(c, t0, t1, n, c->gate, F, F, &L->ffn_down, NULL, NULL);
                sync_after(c, ith, VX_PERF_FFN_ACT);
            } else {
                glu_prep(c, ith, nth, n, (float *)g, u, ld, c->gate, F, &L->ffn_down);
                sync_after(c, ith, VX_PERF_FFN_ACT);
            }
        }
        block_out(c, ith, nth, &L->ffn_down, xd, n, F, &L->ffn_post_norm, &L->ffn_down_s, VX_PERF_FFN_DOWN);
    }

    if (!c->do_out) return; /* the next process's turn */
    /* embeddings: the final norm of the tokens that asked, in their order
     * (the rows the logits below are computed from, with the same kernel) */
    if (c->n_emb > 0) {
        int64_t e0, e1;
        vx_split(c->n_emb, ith, nth, 1, &e0, &e1);
        for (int64_t o = e0; o < e1; o++)
            c->kern.rmsnorm(c->embd + o * E, c->x + (size_t)c->emb_tok[o] * E, M->output_norm.data, E,
                            hp->rms_eps);
    }
    if (c->n_out == 0) return;
    /* final norm of the tokens that want logits, gathered in output order */
    if (solo && c->n_out == 1) {
        out_norm(c, xs, c->x);
        prep_solo(c, ith, xs, E, &M->output, NULL, NULL);
        mm(c, ith, nth, &M->output, 0, xs, 1, E, c->logits, hp->n_vocab, false);
        perf_step(c, ith, VX_PERF_LOGITS);
        if (hp->final_softcap > 0) {
            sync_after(c, ith, VX_PERF_LOGITS);
            final_softcap(c, ith, nth, 1);
            perf_step(c, ith, VX_PERF_LOGITS);
        }
        return;
    }
    int64_t o0, o1;
    vx_split(c->n_out, ith, nth, 1, &o0, &o1);
    for (int64_t o = o0; o < o1; o++) out_norm(c, c->xn + o * E, c->x + (size_t)c->out_tok[o] * E);
    prep(c, o0, o1, c->n_out, c->xn, E, E, &M->output, NULL, NULL);
    sync_after(c, ith, VX_PERF_LOGITS);
    mm(c, ith, nth, &M->output, 0, c->xn, c->n_out, E, c->logits, hp->n_vocab, false);
    perf_step(c, ith, VX_PERF_LOGITS);
    if (hp->final_softcap > 0) {
        sync_after(c, ith, VX_PERF_LOGITS);
        final_softcap(c, ith, nth, c->n_out);
        perf_step(c, ith, VX_PERF_LOGITS);
    }
}

static vx_status fail(vx_context *c, vx_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static vx_status fail(vx_context *c, vx_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
    return st;
}

/* The forward of the batch set up in c: alone, or as this process's stage
 * of the group's pipeline (dist.h), where st is this process's verdict on
 * the batch: a failure is passed on instead of hidden states. Process 0
 * holds the group's lock (vx_decode). */
static vx_status run_forward(vx_context *c, vx_status st) {
    const vx_model *M = c->model;
    vx_dist *d = M->dist;
    if (!vx_dist_multi(d)) {
        c->do_embed = c->do_out = true;
        c->il0 = 0, c->il1 = M->hp.n_layer;
        vx_pool_run(c->pool, forward_worker, c);
        return VX_OK;
    }
    const int32_t r = vx_dist_rank(d), R = vx_dist_size(d);
    const size_t nx = (size_t)c->n_tok * (size_t)M->hp.n_embd;
    c->il0 = M->l0, c->il1 = M->l1;
    c->do_embed = r == 0, c->do_out = false;
    if (r > 0) {
        const vx_status prev = vx_dist_recv(d, r - 1, c->x, nx);
        if (!st) st = prev;
    }
    if (!st) vx_pool_run(c->pool, forward_worker, c);
    vx_dist_send(d, r == R - 1 ? 0 : r + 1, st, c->x, nx);
    if (r > 0 || st) return st;
    /* process 0 again: the output head over what the last one sent */
    if ((st = vx_dist_recv(d, R - 1, c->x, nx))) return st;
    c->do_embed = false, c->do_out = true;
    c->il0 = c->il1 = 0;
    vx_pool_run(c->pool, forward_worker, c);
    return VX_OK;
}

/* Thread 0's time in the steps so far. */
static uint64_t perf_steps(const vx_context *c) {
    uint64_t s = 0;
    for (int i = 0; i < VX_PERF_COUNT; i++) s += c->perf.ns[i];
    return s;
}

vx_status vx_decode(vx_context *c, const vx_batch *b) {
    if (!c || !b || !b->token || !b->pos || !b->seq_id)
        return c ? fail(c, VX_EINVAL, "batch arrays are required") : VX_EINVAL;
    const int64_t t0 = vx_time_ns();
    const vx_hparams *hp = &c->model->hp;
    const int32_t n = b->n_tokens;
    c->n_out = c->n_emb = 0;
    if (n <= 0 || (uint32_t)n > c->params.n_batch)
        return fail(c, VX_EINVAL, "batch of %d tokens (allowed 1..%u)", n, c->params.n_batch);
    const int32_t n_seq = (int32_t)c->params.n_seq_max;
    const bool enc = c->model->arch->encoder; /* no output head */
    for (int32_t i = 0; i < n && enc; i++)
        if (b->logits ? b->logits[i] != 0 : !b->embd) /* without flags: the last token's logits */
            return fail(c, VX_EUNSUPPORTED, "%s is an embedding model (an encoder without an output head): "
                        "it computes embeddings, not logits", c->model->arch->name);
    /* validate: ids in range, each sequence's positions continue its cache */
    int32_t *next = c->seq_next;
    for (int32_t s = 0; s < n_seq; s++) next[s] = vx_kv_len(c->kv, s);
    vx_status st = VX_OK;
    for (int32_t i = 0; i < n && !st; i++) {
        const int32_t s = b->seq_id[i];
        if (b->token[i] < 0 || b->token[i] >= hp->n_vocab)
            st = fail(c, VX_EINVAL, "token %d at batch index %d is outside the vocabulary (%d)",
                      b->token[i], i, hp->n_vocab);
        else if (s < 0 || s >= n_seq)
            st = fail(c, VX_EINVAL, "sequence id %d at batch index %d is outside [0, %d)", s, i,
                      n_seq);
        else if (enc && b->pos[i] == next[s] && next[s] > 0 && next[s] == vx_kv_len(c->kv, s))
            st = fail(c, VX_EINVAL,
                      "sequence %d already holds %d positions: an encoder's attention sees the whole "
                      "sequence, which must come in one batch",
                      s, next[s]);
        else if (b->pos[i] != next[s])
            st = fail(c, VX_EINVAL,
                      "position %d of sequence %d at batch index %d: expected %d (positions "
                      "must continue the cached sequence)",
                      b->pos[i], s, i, next[s]);
        else if (b->pos[i] >= (int32_t)c->params.n_ctx)
            st = fail(c, VX_ERANGE, "position %d exceeds the context size %u", b->pos[i],
                      c->params.n_ctx);
        else
            next[s]++;
    }
    for (int32_t s = 0; s < n_seq && !st; s++) {
        if (next[s] == vx_kv_len(c->kv, s)) continue;
        if (vx_kv_reserve(c->kv, s, next[s]) != VX_OK) {
            st = fail(c, VX_EFULL, "KV cache is full: sequence %d needs %d positions, %d blocks "
                      "free", s, next[s], vx_kv_free_blocks(c->kv));
            for (int32_t r = 0; r < s; r++) vx_kv_truncate(c->kv, r, vx_kv_len(c->kv, r));
        }
    }
    vx_dist *d = c->model->dist;
    const bool follower = vx_dist_multi(d) && vx_dist_rank(d) > 0;
    if (st) {
        /* a later process of a group passes the failure on (it cannot
         * happen: process 0 checked the same batch on the same state) */
        if (follower) c->n_tok = n, run_forward(c, st);
        return st;
    }
    for (int32_t i = 0; i < n; i++) vx_kv_set_token(c->kv, b->seq_id[i], b->pos[i], b->token[i]);
    /* logits and embedding rows */
    for (int32_t i = 0; i < n; i++) {
        const bool want = b->logits ? b->logits[i] != 0 : !enc && !b->embd && i == n - 1;
        c->out_row[i] = want ? c->n_out : -1;
        if (want) c->out_tok[c->n_out++] = i;
        const bool we = b->embd && b->embd[i];
        c->emb_row[i] = we ? c->n_emb : -1;
        if (we) c->emb_tok[c->n_emb++] = i;
    }
    c->batch = b;
    c->n_tok = n;
    for (int32_t i = 0; i < c->n_mm; i++) atomic_init(&c->mm_next[i], 0);
    for (int32_t i = 0; i < (int32_t)c->params.n_threads; i++) c->mm_seq[16 * i] = 0;
    const uint64_t steps0 = c->params.profile ? perf_steps(c) : 0;
    if (c->dist_id >= 0) { /* process 0 of a group: the others take the batch */
        vx_dist_lock(d);
        vx_dist_decode(d, c->dist_id, b);
    }
    st = run_forward(c, VX_OK);
    if (c->dist_id >= 0) vx_dist_unlock(d);
    if (st) st = fail(c, VX_EINTERNAL, "a process of the group failed its layers (%s)", vx_status_str(st));
    const uint64_t dt = (uint64_t)(vx_time_ns() - t0);
    if (c->params.profile) c->perf.ns[VX_PERF_OTHER] += dt - (perf_steps(c) - steps0);
    c->perf.ns_decode += dt;
    c->perf.n_decode++;
    c->perf.n_tokens += (uint64_t)n;
    c->batch = NULL;
    for (int32_t s = 0; s < n_seq; s++)
        if (next[s] != vx_kv_len(c->kv, s)) vx_kv_set_len(c->kv, s, next[s]);
    return st;
}

const float *vx_get_logits_ith(const vx_context *c, int32_t i) {
    if (i < 0 || i >= c->n_tok || c->out_row[i] < 0) return NULL;
    return c->logits + (size_t)c->out_row[i] * (size_t)c->model->hp.n_vocab;
}

const float *vx_get_embeddings_ith(const vx_context *c, int32_t i) {
    if (i < 0 || i >= c->n_tok || c->n_emb == 0 || c->emb_row[i] < 0) return NULL;
    return c->embd + (size_t)c->emb_row[i] * (size_t)c->model->hp.n_embd;
}

vx_status vx_embed_texts(vx_context *ctx, const vx_token *const *texts, const int32_t *n_tokens, int32_t n_texts,
                         vx_pooling pooling, float *out) {
    if (!ctx || !texts || !n_tokens || !out || n_texts <= 0 || !vx_pool_valid(pooling)) return VX_EINVAL;
    const int32_t ns = VX_MIN((int32_t)ctx->params.n_seq_max, n_texts), nb = (int32_t)ctx->params.n_batch;
    const int32_t E = ctx->model->hp.n_embd;
    const bool whole = ctx->model->arch->encoder; /* a text goes in one batch */
    for (int32_t t = 0; t < n_texts; t++) {
        if (!texts[t] || n_tokens[t] <= 0) return VX_EINVAL;
        if ((uint32_t)n_tokens[t] > ctx->params.n_ctx || (whole && n_tokens[t] > nb)) return VX_ERANGE;
    }
    for (int32_t s = 0; s < ns; s++)
        if (vx_kv_len(ctx->kv, s) != 0) return VX_EINVAL;
    /* per batch entry: token, position, sequence, flags; per sequence: its
     * text (-1: free) and how many of its tokens went in */
    vx_token *tok = malloc((size_t)nb * sizeof *tok);
    vx_pos *pos = malloc((size_t)nb * sizeof *pos);
    vx_seq_id *sq = malloc((size_t)nb * sizeof *sq);
    int8_t *want = malloc((size_t)nb);
    int32_t *text_of = malloc((size_t)ns * sizeof *text_of), *fed = calloc((size_t)ns, sizeof *fed);
    vx_status st = tok && pos && sq && want && text_of && fed ? VX_OK : VX_ENOMEM;
    memset(out, 0, (size_t)n_texts * (size_t)E * sizeof *out);
    for (int32_t s = 0; s < ns && text_of; s++) text_of[s] = -1;
    int32_t next = 0, active = 0;
    while (st == VX_OK && (next < n_texts || active > 0)) {
        /* the texts under way first, then new ones in the free sequences */
        int32_t m = 0;
        for (int32_t s = 0; s < ns && m < nb; s++) {
            if (text_of[s] < 0 && next < n_texts && (!whole || m + n_tokens[next] <= nb))
                text_of[s] = next++, fed[s] = 0, active++;
            const int32_t t = text_of[s];
            for (; t >= 0 && fed[s] < n_tokens[t] && m < nb; fed[s]++, m++) {
                tok[m] = texts[t][fed[s]];
                pos[m] = fed[s];
                sq[m] = s;
                want[m] = vx_pool_wants(pooling, fed[s], n_tokens[t]);
            }
        }
        const vx_batch b = {m, tok, pos, sq, NULL, want}; /* embeddings only, no logits */
        st = vx_decode(ctx, &b);
        for (int32_t j = 0; j < m && st == VX_OK; j++)
            if (want[j]) vx_pool_add(pooling, out + (size_t)text_of[sq[j]] * E, vx_get_embeddings_ith(ctx, j), E);
        for (int32_t s = 0; s < ns && st == VX_OK; s++) {
            const int32_t t = text_of[s];
            if (t < 0 || fed[s] < n_tokens[t]) continue;
            vx_pool_end(pooling, out + (size_t)t * E, E, n_tokens[t]);
            vx_kv_seq_rm(ctx, s, 0, -1);
            text_of[s] = -1;
            active--;
        }
    }
    for (int32_t s = 0; s < ns; s++)
        if (vx_kv_len(ctx->kv, s)) vx_kv_seq_rm(ctx, s, 0, -1);
    free(tok);
    free(pos);
    free(sq);
    free(want);
    free(text_of);
    free(fed);
    return st;
}

vx_status vx_kv_seq_rm(vx_context *c, vx_seq_id seq, vx_pos p0, vx_pos p1) {
    if (seq < 0 || seq >= (int32_t)c->params.n_seq_max)
        return fail(c, VX_EINVAL, "sequence id %d out of range", seq);
    if (p1 >= 0 && p1 < vx_kv_len(c->kv, seq))
        return fail(c, VX_EUNSUPPORTED, "only a suffix of a sequence can be removed");
    vx_kv_truncate(c->kv, seq, p0);
    if (c->dist_id >= 0) vx_dist_kv_rm(c->model->dist, c->dist_id, seq, p0, p1);
    return VX_OK;
}

vx_pos vx_kv_seq_len(const vx_context *c, vx_seq_id seq) {
    if (seq < 0 || seq >= (int32_t)c->params.n_seq_max) return 0;
    return vx_kv_len(c->kv, seq);
}

void vx_kv_usage(const vx_context *c, int32_t *total, int32_t *used, int32_t *cached,
                 int32_t *bs) {
    const int32_t t = vx_kv_total_blocks(c->kv);
    if (total) *total = t;
    if (used) *used = t - vx_kv_free_blocks(c->kv);
    if (cached) *cached = vx_kv_cached_blocks(c->kv);
    if (bs) *bs = vx_kv_block_size(c->kv);
}

int32_t vx_kv_seq_reuse_prefix(vx_context *c, vx_seq_id seq, const vx_token *tokens, int32_t n) {
    if (seq < 0 || seq >= (int32_t)c->params.n_seq_max || vx_kv_len(c->kv, seq) != 0 || n <= 0)
        return 0;
    const int32_t got = vx_kv_attach_prefix(c->kv, seq, tokens, n);
    if (c->dist_id >= 0) vx_dist_kv_reuse(c->model->dist, c->dist_id, seq, tokens, n);
    return got;
}

vx_status vx_kv_seq_fork(vx_context *c, vx_seq_id src, vx_seq_id dst) {
    const int32_t ns = (int32_t)c->params.n_seq_max;
    if (src < 0 || src >= ns || dst < 0 || dst >= ns || src == dst)
        return fail(c, VX_EINVAL, "sequence ids %d -> %d out of range", src, dst);
    if (vx_kv_len(c->kv, dst) != 0) return fail(c, VX_EINVAL, "sequence %d is not empty", dst);
    const vx_status st = vx_kv_fork(c->kv, src, dst);
    if (!st && c->dist_id >= 0) vx_dist_kv_fork(c->model->dist, c->dist_id, src, dst);
    return st;
}

void vx_kv_prefix_counts(const vx_context *c, uint64_t *lookups, uint64_t *hits) {
    vx_kv_prefix_stats(c->kv, lookups, hits);
}
