/*
 * amx_gemm.c - prefill GEMM on AMX tiles (tdpbf16ps) for every weight
 * type. Compiled twice: natively with -mamx-tile -mamx-bf16 and the
 * AVX-512 flags (functions named *_amx), and with -DVX_EMU on top of plain
 * AVX2 (functions *_amxemu), where SIMDe supplies the AVX-512 intrinsics
 * and amx_emu.h models the tile instructions, so the same source is tested
 * on any x86 machine.
 *
 * out[t][r] (+)= sum_k W[r][k] x[t][k]: activations x in bf16 rows (the
 * tiles' A operand, loaded straight from the rows), weights as B operand.
 * The weights go through a panel of 32 rows, bf16, in the tiles' pair
 * layout (B tile row p holds elements 2p and 2p + 1 of each of 16 rows):
 * BF16 rows are only transposed, F16 / F32 rows converted, every other
 * type dequantized (straight from the packed records, or to floats
 * first with vx_dequant_row). Per 32 weight rows x 32 tokens four C tiles
 * accumulate in fp32 over a K chunk, 32 elements per step: two A tile
 * loads (tokens 0-15, 16-31), two B tile loads (rows 0-15, 16-31), four
 * tdpbf16ps (16 x 16 x 32 multiply-adds each). Panels are built for a
 * block of rows and K chunk at a time (PANEL_BYTES, KC below), and every
 * token tile runs over all of the block's panels while they sit in L2.
 * vx_gemm_amx_glu runs an FFN's gate and up projections this way side by
 * side (half the panel budget each) and applies the SwiGLU to each 32 x
 * 32 block of their C tiles, writing bf16 rows for the down projection.
 *
 * Precision: weights and activations rounded to bf16 (8 significant bits),
 * products exact, sums in fp32: error below that of the Q8 activations of
 * the integer paths. Given the activations' remainders x - bf16(x) too (the
 * caller does for F16 weights, whose 11 significant bits bf16 would lose),
 * weights are split the same way (BF16 ones are exact already) and three of
 * the four products of (x_hi + x_lo)(w_hi + w_lo) are summed: about 16
 * significant bits, better than fp16 arithmetic, for three times the tile
 * work (tests/test_amx.c states the bounds).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "isa512.h" /* the AVX-512 intrinsics, native or SIMDe (VX_EMU) */
#ifdef VX_EMU
#include "x86/amx_emu.h"
#define VXAMX(name) name##_amxemu
#else
#define VXAMX(name) name##_amx
#endif

#include "common.h"
#include "amx_util.h"
#include "kernels_amx.h"
#include "quant.h"

#define NR 32 /* weight rows per panel */
#define MT 32 /* tokens per step */

/* Tiles 0-3: C (token tile i, row tile j at 2i + j), 4-5: A (tokens),
 * 6-7: B (rows) (amx_util.h's configuration). */

/* Element layout of a panel half (16 rows): pair p = k / 2 of row n at
 * uint16 index 32 p + 2 n + k % 2; B tile of step s at pair 16 s. */

/* 16 rows of bf16 values (rows ld uint16 apart; K elements) into a half. */
static void half_from_bf16(const uint16_t *w, size_t ld, int nr, int64_t K, uint16_t *half) {
    for (int64_t s = 0; s < K / 32; s++) {
        __m512i v[16];
#pragma GCC unroll 16
        for (int n = 0; n < 16; n++)
            v[n] = n < nr ? _mm512_loadu_si512((const void *)(w + (size_t)n * ld + 32 * s)) : _mm512_setzero_si512();
        transpose16(v);
        for (int p = 0; p < 16; p++) _mm512_storeu_si512((void *)(half + (16 * s + p) * 32), v[p]);
    }
}

/* The same from f32 rows (f16 = 0, rows ld floats apart) or fp16 rows
 * (f16 = 1, ld uint16 apart); with lo, the remainders w - bf16(w) go into
 * the half lo the same way. */
static void half_from_float(const void *w, size_t ld, int f16, int nr, int64_t K, uint16_t *half, uint16_t *lo) {
    for (int64_t s = 0; s < K / 32; s++) {
        __m512i v[16], u[16];
#pragma GCC unroll 16
        for (int n = 0; n < 16; n++) {
            v[n] = u[n] = _mm512_setzero_si512();
            if (n >= nr) continue;
            __m512 a, b;
            if (f16) {
                const uint16_t *row = (const uint16_t *)w + (size_t)n * ld + 32 * s;
                a = f16x16(row), b = f16x16(row + 16);
            } else {
                const float *row = (const float *)w + (size_t)n * ld + 32 * s;
                a = _mm512_loadu_ps(row), b = _mm512_loadu_ps(row + 16);
            }
            if (lo) bf16x32_split(a, b, &v[n], &u[n]);
            else v[n] = bf16x32(a, b);
        }
        transpose16(v);
        for (int p = 0; p < 16; p++) _mm512_storeu_si512((void *)(half + (16 * s + p) * 32), v[p]);
        if (!lo) continue;
        transpose16(u);
        for (int p = 0; p < 16; p++) _mm512_storeu_si512((void *)(lo + (16 * s + p) * 32), u[p]);
    }
}

/* ---- quantized 8-row packed layouts, dequantized straight into a half.
 * A quad is 4 consecutive elements k = 4Q .. 4Q + 3 of 16 rows: 64 int8
 * codes, row n at bytes 4n .. 4n + 3 (the packed records' [row][byte]
 * order, rows 0-7 from one record, 8-15 from the next). Its values are
 * code * s[n] - m[n], written as pair rows 2Q and 2Q + 1 of the half. */

/* Per-row factors (s, m: 16 rows) spread over the four 16-byte chunks of
 * a quad: lane j of chunk i belongs to row 4i + j / 4. */
typedef struct quad_scales {
    __m512 s[4], m[4];
} quad_scales;

/* Chunk i's spread of the 16 per-row values v. */
static inline __attribute__((always_inline)) __m512 spread4(__m512 v, int i) {
    const __m512i idx = _mm512_set_epi32(4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 2, 4 * i + 2, 4 * i + 2,
                                         4 * i + 2, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i, 4 * i, 4 * i, 4 * i);
    return _mm512_permutexvar_ps(idx, v);
}

/* The quad's values f[i] = code * s[i] - m[i] of chunk i (16 bytes: rows
 * 4i .. 4i + 3, [row][byte]) into pair rows 2Q and 2Q + 1 of the half:
 * bf16x32 of chunks 0-1 (rows 0-7; of 2-3: rows 8-15) puts the pair
 * (element 0, 1) of row r in dword 2r and (2, 3) in dword 2r + 1: the
 * even dwords of both are pair row 2Q, the odd ones pair row 2Q + 1. */
static inline __attribute__((always_inline)) void store_quad(uint16_t *half, int64_t Q, __m512 f[4], const quad_scales *qs) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) f[i] = _mm512_fmsub_ps(f[i], qs->s[i], qs->m[i]);
    const __m512i lo = bf16x32(f[0], f[1]), hi = bf16x32(f[2], f[3]);
    _mm512_storeu_si512((void *)(half + 64 * Q), _mm512_permutex2var_epi32(lo, even, hi));
    _mm512_storeu_si512((void *)(half + 64 * Q + 32), _mm512_permutex2var_epi32(lo, odd, hi));
}

/* The quad's 64 int8 codes in one vector (chunk i: bytes 16i .. 16i + 15). */
static inline __attribute__((always_inline)) void emit_quad(uint16_t *half, int64_t Q, __m512i codes, const quad_scales *qs) {
    __m512 f[4];
    f[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_castsi512_si128(codes)));
    f[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(codes, 1)));
    f[2] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(codes, 2)));
    f[3] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(codes, 3)));
    store_quad(half, Q, f, qs);
}

/* Two 32-byte [row][byte] pieces (rows 0-7 and 8-15; b NULL: zeros). */
static inline __m512i join(const uint8_t *a, const uint8_t *b) {
    const __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)a);
    const __m256i hi = b ? _mm256_loadu_si256((const __m256i *)(const void *)b) : _mm256_setzero_si256();
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Two 16-byte pieces (rows 0-7 at a, 8-15 at b; b NULL: zeros). */
static inline __m256i join16(const void *a, const void *b) {
    const __m128i lo = _mm_loadu_si128((const __m128i *)a);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), b ? _mm_loadu_si128((const __m128i *)b) : _mm_setzero_si128(), 1);
}

/* 16 fp16 values: 8 at a (rows 0-7), 8 at b (rows 8-15; NULL: zeros). */
static inline __m512 f16_rows(const void *a, const void *b) { return _mm512_cvtph_ps(join16(a, b)); }

/* The 32-element types whose codes need no more than a widening (Q8_0's
 * signed bytes, Q4_0 / Q4_1's low or high nibbles; their offset or min in
 * m): emit_quad's work with each quad's four 16-byte chunks (rows 0-3,
 * 4-7 at a, a + 16; 8-11, 12-15 at b, b + 16) widened straight from the
 * records by one vpmovsxbd / vpmovzxbd each, without emit_quad's join
 * into one vector and its three extracts (port 5, as the widenings are),
 * and the row factors kept in registers for all eight quads of a block
 * (the general path's quad_scales went through the stack: perf showed
 * Q8_0's panel build at 20% of the GEMMs' time).
 * kind: CODES_S8, CODES_LO, CODES_HI. */
enum { CODES_S8, CODES_LO, CODES_HI };
static inline __attribute__((always_inline)) __m512 codes16(const uint8_t *p, int kind) {
    const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m512i v;
    if (kind == CODES_S8) v = _mm512_cvtepi8_epi32(x);
    else if (kind == CODES_LO) v = _mm512_and_si512(_mm512_cvtepu8_epi32(x), _mm512_set1_epi32(15));
    else v = _mm512_srli_epi32(_mm512_cvtepu8_epi32(x), 4);
    return _mm512_cvtepi32_ps(v);
}

static inline __attribute__((always_inline)) void quad32(uint16_t *half, int64_t Q, const uint8_t *a,
                                                          const uint8_t *b, int kind, const __m512 s[4],
                                                          const __m512 m[4], int has_m) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512 f0 = codes16(a, kind), f1 = codes16(a + 16, kind), f2 = codes16(b, kind), f3 = codes16(b + 16, kind);
    if (has_m) {
        f0 = _mm512_fmsub_ps(f0, s[0], m[0]), f1 = _mm512_fmsub_ps(f1, s[1], m[1]);
        f2 = _mm512_fmsub_ps(f2, s[2], m[2]), f3 = _mm512_fmsub_ps(f3, s[3], m[3]);
    } else {
        f0 = _mm512_mul_ps(f0, s[0]), f1 = _mm512_mul_ps(f1, s[1]);
        f2 = _mm512_mul_ps(f2, s[2]), f3 = _mm512_mul_ps(f3, s[3]);
    }
    const __m512i lo = bf16x32(f0, f1), hi = bf16x32(f2, f3);
    _mm512_storeu_si512((void *)(half + 64 * Q), _mm512_permutex2var_epi32(lo, even, hi));
    _mm512_storeu_si512((void *)(half + 64 * Q + 32), _mm512_permutex2var_epi32(lo, odd, hi));
}

/* nb blocks of Q8_0_R8 / Q4_0_R8 / Q4_1_R8 records (rows 0-7 at ra, 8-15
 * at rb, NULL: zeros) into a half. Q4_0's (c - 8) d is c d - 8 d, one
 * rounding of the same exact value (8 d is exact); Q4_1's c d + m. */
static void half_from_r8_32(int type, const uint8_t *ra, const uint8_t *rb, size_t rec, int64_t nb, uint16_t *half) {
    static const uint8_t zeros[64] __attribute__((aligned(64)));
    const int q8 = type == VX_TYPE_Q8_0_R8, q41 = type == VX_TYPE_Q4_1_R8;
    const size_t qo = q8 ? offsetof(vx_block_q8_0_r8, qs) : q41 ? offsetof(vx_block_q4_1_r8, qs) : offsetof(vx_block_q4_0_r8, qs);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *A = ra + (size_t)i * rec, *B = rb ? rb + (size_t)i * rec : NULL;
        const __m512 d = f16_rows(A, B);
        __m512 m = _mm512_setzero_ps();
        if (q41)
            m = _mm512_sub_ps(m, f16_rows(((const vx_block_q4_1_r8 *)(const void *)A)->m,
                                          B ? ((const vx_block_q4_1_r8 *)(const void *)B)->m : NULL));
        else if (!q8)
            m = _mm512_mul_ps(d, _mm512_set1_ps(8.0f));
        __m512 sv[4], mv[4];
        #pragma GCC unroll 4
        for (int u = 0; u < 4; u++) sv[u] = spread4(d, u), mv[u] = spread4(m, u);
        const uint8_t *qa = A + qo, *qb = B ? B + qo : zeros;
        const size_t bstep = B ? 32 : 0;
        if (q8) {
            /* qs[q][r][b]: 32 bytes per quad, rows 0-7 */
            for (int q = 0; q < 8; q++)
                quad32(half, 8 * i + q, qa + 32 * q, qb + bstep * (size_t)q, CODES_S8, sv, mv, 0);
        } else {
            /* quad q: nibble q / 4 of byte piece q % 4 */
            for (int q = 0; q < 4; q++)
                quad32(half, 8 * i + q, qa + 32 * q, qb + bstep * (size_t)q, CODES_LO, sv, mv, 1);
            for (int q = 4; q < 8; q++)
                quad32(half, 8 * i + q, qa + 32 * (q % 4), qb + bstep * (size_t)(q % 4), CODES_HI, sv, mv, 1);
        }
    }
}

/* Column j of two [8 rows][2] byte arrays (rows 0-7 at a, 8-15 at b;
 * NULL: zeros), signed or not, as 16 floats. */
static inline __m512 byte_rows(const void *a, const void *b, int j, int sgn) {
    __m256i w = join16(a, b);
    if (sgn) w = j ? _mm256_srai_epi16(w, 8) : _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8);
    else w = j ? _mm256_srli_epi16(w, 8) : _mm256_and_si256(w, _mm256_set1_epi16(0xff));
    return _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(w));
}

/* 16 rows (8 if rb is NULL) of one packed type into a half: ra, rb the two
 * 8-row groups' records, nb blocks. The rows' factors as the reference
 * dequantization has them (fp16 scale times the integer sub-block scale,
 * one rounding), 16 rows to a vector. */
static void half_from_r8(int type, const uint8_t *ra, const uint8_t *rb, size_t rec, int64_t nb, uint16_t *half) {
    if (type == VX_TYPE_Q8_0_R8 || type == VX_TYPE_Q4_0_R8 || type == VX_TYPE_Q4_1_R8) {
        half_from_r8_32(type, ra, rb, rec, nb, half);
        return;
    }
    quad_scales qs;
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) qs.s[u] = qs.m[u] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(15), one = _mm512_set1_epi8(1);
    const __m512i book = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)vx_iq4nl_values));
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *A = ra + (size_t)i * rec, *B = rb ? rb + (size_t)i * rec : NULL;
        if (type == VX_TYPE_Q4_K_R8 || type == VX_TYPE_Q5_K_R8) {
            /* Q5_K_R8: Q4_K_R8's fields, then the fifth bits (bit s of
             * qh[q][r][b]: element 32s + 4q + b of row r) */
            const vx_block_q4_K_r8 *a = (const void *)A, *b = (const void *)B;
            const vx_block_q5_K_r8 *a5 = type == VX_TYPE_Q5_K_R8 ? (const void *)A : NULL;
            const vx_block_q5_K_r8 *b5 = a5 && B ? (const void *)B : NULL;
            const __m512 d = f16_rows(a->d, b ? b->d : NULL), dm = f16_rows(a->dmin, b ? b->dmin : NULL);
            for (int s = 0; s < 8; s++) {
                const __m512 sc = _mm512_mul_ps(d, byte_rows(a->sc[s / 2], b ? b->sc[s / 2] : NULL, s % 2, 0));
                const __m512 mn = _mm512_mul_ps(dm, byte_rows(a->mn[s / 2], b ? b->mn[s / 2] : NULL, s % 2, 0));
                #pragma GCC unroll 4
                for (int u = 0; u < 4; u++) qs.s[u] = spread4(sc, u), qs.m[u] = spread4(mn, u);
                for (int q = 0; q < 8; q++) {
                    __m512i c = join(a->qs[s / 2][q][0], b ? b->qs[s / 2][q][0] : NULL);
                    if (s % 2) c = _mm512_srli_epi16(c, 4);
                    c = _mm512_and_si512(c, m4);
                    if (a5) {
                        const __m512i hb = join(a5->qh[q][0], b5 ? b5->qh[q][0] : NULL);
                        c = _mm512_or_si512(c, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, s), one), 4));
                    }
                    emit_quad(half, 64 * i + 8 * s + q, c, &qs);
                }
            }
        } else if (type == VX_TYPE_Q6_K_R8) {
            const vx_block_q6_K_r8 *a = (const void *)A, *b = (const void *)B;
            const __m512 d = f16_rows(a->d, b ? b->d : NULL);
            #pragma GCC unroll 4
            for (int u = 0; u < 4; u++) qs.m[u] = _mm512_setzero_ps();
            for (int j = 0; j < 16; j++) { /* 16-element sub-block: quads 4j .. 4j + 3 */
                const __m512 sc = _mm512_mul_ps(d, byte_rows(a->sc[j / 2], b ? b->sc[j / 2] : NULL, j % 2, 1));
                #pragma GCC unroll 4
                for (int u = 0; u < 4; u++) qs.s[u] = spread4(sc, u);
                const int h = j / 8, k = (j % 8) / 2;
                for (int q = 4 * (j % 2); q < 4 * (j % 2) + 4; q++) {
                    __m512i lo = join(a->q[h][q][k % 2][0], b ? b->q[h][q][k % 2][0] : NULL);
                    __m512i hb = join(a->q[h][q][2][0], b ? b->q[h][q][2][0] : NULL);
                    lo = _mm512_and_si512(_mm512_srlv_epi16(lo, _mm512_set1_epi16((short)(4 * (k / 2)))), m4);
                    hb = _mm512_and_si512(_mm512_srlv_epi16(hb, _mm512_set1_epi16((short)(2 * k))), _mm512_set1_epi8(3));
                    const __m512i c = _mm512_sub_epi8(_mm512_or_si512(lo, _mm512_slli_epi16(hb, 4)),
                                                      _mm512_set1_epi8(32));
                    emit_quad(half, 64 * i + 32 * h + 8 * k + q, c, &qs);
                }
            }
        } else if (type == VX_TYPE_Q3_K_R8 || type == VX_TYPE_Q2_K_R8 || type == VX_TYPE_TQ2_0_R8) {
            /* 2-bit codes: element 128h + 32j + 4q + b at bits 2j of
             * qs[h][q][r][b]; Q3_K's high bit g = 4h + j of hm[q][r][b]
             * (value: code + 4 high - 4, times d sc with the scale
             * decoded to int8), Q2_K's scales byte (scale | min << 4):
             * code d scale - dmin min; TQ2_0: code d - d */
            const int q3 = type == VX_TYPE_Q3_K_R8, tern = type == VX_TYPE_TQ2_0_R8;
            const vx_block_q3_K_r8 *a3 = (const void *)A, *b3 = (const void *)B;
            const vx_block_q2_K_r8 *a2 = (const void *)A, *b2 = (const void *)B;
            const vx_block_tq2_0_r8 *at = (const void *)A, *bt = (const void *)B;
            const __m512 d = f16_rows(A, B); /* d[8] first in all three */
            const __m512 dm = q3 ? _mm512_setzero_ps() : tern ? d : f16_rows(a2->dmin, b2 ? b2->dmin : NULL);
            if (q3)
                #pragma GCC unroll 4
                for (int u = 0; u < 4; u++) qs.m[u] = _mm512_setzero_ps();
            for (int j16 = 0; j16 < 16; j16++) { /* 16-element sub-block: quads 4 j16 .. 4 j16 + 3 */
                if (q3) {
                    const __m512 sc = _mm512_mul_ps(d, byte_rows(a3->sc[j16 / 2], b3 ? b3->sc[j16 / 2] : NULL, j16 % 2, 1));
                    #pragma GCC unroll 4
                    for (int u = 0; u < 4; u++) qs.s[u] = spread4(sc, u);
                } else if (tern) {
                    #pragma GCC unroll 4
                    for (int u = 0; u < 4; u++) qs.s[u] = spread4(d, u), qs.m[u] = spread4(dm, u);
                } else {
                    const __m512 sm = byte_rows(a2->sc[j16 / 2], b2 ? b2->sc[j16 / 2] : NULL, j16 % 2, 0);
                    const __m512 mn = _mm512_floor_ps(_mm512_mul_ps(sm, _mm512_set1_ps(1.0f / 16)));
                    const __m512 sc = _mm512_mul_ps(d, _mm512_fnmadd_ps(mn, _mm512_set1_ps(16.0f), sm));
                    const __m512 m = _mm512_mul_ps(dm, mn);
                    #pragma GCC unroll 4
                    for (int u = 0; u < 4; u++) qs.s[u] = spread4(sc, u), qs.m[u] = spread4(m, u);
                }
                const int h = j16 / 8, j = (j16 % 8) / 2;
                for (int q = 4 * (j16 % 2); q < 4 * (j16 % 2) + 4; q++) {
                    const uint8_t *pa = q3 ? a3->qs[h][q][0] : tern ? at->qs[h][q][0] : a2->qs[h][q][0];
                    const uint8_t *pb = !B ? NULL : q3 ? b3->qs[h][q][0] : tern ? bt->qs[h][q][0] : b2->qs[h][q][0];
                    __m512i c = _mm512_and_si512(_mm512_srli_epi16(join(pa, pb), 2 * j), _mm512_set1_epi8(3));
                    if (q3) {
                        const __m512i hb = join(a3->hm[q][0], b3 ? b3->hm[q][0] : NULL);
                        c = _mm512_or_si512(c, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 4 * h + j), one), 2));
                        c = _mm512_sub_epi8(c, _mm512_set1_epi8(4));
                    }
                    emit_quad(half, 64 * i + 32 * h + 8 * j + q, c, &qs);
                }
            }
        } else {
            /* Q5_0, Q5_1, IQ4_NL (Q8_0, Q4_0, Q4_1: half_from_r8_32):
             * d[8] first; Q5_1: value code d + m */
            const __m512 d = f16_rows(A, B);
            const __m512 m = type == VX_TYPE_Q5_1_R8 ? _mm512_sub_ps(_mm512_setzero_ps(),
                                                                    f16_rows(((const vx_block_q5_1_r8 *)(const void *)A)->m,
                                                                             B ? ((const vx_block_q5_1_r8 *)(const void *)B)->m : NULL))
                                                     : _mm512_setzero_ps();
            #pragma GCC unroll 4
            for (int u = 0; u < 4; u++) qs.s[u] = spread4(d, u), qs.m[u] = spread4(m, u);
            {
                /* nibbles (qs[c][r][b]: byte 4c + b of row r, low nibble
                 * element 4c + b, high 16 + 4c + b), Q5_0 / Q5_1's fifth
                 * bits (qh[r][b] bit q: element 4q + b), then Q5_0's
                 * offset 16 or IQ4_NL's book */
                const uint8_t *qa, *qb, *ha = NULL, *hb = NULL;
                if (type == VX_TYPE_Q5_0_R8) {
                    const vx_block_q5_0_r8 *a = (const void *)A, *b = (const void *)B;
                    qa = a->qs[0][0], qb = b ? b->qs[0][0] : NULL, ha = a->qh[0], hb = b ? b->qh[0] : NULL;
                } else if (type == VX_TYPE_Q5_1_R8) {
                    const vx_block_q5_1_r8 *a = (const void *)A, *b = (const void *)B;
                    qa = a->qs[0][0], qb = b ? b->qs[0][0] : NULL, ha = a->qh[0], hb = b ? b->qh[0] : NULL;
                } else { /* IQ4_NL (Q4_0's record) */
                    const vx_block_iq4_nl_r8 *a = (const void *)A, *b = (const void *)B;
                    qa = a->qs[0][0], qb = b ? b->qs[0][0] : NULL;
                }
                const __m512i hbits = ha ? join(ha, hb) : _mm512_setzero_si512();
                const int off = type == VX_TYPE_Q5_0_R8 ? 16 : 0;
                for (int q = 0; q < 8; q++) { /* quad q: nibble q / 4 of byte piece q % 4 */
                    __m512i c = join(qa + 32 * (q % 4), qb ? qb + 32 * (q % 4) : NULL);
                    c = _mm512_and_si512(q < 4 ? c : _mm512_srli_epi16(c, 4), m4);
                    if (ha) {
                        const __m512i h5 = _mm512_and_si512(_mm512_srlv_epi16(hbits, _mm512_set1_epi16((short)q)), one);
                        c = _mm512_or_si512(c, _mm512_slli_epi16(h5, 4));
                    }
                    if (type == VX_TYPE_IQ4_NL_R8) c = _mm512_shuffle_epi8(book, c);
                    else if (off) c = _mm512_sub_epi8(c, _mm512_set1_epi8((char)off));
                    emit_quad(half, 8 * i + q, c, &qs);
                }
            }
        }
    }
}

static int r8_block(int type) {
    switch (type) {
    case VX_TYPE_Q2_K_R8: case VX_TYPE_Q3_K_R8: case VX_TYPE_Q4_K_R8: case VX_TYPE_Q5_K_R8: case VX_TYPE_Q6_K_R8:
    case VX_TYPE_TQ2_0_R8:
        return 256;
    case VX_TYPE_Q4_0_R8: case VX_TYPE_Q4_1_R8: case VX_TYPE_Q5_0_R8: case VX_TYPE_Q5_1_R8: case VX_TYPE_Q8_0_R8:
    case VX_TYPE_IQ4_NL_R8:
        return 32;
    default: return 0;
    }
}

/* Rows [r, r + nr) of the weight (nr <= 32), elements [k0, k0 + kc), into
 * the panel: two halves of kc * 16 values (rows 0-15, 16-31), and with lo
 * two more of the remainders w - bf16(w) (F16 / F32 / dequantized weights;
 * BF16 weights and the packed types' values times a scale have none worth
 * keeping). f32: K * 16 floats of scratch for the dequantized types; k0
 * and kc are multiples of the type's block. The dequantizing path converts
 * whole rows for every K chunk: the forward pass never takes it (amx_for
 * sends only F16, BF16 and the packed types read above), test_amx does. */
static void build_panel(int type, const void *w, size_t rs, int r, int nr, int64_t K, int64_t k0, int64_t kc,
                        uint16_t *panel, uint16_t *lo, float *f32) {
    for (int h = 0; h < 2; h++) {
        uint16_t *half = panel + (size_t)h * (size_t)kc * 16, *lhalf = lo ? lo + (size_t)h * (size_t)kc * 16 : NULL;
        const int n = VX_MIN(16, nr - 16 * h), r0 = r + 16 * h;
        if (lhalf && (n <= 0 || type == VX_TYPE_BF16)) memset(lhalf, 0, (size_t)kc * 16 * sizeof(uint16_t));
        if (n <= 0) {
            memset(half, 0, (size_t)kc * 16 * sizeof(uint16_t));
            continue;
        }
        const uint8_t *row0 = (const uint8_t *)w + (size_t)r0 * rs;
        if (type == VX_TYPE_BF16) {
            half_from_bf16((const uint16_t *)(const void *)row0 + k0, rs / 2, n, kc, half);
        } else if (type == VX_TYPE_F16) {
            half_from_float((const uint16_t *)(const void *)row0 + k0, rs / 2, 1, n, kc, half, lhalf);
        } else if (type == VX_TYPE_F32) {
            half_from_float((const float *)(const void *)row0 + k0, rs / 4, 0, n, kc, half, lhalf);
        } else if (r8_block(type) && !lo) {
            /* packed rows: r0 starts a group of 8 (r is a multiple of 32) */
            const int64_t blk = r8_block(type);
            const size_t rec = 8 * rs / (size_t)(K / blk), skip = (size_t)(k0 / blk) * rec;
            half_from_r8(type, row0 + skip, n > 8 ? row0 + 8 * rs + skip : NULL, rec, kc / blk, half);
        } else {
            for (int i = 0; i < n; i++) vx_dequant_row(type, w, rs, r0 + i, K, f32 + (size_t)i * K);
            half_from_float(f32 + k0, (size_t)K, 0, n, kc, half, lhalf);
        }
    }
}

/* C tile (16 tokens x 16 rows) from / to out, or through tmp when the tile
 * sticks out of the nt x nr block. */
#define C_LOAD(c, i, j)                                                                             \
    do {                                                                                            \
        float *o_ = out + (int64_t)(t + 16 * (i)) * ldo + r + 16 * (j);                              \
        const int mt_ = VX_MIN(16, ntok - t - 16 * (i)), mr_ = VX_MIN(16, nrows - r - 16 * (j));     \
        if (!cacc || mt_ <= 0 || mr_ <= 0) {                                                          \
            _tile_zero(c);                                                                          \
        } else if (mt_ == 16 && mr_ == 16) {                                                        \
            _tile_loadd(c, o_, ldo * 4);                                                            \
        } else {                                                                                    \
            memset(tmp, 0, sizeof tmp);                                                             \
            for (int a_ = 0; a_ < mt_; a_++) memcpy(tmp[a_], o_ + a_ * ldo, (size_t)mr_ * 4);        \
            _tile_loadd(c, tmp, 64);                                                                \
        }                                                                                           \
    } while (0)
#define C_STORE(c, i, j)                                                                            \
    do {                                                                                            \
        float *o_ = out + (int64_t)(t + 16 * (i)) * ldo + r + 16 * (j);                              \
        const int mt_ = VX_MIN(16, ntok - t - 16 * (i)), mr_ = VX_MIN(16, nrows - r - 16 * (j));     \
        if (mt_ == 16 && mr_ == 16) {                                                               \
            _tile_stored(c, o_, ldo * 4);                                                           \
        } else if (mt_ > 0 && mr_ > 0) {                                                            \
            _tile_stored(c, tmp, 64);                                                               \
            for (int a_ = 0; a_ < mt_; a_++) memcpy(o_ + a_ * ldo, tmp[a_], (size_t)mr_ * 4);        \
        }                                                                                           \
    } while (0)

/* C tile 2i + j += A tile 4 + i (tokens) x B tile 6 + j (rows) */
#define DP2X2()                                                                                     \
    do {                                                                                            \
        _tile_dpbf16ps(0, 4, 6);                                                                    \
        _tile_dpbf16ps(1, 4, 7);                                                                    \
        _tile_dpbf16ps(2, 5, 6);                                                                    \
        _tile_dpbf16ps(3, 5, 7);                                                                    \
    } while (0)

/* The A rows of token tile t (tokens t..t+15, t+16..t+31) from element
 * k0 on, and with xl the remainders' (else NULL). */
static inline void a_rows(const uint16_t *xa, const uint16_t *xl, int64_t k0, int t, size_t xstride,
                          const uint8_t *a[4]) {
    a[0] = (const uint8_t *)(xa + k0) + (size_t)t * xstride;
    a[1] = a[0] + 16 * xstride;
    a[2] = xl ? (const uint8_t *)(xl + k0) + (size_t)t * xstride : NULL;
    a[3] = xl ? a[2] + 16 * xstride : NULL;
}

/* C tiles 0-3 += the tile products of a K chunk (kc elements) of a token
 * tile (A rows a[0], a[1]; with the activations' remainders a[2], a[3])
 * and a panel (halves b0, b1; the weights' remainders l0, l1). */
static inline __attribute__((always_inline)) void tile_steps(const uint8_t *const a[4], size_t xstride,
                                                             const uint16_t *b0, const uint16_t *b1,
                                                             const uint16_t *l0, const uint16_t *l1, int64_t kc) {
    const uint8_t *a0 = a[0], *a1 = a[1], *e0 = a[2], *e1 = a[3];
#define LOAD_A(p0, p1)                                   \
    do {                                                 \
        _tile_loadd(4, (p0) + 64 * s, (int64_t)xstride); \
        _tile_loadd(5, (p1) + 64 * s, (int64_t)xstride); \
    } while (0)
#define LOAD_B(p0, p1)                       \
    do {                                     \
        _tile_loadd(6, (p0) + 512 * s, 64);  \
        _tile_loadd(7, (p1) + 512 * s, 64);  \
    } while (0)
    for (int64_t s = 0; s < kc / 32; s++) {
        if (l0) {
            /* three of the four products of (x_hi + x_lo)(w_hi + w_lo), in
             * an order that changes one operand between products: x_lo
             * w_hi, x_hi w_hi, x_hi w_lo, 8 tile loads a step (x_hi w_hi
             * first took 10: w_hi loaded twice) */
            LOAD_A(e0, e1);
            LOAD_B(b0, b1);
            DP2X2();
            LOAD_A(a0, a1);
            DP2X2();
            LOAD_B(l0, l1);
            DP2X2();
            continue;
        }
        LOAD_A(a0, a1);
        LOAD_B(b0, b1);
        DP2X2();
        if (e0) { /* x_lo w_hi */
            LOAD_A(e0, e1);
            DP2X2();
        }
    }
#undef LOAD_A
#undef LOAD_B
}

/* Weight panels are built for a block of up to PANEL_BYTES of bf16 rows
 * (at least 32 rows) over at most KC elements of K at a time; every 32-token
 * tile then runs over all the block's panels before the next token tile,
 * the partial sums going through out between K chunks (fp32 both ways: the
 * same bits as one pass). The block stays in L2 while a token tile's
 * activations (32 x KC bf16, 128 KiB) are reused for every panel. With the
 * panel outermost (one 128 KiB panel against all the tokens) the
 * activations streamed from L3, and without the K chunks the down
 * projection's blocks (K = 8192) held only 64 rows: the tile loop ran at a
 * third of the speed (1-thread BF16 GEMM, K 2048, 256 rows, 512 tokens:
 * 360 -> 1000 GFLOP/s). */
#define PANEL_BYTES ((size_t)1 << 20)
#define KC 2048

static size_t block_bytes(int64_t K) { return VX_MAX(PANEL_BYTES, (size_t)VX_MIN(K, KC) * NR * sizeof(uint16_t)); }

size_t VXAMX(vx_gemm_amx_scratch)(int64_t K) {
    return 2 * block_bytes(K) + (size_t)K * 16 * sizeof(float) + 64;
}

void VXAMX(vx_gemm_amx)(int type, int64_t K, const void *w, size_t rs, int nrows, const uint16_t *xa,
                        const uint16_t *xl, size_t xstride, int ntok, float *out, int64_t ldo, int acc,
                        void *scratch) {
    uint16_t *panels = (uint16_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint16_t *los = xl && type != VX_TYPE_BF16 ? panels + block_bytes(K) / sizeof(uint16_t) : NULL;
    float *f32 = (float *)(void *)(panels + 2 * block_bytes(K) / sizeof(uint16_t));
    float tmp[16][16];
    const int64_t kcmax = VX_MIN(K, KC);
    /* with the remainders' panels too, half the rows: both sets together
     * then fit the budget, and L2 */
    const size_t budget = los ? PANEL_BYTES / 2 : PANEL_BYTES;
    const int rb_max = (int)VX_MAX(NR, budget / ((size_t)kcmax * NR * sizeof(uint16_t)) * NR);
    tiles_config();
    for (int rb = 0; rb < nrows; rb += rb_max) {
        const int nb = VX_MIN(rb_max, nrows - rb);
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            const int64_t kc = VX_MIN(KC, K - k0);
            const size_t pstride = (size_t)kc * NR; /* one panel: 32 rows x kc values */
            const int cacc = acc || k0 > 0;
            for (int p = 0; p < nb; p += NR)
                build_panel(type, w, rs, rb + p, VX_MIN(NR, nb - p), K, k0, kc, panels + (size_t)p / NR * pstride,
                            los ? los + (size_t)p / NR * pstride : NULL, f32);
            for (int t = 0; t < ntok; t += MT) {
                const uint8_t *a[4];
                a_rows(xa, xl, k0, t, xstride, a);
                for (int p = 0; p < nb; p += NR) {
                    const int r = rb + p;
                    const uint16_t *b0 = panels + (size_t)p / NR * pstride, *b1 = b0 + (size_t)kc * 16;
                    const uint16_t *l0 = los ? los + (size_t)p / NR * pstride : NULL;
                    const uint16_t *l1 = l0 ? l0 + (size_t)kc * 16 : NULL;
                    C_LOAD(0, 0, 0);
                    C_LOAD(1, 0, 1);
                    C_LOAD(2, 1, 0);
                    C_LOAD(3, 1, 1);
                    tile_steps(a, xstride, b0, b1, l0, l1, kc);
                    C_STORE(0, 0, 0);
                    C_STORE(1, 0, 1);
                    C_STORE(2, 1, 0);
                    C_STORE(3, 1, 1);
                }
            }
        }
    }
    _tile_release();
}

/* The SwiGLU of a 32 x 32 block (gate values g, up values u, row i of
 * each at [i][0..31]): glu(g, u) over all of it, then the first mt rows'
 * first mr values to bf16 (with dlo the remainders too) at dst, rows ldd
 * apart: the conversion of vx_f32_to_bf16, lane for lane. */
static void glu_block(float (*g)[32], float (*u)[32], vx_glu_fn glu, int mt, int mr, uint16_t *dst, uint16_t *dlo,
                      size_t ldd) {
    glu(&g[0][0], &u[0][0], 32 * 32);
    uint16_t part[2][32] __attribute__((aligned(64)));
    for (int i = 0; i < mt; i++) {
        const __m512 a = _mm512_loadu_ps(g[i]), b = _mm512_loadu_ps(g[i] + 16);
        __m512i h, l = _mm512_setzero_si512();
        if (dlo) bf16x32_split(a, b, &h, &l);
        else h = bf16x32(a, b);
        uint16_t *d = dst + (size_t)i * ldd, *dl = dlo ? dlo + (size_t)i * ldd : NULL;
        if (mr == 32) {
            _mm512_storeu_si512((void *)d, h);
            if (dl) _mm512_storeu_si512((void *)dl, l);
        } else { /* the block's last rows: mr of them */
            _mm512_store_si512((void *)part[0], h);
            _mm512_store_si512((void *)part[1], l);
            memcpy(d, part[0], (size_t)mr * sizeof(uint16_t));
            if (dl) memcpy(dl, part[1], (size_t)mr * sizeof(uint16_t));
        }
    }
}

/* C tiles 0-3 (32 tokens x 32 rows) into a 32 x 32 block. */
#define C_BLOCK(blk)                                                                                \
    do {                                                                                            \
        _tile_stored(0, &(blk)[0][0], 128);                                                         \
        _tile_stored(1, &(blk)[0][16], 128);                                                        \
        _tile_stored(2, &(blk)[16][0], 128);                                                        \
        _tile_stored(3, &(blk)[16][16], 128);                                                       \
    } while (0)

void VXAMX(vx_gemm_amx_glu)(int type, int64_t K, const void *wg, const void *wu, size_t rs, int nrows,
                            const uint16_t *xa, const uint16_t *xl, size_t xstride, int ntok, float *pg, float *pu,
                            int64_t ldp, vx_glu_fn glu, uint16_t *dst, uint16_t *dlo, size_t ldd, void *scratch) {
    uint16_t *panels = (uint16_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint16_t *los = xl && type != VX_TYPE_BF16 ? panels + block_bytes(K) / sizeof(uint16_t) : NULL;
    float *f32 = (float *)(void *)(panels + 2 * block_bytes(K) / sizeof(uint16_t));
    float tmp[16][16];
    float gb[32][32] __attribute__((aligned(64))), ub[32][32] __attribute__((aligned(64)));
    const int64_t kcmax = VX_MIN(K, KC);
    /* half of the panel budget each for the gate's and the up's rows; the
     * up panels (and their remainders) start uoff values in */
    const size_t budget = los ? PANEL_BYTES / 4 : PANEL_BYTES / 2;
    const int rb_max = (int)VX_MAX(NR, budget / ((size_t)kcmax * NR * sizeof(uint16_t)) * NR);
    const size_t uoff = (size_t)rb_max * (size_t)kcmax;
    const void *const wsel[2] = {wg, wu};
    float *const psel[2] = {pg, pu};
    tiles_config();
    for (int rb = 0; rb < nrows; rb += rb_max) {
        const int nb = VX_MIN(rb_max, nrows - rb);
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            const int64_t kc = VX_MIN(KC, K - k0);
            const size_t pstride = (size_t)kc * NR;
            const int cacc = k0 > 0, last = k0 + kc >= K;
            for (int m = 0; m < 2; m++)
                for (int p = 0; p < nb; p += NR)
                    build_panel(type, wsel[m], rs, rb + p, VX_MIN(NR, nb - p), K, k0, kc,
                                panels + m * uoff + (size_t)p / NR * pstride,
                                los ? los + m * uoff + (size_t)p / NR * pstride : NULL, f32);
            for (int t = 0; t < ntok; t += MT) {
                const uint8_t *a[4];
                a_rows(xa, xl, k0, t, xstride, a);
                for (int p = 0; p < nb; p += NR) {
                    const int r = rb + p;
                    for (int m = 0; m < 2; m++) { /* the gate's rows, then the up's */
                        const uint16_t *b0 = panels + m * uoff + (size_t)p / NR * pstride, *b1 = b0 + (size_t)kc * 16;
                        const uint16_t *l0 = los ? los + m * uoff + (size_t)p / NR * pstride : NULL;
                        const uint16_t *l1 = l0 ? l0 + (size_t)kc * 16 : NULL;
                        float *out = psel[m]; /* partial sums between K chunks */
                        const int64_t ldo = ldp;
                        C_LOAD(0, 0, 0);
                        C_LOAD(1, 0, 1);
                        C_LOAD(2, 1, 0);
                        C_LOAD(3, 1, 1);
                        tile_steps(a, xstride, b0, b1, l0, l1, kc);
                        if (!last) {
                            C_STORE(0, 0, 0);
                            C_STORE(1, 0, 1);
                            C_STORE(2, 1, 0);
                            C_STORE(3, 1, 1);
                        } else {
                            C_BLOCK(m ? ub : gb);
                        }
                    }
                    if (last)
                        glu_block(gb, ub, glu, VX_MIN(MT, ntok - t), VX_MIN(NR, nrows - r), dst + (size_t)t * ldd + r,
                                  dlo ? dlo + (size_t)t * ldd + r : NULL, ldd);
                }
            }
        }
    }
    _tile_release();
}

void VXAMX(vx_f32_to_bf16)(const float *src, uint16_t *dst, uint16_t *lo, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = _mm512_loadu_ps(src + i), b = _mm512_loadu_ps(src + i + 16);
        if (lo) {
            __m512i h, l;
            bf16x32_split(a, b, &h, &l);
            _mm512_storeu_si512((void *)(dst + i), h);
            _mm512_storeu_si512((void *)(lo + i), l);
        } else {
            _mm512_storeu_si512((void *)(dst + i), bf16x32(a, b));
        }
    }
    for (; i < n; i++) {
        dst[i] = vx_fp32_to_bf16(src[i]);
        if (lo) lo[i] = vx_fp32_to_bf16(src[i] - vx_bf16_to_fp32(dst[i]));
    }
}

/* Peak-throughput loop for `vx bench --limits`: iters x 4 tdpbf16ps of
 * 16 x 16 x 32 multiply-adds (65536 flops), four independent
 * accumulators; returns a value so the work is kept. The operands are
 * pseudo-random bf16 values in (-1, 1), not zeros: the tiles' throughput
 * depends on the data here (zero tiles ran up to 2x faster than real
 * operands in the same minute, which made the GEMM's share of "peak" look
 * worse than it is). */
double VXAMX(vx_peak_amx_bf16)(int64_t iters) {
    uint16_t ab[4][16][32] __attribute__((aligned(64)));
    uint32_t r = 0x2545f491u;
    for (int i = 0; i < 4 * 16 * 32; i++) {
        r = r * 1664525u + 1013904223u;
        /* sign, exponent 118..126 (2^-9 .. 2^-1), random mantissa */
        (&ab[0][0][0])[i] = (uint16_t)((r >> 31) << 15 | (118u + (r >> 8) % 9u) << 7 | (r & 0x7fu));
    }
    float c[16][16];
    tiles_config();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ab[0], 64);
    _tile_loadd(5, ab[1], 64);
    _tile_loadd(6, ab[2], 64);
    _tile_loadd(7, ab[3], 64);
    for (int64_t i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, 64);
    _tile_release();
    return c[0][0];
}
