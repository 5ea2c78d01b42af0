/*
 * test_kernels.c - tests of the AVX2 quantization kernels (src/x86/avx2_quant.c,
 * avx2_quant_k.c) against the plain-C references of the traits table:
 *   - the activation quantizers (Q8_0, Q8_1, Q8_K) must give the same bytes
 *     on Gaussian rows over many scales, on exact rounding ties, signed
 *     ties of the extreme, zeros, infinities, NaNs and random bit patterns;
 *   - vec_dot and gemv (1..13 rows, covering the 4-row groups and every
 *     remainder) must match the reference vec_dot to 1e-5 of sum |x_i y_i|
 *     on rows quantized by the reference, on random-byte blocks (every code
 *     and scale pattern, to catch 16-bit overflow) and on the tensors of the
 *     fixture models;
 *   - F16/BF16 x f32 dots and gemv against double-precision sums.
 *   - the prefill GEMM kernels (src/x86/avx2_gemm.c, avx2_gemm_k.c) against
 *     the reference and, bit for bit (F16: to rounding), the gemv.
 *   - every kernel tier's table (avx2; avx512 natively when the CPU has it;
 *     avx512-emu, the AVX-512 kernels emulated over AVX2, always): the gemv
 *     and gemm of the packed *_R8 layouts bit-equal to the AVX2 gemv on the
 *     plain layout (and that to the reference within 1e-5 of sum |x y|),
 *     and any plain-layout entry a tier replaces through the GEMM checks.
 * Skipped when the CPU lacks AVX2 (or FMA/F16C, which the kernels also use).
 */
#include <cpuid.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gguf.h"
#include "ops.h"
#include "quant.h"
#include "quant_iq.h"
#include "quant_ref.h"
#include "testutil.h"
#include "x86/kernels_x86.h"

/* ------------------------------------------------------------ helpers */

typedef struct {
    uint64_t s;
    float spare; /* rng_gauss's second value, when has_spare */
    int has_spare;
} rng;

static uint64_t rng_next(rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_uniform(rng *r) { /* (0, 1) */
    return ((double)(rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Marsaglia's polar method: two values per logarithm, no cosine (the
 * Box-Muller form with one value per log and cos was a third of the
 * sanitizer pass's time, in generating the gemm tests' activations). */
static float rng_gauss(rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, q;
    do {
        u = 2.0 * rng_uniform(r) - 1.0;
        v = 2.0 * rng_uniform(r) - 1.0;
        q = u * u + v * v;
    } while (q >= 1.0 || q == 0.0);
    const double m = sqrt(-2.0 * log(q) / q);
    r->spare = (float)(v * m);
    r->has_spare = 1;
    return (float)(u * m);
}

static void fill_gauss(rng *r, float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * rng_gauss(r);
}

/* The same distribution, drawn from a pool of 2^18 Gaussian values along
 * a random odd stride from a random start (a walk through the whole pool
 * before it repeats): the gemm tests take ~10^8 activation values, whose
 * generation was the plain pass's largest cost. */
#define GAUSS_POOL (1 << 18)
static void fill_gauss_pooled(rng *r, float *x, int64_t n, float scale) {
    static float pool[GAUSS_POOL];
    static int ready;
    if (!ready) {
        rng pr = {.s = 31337};
        for (int i = 0; i < GAUSS_POOL; i++) pool[i] = rng_gauss(&pr);
        ready = 1;
    }
    const uint64_t u = rng_next(r);
    const size_t start = (size_t)(u & (GAUSS_POOL - 1)), stride = (size_t)((u >> 32) & (GAUSS_POOL - 1)) | 1;
    for (int64_t i = 0; i < n; i++) x[i] = scale * pool[(start + (size_t)i * stride) & (GAUSS_POOL - 1)];
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* MXFP4's exponent bytes in random-byte rows (nb blocks at p): the two
 * subnormal scales (e = 0, 1) in every 7th block, else 2^-18 .. 2^1, so
 * no product overflows */
static void sane_e8m0(int t, uint8_t *p, size_t nb, uint64_t bits) {
    if (t == VX_TYPE_IQ1_M) { /* its fp16 scale lives in the scale nibbles: 2^-14 .. ~1, either sign */
        for (size_t b = 0; b < nb; b++, bits = bits * 6364136223846793005ull + 1442695040888963407ull)
            vx_iq_set_scale(t, p + b * sizeof(vx_block_iq1_m),
                            (uint16_t)(((bits >> 63) << 15) | (1 + (bits >> 40) % 15) << 10 | ((bits >> 20) & 0x3FF)));
        return;
    }
    if (t != VX_TYPE_MXFP4) return;
    for (size_t b = 0; b < nb; b++, bits = bits * 6364136223846793005ull + 1442695040888963407ull)
        p[b * sizeof(vx_block_mxfp4)] = (uint8_t)(b % 7 == 0 ? b / 7 % 2 : 110 + (bits >> 33) % 20);
}

static float bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Every weight type with an AVX2 kernel. fp16_fields: byte offsets of the
 * block's fp16 factors (overwritten with sane values in random-byte
 * blocks, whose other bytes may be anything). */
typedef struct {
    int type;
    vx_vec_dot_fn dot;
    vx_gemv_fn gemv;
    int nf16;
    size_t fp16_fields[2];
} kcase;

/* the grid i-quants have no AVX2 vec_dot: their gemv on one row */
#define IQ_DOT(name)                                                                     \
    static void name##_dot1(int64_t n, float *s, const void *x, const void *y) {         \
        vx_gemv_##name##_avx2(n, x, 0, 1, y, s);                                         \
    }
IQ_DOT(iq2_xxs)
IQ_DOT(iq2_xs)
IQ_DOT(iq2_s)
IQ_DOT(iq3_xxs)
IQ_DOT(iq3_s)
IQ_DOT(iq1_s)
IQ_DOT(iq1_m)
#undef IQ_DOT

static const kcase cases[] = {
    {VX_TYPE_IQ2_XXS, iq2_xxs_dot1, vx_gemv_iq2_xxs_avx2, 1, {0, 0}},
    {VX_TYPE_IQ2_XS, iq2_xs_dot1, vx_gemv_iq2_xs_avx2, 1, {0, 0}},
    {VX_TYPE_IQ2_S, iq2_s_dot1, vx_gemv_iq2_s_avx2, 1, {0, 0}},
    {VX_TYPE_IQ3_XXS, iq3_xxs_dot1, vx_gemv_iq3_xxs_avx2, 1, {0, 0}},
    {VX_TYPE_IQ3_S, iq3_s_dot1, vx_gemv_iq3_s_avx2, 1, {0, 0}},
    {VX_TYPE_IQ1_S, iq1_s_dot1, vx_gemv_iq1_s_avx2, 1, {0, 0}},
    /* no fp16 field: sane_e8m0 sets its scale */
    {VX_TYPE_IQ1_M, iq1_m_dot1, vx_gemv_iq1_m_avx2, 0, {0, 0}},
    {VX_TYPE_Q4_0, vx_vec_dot_q4_0_q8_0_avx2, vx_gemv_q4_0_avx2, 1, {offsetof(vx_block_q4_0, d), 0}},
    {VX_TYPE_Q4_1,
     vx_vec_dot_q4_1_q8_1_avx2,
     vx_gemv_q4_1_avx2,
     2,
     {offsetof(vx_block_q4_1, d), offsetof(vx_block_q4_1, m)}},
    {VX_TYPE_Q5_0, vx_vec_dot_q5_0_q8_0_avx2, vx_gemv_q5_0_avx2, 1, {offsetof(vx_block_q5_0, d), 0}},
    {VX_TYPE_Q5_1,
     vx_vec_dot_q5_1_q8_1_avx2,
     vx_gemv_q5_1_avx2,
     2,
     {offsetof(vx_block_q5_1, d), offsetof(vx_block_q5_1, m)}},
    {VX_TYPE_Q8_0, vx_vec_dot_q8_0_q8_0_avx2, vx_gemv_q8_0_avx2, 1, {offsetof(vx_block_q8_0, d), 0}},
    {VX_TYPE_IQ4_NL, vx_vec_dot_iq4_nl_q8_0_avx2, vx_gemv_iq4_nl_avx2, 1, {offsetof(vx_block_iq4_nl, d), 0}},
    /* no fp16 factor: its exponent bytes are set by sane_e8m0 */
    {VX_TYPE_MXFP4, vx_vec_dot_mxfp4_q8_0_avx2, vx_gemv_mxfp4_avx2, 0, {0, 0}},
    {VX_TYPE_Q2_K,
     vx_vec_dot_q2_K_q8_K_avx2,
     vx_gemv_q2_K_avx2,
     2,
     {offsetof(vx_block_q2_K, d), offsetof(vx_block_q2_K, dmin)}},
    {VX_TYPE_Q3_K, vx_vec_dot_q3_K_q8_K_avx2, vx_gemv_q3_K_avx2, 1, {offsetof(vx_block_q3_K, d), 0}},
    {VX_TYPE_Q4_K,
     vx_vec_dot_q4_K_q8_K_avx2,
     vx_gemv_q4_K_avx2,
     2,
     {offsetof(vx_block_q4_K, d), offsetof(vx_block_q4_K, dmin)}},
    {VX_TYPE_Q5_K,
     vx_vec_dot_q5_K_q8_K_avx2,
     vx_gemv_q5_K_avx2,
     2,
     {offsetof(vx_block_q5_K, d), offsetof(vx_block_q5_K, dmin)}},
    {VX_TYPE_Q6_K, vx_vec_dot_q6_K_q8_K_avx2, vx_gemv_q6_K_avx2, 1, {offsetof(vx_block_q6_K, d), 0}},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static const kcase *find_case(int type) {
    for (int i = 0; i < NCASES; i++)
        if (cases[i].type == type) return &cases[i];
    return NULL;
}

#define DOT_TOL 1e-5

/* Worst |kernel - reference| / sum |x_i y_i| seen per weight type. */
typedef struct {
    double worst[VX_TYPE_COUNT];
} err_stats;

static bool within_tol(err_stats *st, int type, double got, double ref, double mag) {
    const double err = fabs(got - ref);
    if (mag > 0.0 && err / mag > st->worst[type]) st->worst[type] = err / mag;
    return err <= DOT_TOL * mag;
}

/* ---------------------------------------------------------- quantizers */

typedef struct {
    int type;
    vx_from_float_fn avx2;
} qcase;

static const qcase qcases[] = {
    {VX_TYPE_Q8_0, vx_quantize_row_q8_0_avx2},
    {VX_TYPE_Q8_1, vx_quantize_row_q8_1_avx2},
    {VX_TYPE_Q8_K, vx_quantize_row_q8_K_avx2},
};

/* Quantizes x with the reference and the AVX2 quantizer; the bytes must
 * be identical. Returns true when they are. */
static bool same_bytes(const qcase *q, const float *x, int64_t n, const char *what) {
    const vx_type_traits *tr = vx_type_get_traits(q->type);
    const size_t rs = vx_row_size((vx_type)q->type, n);
    uint8_t *a = xmalloc(rs), *b = xmalloc(rs);
    memset(a, 0xA5, rs);
    memset(b, 0x5A, rs);
    tr->from_float(x, a, n);
    q->avx2(x, b, n);
    size_t diff = 0;
    while (diff < rs && a[diff] == b[diff]) diff++;
    CHECKF(diff == rs, "%s quantizer, %s, n=%lld: first differing byte %zu (block %zu): ref %02x avx2 %02x",
           tr->name, what, (long long)n, diff, diff / tr->type_size, diff < rs ? a[diff] : 0,
           diff < rs ? b[diff] : 0);
    free(a);
    free(b);
    return diff == rs;
}

static void test_quantizers(void) {
    rng r = {.s = 12345};
    const int64_t ns[] = {256, 512, 4096, 14336};
    const float scales[] = {1.0f, 1e-3f, 1e-8f, 1e-41f, 3e4f, 1e30f, 3e38f};
    float *x = xmalloc(14336 * sizeof(float));
    for (size_t qi = 0; qi < sizeof qcases / sizeof qcases[0]; qi++) {
        const qcase *q = &qcases[qi];
        char what[96];
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
                fill_gauss(&r, x, ns[k], scales[s]);
                snprintf(what, sizeof what, "gauss scale %g", (double)scales[s]);
                same_bytes(q, x, ns[k], what);
            }
        }
        const int64_t n = 4096;

        /* zeros and negative zeros */
        for (int64_t i = 0; i < n; i++) x[i] = (i & 1) ? -0.0f : 0.0f;
        same_bytes(q, x, n, "zeros");

        /* constant and near-constant blocks */
        for (int64_t i = 0; i < n; i++) x[i] = (i % 3 == 0) ? 0.75f : -0.75f;
        same_bytes(q, x, n, "+-constant");

        /* the extreme twice with opposite signs, at various positions (the
         * first one decides the sign of Q8_K's scale) */
        fill_gauss(&r, x, n, 1.0f);
        for (int64_t b = 0; b < n / 256; b++) {
            int i0 = (int)(rng_next(&r) % 256), i1 = (int)(rng_next(&r) % 256);
            x[b * 256 + i0] = 9.0f;
            x[b * 256 + i1] = -9.0f;
            x[b * 256 + (b % 32)] = (b & 1) ? 9.0f : -9.0f;
        }
        same_bytes(q, x, n, "signed ties of the extreme");

        /* exact rounding ties and their neighbours: 127 in every block
         * makes the scale 1 exactly, so x * id is x itself */
        {
            int64_t i = 0;
            for (int k = -127; k < 127 && i < n; k++) {
                float t = (float)k + 0.5f;
                for (int u = -6; u <= 6 && i < n; u++) {
                    uint32_t bits;
                    memcpy(&bits, &t, 4);
                    bits = (uint32_t)((int32_t)bits + u);
                    if (i % 32 == 0) x[i++] = 127.0f;
                    x[i++] = bits_to_float(bits);
                }
            }
            for (; i < n; i++) x[i] = (i % 32 == 0) ? 127.0f : (float)(i % 255) - 127.0f + 0.5f;
            same_bytes(q, x, n, "rounding ties (scale 1)");
            /* the same ties at d = 254 / 127 = 2 (id = 0.5) */
            for (int64_t j = 0; j < n; j++) x[j] *= 2.0f;
            same_bytes(q, x, n, "rounding ties (scale 2)");
        }

        /* infinities and NaNs in some blocks */
        fill_gauss(&r, x, n, 1.0f);
        x[5] = INFINITY;
        x[300] = -INFINITY;
        x[600] = NAN;
        x[900] = -NAN;
        x[1200] = NAN;
        x[1201] = INFINITY;
        for (int64_t i = 2048; i < 2048 + 256; i++) x[i] = NAN;
        same_bytes(q, x, n, "inf/nan");

        /* random bit patterns: denormals, huge values, NaNs, infinities */
        for (int rep = 0; rep < 20; rep++) {
            for (int64_t i = 0; i < n; i++) x[i] = bits_to_float((uint32_t)rng_next(&r));
            same_bytes(q, x, n, "random bits");
            /* finite random bits with a moderate exponent range */
            for (int64_t i = 0; i < n; i++) {
                uint32_t u = (uint32_t)rng_next(&r);
                u = (u & 0x807FFFFFu) | ((uint32_t)(100 + rng_next(&r) % 60) << 23);
                x[i] = bits_to_float(u);
            }
            same_bytes(q, x, n, "random finite bits");
        }
    }
    free(x);

    /* Every float in (-127.5, 127.5) near a half-integer tie (within 2^14
     * ulps) through the Q8_0 rounding, with the scale pinned to 1. This is
     * where roundf (ties away) and the vector emulation could disagree. */
    {
        const qcase *q = &qcases[0];
        const int64_t n = 32 * 4096;
        float *v = xmalloc((size_t)n * sizeof(float));
        int64_t i = 0;
        bool ok = true;
        for (int k = -128; k < 127 && ok; k++) {
            float t = (float)k + 0.5f;
            uint32_t bits;
            memcpy(&bits, &t, 4);
            for (int32_t u = -(1 << 14); u <= (1 << 14) && ok; u++) {
                float f = bits_to_float((uint32_t)((int32_t)bits + u));
                if (!(fabsf(f) < 127.0f)) continue;
                if (i % 32 == 0) v[i++] = -127.0f;
                v[i++] = f;
                if (i == n) {
                    ok = same_bytes(q, v, n, "dense ties");
                    i = 0;
                }
            }
        }
        if (ok && i > 0) {
            while (i % 32) v[i++] = 0.0f;
            same_bytes(q, v, i, "dense ties");
        }
        free(v);
    }
}

/* -------------------------------------------------------- dot products */

/* sum |a_i b_i| in double: the scale of a dot product's rounding */
static double abs_dot(const float *a, const float *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m += fabs((double)a[i] * b[i]);
    return m;
}

/* sum |x_i y_i| over the dequantized rows: the scale of the rounding
 * differences a reordered float accumulation may show. */
static double magnitude(const vx_type_traits *tx, const void *x, const vx_type_traits *ty, const void *y,
                        int64_t n, float *fx, float *fy) {
    tx->to_float(x, fx, n);
    ty->to_float(y, fy, n);
    return abs_dot(fx, fy, n);
}

/* Reference-quantized or random-byte rows: nrows rows of n against one
 * activation row; vec_dot and gemv (every row count 1..nrows) vs the
 * reference vec_dot. */
#define MAX_ROWS 13

static void check_rows(err_stats *st, const kcase *kc, const uint8_t *w, size_t rs, int nrows, const void *yq,
                       int64_t n, const char *what) {
    const vx_type_traits *tx = vx_type_get_traits(kc->type);
    const vx_type_traits *ty = vx_type_get_traits(tx->vec_dot_type);
    float *fx = xmalloc((size_t)n * sizeof(float)), *fy = xmalloc((size_t)n * sizeof(float));
    float ref[MAX_ROWS], out[MAX_ROWS];
    double mag[MAX_ROWS];
    for (int r = 0; r < nrows; r++) {
        tx->vec_dot(n, &ref[r], w + (size_t)r * rs, yq);
        mag[r] = magnitude(tx, w + (size_t)r * rs, ty, yq, n, fx, fy);
        float s = NAN;
        kc->dot(n, &s, w + (size_t)r * rs, yq);
        CHECKF(within_tol(st, kc->type, s, ref[r], mag[r]),
               "%s vec_dot %s n=%lld row %d: %.9g vs ref %.9g (mag %.6g)", tx->name, what, (long long)n, r,
               (double)s, (double)ref[r], mag[r]);
    }
    for (int nr = 1; nr <= nrows; nr++) {
        for (int r = 0; r < MAX_ROWS; r++) out[r] = NAN;
        kc->gemv(n, w, rs, nr, yq, out);
        for (int r = 0; r < nr; r++)
            CHECKF(within_tol(st, kc->type, out[r], ref[r], mag[r]),
                   "%s gemv %s n=%lld nrows=%d row %d: %.9g vs ref %.9g (mag %.6g)", tx->name, what,
                   (long long)n, nr, r, (double)out[r], (double)ref[r], mag[r]);
        for (int r = nr; r < MAX_ROWS; r++) CHECKF(isnan(out[r]), "%s gemv wrote past nrows", tx->name);
    }
    free(fx);
    free(fy);
}

/* A random finite fp16 factor between 2^-14 and ~1, either sign allowed
 * only where the format allows it (all of them store plain fp16). */
static uint16_t rand_factor(rng *r) {
    float v = (float)(rng_uniform(r) * pow(2.0, -(double)(rng_next(r) % 14)));
    return vx_fp32_to_fp16((rng_next(r) & 1) ? -v : v);
}

static void test_dots(err_stats *st) {
    rng r = {.s = 777};
    const int64_t ns32[] = {32, 64, 96, 896, 4096, 14336};
    const int64_t nsK[] = {256, 512, 2048, 4096, 14336};
    for (int c = 0; c < NCASES; c++) {
        const kcase *kc = &cases[c];
        const vx_type_traits *tx = vx_type_get_traits(kc->type);
        const vx_type_traits *ty = vx_type_get_traits(tx->vec_dot_type);
        const bool kq = tx->blck_size == VX_QK_K;
        const int64_t *ns = kq ? nsK : ns32;
        const int nn = kq ? (int)(sizeof nsK / sizeof nsK[0]) : (int)(sizeof ns32 / sizeof ns32[0]);
        for (int k = 0; k < nn; k++) {
            const int64_t n = ns[k];
            /* the slow searching K-quantizers get fewer rows at the largest n */
            const int nrows = n >= 4096 && kq ? 5 : MAX_ROWS;
            const size_t rs = vx_row_size((vx_type)kc->type, n);
            uint8_t *w = xmalloc(rs * MAX_ROWS);
            void *yq = xmalloc(vx_row_size(tx->vec_dot_type, n));
            float *f = xmalloc((size_t)n * sizeof(float));

            fill_gauss(&r, f, n, 1.0f);
            ty->from_float(f, yq, n);
            for (int row = 0; row < nrows && tx->from_float; row++) { /* grid i-quants: no quantizer */
                fill_gauss(&r, f, n, 0.02f * (float)(row + 1));
                if (row == 1) /* a row with an offset: the mins carry weight */
                    for (int64_t i = 0; i < n; i++) f[i] += 0.05f;
                tx->from_float(f, w + (size_t)row * rs, n);
            }
            if (tx->from_float) check_rows(st, kc, w, rs, nrows, yq, n, "gauss");

            /* random bytes everywhere but the fp16 factors: every code and
             * sub-block scale pattern, e.g. all-63 scales with 15/31/63
             * codes, the worst cases for the 16-bit pair sums */
            for (int row = 0; row < MAX_ROWS; row++) {
                uint8_t *p = w + (size_t)row * rs;
                for (size_t b = 0; b < rs; b++) p[b] = (uint8_t)rng_next(&r);
                if (row == 0) memset(p, 0xFF, rs); /* largest codes and scales */
                for (size_t b = 0; b < rs / tx->type_size; b++)
                    for (int fi = 0; fi < kc->nf16; fi++) {
                        uint16_t h = rand_factor(&r);
                        memcpy(p + b * tx->type_size + kc->fp16_fields[fi], &h, 2);
                    }
                sane_e8m0(kc->type, p, rs / tx->type_size, rng_next(&r));
            }
            /* an activation row with extreme codes: all +-127 */
            for (int64_t i = 0; i < n; i++) f[i] = (rng_next(&r) & 1) ? 1.0f : -1.0f;
            ty->from_float(f, yq, n);
            check_rows(st, kc, w, rs, MAX_ROWS, yq, n, "random bytes, +-127 activations");
            fill_gauss(&r, f, n, 3.0f);
            ty->from_float(f, yq, n);
            check_rows(st, kc, w, rs, MAX_ROWS, yq, n, "random bytes");

            free(w);
            free(yq);
            free(f);
        }
    }
}

/* ------------------------------------------------------- F16/BF16 x f32 */

static void check_half(err_stats *st, bool bf, const uint16_t *w, size_t stride_elems, int nrows,
                       const float *x, int64_t n) {
    const int type = bf ? VX_TYPE_BF16 : VX_TYPE_F16;
    double ref[MAX_ROWS], mag[MAX_ROWS];
    float out[MAX_ROWS];
    const char *name = bf ? "BF16" : "F16";
    for (int r = 0; r < nrows; r++) {
        const uint16_t *wr = w + (size_t)r * stride_elems;
        ref[r] = mag[r] = 0.0;
        for (int64_t i = 0; i < n; i++) {
            double p = (double)(bf ? vx_bf16_to_fp32(wr[i]) : vx_fp16_to_fp32(wr[i])) * x[i];
            ref[r] += p;
            mag[r] += fabs(p);
        }
        float s = bf ? vx_dot_bf16_f32_avx2(n, wr, x) : vx_dot_f16_f32_avx2(n, wr, x);
        CHECKF(within_tol(st, type, s, ref[r], mag[r]), "%s dot n=%lld row %d: %.9g vs %.9g", name,
               (long long)n, r, (double)s, ref[r]);
    }
    for (int nr = 1; nr <= nrows; nr++) {
        if (bf)
            vx_gemv_bf16_avx2(n, w, stride_elems * 2, nr, x, out);
        else
            vx_gemv_f16_avx2(n, w, stride_elems * 2, nr, x, out);
        for (int r = 0; r < nr; r++)
            CHECKF(within_tol(st, type, out[r], ref[r], mag[r]),
                   "%s gemv n=%lld nrows=%d row %d: %.9g vs %.9g", name, (long long)n, nr, r, (double)out[r],
                   ref[r]);
    }
}

static void test_half(err_stats *st) {
    rng r = {.s = 99};
    const int64_t ns[] = {1, 7, 8, 15, 16, 31, 33, 100, 896, 4096, 14336, 14339};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int64_t n = ns[k];
        uint16_t *w = xmalloc((size_t)n * MAX_ROWS * sizeof(uint16_t));
        float *x = xmalloc((size_t)n * sizeof(float)), *f = xmalloc((size_t)n * sizeof(float));
        fill_gauss(&r, x, n, 1.0f);
        for (int bf = 0; bf < 2; bf++) {
            for (int row = 0; row < MAX_ROWS; row++) {
                fill_gauss(&r, f, n, 0.05f);
                for (int64_t i = 0; i < n; i++)
                    w[(size_t)row * n + i] = bf ? vx_fp32_to_bf16(f[i]) : vx_fp32_to_fp16(f[i]);
            }
            check_half(st, bf, w, (size_t)n, MAX_ROWS, x, n);
        }
        free(w);
        free(x);
        free(f);
    }
}

/* ---------------------------------------------------------- prefill GEMM */

/* The GEMM kernels (avx2_gemm.c, avx2_gemm_k.c) against the reference
 * vec_dot for every (row, token), nrows 1..11 (8-row groups and short
 * ones) and ntok 1..9 and 64, writing and accumulating, with padded
 * activation rows and output rows: quantized types must also give exactly
 * the gemv's bits (the canonical float order of avx2_quant_util.h: batch
 * invariance), F16 (f32 activations) the gemv's value up to rounding.
 * The kernels get their scratch, filled with NaNs before every call (none
 * may be read before it is written); F16/BF16, which use it, also run
 * without (NULL: the gemv per token in blocks of 16 rows, so to rounding
 * again). */
typedef struct {
    int type;
    vx_gemm_fn gemm;
    vx_gemv_fn gemv;
    size_t (*scratch)(int64_t n); /* the kernel table's gemm_scratch (NULL: none) */
    int exact_nt; /* F16/BF16: from 2 to this many tokens, exactly the gemv's bits over the same rows */
    vx_gemm_fn same_bits; /* F16/BF16: past 15 tokens, with scratch, exactly this GEMM's bits (NULL: none) */
    int bf16_acts; /* BF16 on vdpbf16ps: past 15 tokens, with scratch, activations rounded to bf16 */
} gcase;

/* A GEMM result against the reference: DOT_TOL, or with activations
 * rounded to bf16 (half an ulp, 2^-9 of each |w x|, summed) 2^-8 of the
 * magnitude, as test_amx.c bounds the tiles. */
static bool gemm_tol(err_stats *st, const gcase *gc, bool rounded, double got, double ref, double mag) {
    if (gc->bf16_acts && rounded) return fabs(got - ref) <= (0x1p-8 + DOT_TOL) * mag;
    return within_tol(st, gc->type, got, ref, mag);
}

#define GEMM_TOK 260 /* past one 252-token tile of the F16/BF16 gemm */
#define GEMM_ROWS 37 /* groups of 8 and blocks of 16 rows, and a short one */
#define GEMM_LDO 39

/* nrows weight rows of type t, rs bytes apart: random bytes with sane fp16
 * factors (every code and scale; row 0 all ones) in rows 0 and 1 of
 * quantized types, quantized Gaussians elsewhere. */
/* The fp16 factors of a block of type t: the case table's, or the
 * ternary types' one scale (they have no plain-layout kernels of their
 * own: the SIMD tiers run them as TQ2_0_R8, check_packed). */
static int block_f16(int t, size_t off[2]) {
    const kcase *kc = find_case(t);
    if (kc) {
        off[0] = kc->fp16_fields[0], off[1] = kc->fp16_fields[1];
        return kc->nf16;
    }
    off[0] = t == VX_TYPE_TQ1_0 ? offsetof(vx_block_tq1_0, d) : offsetof(vx_block_tq2_0, d), off[1] = 0;
    return 1;
}

static void gemm_weights(int t, int64_t n, uint8_t *w, size_t rs, int nrows, rng *r, float *f) {
    const vx_type_traits *tx = vx_type_get_traits(t);
    size_t f16_off[2];
    const int nf16 = block_f16(t, f16_off);
    for (int row = 0; row < nrows; row++) {
        uint8_t *p = w + (size_t)row * rs;
        if ((row % 8 < 2 && tx->is_quantized) || !tx->from_float) { /* grid i-quants: random codes only */
            for (size_t b = 0; b < rs; b++) p[b] = (uint8_t)rng_next(r);
            if (row == 0) memset(p, 0xFF, rs);
            for (size_t b = 0; b < vx_row_size((vx_type)t, n) / tx->type_size; b++)
                for (int fi = 0; fi < nf16; fi++) {
                    uint16_t h = rand_factor(r);
                    memcpy(p + b * tx->type_size + f16_off[fi], &h, 2);
                }
            sane_e8m0(t, p, vx_row_size((vx_type)t, n) / tx->type_size, rng_next(r));
        } else {
            fill_gauss(r, f, n, 0.02f * (float)(row % 4 + 1));
            if (row == 1)
                for (int64_t i = 0; i < n; i++) f[i] += 0.05f;
            tx->from_float(f, p, n);
        }
    }
}

/* ntok activation rows of type yt (F32: raw floats), as bytes apart; token
 * 0 has the extreme codes (all +-127). */
static void gemm_acts(int yt, int64_t n, uint8_t *y, size_t as, int ntok, rng *r, float *f) {
    for (int t = 0; t < ntok; t++) {
        if (t == 0)
            for (int64_t i = 0; i < n; i++) f[i] = (rng_next(r) & 1) ? 1.0f : -1.0f;
        else
            fill_gauss_pooled(r, f, n, 0.1f * (float)(1 + t % 7));
        if (yt == VX_TYPE_F32) memcpy(y + (size_t)t * as, f, (size_t)n * sizeof(float));
        else vx_type_get_traits(yt)->from_float(f, y + (size_t)t * as, n);
    }
}

static void check_gemm(err_stats *st, const gcase *gc, int64_t n, rng *r) {
    const vx_type_traits *tx = vx_type_get_traits(gc->type);
    const bool half = gc->type == VX_TYPE_F16 || gc->type == VX_TYPE_BF16;
    const int yt = half ? VX_TYPE_F32 : tx->vec_dot_type;
    const vx_type_traits *ty = vx_type_get_traits(yt);
    const size_t rs = vx_row_size((vx_type)gc->type, n) + 64; /* padded rows */
    const size_t as = vx_row_size((vx_type)yt, n) + 32;        /* padded activations */
    uint8_t *w = xmalloc(rs * GEMM_ROWS), *y = xmalloc(as * GEMM_TOK);
    float *f = xmalloc((size_t)n * sizeof(float)), *fy = xmalloc((size_t)n * sizeof(float));
    float *ref = xmalloc(sizeof(float) * GEMM_ROWS * GEMM_TOK), *one = xmalloc(sizeof(float) * GEMM_ROWS * GEMM_TOK);
    double *mag = xmalloc(sizeof(double) * GEMM_ROWS * GEMM_TOK);
    float *out = xmalloc(sizeof(float) * GEMM_LDO * GEMM_TOK);
    const size_t sb = gc->scratch ? gc->scratch(n) : 0;
    uint8_t *scr = sb ? xmalloc(sb) : NULL;
    float *out2 = xmalloc(sizeof(float) * GEMM_LDO * GEMM_TOK); /* same_bits' */
    /* the weights as floats, once (magnitude per cell below) */
    float *fw = half ? NULL : xmalloc(sizeof(float) * GEMM_ROWS * (size_t)n);

    gemm_weights(gc->type, n, w, rs, GEMM_ROWS, r, f);
    gemm_acts(yt, n, y, as, GEMM_TOK, r, f);
    for (int row = 0; fw && row < GEMM_ROWS; row++) tx->to_float(w + (size_t)row * rs, fw + (size_t)row * n, n);
    /* references: double sums (F16) or the reference vec_dot; the gemv per token */
    for (int t = 0; t < GEMM_TOK; t++) {
        const uint8_t *yr = y + (size_t)t * as;
        if (!half) ty->to_float(yr, fy, n);
        for (int row = 0; row < GEMM_ROWS; row++) {
            const uint8_t *wr = w + (size_t)row * rs;
            const int i = t * GEMM_ROWS + row;
            if (half) {
                double s = 0.0, m = 0.0;
                for (int64_t j = 0; j < n; j++) {
                    const uint16_t h = ((const uint16_t *)(const void *)wr)[j];
                    const double pr = (double)(gc->type == VX_TYPE_F16 ? vx_fp16_to_fp32(h) : vx_bf16_to_fp32(h)) *
                                      ((const float *)(const void *)yr)[j];
                    s += pr;
                    m += fabs(pr);
                }
                ref[i] = (float)s;
                mag[i] = m;
            } else {
                tx->vec_dot(n, &ref[i], wr, yr);
                mag[i] = abs_dot(fw + (size_t)row * n, fy, n); /* magnitude(), rows converted once */
            }
        }
        gc->gemv(n, w, rs, GEMM_ROWS, yr, one + (size_t)t * GEMM_ROWS);
    }
    const int ntoks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, GEMM_TOK};
    const int nrs[] = {1, 3, 4, 8, 9, 16, 17, GEMM_ROWS};
    for (size_t ri = 0; ri < sizeof nrs / sizeof nrs[0]; ri++)
        for (size_t k = 0; k < sizeof ntoks / sizeof ntoks[0]; k++)
            for (int pass = 0; pass < (half && scr ? 4 : 2); pass++) {
                /* writing and accumulating; F16/BF16 then both without scratch */
                const int nt = ntoks[k], nr = nrs[ri], accum = pass & 1;
                void *const s = pass < 2 ? scr : NULL;
                /* accumulate: onto 0.375 everywhere; untouched cells keep it */
                const float base = 0.375f;
                for (int i = 0; i < GEMM_LDO * GEMM_TOK; i++) out[i] = accum ? base : NAN;
                if (scr) memset(scr, 0xFF, sb); /* NaNs */
                gc->gemm(n, w, rs, nr, y, as, nt, out, GEMM_LDO, accum, s);
                if (half && s && nt == GEMM_TOK) { /* the GEMM path ran, in the scratch */
                    size_t b = 0;
                    while (b < sb && scr[b] == 0xFF) b++;
                    CHECKF(b < sb, "%s gemm n=%lld nrows=%d ntok=%d: scratch unused", tx->name, (long long)n, nr, nt);
                }
                if (gc->same_bits && s && nt > 15) { /* e.g. the AVX-512 panels against the AVX2 ones */
                    for (int i = 0; i < GEMM_LDO * GEMM_TOK; i++) out2[i] = accum ? base : NAN;
                    gc->same_bits(n, w, rs, nr, y, as, nt, out2, GEMM_LDO, accum, s);
                    for (int i = 0; i < GEMM_LDO * nt; i++)
                        CHECKF(i % GEMM_LDO >= nr || out[i] == out2[i],
                               "%s gemm%s n=%lld nrows=%d ntok=%d tok %d row %d: %.9g vs %.9g of the tier it must equal",
                               tx->name, accum ? "+acc" : "", (long long)n, nr, nt, i / GEMM_LDO, i % GEMM_LDO,
                               (double)out[i], (double)out2[i]);
                }
                for (int t = 0; t < GEMM_TOK; t++)
                    for (int row = 0; row < GEMM_LDO; row++) {
                        const float o = out[t * GEMM_LDO + row];
                        if (t >= nt || row >= nr) {
                            CHECKF(accum ? o == base : isnan(o),
                                   "%s gemm n=%lld nrows=%d ntok=%d scratch %d wrote (%d, %d)", tx->name,
                                   (long long)n, nr, nt, s != NULL, t, row);
                            continue;
                        }
                        const int i = t * GEMM_ROWS + row;
                        if (accum) {
                            if (!half)
                                CHECKF(o == base + one[i],
                                       "%s gemm+acc n=%lld nrows=%d ntok=%d tok %d row %d: %.9g vs %.9g", tx->name,
                                       (long long)n, nr, nt, t, row, (double)o, (double)(base + one[i]));
                            else /* the sum continues from base: within rounding of base + ref */
                                CHECKF(gemm_tol(st, gc, s && nt > 15, o, base + ref[i], mag[i] + base),
                                       "%s gemm+acc n=%lld nrows=%d ntok=%d scratch %d tok %d row %d: %.9g vs %.9g",
                                       tx->name, (long long)n, nr, nt, s != NULL, t, row, (double)o,
                                       (double)(base + ref[i]));
                            continue;
                        }
                        CHECKF(gemm_tol(st, gc, s && nt > 15, o, ref[i], mag[i]),
                               "%s gemm n=%lld nrows=%d ntok=%d scratch %d tok %d row %d: %.9g vs ref %.9g (mag %.6g)",
                               tx->name, (long long)n, nr, nt, s != NULL, t, row, (double)o, (double)ref[i], mag[i]);
                        if (!half)
                            CHECKF(o == one[i],
                                   "%s gemm n=%lld nrows=%d ntok=%d tok %d row %d: %.9g vs gemv %.9g", tx->name,
                                   (long long)n, nr, nt, t, row, (double)o, (double)one[i]);
                        else if (nt >= 2 && nt <= gc->exact_nt) {
                            float g[GEMM_ROWS]; /* the gemv over the call's rows (their grouping) */
                            gc->gemv(n, w, rs, nr, y + (size_t)t * as, g);
                            CHECKF(o == g[row], "%s gemm n=%lld nrows=%d ntok=%d tok %d row %d: %.9g vs gemv %.9g",
                                   tx->name, (long long)n, nr, nt, t, row, (double)o, (double)g[row]);
                        } else
                            CHECKF(gemm_tol(st, gc, s && nt > 15, o, one[i], mag[i]),
                                   "%s gemm n=%lld nrows=%d ntok=%d scratch %d tok %d row %d: %.9g vs gemv %.9g",
                                   tx->name, (long long)n, nr, nt, s != NULL, t, row, (double)o, (double)one[i]);
                    }
            }
    free(scr);
    free(fw);
    free(w);
    free(y);
    free(f);
    free(fy);
    free(ref);
    free(one);
    free(mag);
    free(out);
    free(out2);
}

static void test_gemm(err_stats *st) {
    static const gcase gcases[] = {
        {VX_TYPE_Q4_0, vx_gemm_q4_0_avx2, vx_gemv_q4_0_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_Q5_0, vx_gemm_q5_0_avx2, vx_gemv_q5_0_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_Q8_0, vx_gemm_q8_0_avx2, vx_gemv_q8_0_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_Q4_1, vx_gemm_q4_1_avx2, vx_gemv_q4_1_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_Q5_1, vx_gemm_q5_1_avx2, vx_gemv_q5_1_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_IQ4_NL, vx_gemm_iq4_nl_avx2, vx_gemv_iq4_nl_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_MXFP4, vx_gemm_mxfp4_avx2, vx_gemv_mxfp4_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_Q4_K, vx_gemm_q4_K_avx2, vx_gemv_q4_K_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_Q6_K, vx_gemm_q6_K_avx2, vx_gemv_q6_K_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_Q5_K, vx_gemm_q5_K_avx2, vx_gemv_q5_K_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_Q3_K, vx_gemm_q3_K_avx2, vx_gemv_q3_K_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_Q2_K, vx_gemm_q2_K_avx2, vx_gemv_q2_K_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_IQ2_XXS, vx_gemm_iq2_xxs_avx2, vx_gemv_iq2_xxs_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_IQ2_XS, vx_gemm_iq2_xs_avx2, vx_gemv_iq2_xs_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_IQ2_S, vx_gemm_iq2_s_avx2, vx_gemv_iq2_s_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_IQ3_XXS, vx_gemm_iq3_xxs_avx2, vx_gemv_iq3_xxs_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_IQ3_S, vx_gemm_iq3_s_avx2, vx_gemv_iq3_s_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_IQ1_S, vx_gemm_iq1_s_avx2, vx_gemv_iq1_s_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_IQ1_M, vx_gemm_iq1_m_avx2, vx_gemv_iq1_m_avx2, NULL, 0, NULL, 0},
        {VX_TYPE_F16, vx_gemm_f16_avx2, vx_gemv_f16_avx2, vx_gemm_half_scratch_avx2, 0, NULL, 0},
        {VX_TYPE_BF16, vx_gemm_bf16_avx2, vx_gemv_bf16_avx2, vx_gemm_half_scratch_avx2, 0, NULL, 0},
    };
    const size_t nc = sizeof gcases / sizeof gcases[0];
    /* 32-blocks: odd block counts (the lone tail block), one chunk and
     * several; K-quants: a partial last chunk; F16: n % 8 tails */
    const int64_t ns32[] = {32, 96, 896, 4096, 14336, 0};
    const int64_t nsK[] = {256, 1280, 4096, 14336, 0};
    const int64_t nsF[] = {7, 40, 896, 4096, 14339, 0};
    rng r = {.s = 4242};
    for (size_t c = 0; c < nc; c++) {
        const gcase *gc = &gcases[c];
        const int64_t *ns = ns32;
        if (gc->type == VX_TYPE_F16 || gc->type == VX_TYPE_BF16) ns = nsF;
        else if (vx_type_get_traits(gc->type)->blck_size == VX_QK_K) ns = nsK;
        for (int k = 0; ns[k]; k++) check_gemm(st, gc, ns[k], &r);
    }
}

/* The 8-row packed layouts (quant.h): 40 rows packed; the reference gemv
 * on them, each tier's gemv (1..9 groups: the gemv takes 2 or 4 groups a
 * G-th of the call apart, then the rest one at a time) and gemm (for
 * 1..9 and 64 tokens, writing and accumulating, 8 and 40 rows), must
 * all give exactly the plain
 * layout's AVX2 gemv bits: every tier keeps the canonical order (per row
 * and block an exact int32 sum, then the same float steps), so equality,
 * not a tolerance, is the bar; the reference gemv on the plain layout is
 * met to DOT_TOL like every kernel (within_tol). */
#define PK_ROWS 72 /* 9 groups: 4 x 2 or 2 x 4 a G-th apart, and one */
#define PK_GEMM_ROWS 40
static void check_packed(err_stats *st, const vx_kernels *kt, int type, vx_gemv_fn plain_gemv, vx_gemv_fn pref,
                         int64_t n, rng *r) {
    const int ptype = vx_repack_type(type);
    const vx_gemv_fn pgemv = kt->gemv[ptype];
    const vx_gemm_fn pgemm = kt->gemm[ptype];
    const size_t rs = vx_row_size((vx_type)type, n), prs = vx_repack_row_size(ptype, n);
    const int act_type = vx_type_get_traits(type)->vec_dot_type;
    const size_t as = vx_row_size((vx_type)act_type, n);
    uint8_t *w = xmalloc(rs * PK_ROWS), *pw = xmalloc(prs * PK_ROWS), *y = xmalloc(as * GEMM_TOK);
    float *f = xmalloc((size_t)n * sizeof(float)), *fy = xmalloc((size_t)n * sizeof(float));
    float *one = xmalloc(sizeof(float) * PK_ROWS * GEMM_TOK), *got = xmalloc(sizeof(float) * PK_ROWS);
    float *out = xmalloc(sizeof(float) * (PK_ROWS + 3) * GEMM_TOK);
    const int ldo = PK_ROWS + 3;
    uint8_t *scr = kt->gemm_scratch ? xmalloc(kt->gemm_scratch(n)) : NULL; /* the table's, as a context has */
    const vx_type_traits *tx = vx_type_get_traits(type), *ty = vx_type_get_traits(act_type);
    /* the ternary types are packed (TQ2_0_R8) with the codes and scales of
     * the Q2_K blocks of their values: the packed kernels' bits are the
     * plain Q2_K gemv's on those blocks (w2), and the packed rows their
     * values */
    const bool tern = type == VX_TYPE_TQ1_0 || type == VX_TYPE_TQ2_0;
    const size_t rs2 = tern ? vx_row_size(VX_TYPE_Q2_K, n) : rs;
    uint8_t *w2 = tern ? xmalloc(rs2 * PK_ROWS) : w;
    CHECKF(pgemv && pgemm, "%s: no %s_R8 kernels", kt->name, vx_type_name(type));
    if (!pgemv || !pgemm) goto done;
    gemm_weights(type, n, w, rs, PK_ROWS, r, f);
    gemm_acts(act_type, n, y, as, GEMM_TOK, r, f);
    if (type == VX_TYPE_MXFP4) { /* the exponents fp16 holds (sane_e8m0's subnormal ones would not pack) */
        CHECK(!vx_mxfp4_packable(w, (int64_t)(rs / sizeof(vx_block_mxfp4))) || !tx->is_quantized);
        for (size_t b = 0; b < rs * PK_ROWS / sizeof(vx_block_mxfp4); b++) {
            uint8_t *e = &((vx_block_mxfp4 *)(void *)w)[b].e;
            if (*e < 104) *e = (uint8_t)(104 + *e);
        }
        CHECK(vx_mxfp4_packable(w, (int64_t)(rs * PK_ROWS / sizeof(vx_block_mxfp4))));
    }
    if (tern)
        for (int row = 0; row < PK_ROWS; row++)
            for (int64_t b = 0; b < n / 256; b++)
                vx_tq_block_as_q2_K(type, w + (size_t)row * rs + (size_t)b * tx->type_size,
                                    (vx_block_q2_K *)(void *)(w2 + (size_t)row * rs2) + b);
    /* Q4_K_R8 adds 4 bytes of decoded scales per 144-byte block, Q3_K_R8
     * 4 per 110, Q5_K_R8 4 per 176; TQ2_0_R8 has TQ2_0's 66; the others
     * keep the file's size */
    CHECK(ptype == VX_TYPE_Q4_K_R8    ? prs * 8 == rs * 8 / 144 * 148
          : ptype == VX_TYPE_Q3_K_R8  ? prs * 8 == rs * 8 / 110 * 114
          : ptype == VX_TYPE_Q5_K_R8  ? prs * 8 == rs * 8 / 176 * 180
          : ptype == VX_TYPE_TQ2_0_R8 ? prs == (size_t)n / 256 * 66
          : ptype == VX_TYPE_MXFP4_R8 ? prs == (size_t)n / 32 * 18 /* an fp16 scale for the exponent byte */
                                      : prs == rs);
    vx_repack_rows(type, w, rs, PK_ROWS, n, pw);
    if (tern) { /* the packed rows hold the Q2_K blocks' values */
        float *a = xmalloc((size_t)n * sizeof(float)), *b = xmalloc((size_t)n * sizeof(float));
        int bad = 0;
        for (int row = 0; row < PK_ROWS; row++) {
            vx_dequant_row(VX_TYPE_Q2_K, w2, rs2, row, n, a);
            vx_dequant_row(ptype, pw + (size_t)(row / 8) * 8 * prs, prs, row % 8, n, b);
            bad += memcmp(a, b, (size_t)n * sizeof(float)) != 0;
        }
        CHECKF(bad == 0, "%s n=%lld: %d packed rows with other values than their Q2_K blocks", vx_type_name(type),
               (long long)n, bad);
        free(a);
        free(b);
    }
    const char *name = vx_type_name(type);
    /* rows past the gemv's tables (n > 8192) are about the row length, not
     * the token count: 20 tokens for them (the whole 260 took most of the
     * sanitizer pass's time) */
    const int tok_max = n > 8192 ? 20 : GEMM_TOK;
    for (int t = 0; t < tok_max; t++) {
        const uint8_t *yt = y + (size_t)t * as;
        float *o1 = one + (size_t)t * PK_ROWS;
        plain_gemv(n, w2, rs2, PK_ROWS, yt, o1);
        if (t < 8) /* the reference vec_dot on the plain rows, to DOT_TOL */
            for (int row = 0; row < PK_ROWS; row++) {
                float ref;
                tx->vec_dot(n, &ref, w + (size_t)row * rs, yt);
                const double mag = magnitude(tx, w + (size_t)row * rs, ty, yt, n, f, fy);
                CHECKF(within_tol(st, tern ? type : ptype, o1[row], ref, mag), "%s_R8 %s n=%lld tok %d row %d: %.9g vs ref %.9g",
                       name, kt->name, (long long)n, t, row, (double)o1[row], (double)ref);
            }
        if (pref) {
            pref(n, pw, prs, PK_ROWS, yt, got);
            for (int row = 0; row < PK_ROWS; row++)
                CHECKF(got[row] == o1[row], "%s_R8 ref gemv n=%lld tok %d row %d: %.9g vs plain %.9g", name,
                       (long long)n, t, row, (double)got[row], (double)o1[row]);
        }
        for (int nr = t < 4 ? 8 : PK_ROWS; nr <= PK_ROWS; nr += 8) {
            pgemv(n, pw, prs, nr, yt, got);
            for (int row = 0; row < nr; row++)
                CHECKF(got[row] == o1[row], "%s_R8 %s gemv n=%lld nrows=%d tok %d row %d: %.9g vs plain %.9g", name,
                       kt->name, (long long)n, nr, t, row, (double)got[row], (double)o1[row]);
        }
        /* the second group alone, from its own start */
        pgemv(n, pw + 8 * prs, prs, 8, yt, got);
        for (int row = 0; row < 8; row++)
            CHECKF(got[row] == o1[8 + row], "%s_R8 %s gemv (second group) n=%lld tok %d row %d", name, kt->name,
                   (long long)n, t, row);
    }
    const int ntoks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, tok_max};
    /* the GEMM on an activation table too, where the tier has one (the
     * table made as forward.c's prep makes it: in two token ranges) */
    const vx_gemm_tab_fn tgemm = kt->gemm_tab[ptype];
    const size_t tne = tgemm ? vx_act_tab_entries(n, GEMM_TOK) : 0;
    uint8_t *tmem = tgemm ? xmalloc(vx_act_tab_bytes(tne)) : NULL;
    vx_act_tab tab = {y, as, n, 0, NULL, NULL, {NULL, NULL, NULL}};
    if (tmem) vx_act_tab_bind(&tab, tmem, tne);
    CHECKF(!tgemm || act_type == VX_TYPE_Q8_0, "%s: a table GEMM for %s activations", kt->name,
           vx_type_name(act_type));
    for (int nr = 8; nr <= PK_GEMM_ROWS; nr = nr == 8 ? PK_GEMM_ROWS : PK_GEMM_ROWS + 1)
        for (size_t k = 0; k < sizeof ntoks / sizeof ntoks[0]; k++)
            for (int accum = 0; accum < 4; accum++) {
                const int nt = ntoks[k], via_tab = accum >> 1;
                if (via_tab && !tgemm) break;
                if (via_tab && tab.ntok != nt) {
                    tab.ntok = nt;
                    memset(tmem, 0xA5, vx_act_tab_bytes(tne)); /* stale entries must not survive */
                    vx_act_tab_fill(&tab, nt / 2, nt, 0, n / 32);
                    vx_act_tab_fill(&tab, 0, nt / 2, 0, n / 32);
                }
                const float base = 0.375f;
                for (int i = 0; i < ldo * GEMM_TOK; i++) out[i] = accum & 1 ? base : NAN;
                if (via_tab) tgemm(pw, prs, nr, &tab, out, ldo, accum & 1);
                else pgemm(n, pw, prs, nr, y, as, nt, out, ldo, accum, scr);
                for (int t = 0; t < GEMM_TOK; t++)
                    for (int row = 0; row < ldo; row++) {
                        const float o = out[t * ldo + row];
                        if (t >= nt || row >= nr) {
                            CHECKF(accum & 1 ? o == base : isnan(o), "%s_R8 %s gemm%s wrote (%d, %d)", name, kt->name,
                                   via_tab ? " (table)" : "", t, row);
                            continue;
                        }
                        const float want = accum & 1 ? base + one[t * PK_ROWS + row] : one[t * PK_ROWS + row];
                        CHECKF(o == want, "%s_R8 %s gemm%s%s n=%lld nrows=%d ntok=%d tok %d row %d: %.9g vs %.9g",
                               name, kt->name, via_tab ? " (table)" : "", accum & 1 ? "+acc" : "", (long long)n, nr, nt, t, row, (double)o,
                               (double)want);
                    }
            }
    free(tmem);
done:
    free(scr);
    if (w2 != w) free(w2);
    free(w);
    free(pw);
    free(y);
    free(f);
    free(fy);
    free(one);
    free(got);
    free(out);
}

/* The AVX-512 tier's GEMVs of the 32-element packed types come with four
 * far groups per turn (Intel) or two (AMD, cpu.c): the copy of each table
 * below takes the other set, so both run wherever the tier does. */
enum { N_G2 = 7 };
static const int g2_types[N_G2] = {VX_TYPE_Q4_0_R8, VX_TYPE_Q5_0_R8,  VX_TYPE_Q8_0_R8, VX_TYPE_Q4_1_R8,
                                   VX_TYPE_Q5_1_R8, VX_TYPE_IQ4_NL_R8, VX_TYPE_MXFP4_R8};
static vx_gemv_fn const g4_native[N_G2] = {vx_gemv_q4_0_r8_avx512, vx_gemv_q5_0_r8_avx512, vx_gemv_q8_0_r8_avx512,
                                          vx_gemv_q4_1_r8_avx512, vx_gemv_q5_1_r8_avx512, vx_gemv_iq4_nl_r8_avx512,
                                          vx_gemv_mxfp4_r8_avx512};
static vx_gemv_fn const g2_native[N_G2] = {vx_gemv_q4_0_r8_g2_avx512, vx_gemv_q5_0_r8_g2_avx512,
                                          vx_gemv_q8_0_r8_g2_avx512, vx_gemv_q4_1_r8_g2_avx512,
                                          vx_gemv_q5_1_r8_g2_avx512, vx_gemv_iq4_nl_r8_g2_avx512,
                                          vx_gemv_mxfp4_r8_g2_avx512};
static vx_gemv_fn const g4_emu[N_G2] = {vx_gemv_q4_0_r8_avx512emu, vx_gemv_q5_0_r8_avx512emu,
                                       vx_gemv_q8_0_r8_avx512emu, vx_gemv_q4_1_r8_avx512emu,
                                       vx_gemv_q5_1_r8_avx512emu, vx_gemv_iq4_nl_r8_avx512emu,
                                       vx_gemv_mxfp4_r8_avx512emu};
static vx_gemv_fn const g2_emu[N_G2] = {vx_gemv_q4_0_r8_g2_avx512emu, vx_gemv_q5_0_r8_g2_avx512emu,
                                       vx_gemv_q8_0_r8_g2_avx512emu, vx_gemv_q4_1_r8_g2_avx512emu,
                                       vx_gemv_q5_1_r8_g2_avx512emu, vx_gemv_iq4_nl_r8_g2_avx512emu,
                                       vx_gemv_mxfp4_r8_g2_avx512emu};

static void swap_g2(vx_kernels *k, vx_gemv_fn const *g4, vx_gemv_fn const *g2) {
    for (int i = 0; i < N_G2; i++) k->gemv[g2_types[i]] = k->gemv[g2_types[i]] == g4[i] ? g2[i] : g4[i];
}

/* The tiers to test: avx2, avx512 when this CPU has it, and the emulated
 * avx512 (SIMDe over AVX2, src/x86/isa512.h; not under ASan where the
 * native tier runs the same source). The AVX-512 tables take the GFNI
 * Q6_K, Q5_K, Q3_K and Q2_K gemvs (and Q5_K, Q3_K, Q2_K gemms) where they can (natively on GFNI CPUs, always
 * emulated); each is followed by a copy with the plain ones, so that both
 * run wherever the tier does. */
static int tiers(vx_kernels *kt) {
    int n = 0;
    const bool native = vx_cpu_best_isa() >= VX_ISA_AVX512;
    vx_kernels_init(&kt[n++], VX_ISA_AVX2);
    if (native) {
        vx_kernels_init(&kt[n++], VX_ISA_AVX512);
        kt[n] = kt[n - 1];
        kt[n].gemv[VX_TYPE_Q6_K_R8] = vx_gemv_q6_K_r8_avx512;
        kt[n].gemv[VX_TYPE_Q5_K_R8] = vx_gemv_q5_K_r8_avx512;
        kt[n].gemv[VX_TYPE_Q3_K_R8] = vx_gemv_q3_K_r8_avx512;
        kt[n].gemm[VX_TYPE_Q5_K_R8] = vx_gemm_q5_K_r8_avx512;
        kt[n].gemv[VX_TYPE_Q2_K_R8] = vx_gemv_q2_K_r8_avx512;
        kt[n].gemm[VX_TYPE_Q2_K_R8] = vx_gemm_q2_K_r8_avx512;
        kt[n].gemv[VX_TYPE_TQ2_0_R8] = vx_gemv_tq2_0_r8_avx512;
        kt[n].gemm[VX_TYPE_TQ2_0_R8] = vx_gemm_tq2_0_r8_avx512;
        kt[n++].gemm[VX_TYPE_Q3_K_R8] = vx_gemm_q3_K_r8_avx512;
        swap_g2(&kt[n - 1], g4_native, g2_native);
    }
    static bool said, skip;
    if (!said) skip = vx_test_skip_emulated(native, "avx512-emu"), said = true;
    if (!skip) {
        vx_kernels_init_emulated(&kt[n++]);
        kt[n] = kt[n - 1];
        kt[n].gemv[VX_TYPE_Q6_K_R8] = vx_gemv_q6_K_r8_avx512emu;
        kt[n].gemv[VX_TYPE_Q5_K_R8] = vx_gemv_q5_K_r8_avx512emu;
        kt[n].gemv[VX_TYPE_Q3_K_R8] = vx_gemv_q3_K_r8_avx512emu;
        kt[n].gemm[VX_TYPE_Q5_K_R8] = vx_gemm_q5_K_r8_avx512emu;
        kt[n].gemv[VX_TYPE_Q2_K_R8] = vx_gemv_q2_K_r8_avx512emu;
        kt[n].gemm[VX_TYPE_Q2_K_R8] = vx_gemm_q2_K_r8_avx512emu;
        kt[n].gemv[VX_TYPE_TQ2_0_R8] = vx_gemv_tq2_0_r8_avx512emu;
        kt[n].gemm[VX_TYPE_TQ2_0_R8] = vx_gemm_tq2_0_r8_avx512emu;
        kt[n++].gemm[VX_TYPE_Q3_K_R8] = vx_gemm_q3_K_r8_avx512emu;
        swap_g2(&kt[n - 1], g4_emu, g2_emu);
    }
    /* the AMX tier (its int8 tile GEMMs of the packed 32-element types), natively
     * where the CPU has it, else emulated (unless skipped as above) */
    if (vx_cpu_best_isa() >= VX_ISA_AMX)
        vx_kernels_init(&kt[n++], VX_ISA_AMX);
    else if (!skip)
        vx_kernels_init_emulated_amx(&kt[n++]);
    return n;
}

static void test_packed(err_stats *st) {
    const int64_t ns[] = {256, 1280, 4096, 0};
    /* 32-blocks: one block, odd counts (the lone tail block on the even
     * chain), more than one GEMM chunk, and rows past the gemv's tables */
    const int64_t ns32[] = {32, 96, 896, 4864, 40960, 0};
    vx_kernels kt[6];
    const int nk = tiers(kt);
    for (int ti = 0; ti < nk; ti++) {
        rng r = {.s = 777};
        const vx_kernels *k = &kt[ti];
        /* the reference gemv on the packed layout once, with the AVX2 tier */
        const bool first = ti == 0;
        for (int i = 0; ns[i]; i++) {
            check_packed(st, k, VX_TYPE_Q4_K, vx_gemv_q4_K_avx2, first ? vx_gemv_q4_K_r8_ref : NULL, ns[i], &r);
            check_packed(st, k, VX_TYPE_Q6_K, vx_gemv_q6_K_avx2, first ? vx_gemv_q6_K_r8_ref : NULL, ns[i], &r);
            check_packed(st, k, VX_TYPE_Q5_K, vx_gemv_q5_K_avx2, first ? vx_gemv_q5_K_r8_ref : NULL, ns[i], &r);
            check_packed(st, k, VX_TYPE_Q3_K, vx_gemv_q3_K_avx2, first ? vx_gemv_q3_K_r8_ref : NULL, ns[i], &r);
            check_packed(st, k, VX_TYPE_Q2_K, vx_gemv_q2_K_avx2, first ? vx_gemv_q2_K_r8_ref : NULL, ns[i], &r);
            check_packed(st, k, VX_TYPE_TQ2_0, vx_gemv_q2_K_avx2, first ? vx_gemv_tq2_0_r8_ref : NULL, ns[i], &r);
            check_packed(st, k, VX_TYPE_TQ1_0, vx_gemv_q2_K_avx2, first ? vx_gemv_tq2_0_r8_ref : NULL, ns[i], &r);
        }
        for (int i = 0; ns32[i]; i++) {
            check_packed(st, k, VX_TYPE_Q4_0, vx_gemv_q4_0_avx2, first ? vx_gemv_q4_0_r8_ref : NULL, ns32[i], &r);
            check_packed(st, k, VX_TYPE_Q5_0, vx_gemv_q5_0_avx2, first ? vx_gemv_q5_0_r8_ref : NULL, ns32[i], &r);
            check_packed(st, k, VX_TYPE_Q8_0, vx_gemv_q8_0_avx2, first ? vx_gemv_q8_0_r8_ref : NULL, ns32[i], &r);
            check_packed(st, k, VX_TYPE_Q4_1, vx_gemv_q4_1_avx2, first ? vx_gemv_q4_1_r8_ref : NULL, ns32[i], &r);
            check_packed(st, k, VX_TYPE_Q5_1, vx_gemv_q5_1_avx2, first ? vx_gemv_q5_1_r8_ref : NULL, ns32[i], &r);
            check_packed(st, k, VX_TYPE_IQ4_NL, vx_gemv_iq4_nl_avx2, first ? vx_gemv_iq4_nl_r8_ref : NULL, ns32[i],
                         &r);
            check_packed(st, k, VX_TYPE_MXFP4, vx_gemv_mxfp4_avx2, first ? vx_gemv_mxfp4_r8_ref : NULL, ns32[i], &r);
        }
        printf("packed gemv/gemm checked: tier %s\n", k->name);
    }
}

/* A tier's gemv against the AVX2 tier's on the same rows: both keep the
 * canonical order (exact per-block integer sums, the same float steps), so
 * every output must be the same float, bit for bit. */
static void check_same_gemv(err_stats *st, int t, vx_gemv_fn a, vx_gemv_fn b, const char *tier, int64_t n, rng *r) {
    const vx_type_traits *tx = vx_type_get_traits(t);
    const int yt = tx->vec_dot_type, nr = 19, ntk = 5;
    const size_t rs = vx_row_size((vx_type)t, n) + 16, as = vx_row_size((vx_type)yt, n);
    uint8_t *w = xmalloc(rs * nr), *y = xmalloc(as * ntk);
    float *f = xmalloc((size_t)n * sizeof(float)), oa[19], ob[19];
    gemm_weights(t, n, w, rs, nr, r, f);
    gemm_acts(yt, n, y, as, ntk, r, f);
    for (int k = 0; k < ntk; k++) {
        a(n, w, rs, nr, y + (size_t)k * as, oa);
        b(n, w, rs, nr, y + (size_t)k * as, ob);
        for (int i = 0; i < nr; i++)
            CHECKF(memcmp(&oa[i], &ob[i], sizeof(float)) == 0, "%s gemv tier %s n=%lld tok %d row %d: %.9g, AVX2 %.9g",
                   tx->name, tier, (long long)n, k, i, oa[i], ob[i]);
    }
    free(w);
    free(y);
    free(f);
}

/* Plain-layout entries a tier replaces: the same gemm/gemv checks as the
 * AVX2 kernels get, and for the quantized ones the AVX2 gemv's bits. */
static void test_tier_plain(err_stats *st) {
    vx_kernels kt[6];
    const int nk = tiers(kt);
    static const int types[] = {VX_TYPE_Q4_0,  VX_TYPE_Q5_0,   VX_TYPE_Q8_0,  VX_TYPE_Q4_K,  VX_TYPE_Q6_K,
                                VX_TYPE_F16,   VX_TYPE_BF16,   VX_TYPE_IQ2_XXS, VX_TYPE_IQ2_XS, VX_TYPE_IQ2_S,
                                VX_TYPE_IQ3_XXS, VX_TYPE_IQ3_S, VX_TYPE_IQ1_S, VX_TYPE_IQ1_M};
    const int64_t ns32[] = {32, 96, 896, 4096, 0};
    const int64_t nsK[] = {256, 1280, 4096, 0};
    const int64_t nsF[] = {7, 40, 896, 4099, 0};
    for (int ti = 1; ti < nk; ti++)
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            const int t = types[i];
            if (kt[ti].gemv[t] == kt[0].gemv[t] && kt[ti].gemm[t] == kt[0].gemm[t]) continue;
            /* the AVX-512 tier's F16 / BF16 gemms take 2-15 tokens as the
             * gemv does (avx512_half.c): exactly its bits there; from 16
             * tokens exactly the AVX2 tier's (kt[0]) panel GEMM's */
            const int half = t == VX_TYPE_F16 || t == VX_TYPE_BF16;
            const int own = half && kt[ti].gemm[t] != kt[0].gemm[t];
            /* BF16 on vdpbf16ps (AVX512-BF16 CPUs): bf16 activations */
            const int dp = kt[ti].gemm[t] == vx_gemm_bf16_dp_avx512;
            const gcase gc = {t, kt[ti].gemm[t], kt[ti].gemv[t], kt[ti].gemm_scratch, own ? 15 : 0,
                              own && !dp ? kt[0].gemm[t] : NULL, dp};
            const int64_t *ns = t == VX_TYPE_F16 || t == VX_TYPE_BF16 ? nsF
                                : vx_type_get_traits(t)->blck_size == VX_QK_K ? nsK
                                                                               : ns32;
            rng r = {.s = 4243};
            for (int k = 0; ns[k]; k++) check_gemm(st, &gc, ns[k], &r);
            if (!half)
                for (int k = 0; ns[k]; k++) check_same_gemv(st, t, kt[ti].gemv[t], kt[0].gemv[t], kt[ti].name, ns[k], &r);
            if (dp) { /* the f32-activation BF16 GEMM such a tier keeps for batch_invariant: the AVX2 bits */
                const gcase g32 = {t, kt[ti].gemm_bf16_f32, kt[ti].gemv[t], kt[ti].gemm_scratch, 15, kt[0].gemm[t], 0};
                for (int k = 0; ns[k]; k++) check_gemm(st, &g32, ns[k], &r);
            }
            printf("plain %s gemv/gemm checked: tier %s\n", vx_type_name(t), kt[ti].name);
        }
}

/* ------------------------------------------------------------ fixtures */

static const char *const fixture_types[] = {"F16",  "BF16",   "Q8_0",   "Q4_0",   "Q4_1", "Q5_0",  "Q5_1",
                                            "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL"};

/* Up to 64 rows of every tensor of every llama fixture whose type has a
 * kernel, against a Gaussian activation row. */
static void test_fixtures(err_stats *st) {
    char err[256];
    int tested[VX_TYPE_COUNT];
    memset(tested, 0, sizeof tested);
    rng r = {.s = 2024};
    for (size_t fi = 0; fi < sizeof fixture_types / sizeof fixture_types[0]; fi++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/llama/llama-%s.gguf", fixture_types[fi]);
        const char *path = vx_test_fixture_path(rel);
        vx_gguf *g = NULL;
        vx_status rc = vx_gguf_open(path, &g, err, sizeof err);
        CHECKF(rc == VX_OK, "cannot open %s: %s", path, err);
        if (rc != VX_OK) continue;
        for (int64_t ti = 0; ti < vx_gguf_n_tensors(g); ti++) {
            const vx_gguf_tensor *t = vx_gguf_tensor_at(g, ti);
            const int64_t n = t->ne[0];
            const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
            const int nrows = rows < 64 ? (int)rows : 64;
            const size_t rs = vx_row_size((vx_type)t->type, n);
            if (rs == 0) continue;
            float *x = xmalloc((size_t)n * sizeof(float));
            fill_gauss(&r, x, n, 1.0f);
            if (t->type == VX_TYPE_F16 || t->type == VX_TYPE_BF16) {
                const bool bf = t->type == VX_TYPE_BF16;
                for (int r0 = 0; r0 < nrows; r0 += MAX_ROWS) {
                    const int nr = nrows - r0 < MAX_ROWS ? nrows - r0 : MAX_ROWS;
                    check_half(st, bf, (const uint16_t *)t->data + (size_t)r0 * (rs / 2), rs / 2, nr, x, n);
                }
                tested[t->type]++;
            } else {
                const kcase *kc = find_case(t->type);
                if (kc) {
                    const vx_type_traits *tx = vx_type_get_traits(t->type);
                    const vx_type_traits *ty = vx_type_get_traits(tx->vec_dot_type);
                    void *yq = xmalloc(vx_row_size(tx->vec_dot_type, n));
                    ty->from_float(x, yq, n);
                    for (int r0 = 0; r0 < nrows; r0 += MAX_ROWS) {
                        const int nr = nrows - r0 < MAX_ROWS ? nrows - r0 : MAX_ROWS;
                        check_rows(st, kc, (const uint8_t *)t->data + (size_t)r0 * rs, rs, nr, yq, n,
                                   t->name);
                    }
                    free(yq);
                    tested[t->type]++;
                }
            }
            free(x);
        }
        vx_gguf_close(g);
    }
    printf("fixture tensors checked:");
    for (int t = 0; t < VX_TYPE_COUNT; t++)
        if (tested[t]) printf(" %s %d", vx_type_name(t), tested[t]);
    printf("\n");
    /* the fixtures hold no MXFP4 or grid i-quant tensor (test_arch checks
     * files of each against llama.cpp's logits) */
    for (int c = 0; c < NCASES; c++)
        CHECKF(tested[cases[c].type] > 0 || cases[c].type == VX_TYPE_MXFP4 || vx_iq_is_grid(cases[c].type),
               "no fixture tensor of type %s",
               vx_type_name(cases[c].type));
}

/* Type names, the load-time packed ids included (within_tol keys the
 * packed checks by them). */
static const char *stat_name(int t) {
    switch (t) {
    case VX_TYPE_Q4_K_R8: return "Q4_K_R8";
    case VX_TYPE_Q6_K_R8: return "Q6_K_R8";
    case VX_TYPE_Q3_K_R8: return "Q3_K_R8";
    case VX_TYPE_Q5_K_R8: return "Q5_K_R8";
    case VX_TYPE_Q2_K_R8: return "Q2_K_R8";
    case VX_TYPE_TQ2_0_R8: return "TQ2_0_R8";
    case VX_TYPE_Q4_0_R8: return "Q4_0_R8";
    case VX_TYPE_Q5_0_R8: return "Q5_0_R8";
    case VX_TYPE_Q8_0_R8: return "Q8_0_R8";
    case VX_TYPE_Q4_1_R8: return "Q4_1_R8";
    case VX_TYPE_Q5_1_R8: return "Q5_1_R8";
    case VX_TYPE_IQ4_NL_R8: return "IQ4_NL_R8";
    case VX_TYPE_MXFP4_R8: return "MXFP4_R8";
    default: return vx_type_name(t);
    }
}

/* F16C from CPUID leaf 1 (ECX bit 29): not every compiler's
 * __builtin_cpu_supports knows it. */
static bool cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && ((c >> 29) & 1);
}

int main(void) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !cpu_has_f16c()) {
        printf("skipped: no AVX2\n");
        return vx_test_finish("test_kernels");
    }
    err_stats st;
    memset(&st, 0, sizeof st);
    test_quantizers();
    test_dots(&st);
    test_half(&st);
    test_gemm(&st);
    test_packed(&st);
    test_tier_plain(&st);
    test_fixtures(&st);
    printf("worst |kernel - ref| / sum|x y| (bound %.0e; *_R8: every tier, bit-equal to AVX2):", DOT_TOL);
    for (int t = 0; t < VX_TYPE_COUNT; t++)
        if (st.worst[t] > 0.0) printf(" %s %.1e", stat_name(t), st.worst[t]);
    printf("\n");
    return vx_test_finish("test_kernels");
}
