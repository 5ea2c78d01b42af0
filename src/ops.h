/*
 * ops.h - the float operations of the forward pass (reference C), and the
 * kernel table the context picks once at init (generic or per-ISA).
 */
#ifndef VX_OPS_H
#define VX_OPS_H

#include <stdint.h>

#include "matmul.h"
#include "model.h"

/* Kernels that have SIMD variants. Filled once by vx_kernels_init(). */
/* Chunk-heads the fused decode attention prefetches ahead: over 16 layers
 * x 3600 positions x 8 kv heads x 64 on two threads of a Zen 5 guest, 1
 * ahead took ~3.4 ms a token, 2-4 ahead ~3.0, 7 ahead ~3.9. */
#define VX_ATTN_DEC_AHEAD 3

typedef struct vx_kernels {
    const char *name; /* "generic", "avx2", ... */
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    /* y += a * x */
    void (*axpy_f32)(float *y, float a, const float *x, int64_t n);
    /* x[j] = exp(x[j] - m) for j < n; returns their sum (softmax numerators) */
    float (*exp_shift_sum)(float *x, int64_t n, float m);
    /* fp16 <-> fp32 rows (KV cache) */
    void (*f16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    void (*f32_to_f16)(const float *src, uint16_t *dst, int64_t n);
    /* Q8_0 row (n a multiple of 32) -> f32 (KV cache) */
    void (*q8_0_to_f32)(const void *src, float *dst, int64_t n);
    /* g = silu(g) * u elementwise (SwiGLU) */
    void (*swiglu)(float *g, const float *u, int64_t n);
    /* g = gelu(g) * u elementwise (GeGLU, GELU's tanh form: Gemma) */
    void (*geglu)(float *g, const float *u, int64_t n);
    /* RMSNorm (vx_rmsnorm; every tier the same bits) */
    void (*rmsnorm)(float *out, const float *x, const float *w, int64_t n, float eps);
    /* RoPE of one head vector in place (vx_rope_apply, kind a vx_rope_kind;
     * every tier the same bits) */
    void (*rope)(float *v, const float *cs, int32_t n_rot, int kind);
    /* ---- attention blocks (attention.c) ----
     * Small row-major product: c[i][j] = (alpha ? alpha[i] * c[i][j] : 0)
     * + sum_p a[i][p] * b[p][j] for i < m, j < n, p < kd. */
    void (*gemm_f32)(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float *c, int64_t ldc, const float *alpha);
    /* the same with b in fp16 (V rows of an F16 cache) */
    void (*gemm_f16b)(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda,
                      const uint16_t *b, int64_t ldb, float *c, int64_t ldc, const float *alpha);
    /* Scores: c[i][j] = sum_p a[i][p] * b[j][p] for i < m, j < n, p < kd
     * (b holds n rows of kd, ldb apart: K rows); b in f32 or fp16. Every
     * score in one association, whatever m and n (the SIMD tiers: one
     * 8-lane FMA chain over 8-element steps, the lanes' tree l + 4, l + 2,
     * l + 1, then the scalar tail; attn_dec_f16 sums the same way). */
    void (*gemm_abt_f32)(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float *c, int64_t ldc);
    void (*gemm_abt_f16b)(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda,
                          const uint16_t *b, int64_t ldb, float *c, int64_t ldc);
    /* Online-softmax update of m score rows of 16 (s is [m][16], scaled by
     * scale first): row i sees columns j < nv[i]. mx[i] becomes max(mx[i],
     * visible scores), s[i][j] exp(s[i][j] - mx[i]) (0 where not visible), corr[i] = exp(old mx[i] -
     * new mx[i]) (1 if nv[i] == 0), l[i] = l[i] * corr[i] + sum_j s[i][j]. */
    void (*attn_softmax16)(float *s, int64_t m, const int32_t *nv, float scale, float *mx,
                           float *l, float *corr);
    /* Gemma 2's soft caps, in place: x = out tanh(in x) for n values, each
     * value's bits whatever n and its place (the attention's scores, in
     * their units: in = scale / cap, out = cap / scale; the final logits:
     * in = 1 / cap, out = cap). The reference takes tanhf; the SIMD tiers
     * their own tanh (avx2_ops.c, cap8), which their fused decode kernels
     * apply too. */
    void (*softcap)(float *x, int64_t n, float in, float out);
    /* Fused decode attention of one query token over n cache positions (n
     * a multiple of 16, all visible) for nh kv heads with g <= 8 query rows
     * each: head h has rows q[h g + i] (i < g, hd floats each; o, mx, l
     * likewise) and its K/V for position p = 16 c + j (j < 16) at k + c cs
     * + h hs + j ld, v + c cs + h hs + j ld (fp16 elements; a head-major
     * cache block: ld = hd, hs = 16 hd, cs = the block's size). kx, vx: the
     * chunk that follows (the next run of cache blocks; head h at kx + h
     * hs, rows ld apart), only prefetched; NULL if none. Per 16-position chunk and head, exactly
     * gemm_abt_f16b (scores), attn_softmax16 (all 16 visible) and
     * gemm_f16b (alpha = corr) of this table: the same bits of o and l
     * (and of mx, but for the sign of a maximum of zero, which changes
     * nothing else), for finite scores. cap > 0 (Gemma 2's soft cap): the
     * scores go through softcap (in = scale / cap, out = cap / scale)
     * before attn_softmax16. */
    /* (The SIMD kernels prefetch the chunk-head VX_ATTN_DEC_AHEAD steps
     * ahead of the one they compute, chunks outer and heads inner: over a
     * head-major cache that is the memory order.) */
    void (*attn_dec_f16)(int64_t nh, int64_t g, int64_t hd, const float *q, const uint16_t *k,
                         const uint16_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint16_t *kx,
                         const uint16_t *vx, float scale, float cap, float *mx, float *l, float *o);
    /* The same over a Q8_0 cache (rows of hd / 32 34-byte blocks; ld, hs,
     * cs in bytes): per chunk and head exactly
     * q8_0_to_f32 of the K and V rows, gemm_abt_f32, (softcap,)
     * attn_softmax16 and gemm_f32 of this table. Returns 0 (and does nothing) for shapes it
     * does not take; NULL in tables without one: the caller runs those
     * steps itself. */
    int (*attn_dec_q8_0)(int64_t nh, int64_t g, int64_t hd, const float *q, const uint8_t *k,
                         const uint8_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint8_t *kx,
                         const uint8_t *vx, float scale, float cap, float *mx, float *l, float *o);
    /* Rows [r0, r1) of y[t][r] (+)= dot(W[r], x[t]) for t in [0, n).
     * scratch holds at least ne0 floats. accumulate adds to y. */
    void (*matmul)(const struct vx_kernels *k, const vx_weight *w, size_t mat_offset, int64_t r0,
                   int64_t r1, const float *x, int64_t n, int64_t ldx, float *y, int64_t ldy,
                   bool accumulate, float *scratch);
    /* AMX prefill GEMM for any weight type against bf16 activation rows
     * (src/x86/kernels_amx.h; NULL without AMX), its scratch bytes for rows
     * of K elements, and the f32 -> bf16 row conversion it takes (with lo:
     * also the remainders, for F16 weights) */
    vx_gemm_bf16_fn gemm_amx;
    vx_gemm_glu_fn gemm_amx_glu; /* with the same scratch as gemm_amx */
    size_t (*gemm_amx_scratch)(int64_t K);
    void (*f32_to_bf16)(const float *src, uint16_t *dst, uint16_t *lo, int64_t n);
    /* Prefill attention on AMX tiles (src/x86/amx_attn.c; NULL without
     * AMX) for one query tile and one kv head over an F16 cache, state in
     * vx_attn_tiles_bytes() of scratch: begin takes the tile's rows (row
     * r: q + (r / g) ldq + (r % g) hd, at position p0 + r / g), then one
     * step per 64 positions from 0 (k[0..3], v[0..3]: the first rows of its
     * 16-position chunks, ld elements apart; k[4..7], v[4..7] those of the
     * next step, only prefetched, NULL past the end; np: positions in the
     * step), then end writes the outputs in the rows' layout (ldo).
     * hd % 32 == 0, hd <= 256, rows <= VX_ATTN_TILES_MAX_ROWS. softcap,
     * window: Gemma 2's score cap and sliding window (vx_attn_args; 0:
     * none); steps wholly before every row's window may be left out. */
    void (*attn_tiles_begin)(void *st, int64_t rows, int64_t g, int64_t hd, const float *q, int64_t ldq,
                             int32_t p0, float scale, float softcap, int32_t window);
    void (*attn_tiles_step)(void *st, int32_t c0, int32_t np, const uint16_t *const *k,
                            const uint16_t *const *v, int64_t ld);
    void (*attn_tiles_end)(void *st, float *out, int64_t ldo);
    /* per weight type: GEMV against activation rows (see matmul.h) */
    vx_gemv_fn gemv[VX_TYPE_COUNT];
    /* per weight type: GEMM over a token tile (NULL: gemv per token), and
     * the per-thread scratch bytes these GEMMs take for rows of n elements
     * (allocated once per context; gemm_scratch NULL: they take none) */
    vx_gemm_fn gemm[VX_TYPE_COUNT];
    /* where gemm[BF16] rounds the activations to bf16 (vdpbf16ps; as the
     * AMX tiles, "other rounding"), the GEMM on f32 activations that
     * batch_invariant and f32_matmul contexts take instead (NULL: none) */
    vx_gemm_fn gemm_bf16_f32;
    size_t (*gemm_scratch)(int64_t n);
    /* per packed weight type: the GEMM on an activation table (vx_act_tab,
     * matmul.h; NULL: none), where it is the same as gemm[type] */
    vx_gemm_tab_fn gemm_tab[VX_TYPE_COUNT];
    /* per activation type (Q8_0, Q8_1, Q8_K): float row -> activation row */
    vx_act_fn act[VX_TYPE_COUNT];
} vx_kernels;

/* The tile attention's state: query rows up to VX_ATTN_TILES_MAX_ROWS
 * (padded to 16) x head dim hd, Q^T in bf16 hi and lo and O^T in fp32,
 * with one step's K, V^T, scores and P^T (64 positions). 1024 rows: each
 * step's K / V conversion serves twice the rows of 512 (a Llama-1B layer
 * at depth 3584, 1 thread: 6-10% faster in three alternated pairs;
 * hd 128: 1 MiB of state, in L2). */
enum { VX_ATTN_TILES_MAX_ROWS = 1024 };
static inline size_t vx_attn_tiles_bytes(int64_t hd) {
    const size_t mr = VX_ATTN_TILES_MAX_ROWS, h = (size_t)hd;
    return 64 + 256 + mr * h * 8 + mr * 12 + 64 * h * 8 + 64 * 16 * 4 + 2 * 32 * 16 * 4;
}

/* Kernel tiers, ordered: a tier's table is the one below it with some
 * entries replaced. VX_ISA_AVX512: AVX-512 F/BW/VL/DQ + VNNI with the zmm
 * and opmask state enabled by the OS (XGETBV); its table is the AVX2 one
 * with the kernels of src/x86/avx512_*.c on top. VX_ISA_AMX: that and AMX
 * (tile + bf16 units, the tile state enabled by the OS and granted to the
 * process): prefill matmuls of 32+ tokens go through the bf16 tile GEMM
 * (src/x86/amx_gemm.c). */
typedef enum vx_isa { VX_ISA_GENERIC = 0, VX_ISA_AVX2 = 1, VX_ISA_AVX512 = 2, VX_ISA_AMX = 3 } vx_isa;

/* Best ISA this CPU and OS support (CPUID + XGETBV), capped by the
 * environment: VX_FORCE_GENERIC=1 forces the reference kernels,
 * VX_ISA=generic|avx2|avx512|amx caps the tier (to A/B tiers on one machine). */
vx_isa vx_cpu_best_isa(void);
/* The table of a tier ("generic", "avx2", "avx512"); the caller must have
 * checked the CPU (vx_cpu_best_isa() >= isa). */
void vx_kernels_init(vx_kernels *k, vx_isa isa);
/* The AVX-512 tier run through its emulated copy (SIMDe over AVX2; name
 * "avx512-emu"): needs AVX2 only. For tests and VX_EMULATE=avx512. */
void vx_kernels_init_emulated(vx_kernels *k);
/* That with the AMX GEMM emulated too (amx_emu.h; name "amx-emu";
 * VX_EMULATE=amx). */
void vx_kernels_init_emulated_amx(vx_kernels *k);
/* What a new context uses: the best tier per vx_cpu_best_isa(), or the
 * emulated AVX-512 tier when VX_EMULATE=avx512 is set and AVX2 is
 * available (VX_FORCE_GENERIC still wins). */
void vx_kernels_init_best(vx_kernels *k);

/* reference kernels */
float vx_dot_f32_ref(const float *a, const float *b, int64_t n);
void vx_axpy_f32_ref(float *y, float a, const float *x, int64_t n);
void vx_matmul_ref(const vx_kernels *k, const vx_weight *w, size_t mat_offset, int64_t r0,
                   int64_t r1, const float *x, int64_t n, int64_t ldx, float *y, int64_t ldy,
                   bool accumulate, float *scratch);

float vx_exp_shift_sum_ref(float *x, int64_t n, float m);
void vx_f16_to_f32_ref(const uint16_t *src, float *dst, int64_t n);
void vx_f32_to_f16_ref(const float *src, uint16_t *dst, int64_t n);
void vx_q8_0_to_f32_ref(const void *src, float *dst, int64_t n);
void vx_gemm_f32_ref(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float *c, int64_t ldc, const float *alpha);
void vx_gemm_f16b_ref(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const uint16_t *b,
                      int64_t ldb, float *c, int64_t ldc, const float *alpha);
void vx_gemm_abt_f32_ref(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const float *b,
                         int64_t ldb, float *c, int64_t ldc);
void vx_gemm_abt_f16b_ref(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda,
                          const uint16_t *b, int64_t ldb, float *c, int64_t ldc);
void vx_attn_softmax16_ref(float *s, int64_t m, const int32_t *nv, float scale, float *mx, float *l,
                           float *corr);
void vx_softcap_ref(float *x, int64_t n, float in, float out);
void vx_attn_dec_f16_ref(int64_t nh, int64_t g, int64_t hd, const float *q, const uint16_t *k,
                         const uint16_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint16_t *kx, const uint16_t *vx,
                         float scale, float cap, float *mx, float *l, float *o);
int vx_attn_dec_q8_0_ref(int64_t nh, int64_t g, int64_t hd, const float *q, const uint8_t *k,
                         const uint8_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint8_t *kx, const uint8_t *vx,
                         float scale, float cap, float *mx, float *l, float *o);

/* out = x / rms(x) * w (w may be NULL: no scale). out may alias x. */
void vx_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);
/* LayerNorm: out = (x - mean(x)) / sqrt(var(x) + eps) * w + b (w, b may
 * be NULL: none). out may alias x. */
void vx_layernorm(float *out, const float *x, const float *w, const float *b, int64_t n, float eps);
/* Rotates one head vector in place; cs holds n_rot/2 (cos, sin) pairs. */
void vx_rope_apply(float *v, const float *cs, int32_t n_rot, vx_rope_kind kind);
/* the same as the kernel table's reference entry */
void vx_rope_ref(float *v, const float *cs, int32_t n_rot, int kind);
/* silu(g) * u, elementwise into g */
void vx_swiglu(float *g, const float *u, int64_t n);
/* gelu(g) * u, elementwise into g, with GELU's tanh form
 * 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))) (PyTorch's
 * approximate="tanh", Gemma's gelu_pytorch_tanh, ggml's gelu) */
void vx_geglu(float *g, const float *u, int64_t n);
/* in-place softmax over n values */
void vx_softmax(float *x, int64_t n);

#endif
