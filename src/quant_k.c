/*
 * quant_k.c - plain-C reference kernels for the K-quants (Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K) and their activation type Q8_K: dequantization, quantization
 * and dot products.
 *
 * A K-quant super-block holds 256 elements in sub-blocks of 16 or 32, each
 * with its own small integer scale (and min) that is itself scaled by fp16
 * super-block factors. Each layout is written down once, as helpers mapping
 * element e to its bits, shared by dequantization, quantization and the dot
 * products.
 *
 * Dequantization rounds exactly like the GGUF reference (e.g. Q4_K computes
 * d*sc and dmin*m in float first, then (d*sc)*q - dmin*m), so results are bit
 * identical. The quantizers are our own: a least-squares search for each
 * sub-block's scale (and min), integer sub-block scales relative to the
 * best fp16 super-block factors, a one-step nudge of those integers, then a
 * least-squares refit of the super-block factors (quantize_asym_block,
 * quantize_sym_block).
 */
#include <math.h>
#include <string.h>

#include "common.h"
#include "quant_ref.h"

/* No fused multiply-adds, so the quantizers give the same bytes whatever
 * the compiler and target flags (GCC never fuses under -std=c11; clang
 * fuses within an expression when FMA is enabled unless told not to). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK VX_QK_K

/* ===================================================== layout helpers */

/* Q2_K / Q3_K low bits: 128-element halves; within one, element 32*j + l
 * lives in bits 2j..2j+1 of qs[32*half + l]. */
static inline int q2_index(int e) { return 32 * (e / 128) + e % 32; }
static inline int q2_shift(int e) { return 2 * ((e % 128) / 32); }

/* Q4_K / Q5_K nibbles: 64-element chunks; within one, element l < 32 is the
 * low nibble of qs[32*chunk + l] and element 32 + l the high nibble. */
static inline int q4_index(int e) { return 32 * (e / 64) + e % 32; }
static inline int q4_shift(int e) { return 4 * ((e % 64) / 32); }

/* Q6_K: 128-element halves split in four quarters k of 32; quarter k uses
 * nibble (k / 2) of ql[64*half + 32*(k % 2) + l] and bits 2k..2k+1 of
 * qh[32*half + l]. */
static inline int q6_ql_index(int e) { return 64 * (e / 128) + 32 * ((e % 128) / 32 % 2) + e % 32; }
static inline int q6_ql_shift(int e) { return 4 * ((e % 128) / 64); }
static inline int q6_qh_index(int e) { return 32 * (e / 128) + e % 32; }
static inline int q6_qh_shift(int e) { return 2 * ((e % 128) / 32); }

/* Q2_K: 2-bit q (0..3). */
static inline int q2_K_get(const vx_block_q2_K *b, int e) {
    return (b->qs[q2_index(e)] >> q2_shift(e)) & 3;
}

/* Q3_K: signed q in -4..3 stored as 2 low bits + a high bit in hmask
 * (element e: byte e % 32, bit e / 32). A set high bit means q >= 0. */
static inline int q3_K_get(const vx_block_q3_K *b, int e) {
    int lo = (b->qs[q2_index(e)] >> q2_shift(e)) & 3;
    int hi = (b->hmask[e % 32] >> (e / 32)) & 1;
    return lo - (hi ? 0 : 4);
}

static inline int q4_K_get(const vx_block_q4_K *b, int e) {
    return (b->qs[q4_index(e)] >> q4_shift(e)) & 0x0F;
}

/* Q5_K: nibble as Q4_K plus bit 4 in qh[e % 32], bit (e / 32). */
static inline int q5_K_get(const vx_block_q5_K *b, int e) {
    int lo = (b->qs[q4_index(e)] >> q4_shift(e)) & 0x0F;
    int hi = (b->qh[e % 32] >> (e / 32)) & 1;
    return lo | (hi << 4);
}

/* Q6_K: signed q in -32..31 (stored with +32). */
static inline int q6_K_get(const vx_block_q6_K *b, int e) {
    int lo = (b->ql[q6_ql_index(e)] >> q6_ql_shift(e)) & 0x0F;
    int hi = (b->qh[q6_qh_index(e)] >> q6_qh_shift(e)) & 3;
    return (lo | (hi << 4)) - 32;
}

void vx_q3_K_unpack_scales(const uint8_t p[12], int8_t out[16]) {
    /* Scale i: low 4 bits in byte i % 8 (low nibble for i < 8, high
     * otherwise), high 2 bits in byte 8 + i % 4 at bit 2 * (i / 4); stored
     * with +32. */
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? p[i] & 0x0F : p[i - 8] >> 4;
        int hi = (p[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

static void q3_K_pack_scales(const int8_t sc[16], uint8_t p[12]) {
    memset(p, 0, 12);
    for (int i = 0; i < 16; i++) {
        int u = sc[i] + 32; /* 0..63 */
        if (i < 8)
            p[i] |= (uint8_t)(u & 0x0F);
        else
            p[i - 8] |= (uint8_t)((u & 0x0F) << 4);
        p[8 + i % 4] |= (uint8_t)((u >> 4) << (2 * (i / 4)));
    }
}

void vx_q4_K_unpack_scales(const uint8_t p[12], uint8_t sc[8], uint8_t mn[8]) {
    /* Sub-blocks 0..3: 6-bit scale in p[j], min in p[j + 4]. Sub-blocks
     * 4..7: low 4 bits in the nibbles of p[j + 4], high 2 bits in the top
     * bits of p[j - 4] (scale) and p[j] (min). */
    for (int j = 0; j < 4; j++) {
        sc[j] = p[j] & 63;
        mn[j] = p[j + 4] & 63;
    }
    for (int j = 4; j < 8; j++) {
        sc[j] = (uint8_t)((p[j + 4] & 0x0F) | ((p[j - 4] >> 6) << 4));
        mn[j] = (uint8_t)((p[j + 4] >> 4) | ((p[j] >> 6) << 4));
    }
}

static void q4_K_pack_scales(const uint8_t sc[8], const uint8_t mn[8], uint8_t p[12]) {
    for (int j = 0; j < 4; j++) {
        p[j] = sc[j];
        p[j + 4] = mn[j];
    }
    for (int j = 4; j < 8; j++) {
        p[j + 4] = (uint8_t)((sc[j] & 0x0F) | ((mn[j] & 0x0F) << 4));
        p[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
        p[j] |= (uint8_t)((mn[j] >> 4) << 6);
    }
}

/* ===================================================== dequantization */

void vx_dequantize_row_q2_K(const void *src, float *dst, int64_t n) {
    const vx_block_q2_K *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = vx_fp16_to_fp32(b[i].d);
        const float dmin = vx_fp16_to_fp32(b[i].dmin);
        for (int s = 0; s < QK / 16; s++) {
            const float dl = d * (float)(b[i].scales[s] & 0x0F);
            const float ml = dmin * (float)(b[i].scales[s] >> 4);
            for (int e = 16 * s; e < 16 * s + 16; e++) dst[e] = dl * (float)q2_K_get(&b[i], e) - ml;
        }
    }
}

void vx_dequantize_row_q3_K(const void *src, float *dst, int64_t n) {
    const vx_block_q3_K *b = src;
    int8_t sc[16];
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = vx_fp16_to_fp32(b[i].d);
        vx_q3_K_unpack_scales(b[i].scales, sc);
        for (int s = 0; s < QK / 16; s++) {
            const float dl = d * (float)sc[s];
            for (int e = 16 * s; e < 16 * s + 16; e++) dst[e] = dl * (float)q3_K_get(&b[i], e);
        }
    }
}

void vx_dequantize_row_q4_K(const void *src, float *dst, int64_t n) {
    const vx_block_q4_K *b = src;
    uint8_t sc[8], mn[8];
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = vx_fp16_to_fp32(b[i].d);
        const float dmin = vx_fp16_to_fp32(b[i].dmin);
        vx_q4_K_unpack_scales(b[i].scales, sc, mn);
        for (int s = 0; s < 8; s++) {
            const float dl = d * (float)sc[s];
            const float ml = dmin * (float)mn[s];
            for (int e = 32 * s; e < 32 * s + 32; e++) dst[e] = dl * (float)q4_K_get(&b[i], e) - ml;
        }
    }
}

void vx_dequantize_row_q5_K(const void *src, float *dst, int64_t n) {
    const vx_block_q5_K *b = src;
    uint8_t sc[8], mn[8];
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = vx_fp16_to_fp32(b[i].d);
        const float dmin = vx_fp16_to_fp32(b[i].dmin);
        vx_q4_K_unpack_scales(b[i].scales, sc, mn);
        for (int s = 0; s < 8; s++) {
            const float dl = d * (float)sc[s];
            const float ml = dmin * (float)mn[s];
            for (int e = 32 * s; e < 32 * s + 32; e++) dst[e] = dl * (float)q5_K_get(&b[i], e) - ml;
        }
    }
}

void vx_dequantize_row_q6_K(const void *src, float *dst, int64_t n) {
    const vx_block_q6_K *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = vx_fp16_to_fp32(b[i].d);
        for (int s = 0; s < QK / 16; s++) {
            const float dl = d * (float)b[i].scales[s];
            for (int e = 16 * s; e < 16 * s + 16; e++) dst[e] = dl * (float)q6_K_get(&b[i], e);
        }
    }
}

void vx_dequantize_row_q8_K(const void *src, float *dst, int64_t n) {
    const vx_block_q8_K *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        for (int e = 0; e < QK; e++) dst[e] = b[i].d * (float)b[i].qs[e];
    }
}

/* ======================================================= quantization */

/*
 * Sub-block fits. Both search a spread of trial scales around the one that
 * maps the extreme onto the last level: each trial rounds to codes and
 * refits scale (and offset) to those codes by least squares; the trial with
 * the smallest residual wins and is then polished by alternating "round
 * codes" and "refit" until the error stops falling (each step can only lower
 * it). Trials that clip the extreme a little usually win: fewer levels are
 * wasted on one outlier.
 */
#define FIT_TRIALS 8      /* trials on each side of the nominal scale */
#define FIT_SPREAD 0.03f  /* relative step between trial scales */
#define FIT_POLISH 4

/* Rounds x to codes in [0, nmax] with x ~= a*q + b, refits (a, b) to those
 * codes by least squares keeping b <= 0 (the formats subtract a
 * non-negative min) and returns the refit's squared error; INFINITY when
 * degenerate. sxx = sum x^2. */
static double asym_fit_codes(const float *x, int n, int nmax, double sxx, double sx, float a,
                             float b, float *a_out, float *b_out) {
    const float ia = 1.0f / a;
    int sq = 0, sqq = 0;
    /* four partial sums: one running sum would serialize on add latency */
    float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < n; i += 4) { /* n is 16 or 32 */
        for (int k = 0; k < 4; k++) {
            int q = vx_q_round_clamp((x[i + k] - b) * ia, 0, nmax);
            sq += q;
            sqq += q * q;
            p[k] += x[i + k] * (float)q;
        }
    }
    double sxq = ((double)p[0] + p[1]) + ((double)p[2] + p[3]);
    double det = (double)n * sqq - (double)sq * sq;
    if (!(det > 0.0)) return INFINITY; /* all codes equal: slope undetermined */
    double na = (n * sxq - sq * sx) / det;
    double nb = (sqq * sx - sq * sxq) / det;
    if (nb > 0.0) { /* min would be negative: pin the offset at 0 */
        nb = 0.0;
        na = sxq / (double)sqq;
    }
    if (!(na > 0.0)) return INFINITY;
    *a_out = (float)na;
    *b_out = (float)nb;
    /* the residual is orthogonal to q and 1 at the optimum (to q alone when
     * b is pinned at 0), which leaves sum r^2 = sxx - a sxq - b sx */
    double err = sxx - na * sxq - nb * sx;
    return err > 0.0 ? err : 0.0;
}

/* Fits x[0..n) ~= a*q - m with q in [0, nmax], a >= 0, m >= 0; returns a. */
static float fit_asym(const float *x, int n, int nmax, float *m_out) {
    float lo = x[0], hi = x[0];
    double sxx = 0.0, sx = 0.0;
    for (int i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
        sxx += (double)x[i] * x[i];
        sx += x[i];
    }
    if (lo > 0.0f) lo = 0.0f;
    if (!(hi > lo) || !isfinite(hi - lo)) { /* constant at or below zero: the min says it all */
        *m_out = isfinite(lo) ? -lo : 0.0f;
        return 0.0f;
    }
    float best_a = (hi - lo) / (float)nmax, best_b = lo;
    double best = INFINITY;
    for (int t = -FIT_TRIALS; t <= FIT_TRIALS; t++) {
        float a, b;
        float trial = (hi - lo) / ((float)nmax * (1.0f + FIT_SPREAD * (float)t));
        double err = asym_fit_codes(x, n, nmax, sxx, sx, trial, lo, &a, &b);
        if (err < best) {
            best = err;
            best_a = a;
            best_b = b;
        }
    }
    for (int it = 0; it < FIT_POLISH && best < INFINITY; it++) {
        float a, b;
        double err = asym_fit_codes(x, n, nmax, sxx, sx, best_a, best_b, &a, &b);
        if (!(err < best)) break;
        best = err;
        best_a = a;
        best_b = b;
    }
    *m_out = -best_b;
    return best_a;
}

/* Rounds x to codes in [-nmax, nmax - 1] with x ~= a*q, refits a to those
 * codes and returns the refit's squared error, sxx - sxq^2 / sqq
 * (INFINITY when every code is 0). */
static double sym_fit_codes(const float *x, int n, int nmax, double sxx, float a, float *a_out) {
    const float ia = 1.0f / a;
    int sqq = 0;
    float p[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* as in asym_fit_codes */
    for (int i = 0; i < n; i += 4) {
        for (int k = 0; k < 4; k++) {
            int q = vx_q_round_clamp(x[i + k] * ia, -nmax, nmax - 1);
            sqq += q * q;
            p[k] += x[i + k] * (float)q;
        }
    }
    double sxq = ((double)p[0] + p[1]) + ((double)p[2] + p[3]);
    if (sqq == 0) return INFINITY;
    *a_out = (float)(sxq / sqq);
    double err = sxx - sxq * sxq / sqq;
    return err > 0.0 ? err : 0.0;
}

/* Fits x[0..n) ~= a*q with q in [-nmax, nmax - 1]; returns a (any sign). */
static float fit_sym(const float *x, int n, int nmax) {
    float amax = 0.0f, max = 0.0f;
    double sxx = 0.0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
        sxx += (double)x[i] * x[i];
    }
    if (!(amax > 0.0f) || !isfinite(amax)) return 0.0f;
    /* The code range is lopsided (-nmax..nmax-1): try putting the extreme on
     * the long side (negative scale) and on the short side. */
    float best_a = max / -(float)nmax;
    double best = INFINITY;
    for (int side = 0; side < 2; side++) {
        const float end = side == 0 ? -(float)nmax : (float)(nmax - 1);
        for (int t = -FIT_TRIALS; t <= FIT_TRIALS; t++) {
            float a;
            double err = sym_fit_codes(x, n, nmax, sxx, max / (end * (1.0f + FIT_SPREAD * (float)t)), &a);
            if (err < best) {
                best = err;
                best_a = a;
            }
        }
    }
    for (int it = 0; it < FIT_POLISH && best < INFINITY; it++) {
        float a;
        double err = sym_fit_codes(x, n, nmax, sxx, best_a, &a);
        if (!(err < best)) break;
        best = err;
        best_a = a;
    }
    return best_a;
}

/* fp16 neighbours of v: the nearest one at or below |v| and the one at or
 * above (equal when v is representable). Super-block factors of small
 * weights land among fp16 subnormals, where plain rounding can be off by
 * several percent; trying both sides keeps the best product with the
 * integer scales. */
static void fp16_neighbours(float v, uint16_t out[2]) {
    uint16_t h = vx_fp32_to_fp16(v);
    float hv = vx_fp16_to_fp32(h);
    if (hv == v || !isfinite(hv)) {
        out[0] = out[1] = h;
    } else if (fabsf(hv) < fabsf(v)) { /* rounded toward zero: next one up */
        out[0] = h;
        out[1] = (uint16_t)(h + 1);
    } else {
        out[0] = (h & 0x7FFF) ? (uint16_t)(h - 1) : h;
        out[1] = h;
    }
}

/* Result of quantizing one asymmetric super-block (Q2_K, Q4_K, Q5_K). */
typedef struct {
    uint16_t d, dmin;   /* fp16 super-block factors */
    uint8_t sc[16];     /* integer sub-block scales, 0..smax */
    uint8_t mn[16];     /* integer sub-block mins, 0..smax */
    uint8_t q[QK];      /* codes, 0..nmax */
} asym_block;

/* Codes of one sub-block for its effective scale dl and min ml; returns the
 * squared error. The reconstruction dl*q - ml is evaluated exactly as
 * dequantization does it. */
static float asym_sub_codes(const float *x, int sub, int nmax, float dl, float ml, uint8_t *q) {
    const float idl = dl > 0.0f ? 1.0f / dl : 0.0f;
    float err = 0.0f; /* per sub-block in float: short sums, and fast */
    for (int e = 0; e < sub; e++) {
        int c = vx_q_round_clamp((x[e] + ml) * idl, 0, nmax);
        q[e] = (uint8_t)c;
        float diff = (dl * (float)c - ml) - x[e];
        err += diff * diff;
    }
    return err;
}

/* Codes for the whole super-block; returns the squared error. */
static double asym_block_codes(const float *x, int sub, int nmax, asym_block *r) {
    const float d = vx_fp16_to_fp32(r->d), dmin = vx_fp16_to_fp32(r->dmin);
    double err = 0.0;
    for (int s = 0; s < QK / sub; s++)
        err += asym_sub_codes(x + s * sub, sub, nmax, d * (float)r->sc[s], dmin * (float)r->mn[s],
                              r->q + s * sub);
    return err;
}

/* With the fp16 factors fixed, moves each sub-block's integer scale and min
 * by one step where that lowers its error (rounding the fitted values
 * separately is not always the best pair once the codes are re-rounded). */
static double asym_block_nudge(const float *x, int sub, int nmax, int smax, asym_block *r) {
    const float d = vx_fp16_to_fp32(r->d), dmin = vx_fp16_to_fp32(r->dmin);
    uint8_t q[32];
    double total = 0.0;
    for (int s = 0; s < QK / sub; s++) {
        const float *xs = x + s * sub;
        const int sc0 = r->sc[s], mn0 = r->mn[s];
        int bsc = sc0, bmn = mn0;
        float best = asym_sub_codes(xs, sub, nmax, d * (float)sc0, dmin * (float)mn0, q);
        for (int k = 0; k < 9; k++) {
            int sc = sc0 + k % 3 - 1, mn = mn0 + k / 3 - 1;
            if (k == 4 || sc < 0 || sc > smax || mn < 0 || mn > smax) continue;
            float err = asym_sub_codes(xs, sub, nmax, d * (float)sc, dmin * (float)mn, q);
            if (err < best) {
                best = err;
                bsc = sc;
                bmn = mn;
            }
        }
        r->sc[s] = (uint8_t)bsc;
        r->mn[s] = (uint8_t)bmn;
        total += asym_sub_codes(xs, sub, nmax, d * (float)bsc, dmin * (float)bmn, r->q + s * sub);
    }
    return total;
}

/* Quantizes a 256-element super-block in sub-blocks of `sub` elements with
 * codes 0..nmax and integer scales/mins 0..smax. */
static void quantize_asym_block(const float *x, int sub, int nmax, int smax, asym_block *r) {
    float a[16], m[16];
    const int nsub = QK / sub;
    float amax = 0.0f, mmax = 0.0f;
    for (int s = 0; s < nsub; s++) {
        a[s] = fit_asym(x + s * sub, sub, nmax, &m[s]);
        amax = fmaxf(amax, a[s]);
        mmax = fmaxf(mmax, m[s]);
    }
    /* Integer scales relative to each candidate pair of fp16 factors. */
    uint16_t dc[2], mc[2];
    fp16_neighbours(amax / (float)smax, dc);
    fp16_neighbours(mmax / (float)smax, mc);
    double best = INFINITY;
    for (int k = 0; k < 4; k++) {
        asym_block trial;
        trial.d = dc[k & 1];
        trial.dmin = mc[k >> 1];
        const float d = vx_fp16_to_fp32(trial.d), dmin = vx_fp16_to_fp32(trial.dmin);
        for (int s = 0; s < nsub; s++) {
            trial.sc[s] = (uint8_t)(d > 0.0f ? vx_q_round_clamp(a[s] / d, 0, smax) : 0);
            trial.mn[s] = (uint8_t)(dmin > 0.0f ? vx_q_round_clamp(m[s] / dmin, 0, smax) : 0);
        }
        double err = asym_block_codes(x, sub, nmax, &trial);
        if (err < best || k == 0) {
            best = err;
            *r = trial;
        }
    }

    best = asym_block_nudge(x, sub, nmax, smax, r);

    /* The integer scales are fixed now; refit the two fp16 factors to all
     * 256 codes at once (x ~= d*(sc*q) - dmin*mn), re-round, keep if better. */
    for (int it = 0; it < FIT_POLISH; it++) {
        double suu = 0, suv = 0, svv = 0, sxu = 0, sxv = 0;
        for (int e = 0; e < QK; e++) {
            double u = (double)r->sc[e / sub] * r->q[e], v = r->mn[e / sub];
            suu += u * u;
            suv += u * v;
            svv += v * v;
            sxu += x[e] * u;
            sxv += x[e] * v;
        }
        double nd, nm;
        double det = suu * svv - suv * suv;
        if (svv == 0.0) { /* no mins in use: one-parameter fit */
            if (!(suu > 0.0)) break;
            nd = sxu / suu;
            nm = vx_fp16_to_fp32(r->dmin);
        } else {
            if (!(det > 0.0)) break;
            /* minimize sum (d u - e v - x)^2 over d and e */
            nd = (sxu * svv - sxv * suv) / det;
            nm = (sxu * suv - sxv * suu) / det;
        }
        if (!(nd > 0.0) || !(nm >= 0.0)) break;
        asym_block trial = *r;
        trial.d = vx_fp32_to_fp16((float)nd);
        trial.dmin = vx_fp32_to_fp16((float)nm);
        double err = asym_block_codes(x, sub, nmax, &trial);
        if (!(err < best)) break;
        best = err;
        *r = trial;
    }
}

/* Result of quantizing one symmetric super-block (Q3_K, Q6_K). */
typedef struct {
    uint16_t d;
    int8_t sc[16]; /* -smax..smax-1 */
    int8_t q[QK];  /* -nmax..nmax-1 */
} sym_block;

/* Codes of one 16-element sub-block for its effective scale dl; returns
 * the squared error of dl*q, computed as dequantization does. */
static float sym_sub_codes(const float *x, int nmax, float dl, int8_t *q) {
    const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
    float err = 0.0f;
    for (int e = 0; e < 16; e++) {
        int c = vx_q_round_clamp(x[e] * idl, -nmax, nmax - 1);
        q[e] = (int8_t)c;
        float diff = dl * (float)c - x[e];
        err += diff * diff;
    }
    return err;
}

static double sym_block_codes(const float *x, int nmax, sym_block *r) {
    const float d = vx_fp16_to_fp32(r->d);
    double err = 0.0;
    for (int s = 0; s < QK / 16; s++)
        err += sym_sub_codes(x + 16 * s, nmax, d * (float)r->sc[s], r->q + 16 * s);
    return err;
}

/* With d fixed, moves each integer sub-block scale by one step where that
 * lowers the sub-block's error (cf. asym_block_nudge). */
static double sym_block_nudge(const float *x, int nmax, int smax, sym_block *r) {
    const float d = vx_fp16_to_fp32(r->d);
    int8_t q[16];
    double total = 0.0;
    for (int s = 0; s < QK / 16; s++) {
        const float *xs = x + 16 * s;
        const int sc0 = r->sc[s];
        int bsc = sc0;
        float best = sym_sub_codes(xs, nmax, d * (float)sc0, q);
        for (int sc = sc0 - 1; sc <= sc0 + 1; sc += 2) {
            if (sc < -smax || sc > smax - 1) continue;
            float err = sym_sub_codes(xs, nmax, d * (float)sc, q);
            if (err < best) {
                best = err;
                bsc = sc;
            }
        }
        r->sc[s] = (int8_t)bsc;
        total += sym_sub_codes(xs, nmax, d * (float)bsc, r->q + 16 * s);
    }
    return total;
}

/* Quantizes a super-block in 16 sub-blocks of 16 with codes -nmax..nmax-1
 * and signed integer scales -smax..smax-1. */
static void quantize_sym_block(const float *x, int nmax, int smax, sym_block *r) {
    float a[16];
    float amax = 0.0f, max = 0.0f;
    for (int s = 0; s < 16; s++) {
        a[s] = fit_sym(x + 16 * s, 16, nmax);
        if (fabsf(a[s]) > amax) {
            amax = fabsf(a[s]);
            max = a[s];
        }
    }
    /* The largest scale takes the long end (-smax) of the scale range. */
    uint16_t dc[2];
    fp16_neighbours(max / -(float)smax, dc);
    double best = INFINITY;
    for (int k = 0; k < 2; k++) {
        sym_block trial;
        trial.d = dc[k];
        const float d = vx_fp16_to_fp32(trial.d);
        for (int s = 0; s < 16; s++)
            trial.sc[s] = (int8_t)(d != 0.0f ? vx_q_round_clamp(a[s] / d, -smax, smax - 1) : 0);
        double err = sym_block_codes(x, nmax, &trial);
        if (err < best || k == 0) {
            best = err;
            *r = trial;
        }
    }

    best = sym_block_nudge(x, nmax, smax, r);

    for (int it = 0; it < FIT_POLISH; it++) { /* refit d to all codes */
        double suu = 0, sxu = 0;
        for (int e = 0; e < QK; e++) {
            double u = (double)r->sc[e / 16] * r->q[e];
            suu += u * u;
            sxu += x[e] * u;
        }
        if (!(suu > 0.0)) break;
        uint16_t dc2[2];
        fp16_neighbours((float)(sxu / suu), dc2);
        bool improved = false;
        sym_block trial = *r;
        for (int k = 0; k < 2; k++) {
            trial.d = dc2[k];
            double err = sym_block_codes(x, nmax, &trial);
            if (err < best) {
                best = err;
                *r = trial;
                improved = true;
            }
        }
        if (!improved) break;
    }
}

void vx_quantize_row_q2_K(const float *src, void *dst, int64_t n) {
    vx_block_q2_K *b = dst;
    asym_block r;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        quantize_asym_block(src, 16, 3, 15, &r);
        b[i].d = r.d;
        b[i].dmin = r.dmin;
        for (int s = 0; s < 16; s++) b[i].scales[s] = (uint8_t)(r.sc[s] | (r.mn[s] << 4));
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int e = 0; e < QK; e++) b[i].qs[q2_index(e)] |= (uint8_t)(r.q[e] << q2_shift(e));
    }
}

void vx_quantize_row_q3_K(const float *src, void *dst, int64_t n) {
    vx_block_q3_K *b = dst;
    sym_block r;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        quantize_sym_block(src, 4, 32, &r);
        b[i].d = r.d;
        q3_K_pack_scales(r.sc, b[i].scales);
        memset(b[i].qs, 0, sizeof b[i].qs);
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int e = 0; e < QK; e++) {
            int u = r.q[e] + 4; /* 0..7: bit 2 -> hmask, bits 0..1 -> qs */
            b[i].qs[q2_index(e)] |= (uint8_t)((u & 3) << q2_shift(e));
            b[i].hmask[e % 32] |= (uint8_t)((u >> 2) << (e / 32));
        }
    }
}

void vx_quantize_row_q4_K(const float *src, void *dst, int64_t n) {
    vx_block_q4_K *b = dst;
    asym_block r;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        quantize_asym_block(src, 32, 15, 63, &r);
        b[i].d = r.d;
        b[i].dmin = r.dmin;
        q4_K_pack_scales(r.sc, r.mn, b[i].scales);
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int e = 0; e < QK; e++) b[i].qs[q4_index(e)] |= (uint8_t)(r.q[e] << q4_shift(e));
    }
}

void vx_quantize_row_q5_K(const float *src, void *dst, int64_t n) {
    vx_block_q5_K *b = dst;
    asym_block r;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        quantize_asym_block(src, 32, 31, 63, &r);
        b[i].d = r.d;
        b[i].dmin = r.dmin;
        q4_K_pack_scales(r.sc, r.mn, b[i].scales);
        memset(b[i].qs, 0, sizeof b[i].qs);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int e = 0; e < QK; e++) {
            b[i].qs[q4_index(e)] |= (uint8_t)((r.q[e] & 0x0F) << q4_shift(e));
            b[i].qh[e % 32] |= (uint8_t)((r.q[e] >> 4) << (e / 32));
        }
    }
}

void vx_quantize_row_q6_K(const float *src, void *dst, int64_t n) {
    vx_block_q6_K *b = dst;
    sym_block r;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        quantize_sym_block(src, 32, 128, &r);
        b[i].d = r.d;
        memcpy(b[i].scales, r.sc, sizeof b[i].scales);
        memset(b[i].ql, 0, sizeof b[i].ql);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int e = 0; e < QK; e++) {
            int u = r.q[e] + 32; /* 0..63 */
            b[i].ql[q6_ql_index(e)] |= (uint8_t)((u & 0x0F) << q6_ql_shift(e));
            b[i].qh[q6_qh_index(e)] |= (uint8_t)((u >> 4) << q6_qh_shift(e));
        }
    }
}

/* Q8_K is the activation side of the K-quant dot products: plain
 * round-to-nearest with a float scale, plus the sums of each group of 16
 * codes so the dots can apply the sub-block mins without a second pass. */
void vx_quantize_row_q8_K(const float *src, void *dst, int64_t n) {
    vx_block_q8_K *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float amax = 0.0f, max = 0.0f;
        for (int e = 0; e < QK; e++) {
            if (fabsf(src[e]) > amax) {
                amax = fabsf(src[e]);
                max = src[e];
            }
        }
        if (!(amax > 0.0f) || !isfinite(amax)) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int e = 0; e < QK; e++) b[i].qs[e] = (int8_t)vx_q_round_clamp(iscale * src[e], -127, 127);
        for (int g = 0; g < QK / 16; g++) {
            int sum = 0;
            for (int e = 16 * g; e < 16 * g + 16; e++) sum += b[i].qs[e];
            b[i].bsums[g] = (int16_t)sum;
        }
        b[i].d = 1.0f / iscale;
    }
}

/* ======================================================== dot products */
/* Integer sums within each sub-block, scaled by the integer sub-block
 * scales, then one float scaling per super-block; doubles across blocks. */

void vx_vec_dot_q2_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q2_K *x = vx;
    const vx_block_q8_K *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / QK; i++) {
        int32_t isum = 0, msum = 0;
        for (int sb = 0; sb < QK / 16; sb++) {
            int32_t dot = 0;
            for (int e = 16 * sb; e < 16 * sb + 16; e++) dot += q2_K_get(&x[i], e) * y[i].qs[e];
            isum += (x[i].scales[sb] & 0x0F) * dot;
            msum += (x[i].scales[sb] >> 4) * y[i].bsums[sb];
        }
        acc += (double)y[i].d * ((double)vx_fp16_to_fp32(x[i].d) * isum -
                                 (double)vx_fp16_to_fp32(x[i].dmin) * msum);
    }
    *s = (float)acc;
}

void vx_vec_dot_q3_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q3_K *x = vx;
    const vx_block_q8_K *y = vy;
    int8_t sc[16];
    double acc = 0.0;
    for (int64_t i = 0; i < n / QK; i++) {
        vx_q3_K_unpack_scales(x[i].scales, sc);
        int32_t isum = 0;
        for (int sb = 0; sb < QK / 16; sb++) {
            int32_t dot = 0;
            for (int e = 16 * sb; e < 16 * sb + 16; e++) dot += q3_K_get(&x[i], e) * y[i].qs[e];
            isum += sc[sb] * dot;
        }
        acc += (double)y[i].d * vx_fp16_to_fp32(x[i].d) * isum;
    }
    *s = (float)acc;
}

/* Q4_K and Q5_K share a super-block's arithmetic: codes c[0..255] (0..15
 * or 0..31) times the 6-bit sub-block scales, minus the mins over the
 * activation's block sums; the result is y.d (d isum - dmin msum). */
static double k45_superblock(uint16_t d, uint16_t dmin, const uint8_t *scales, const int *c, const vx_block_q8_K *y) {
    uint8_t sc[8], mn[8];
    vx_q4_K_unpack_scales(scales, sc, mn);
    int32_t isum = 0, msum = 0;
    for (int sb = 0; sb < 8; sb++) {
        int32_t dot = 0;
        for (int e = 32 * sb; e < 32 * sb + 32; e++) dot += c[e] * y->qs[e];
        isum += sc[sb] * dot;
        msum += mn[sb] * (y->bsums[2 * sb] + y->bsums[2 * sb + 1]);
    }
    return (double)y->d * ((double)vx_fp16_to_fp32(d) * isum - (double)vx_fp16_to_fp32(dmin) * msum);
}

void vx_vec_dot_q4_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q4_K *x = vx;
    const vx_block_q8_K *y = vy;
    double acc = 0.0;
    int c[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        for (int e = 0; e < QK; e++) c[e] = q4_K_get(&x[i], e);
        acc += k45_superblock(x[i].d, x[i].dmin, x[i].scales, c, &y[i]);
    }
    *s = (float)acc;
}

void vx_vec_dot_q5_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q5_K *x = vx;
    const vx_block_q8_K *y = vy;
    double acc = 0.0;
    int c[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        for (int e = 0; e < QK; e++) c[e] = q5_K_get(&x[i], e);
        acc += k45_superblock(x[i].d, x[i].dmin, x[i].scales, c, &y[i]);
    }
    *s = (float)acc;
}

void vx_vec_dot_q6_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q6_K *x = vx;
    const vx_block_q8_K *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / QK; i++) {
        int32_t isum = 0;
        for (int sb = 0; sb < QK / 16; sb++) {
            int32_t dot = 0;
            for (int e = 16 * sb; e < 16 * sb + 16; e++) dot += q6_K_get(&x[i], e) * y[i].qs[e];
            isum += x[i].scales[sb] * dot;
        }
        acc += (double)y[i].d * vx_fp16_to_fp32(x[i].d) * isum;
    }
    *s = (float)acc;
}

void vx_vec_dot_q8_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q8_K *x = vx;
    const vx_block_q8_K *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / QK; i++) {
        int32_t isum = 0;
        for (int e = 0; e < QK; e++) isum += x[i].qs[e] * y[i].qs[e];
        acc += (double)x[i].d * y[i].d * isum;
    }
    *s = (float)acc;
}
