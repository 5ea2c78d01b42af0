/*
 * avx2_gemm_k.c - prefill GEMM kernels for Q2_K..Q6_K weights x Q8_K
 * activations, and the GEMV and GEMM on their packed 8-row forms *_R8
 * (compiled with -mavx2 -mfma -mf16c -mbmi2).
 *
 * Eight weight rows at a time are unpacked, one or two super-blocks per
 * chunk, into a row-lane panel: code vector (g, q) holds in its 32-bit
 * lane r the four codes 32g + 4q .. 32g + 4q + 3 of row r (an 8x8 dword
 * transpose of the rows' code vectors), so one _mm256_maddubs_epi16 of a
 * code vector against four activation bytes of one token, broadcast,
 * gives pair sums for 8 rows at once. Four tokens share every code vector
 * loaded (a 4-token register tile); Q4_K sums 8 such products in int16
 * before one _mm256_madd_epi16 applies the sub-block scale (the scale in
 * both 16-bit halves of a row's lane), where a row-major kernel needs a
 * madd per maddubs - maddubs is the bottleneck instruction on AVX2. Each
 * (row, token) ends a super-block with an exact int32 sum, then the
 * canonical float step of avx2_quant_util.h: every result is bit-identical
 * to the gemv's (avx2_quant_k.c), so batching never changes an output.
 *
 * Bounds: Q4_K codes 0..15: 8 pair sums (<= 2*15*127 each) fit int16
 * (<= 30480), times a scale <= 63 in madd; Q6_K codes 0..63: two pair sums
 * (<= 2*63*127) fit int16, then madd with the signed scale.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "kernels_x86.h"
#include "quant.h"
#include "quant_ref.h"

#define QK VX_QK_K
/* Tokens per tile: the accumulators of 8 rows x TT tokens (8 KiB) stay in
 * L1, the tile's activations (TT x 292 bytes per super-block) in L2. */
#ifndef TT
#define TT 256
#endif
/* Super-blocks per unpacked chunk (2 x 2.9 KiB, L1). */
#define CBK 2

/* The plain layouts and their 8-row packed forms (quant.h). Two tiles:
 * per-32 scales with int16 sums of 8 code vectors (Q4_K; Q5_K, codes to
 * 31, of 4: 4 x 2 x 31 x 128 < 2^15), and per-16 scales (Q6_K: sums of 2
 * code vectors; Q3_K and Q2_K, codes to 7, of 4, each half of a 32-element
 * step under its own scale). The mins term pairs the panel's mp with the
 * per-32 activation sums (KSC16 0) or the per-16 bsums (KSC16 1); it is
 * subtracted times dmin (KDMIN) or, for the signed codes u - 2^KOFF, as
 * an integer. A packed kind runs its base kind's tile with a cheaper
 * panel load. */
enum { GK_Q4_K, GK_Q6_K, GK_Q5_K, GK_Q3_K, GK_Q2_K, GK_Q4_K_R8, GK_Q6_K_R8, GK_Q3_K_R8, GK_Q2_K_R8, GK_Q5_K_R8,
       GK_TQ2_R8 };
#define KPACKED(k) ((k) >= GK_Q4_K_R8)
#define KBASE(k)                                                                                          \
    ((k) == GK_Q4_K_R8 ? GK_Q4_K : (k) == GK_Q6_K_R8 ? GK_Q6_K : (k) == GK_Q3_K_R8 ? GK_Q3_K              \
                                  : (k) == GK_Q2_K_R8 || (k) == GK_TQ2_R8 ? GK_Q2_K                     \
                                  : (k) == GK_Q5_K_R8                     ? GK_Q5_K                     \
                                                                          : (k))
#define KQ6(k) (KBASE(k) == GK_Q6_K)
#define KSC16(k) (KQ6(k) || KBASE(k) == GK_Q3_K || KBASE(k) == GK_Q2_K)
#define KSPLIT(k) (KBASE(k) == GK_Q5_K || KBASE(k) == GK_Q3_K || KBASE(k) == GK_Q2_K)
#define KDMIN(k) (!KQ6(k) && KBASE(k) != GK_Q3_K)
#define KOFF(k) (KQ6(k) ? 5 : KBASE(k) == GK_Q3_K ? 2 : 0)

/* Bytes per super-block of one row (plain) or per record of 8 rows (packed). */
AINLINE size_t ksize(int k) {
    switch (k) {
    case GK_Q4_K: return sizeof(vx_block_q4_K);
    case GK_Q5_K: return sizeof(vx_block_q5_K);
    case GK_Q6_K: return sizeof(vx_block_q6_K);
    case GK_Q3_K: return sizeof(vx_block_q3_K);
    case GK_Q2_K: return sizeof(vx_block_q2_K);
    case GK_Q4_K_R8: return sizeof(vx_block_q4_K_r8);
    case GK_Q5_K_R8: return sizeof(vx_block_q5_K_r8);
    case GK_Q3_K_R8: return sizeof(vx_block_q3_K_r8);
    case GK_Q2_K_R8: return sizeof(vx_block_q2_K_r8);
    case GK_TQ2_R8: return sizeof(vx_block_tq2_0_r8);
    default: return sizeof(vx_block_q6_K_r8);
    }
}

/* One super-block of 8 rows. Q4_K: q[g] is sub-block g; sc[g] its scale
 * per row (in both int16 halves of the lane); mp[p] (p < 4) the mins of
 * sub-blocks 2p and 2p + 1 as an int16 pair. Q6_K, Q3_K, Q2_K: q[g]
 * covers sub-blocks 2g (codes 0..15) and 2g + 1; sc[j] the 16 sub-block
 * scales; mp[p] (p < 8) scales (Q2_K: mins) 2p and 2p + 1 as a pair. */
typedef struct {
    __m256i q[8][8];
    __m256i sc[16];
    __m256i mp[8];
    __m256 d, dmin;
} panelK;

/* 8x8 byte transpose: rows[r] holds 8 bytes; afterwards the low 8 bytes of
 * c[j] are column 2j (byte r from row r), the high 8 bytes column 2j + 1. */
AINLINE void transpose8x8_u8(const uint64_t rows[8], __m128i c[4]) {
    __m128i t[4], u[4];
    for (int i = 0; i < 4; i++)
        t[i] = _mm_unpacklo_epi8(_mm_cvtsi64_si128((long long)rows[2 * i]),
                                 _mm_cvtsi64_si128((long long)rows[2 * i + 1]));
    u[0] = _mm_unpacklo_epi16(t[0], t[1]);
    u[1] = _mm_unpackhi_epi16(t[0], t[1]);
    u[2] = _mm_unpacklo_epi16(t[2], t[3]);
    u[3] = _mm_unpackhi_epi16(t[2], t[3]);
    c[0] = _mm_unpacklo_epi32(u[0], u[2]);
    c[1] = _mm_unpackhi_epi32(u[0], u[2]);
    c[2] = _mm_unpacklo_epi32(u[1], u[3]);
    c[3] = _mm_unpackhi_epi32(u[1], u[3]);
}

/* Column g of a transposed scale matrix as 8 int32 lanes holding the
 * scale in both 16-bit halves (sgn: bytes are int8, else uint8). */
AINLINE __m256i col_dup16(const __m128i c[4], int g, int sgn) {
    const __m128i b = (g & 1) ? _mm_srli_si128(c[g >> 1], 8) : c[g >> 1];
    const __m256i x = sgn ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    return _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(x, 16));
}

/* Columns 2p and 2p + 1 as int16 pairs per row lane. */
AINLINE __m256i col_pair16(const __m128i c[4], int p, int sgn) {
    const __m128i v = _mm_unpacklo_epi8(c[p], _mm_srli_si128(c[p], 8));
    return sgn ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

/* Q4_K, or Q5_K (five): Q4_K's nibbles, with Q5_K's fifth bits of qh
 * (bit 2c of byte l for element 64c + l, bit 2c + 1 for element
 * 64c + 32 + l) merged in as bit 4, row by row before the transposes. */
AINLINE void unpack_q45_K8(int five, const uint8_t *const rows[8], int64_t i, panelK *P) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    uint64_t sc[8], mn[8]; /* byte j: scale / min of sub-block j */
    uint16_t d[8], dm[8];
    const uint8_t *qs[8], *qh[8];
    for (int r = 0; r < 8; r++) {
        const vx_block_q4_K *b4k = (const vx_block_q4_K *)(const void *)rows[r] + i;
        const vx_block_q5_K *b5k = (const vx_block_q5_K *)(const void *)rows[r] + i;
        q4k_scales_mins(five ? b5k->scales : b4k->scales, &sc[r], &mn[r]);
        d[r] = five ? b5k->d : b4k->d;
        dm[r] = five ? b5k->dmin : b4k->dmin;
        qs[r] = five ? b5k->qs : b4k->qs;
        qh[r] = five ? b5k->qh : NULL;
    }
    for (int c = 0; c < 4; c++) {
        __m256i v[8], hi[8];
        for (int r = 0; r < 8; r++) v[r] = load256(qs[r] + 32 * c);
        if (five) {
            for (int r = 0; r < 8; r++) {
                const __m256i h = load256(qh[r]);
                /* bit 2c (2c + 1) of each byte to bit 4 */
                hi[r] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v[r], 4), m4), byte_bit_to(h, 2 * c + 1, 4));
                v[r] = _mm256_or_si256(_mm256_and_si256(v[r], m4), byte_bit_to(h, 2 * c, 4));
            }
            transpose8_epi32(v);
            transpose8_epi32(hi);
            for (int q = 0; q < 8; q++) {
                P->q[2 * c][q] = v[q];
                P->q[2 * c + 1][q] = hi[q];
            }
        } else {
            transpose8_epi32(v); /* low nibbles: sub-block 2c, high: 2c + 1 */
            for (int q = 0; q < 8; q++) {
                P->q[2 * c][q] = _mm256_and_si256(v[q], m4);
                P->q[2 * c + 1][q] = _mm256_and_si256(_mm256_srli_epi16(v[q], 4), m4);
            }
        }
    }
    __m128i c[4];
    transpose8x8_u8(sc, c);
    for (int g = 0; g < 8; g++) P->sc[g] = col_dup16(c, g, 0);
    transpose8x8_u8(mn, c);
    for (int p = 0; p < 4; p++) P->mp[p] = col_pair16(c, p, 0);
    P->d = _mm256_cvtph_ps(load128(d));
    P->dmin = _mm256_cvtph_ps(load128(dm));
}

static void unpack_q4_K8(const uint8_t *const rows[8], int64_t i, panelK *P) { unpack_q45_K8(0, rows, i, P); }
static void unpack_q5_K8(const uint8_t *const rows[8], int64_t i, panelK *P) { unpack_q45_K8(1, rows, i, P); }

/* The four code vectors of Q6_K's quarters k = 0..3 of a half from its
 * ql bytes l0 (quarters 0, 2), l1 (1, 3) and qh bits: bytewise, so it
 * works on row-major bytes and on row-lane (transposed) ones alike. */
#define Q6_CODES(l0, l1, qh, v0, v1, v2, v3)                                                              \
    do {                                                                                                  \
        const __m256i m4_ = _mm256_set1_epi8(0x0F), m2h_ = _mm256_set1_epi8(0x30);                        \
        v0 = _mm256_or_si256(_mm256_and_si256(l0, m4_), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2h_)); \
        v1 = _mm256_or_si256(_mm256_and_si256(l1, m4_), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2h_)); \
        v2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4_), _mm256_and_si256(qh, m2h_)); \
        v3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4_),                              \
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2h_));                            \
    } while (0)

static void unpack_q6_K8(const uint8_t *const rows[8], int64_t i, panelK *P) {
    const vx_block_q6_K *b[8];
    uint16_t d[8];
    for (int r = 0; r < 8; r++) {
        b[r] = (const vx_block_q6_K *)(const void *)rows[r] + i;
        d[r] = b[r]->d;
    }
    for (int h = 0; h < 2; h++) {
        __m256i v[4][8]; /* step s of this half (elements 128h + 32s + l), row r */
        for (int r = 0; r < 8; r++) {
            const __m256i l0 = load256(b[r]->ql + 64 * h), l1 = load256(b[r]->ql + 64 * h + 32);
            const __m256i qh = load256(b[r]->qh + 32 * h);
            Q6_CODES(l0, l1, qh, v[0][r], v[1][r], v[2][r], v[3][r]);
        }
        for (int s = 0; s < 4; s++) {
            transpose8_epi32(v[s]);
            for (int q = 0; q < 8; q++) P->q[4 * h + s][q] = v[s][q];
        }
    }
    for (int half = 0; half < 2; half++) { /* scales 8 half .. 8 half + 7 */
        uint64_t sr[8];
        __m128i c[4];
        for (int r = 0; r < 8; r++) memcpy(&sr[r], b[r]->scales + 8 * half, 8);
        transpose8x8_u8(sr, c);
        for (int g = 0; g < 8; g++) P->sc[8 * half + g] = col_dup16(c, g, 1);
        for (int p = 0; p < 4; p++) P->mp[4 * half + p] = col_pair16(c, p, 1);
    }
    P->d = _mm256_cvtph_ps(load128(d));
    P->dmin = _mm256_setzero_ps();
}

/* Q2_K, or Q3_K (three): 2-bit fields (element 128h + 32j + l: bits 2j
 * of qs[32h + l]); Q3_K's third bit (bit 4h + j of hmask[l]) merged in as
 * bit 2, so that its codes are u = q + 4 hbit in 0..7 with offset 4. */
AINLINE void unpack_q23_K8(int three, const uint8_t *const rows[8], int64_t i, panelK *P) {
    const __m256i m2 = _mm256_set1_epi8(3);
    int8_t sc[8][16]; /* scales (Q3_K signed), then Q2_K's mins */
    uint8_t mn[8][16];
    uint16_t d[8], dm[8];
    const uint8_t *qs[8], *hm[8];
    for (int r = 0; r < 8; r++) {
        if (three) {
            const vx_block_q3_K *b = (const vx_block_q3_K *)(const void *)rows[r] + i;
            vx_q3_K_unpack_scales(b->scales, sc[r]);
            d[r] = b->d;
            dm[r] = 0;
            qs[r] = b->qs;
            hm[r] = b->hmask;
        } else {
            const vx_block_q2_K *b = (const vx_block_q2_K *)(const void *)rows[r] + i;
            for (int j = 0; j < 16; j++) {
                sc[r][j] = (int8_t)(b->scales[j] & 15);
                mn[r][j] = (uint8_t)(b->scales[j] >> 4);
            }
            d[r] = b->d;
            dm[r] = b->dmin;
            qs[r] = b->qs;
            hm[r] = NULL;
        }
    }
    for (int h = 0; h < 2; h++) {
        __m256i v[4][8]; /* step j of this half (elements 128h + 32j + l), row r */
        for (int r = 0; r < 8; r++) {
            const __m256i q = load256(qs[r] + 32 * h);
            const __m256i hb = three ? load256(hm[r]) : _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                v[j][r] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m2);
                if (three) v[j][r] = _mm256_or_si256(v[j][r], byte_bit_to(hb, 4 * h + j, 2)); /* the third bit */
            }
        }
        for (int j = 0; j < 4; j++) {
            transpose8_epi32(v[j]);
            for (int q = 0; q < 8; q++) P->q[4 * h + j][q] = v[j][q];
        }
    }
    for (int half = 0; half < 2; half++) { /* sub-blocks 8 half .. 8 half + 7 */
        uint64_t sr[8], mr[8];
        __m128i c[4];
        for (int r = 0; r < 8; r++) {
            memcpy(&sr[r], sc[r] + 8 * half, 8);
            if (!three) memcpy(&mr[r], mn[r] + 8 * half, 8);
        }
        transpose8x8_u8(sr, c);
        for (int g = 0; g < 8; g++) P->sc[8 * half + g] = col_dup16(c, g, three);
        if (!three) transpose8x8_u8(mr, c);
        for (int p = 0; p < 4; p++) P->mp[4 * half + p] = col_pair16(c, p, three);
    }
    P->d = _mm256_cvtph_ps(load128(d));
    P->dmin = _mm256_cvtph_ps(load128(dm));
}

static void unpack_q2_K8(const uint8_t *const rows[8], int64_t i, panelK *P) { unpack_q23_K8(0, rows, i, P); }
static void unpack_q3_K8(const uint8_t *const rows[8], int64_t i, panelK *P) { unpack_q23_K8(1, rows, i, P); }

/* Lane r of a pair vector (two int16 per row lane) duplicated: the first
 * (dup_lo) or the second (dup_hi) int16 in both halves of the lane. */
AINLINE __m256i dup_lo(__m256i x) {
    return _mm256_shuffle_epi8(x, _mm256_setr_epi32(0x01000100, 0x05040504, 0x09080908, 0x0D0C0D0C, 0x01000100,
                                                    0x05040504, 0x09080908, 0x0D0C0D0C));
}
AINLINE __m256i dup_hi(__m256i x) {
    return _mm256_shuffle_epi8(x, _mm256_setr_epi32(0x03020302, 0x07060706, 0x0B0A0B0A, 0x0F0E0F0E, 0x03020302,
                                                    0x07060706, 0x0B0A0B0A, 0x0F0E0F0E));
}

/* Panels from the packed layouts: the codes are already in row-lane
 * order, so a panel is a nibble split (Q4_K) or the bit merge (Q6_K). */

/* Q4_K_R8, or Q5_K_R8 (qh: its fifth bits, else NULL). */
static void load_q45_K_r8(const vx_block_q4_K_r8 *b, const uint8_t (*qh)[8][4], panelK *P) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; c++)
        for (int q = 0; q < 8; q++) {
            const __m256i v = load256(b->qs[c][q]);
            P->q[2 * c][q] = _mm256_and_si256(v, m4);
            P->q[2 * c + 1][q] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (qh) {
                const __m256i h = load256(qh[q]);
                P->q[2 * c][q] = _mm256_or_si256(P->q[2 * c][q], byte_bit_to(h, 2 * c, 4));
                P->q[2 * c + 1][q] = _mm256_or_si256(P->q[2 * c + 1][q], byte_bit_to(h, 2 * c + 1, 4));
            }
        }
    for (int p = 0; p < 4; p++) {
        const __m256i x = _mm256_cvtepu8_epi16(load128(b->sc[p]));
        P->sc[2 * p] = dup_lo(x);
        P->sc[2 * p + 1] = dup_hi(x);
        P->mp[p] = _mm256_cvtepu8_epi16(load128(b->mn[p]));
    }
    P->d = _mm256_cvtph_ps(load128(b->d));
    P->dmin = _mm256_cvtph_ps(load128(b->dmin));
}

static void load_q6_K_r8(const vx_block_q6_K_r8 *b, panelK *P) {
    for (int h = 0; h < 2; h++)
        for (int q = 0; q < 8; q++) {
            const __m256i l0 = load256(b->q[h][q][0]), l1 = load256(b->q[h][q][1]), qh = load256(b->q[h][q][2]);
            Q6_CODES(l0, l1, qh, P->q[4 * h][q], P->q[4 * h + 1][q], P->q[4 * h + 2][q], P->q[4 * h + 3][q]);
        }
    for (int p = 0; p < 8; p++) {
        const __m256i x = _mm256_cvtepi8_epi16(load128(b->sc[p]));
        P->mp[p] = x;
        P->sc[2 * p] = dup_lo(x);
        P->sc[2 * p + 1] = dup_hi(x);
    }
    P->d = _mm256_cvtph_ps(load128(b->d));
    P->dmin = _mm256_setzero_ps();
}

/* Q2_K_R8 / Q3_K_R8: code vector (4h + j, q) from the record's qs[h][q]
 * (bits 2j) and, for Q3_K, hm[q] (bit 4h + j, moved to bit 2). */
AINLINE __m256i q23_code(int three, const uint8_t *qs, const uint8_t *hm, int h, int j) {
    const __m256i v = _mm256_and_si256(_mm256_srli_epi16(load256(qs), 2 * j), _mm256_set1_epi8(3));
    if (!three) return v;
    return _mm256_or_si256(v, byte_bit_to(load256(hm), 4 * h + j, 2));
}

/* Scale pair p of a Q2_K_R8 / Q3_K_R8 record as int16 pairs per row lane
 * (Q2_K: the scales; *mn its mins). */
AINLINE __m256i q23_pair(int three, const uint8_t *sc, __m256i *mn) {
    if (three) return _mm256_cvtepi8_epi16(load128(sc));
    const __m256i x = _mm256_cvtepu8_epi16(load128(sc));
    *mn = _mm256_srli_epi16(x, 4);
    return _mm256_and_si256(x, _mm256_set1_epi16(15));
}

/* The record's 2-bit code bytes: Q2_K_R8's, Q3_K_R8's or TQ2_0_R8's
 * (tern: Q2_K's with every scale and min 1, dmin = d). */
AINLINE const uint8_t (*q23_qs(int three, int tern, const uint8_t *rec))[8][8][4] {
    return three  ? ((const vx_block_q3_K_r8 *)(const void *)rec)->qs
           : tern ? ((const vx_block_tq2_0_r8 *)(const void *)rec)->qs
                  : ((const vx_block_q2_K_r8 *)(const void *)rec)->qs;
}

static void load_q23_K_r8(int three, int tern, const uint8_t *rec, panelK *P) {
    const vx_block_q2_K_r8 *b2 = (const vx_block_q2_K_r8 *)(const void *)rec;
    const vx_block_q3_K_r8 *b3 = (const vx_block_q3_K_r8 *)(const void *)rec;
    const uint8_t(*qs)[8][8][4] = q23_qs(three, tern, rec);
    for (int h = 0; h < 2; h++)
        for (int q = 0; q < 8; q++)
            for (int j = 0; j < 4; j++)
                P->q[4 * h + j][q] = three ? q23_code(1, qs[h][q][0], b3->hm[q][0], h, j)
                                           : q23_code(0, qs[h][q][0], NULL, h, j);
    for (int p = 0; p < 8; p++) {
        __m256i mn = _mm256_set1_epi16(1);
        const __m256i x = tern ? mn : q23_pair(three, three ? (const uint8_t *)b3->sc[p][0] : b2->sc[p][0], &mn);
        P->sc[2 * p] = dup_lo(x);
        P->sc[2 * p + 1] = dup_hi(x);
        P->mp[p] = three ? x : mn;
    }
    P->d = _mm256_cvtph_ps(load128(rec)); /* every record starts with d[8] */
    P->dmin = three ? _mm256_setzero_ps() : tern ? P->d : _mm256_cvtph_ps(load128(b2->dmin));
}

AINLINE __m256i bq(const vx_block_q8_K *y, int e) {
    uint32_t v;
    memcpy(&v, y->qs + e, 4);
    return _mm256_set1_epi32((int)v);
}

/* Dword p of x in every lane. */
AINLINE __m256i bcast_dw(__m256i x, int p) { return _mm256_permutevar8x32_epi32(x, _mm256_set1_epi32(p)); }

/* Dword p of an int32 array (any alignment), in every lane: a broadcast
 * load, where a vpermd from a register costs an ALU uop. */
AINLINE __m256i bcast_i32(const int32_t *v, int p) {
    int32_t x;
    memcpy(&x, v + p, 4);
    return _mm256_set1_epi32(x);
}

/* A super-block's integer mins term of 8 rows (Q4_K, Q5_K: sum of min x
 * per-32 activation sum; Q2_K: of min x per-16 sum; Q6_K, Q3_K: of scale
 * x per-16 sum, for the code offset): the panel's int16 pairs mp[p]
 * against the activation pairs pr[p]. Exact in int32, so the order is
 * free. */
AINLINE __m256i mins_k(int kind, const panelK *P, const int32_t *pr) {
    const int np = KSC16(kind) ? 8 : 4;
    __m256i M = _mm256_madd_epi16(P->mp[0], bcast_i32(pr, 0));
#pragma GCC unroll 8
    for (int p = 1; p < np; p++) M = _mm256_add_epi32(M, _mm256_madd_epi16(P->mp[p], bcast_i32(pr, p)));
    return M;
}

#define U4(X) X(0) X(1) X(2) X(3)
/* Four tokens (y0..y3: their blocks of this super-block) against the
 * panels of G = 1 or 2 groups of 8 rows (A, and B when G = 2; G is a
 * compile-time constant at each call): accA[u] (accB[u]) takes the
 * super-block's canonical step for 8 rows. With two groups every
 * activation broadcast serves both groups' code vectors: on Zen 3 the
 * broadcasts, not the multiplies, bound one group (two: +30% on Q4_K,
 * +14% on Q6_K). The 4-token loops are written out: with arrays GCC kept
 * the accumulators in memory. */
AINLINE void tile4(int kind, int G, const panelK *A, const panelK *B, const vx_block_q8_K *y0,
                   const vx_block_q8_K *y1, const vx_block_q8_K *y2, const vx_block_q8_K *y3, __m256 accA[4],
                   __m256 accB[4]) {
    if (G == 1) B = A;
    __m256i IA0 = _mm256_setzero_si256(), IA1 = IA0, IA2 = IA0, IA3 = IA0;
    __m256i IB0 = IA0, IB1 = IA0, IB2 = IA0, IB3 = IA0;
    if (!KQ6(kind)) {
        /* int16 sums of 8 code vectors (KSPLIT: of 4, the halves' scales
         * sc[2g], sc[2g + 1] with KSC16, else both sc[g]) */
        for (int g = 0; g < 8; g++) {
            __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            const int s0 = KSC16(kind) ? 2 * g : g, s1 = KSC16(kind) ? 2 * g + 1 : g;
#define MADD(u, s)                                                              \
    IA##u = _mm256_add_epi32(IA##u, _mm256_madd_epi16(a##u, A->sc[s]));        \
    if (G == 2) IB##u = _mm256_add_epi32(IB##u, _mm256_madd_epi16(b##u, B->sc[s]));
#define MADD0(u) MADD(u, s0)
#define MADD1(u) MADD(u, s1)
#define ZERO(u)                           \
    a##u = _mm256_setzero_si256();        \
    if (G == 2) b##u = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int q = 0; q < 8; q++) {
                if (KSPLIT(kind) && q == 4) {
                    U4(MADD0)
                    U4(ZERO)
                }
                const __m256i WA = A->q[g][q], WB = B->q[g][q];
                const int e = 32 * g + 4 * q;
#define STEP(u)                                                           \
    {                                                                     \
        const __m256i yb = bq(y##u, e);                                   \
        a##u = _mm256_add_epi16(a##u, _mm256_maddubs_epi16(WA, yb));      \
        VX_KEEP(a##u);                                                    \
        if (G == 2) {                                                     \
            b##u = _mm256_add_epi16(b##u, _mm256_maddubs_epi16(WB, yb));  \
            VX_KEEP(b##u);                                                \
        }                                                                 \
    }
                U4(STEP)
#undef STEP
            }
            U4(MADD1)
#undef MADD
#undef MADD0
#undef MADD1
#undef ZERO
        }
    } else {
        for (int g = 0; g < 8; g++)
#pragma GCC unroll 4
            for (int q = 0; q < 8; q += 2) {
                const __m256i WA0 = A->q[g][q], WA1 = A->q[g][q + 1], WB0 = B->q[g][q], WB1 = B->q[g][q + 1];
                const __m256i SA = A->sc[2 * g + (q >= 4)], SB = B->sc[2 * g + (q >= 4)];
                const int e = 32 * g + 4 * q;
#define STEP(u)                                                                                               \
    {                                                                                                         \
        const __m256i y0_ = bq(y##u, e), y1_ = bq(y##u, e + 4);                                               \
        const __m256i pa = _mm256_add_epi16(_mm256_maddubs_epi16(WA0, y0_), _mm256_maddubs_epi16(WA1, y1_));  \
        IA##u = _mm256_add_epi32(IA##u, _mm256_madd_epi16(pa, SA));                                           \
        VX_KEEP(IA##u);                                                                                       \
        if (G == 2) {                                                                                         \
            const __m256i pb =                                                                                \
                _mm256_add_epi16(_mm256_maddubs_epi16(WB0, y0_), _mm256_maddubs_epi16(WB1, y1_));             \
            IB##u = _mm256_add_epi32(IB##u, _mm256_madd_epi16(pb, SB));                                       \
            VX_KEEP(IB##u);                                                                                   \
        }                                                                                                     \
    }
                U4(STEP)
#undef STEP
            }
    }
    /* the activation sums in int16 pairs, dword p = sums (2p, 2p + 1):
     * the per-32 sums (once per token for both groups), or the per-16
     * sums as stored; each pair is broadcast from memory (a load, where a
     * vpermd per pair cost an ALU uop) */
    const vx_block_q8_K *yv[4] = {y0, y1, y2, y3};
    int32_t pr4[4][4];
    const int32_t *pr[4];
    for (int u = 0; u < 4; u++) {
        if (!KSC16(kind)) {
            _mm_storeu_si128((__m128i *)(void *)pr4[u], bsums32(yv[u]));
            pr[u] = pr4[u];
        } else {
            pr[u] = (const int32_t *)(const void *)yv[u]->bsums;
        }
    }
    const __m256i IAv[4] = {IA0, IA1, IA2, IA3}, IBv[4] = {IB0, IB1, IB2, IB3};
    const panelK *PG[2] = {A, B};
    __m256 *accG[2] = {accA, accB};
#pragma GCC unroll 2
    for (int gi = 0; gi < G; gi++) /* the canonical step, per group */
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            const panelK *P = PG[gi];
            const __m256 yd = _mm256_set1_ps(yv[u]->d);
            __m256i I = gi ? IBv[u] : IAv[u];
            const __m256i M = mins_k(kind, P, pr[u]);
            if (KOFF(kind)) I = _mm256_sub_epi32(I, _mm256_slli_epi32(M, KOFF(kind))); /* codes u - 2^KOFF */
            accG[gi][u] = _mm256_fmadd_ps(_mm256_mul_ps(P->d, yd), _mm256_cvtepi32_ps(I), accG[gi][u]);
            if (KDMIN(kind))
                accG[gi][u] = _mm256_fnmadd_ps(_mm256_mul_ps(P->dmin, yd), _mm256_cvtepi32_ps(M), accG[gi][u]);
        }
}

/* One block of rows: G = 1 (8 rows, R of them real; rows[r]: the rows, or
 * for a packed kind rows[0]: the group's first record) or G = 2 (two full
 * packed groups, rows[0] and rows[1] their first records); G is a
 * compile-time constant at each call. */
AINLINE void rowblockK(int k, int G, int64_t n, const uint8_t *const rows[8], int R, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate) {
    const int64_t nsb = n / QK;
    const int packed = KPACKED(k);
    const size_t bs = ksize(k);
    panelK P[2][CBK];
    __m256 acc[2][TT + 3];
    for (int t0 = 0; t0 < ntok; t0 += TT) {
        const int nt = ntok - t0 < TT ? ntok - t0 : TT;
        for (int gi = 0; gi < G; gi++)
            for (int t = 0; t < nt + 3; t++) acc[gi][t] = _mm256_setzero_ps();
        for (int64_t i0 = 0; i0 < nsb; i0 += CBK) {
            const int cb = (int)(nsb - i0 < CBK ? nsb - i0 : CBK);
            if (packed) {
                /* rows[gi] is a group's record: CBK x bs bytes per chunk */
                for (int gi = 0; gi < G; gi++) {
                    for (int j = 0; j < cb; j++) {
                        const uint8_t *rec = rows[gi] + (size_t)(i0 + j) * bs;
                        if (k == GK_Q4_K_R8) load_q45_K_r8((const vx_block_q4_K_r8 *)(const void *)rec, NULL, &P[gi][j]);
                        else if (k == GK_Q5_K_R8)
                            load_q45_K_r8((const vx_block_q4_K_r8 *)(const void *)rec,
                                          ((const vx_block_q5_K_r8 *)(const void *)rec)->qh, &P[gi][j]);
                        else if (k == GK_Q3_K_R8) load_q23_K_r8(1, 0, rec, &P[gi][j]);
                        else if (k == GK_Q2_K_R8 || k == GK_TQ2_R8) load_q23_K_r8(0, k == GK_TQ2_R8, rec, &P[gi][j]);
                        else load_q6_K_r8((const vx_block_q6_K_r8 *)(const void *)rec, &P[gi][j]);
                    }
                    for (size_t o = 0; o < CBK * bs; o += 64)
                        _mm_prefetch((const char *)rows[gi] + (size_t)(i0 + cb) * bs + o, _MM_HINT_T0);
                }
            } else {
                for (int j = 0; j < cb; j++) {
                    if (k == GK_Q4_K) unpack_q4_K8(rows, i0 + j, &P[0][j]);
                    else if (k == GK_Q5_K) unpack_q5_K8(rows, i0 + j, &P[0][j]);
                    else if (k == GK_Q3_K) unpack_q3_K8(rows, i0 + j, &P[0][j]);
                    else if (k == GK_Q2_K) unpack_q2_K8(rows, i0 + j, &P[0][j]);
                    else unpack_q6_K8(rows, i0 + j, &P[0][j]);
                }
                /* the next chunk arrives from DRAM while the tokens run */
                for (int r = 0; r < 8; r++)
                    for (size_t o = 0; o < CBK * bs; o += 64)
                        _mm_prefetch((const char *)rows[r] + (size_t)(i0 + cb) * bs + o, _MM_HINT_T0);
            }
            for (int t = 0; t < nt; t += 4) {
                /* a short last group repeats its last token into spare accumulators */
                const vx_block_q8_K *y[4];
                for (int u = 0; u < 4; u++) {
                    const int tu = t + u < nt ? t + u : nt - 1;
                    y[u] = (const vx_block_q8_K *)(const void *)((const uint8_t *)act +
                                                                  (size_t)(t0 + tu) * act_stride) +
                           i0;
                }
                __m256 a[2][4];
                for (int gi = 0; gi < G; gi++)
                    for (int u = 0; u < 4; u++) a[gi][u] = acc[gi][t + u];
                for (int j = 0; j < cb; j++)
                    tile4(k, G, &P[0][j], &P[G - 1][j], y[0] + j, y[1] + j, y[2] + j, y[3] + j, a[0], a[G - 1]);
                for (int gi = 0; gi < G; gi++)
                    for (int u = 0; u < 4; u++) acc[gi][t + u] = a[gi][u];
            }
        }
        for (int gi = 0; gi < G; gi++)
            for (int t = 0; t < nt; t++) {
                float o[8];
                _mm256_storeu_ps(o, acc[gi][t]);
                float *dst = out + (int64_t)(t0 + t) * ldo + 8 * gi;
                store_rows(dst, o, R, accumulate);
            }
    }
}

AINLINE void gemmK(int k, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                   size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate) {
    for (int r0 = 0; r0 < nrows;) {
        const uint8_t *rows[8];
        if (KPACKED(k) && r0 + 16 <= nrows) { /* two packed groups at once */
            rows[0] = row_at(w, stride, r0);
            rows[1] = row_at(w, stride, r0 + 8);
            rowblockK(k, 2, n, rows, 8, act, act_stride, ntok, out + r0, ldo, accumulate);
            r0 += 16;
            continue;
        }
        const int R = nrows - r0 < 8 ? nrows - r0 : 8;
        for (int r = 0; r < 8; r++) rows[r] = row_at(w, stride, r0 + (r < R ? r : R - 1)); /* a short group repeats its last row */
        rowblockK(k, 1, n, rows, R, act, act_stride, ntok, out + r0, ldo, accumulate);
        r0 += 8;
    }
}

/* Below this many tokens the unpacking is not paid back; the gemv per
 * token gives the same bits. */
#define MIN_TOK_K 4

DEFINE_GEMM_ENTRY(vx_gemm_q4_K_avx2, vx_gemv_q4_K_avx2, gemmK, GK_Q4_K, MIN_TOK_K)
DEFINE_GEMM_ENTRY(vx_gemm_q6_K_avx2, vx_gemv_q6_K_avx2, gemmK, GK_Q6_K, MIN_TOK_K)
DEFINE_GEMM_ENTRY(vx_gemm_q5_K_avx2, vx_gemv_q5_K_avx2, gemmK, GK_Q5_K, MIN_TOK_K)
DEFINE_GEMM_ENTRY(vx_gemm_q3_K_avx2, vx_gemv_q3_K_avx2, gemmK, GK_Q3_K, MIN_TOK_K)
DEFINE_GEMM_ENTRY(vx_gemm_q2_K_avx2, vx_gemv_q2_K_avx2, gemmK, GK_Q2_K, MIN_TOK_K)

/* ---- packed layouts (Q4_K_R8, Q6_K_R8) ----
 * GEMV: one record per 8 rows and super-block; each group's records are
 * read front to back, several groups far apart side by side (below). The
 * codes are in row-lane order, so 8 rows' sums build up in the lanes of
 * one register with no horizontal reduction, and the scales are vectors. */
/* Records a stream's software prefetch runs ahead: every cache line of the
 * record PF_R8 on (avx2_quant_util.h: without it DRAM streams stall). */
#ifndef PF_R8
#define PF_R8 2
#endif

/* Super-blocks whose Q4_K activation pairs the gemv tabulates per call
 * (rows up to 65536 elements). */
#define PRT 256

/* Groups of 8 rows that go together, GEMV_R8_STREAMS of them a G-th of
 * the call's groups apart (as gemv32_r8.h): G long record streams, a part
 * of a record of each in turn. (Adjacent groups side by side, i.e. short
 * streams, lost 15-25% of Llama-1B decode on 2 threads.) Each group's
 * sums are the same whichever groups go with it. */
#ifndef GEMV_R8_STREAMS
#define GEMV_R8_STREAMS 4
#endif

/* Q4_K_R8 (or, five, Q5_K_R8) records of G groups: each record's quarter
 * c (its 256 code bytes, Q5_K's fifth bits, their scales) for every
 * group in turn, so the G streams advance ~300 bytes at a time (a whole
 * record per turn, ~1.2 KiB, read ~15% slower from DRAM on 2 threads).
 * Q4_K sums 8 code vectors in int16 before the madd, Q5_K (codes to 31)
 * 4. Per record an exact int32 sum, then the canonical float step: the
 * same bits as the GEMM (test_kernels). */
AINLINE void q45k_r8_groups(int five, int G, int64_t nsb, const uint8_t *const *g, const vx_block_q8_K *y,
                            const int32_t (*prt)[4], float *const *out) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const size_t rs = ksize(five ? GK_Q5_K_R8 : GK_Q4_K_R8), qtr = rs / 4;
    __m256 acc[GEMV_R8_STREAMS];
#pragma GCC unroll 8
    for (int s = 0; s < G; s++) acc[s] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const vx_block_q8_K *yi = &y[i];
        int32_t pri[4];
        const int32_t *pr = pri;
        if (prt) pr = prt[i];
        else _mm_storeu_si128((__m128i *)(void *)pri, bsums32(yi));
        __m256i I[GEMV_R8_STREAMS];
#pragma GCC unroll 8
        for (int s = 0; s < G; s++) I[s] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
#pragma GCC unroll 8
            for (int s = 0; s < G; s++) {
                const uint8_t *rec = g[s] + (size_t)i * rs;
                const vx_block_q4_K_r8 *b = (const vx_block_q4_K_r8 *)(const void *)rec;
                const vx_block_q5_K_r8 *b5 = (const vx_block_q5_K_r8 *)(const void *)rec;
                /* a quarter of the record PF_R8 records on */
                prefetch_ahead(rec + qtr * c, PF_R8 * rs, c < 3 ? qtr : rs - 3 * qtr);
                __m256i lo = _mm256_setzero_si256(), hi = lo, lo2 = lo, hi2 = lo;
#pragma GCC unroll 8
                for (int q = 0; q < 8; q++) {
                    const __m256i v = load256(b->qs[c][q]);
                    __m256i a = _mm256_and_si256(v, m4), e = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    if (five) {
                        const __m256i h = load256(b5->qh[q]);
                        a = _mm256_or_si256(a, byte_bit_to(h, 2 * c, 4));
                        e = _mm256_or_si256(e, byte_bit_to(h, 2 * c + 1, 4));
                    }
                    const __m256i pa = _mm256_maddubs_epi16(a, bq(yi, 64 * c + 4 * q));
                    const __m256i pe = _mm256_maddubs_epi16(e, bq(yi, 64 * c + 32 + 4 * q));
                    if (five && q >= 4) { /* 4 x 2 x 31 x 127 < 2^15 */
                        lo2 = _mm256_add_epi16(lo2, pa);
                        hi2 = _mm256_add_epi16(hi2, pe);
                    } else {
                        lo = _mm256_add_epi16(lo, pa);
                        hi = _mm256_add_epi16(hi, pe);
                    }
                }
                const __m256i x = _mm256_cvtepu8_epi16(load128(b->sc[c]));
                const __m256i sl = dup_lo(x), sh = dup_hi(x);
                __m256i t = _mm256_add_epi32(_mm256_madd_epi16(lo, sl), _mm256_madd_epi16(hi, sh));
                if (five) t = _mm256_add_epi32(t, _mm256_add_epi32(_mm256_madd_epi16(lo2, sl), _mm256_madd_epi16(hi2, sh)));
                I[s] = _mm256_add_epi32(I[s], t);
            }
        }
        const __m256 yd = _mm256_set1_ps(yi->d);
#pragma GCC unroll 8
        for (int s = 0; s < G; s++) {
            const vx_block_q4_K_r8 *b = (const vx_block_q4_K_r8 *)(const void *)(g[s] + (size_t)i * rs);
            __m256i M = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++)
                M = _mm256_add_epi32(M, _mm256_madd_epi16(_mm256_cvtepu8_epi16(load128(b->mn[p])), bcast_i32(pr, p)));
            acc[s] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(b->d)), yd), _mm256_cvtepi32_ps(I[s]), acc[s]);
            acc[s] = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(b->dmin)), yd), _mm256_cvtepi32_ps(M),
                                      acc[s]);
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < G; s++) _mm256_storeu_ps(out[s], acc[s]);
}

/* Q6_K_R8 records of G groups: each record's half h (its 768 code bytes
 * and their scales) for every group in turn, as q45k_r8_groups. The offset
 * term goes in per half (I - 32 M0 - 32 M1 instead of I - 32 (M0 + M1):
 * wrapping int32 arithmetic, the same result), so the same bits as the
 * GEMM. (Whole records per turn read ~25% slower on 2 threads.) */
AINLINE void q6k_r8_groups(int G, int64_t nsb, const uint8_t *const *g, const vx_block_q8_K *y, float *const *out) {
    __m256 acc[GEMV_R8_STREAMS];
#pragma GCC unroll 8
    for (int s = 0; s < G; s++) acc[s] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const vx_block_q8_K *yi = &y[i];
        const __m256i bs = load256(yi->bsums);
        __m256i I[GEMV_R8_STREAMS];
#pragma GCC unroll 8
        for (int s = 0; s < G; s++) I[s] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
#pragma GCC unroll 8
            for (int s = 0; s < G; s++) {
                const vx_block_q6_K_r8 *b = (const vx_block_q6_K_r8 *)(const void *)g[s] + i;
                /* lines 0-13, then 14-26 of the record PF_R8 records on */
                prefetch_ahead((const uint8_t *)b + 896 * h, PF_R8 * sizeof *b, h == 0 ? 896 : sizeof *b - 896);
                const __m256i x0 = _mm256_cvtepi8_epi16(load128(b->sc[4 * h])),
                              x1 = _mm256_cvtepi8_epi16(load128(b->sc[4 * h + 1])),
                              x2 = _mm256_cvtepi8_epi16(load128(b->sc[4 * h + 2])),
                              x3 = _mm256_cvtepi8_epi16(load128(b->sc[4 * h + 3]));
                __m256i J = I[s];
#define Q6_PAIR(s_, q, A, B, X)                                                                            \
    J = _mm256_add_epi32(                                                                                  \
        J, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(A, bq(yi, 128 * h + 32 * s_ + 4 * (q))),   \
                                              _mm256_maddubs_epi16(B, bq(yi, 128 * h + 32 * s_ + 4 * (q) + 4))), \
                             (q) < 4 ? dup_lo(X) : dup_hi(X)));
#pragma GCC unroll 4
                for (int q = 0; q < 8; q += 2) {
                    __m256i a0, a1, a2, a3, b0, b1, b2, b3;
                    const __m256i la = load256(b->q[h][q][0]), ha = load256(b->q[h][q][1]),
                                  qa = load256(b->q[h][q][2]), lb = load256(b->q[h][q + 1][0]),
                                  hb = load256(b->q[h][q + 1][1]), qb = load256(b->q[h][q + 1][2]);
                    Q6_CODES(la, ha, qa, a0, a1, a2, a3);
                    Q6_CODES(lb, hb, qb, b0, b1, b2, b3);
                    Q6_PAIR(0, q, a0, b0, x0)
                    Q6_PAIR(1, q, a1, b1, x1)
                    Q6_PAIR(2, q, a2, b2, x2)
                    Q6_PAIR(3, q, a3, b3, x3)
                }
#undef Q6_PAIR
                __m256i M = _mm256_madd_epi16(x0, bcast_dw(bs, 4 * h));
                M = _mm256_add_epi32(M, _mm256_madd_epi16(x1, bcast_dw(bs, 4 * h + 1)));
                M = _mm256_add_epi32(M, _mm256_madd_epi16(x2, bcast_dw(bs, 4 * h + 2)));
                M = _mm256_add_epi32(M, _mm256_madd_epi16(x3, bcast_dw(bs, 4 * h + 3)));
                I[s] = _mm256_sub_epi32(J, _mm256_slli_epi32(M, 5)); /* codes are u - 32 */
            }
        }
        const __m256 yd = _mm256_set1_ps(yi->d);
#pragma GCC unroll 8
        for (int s = 0; s < G; s++) {
            const vx_block_q6_K_r8 *b = (const vx_block_q6_K_r8 *)(const void *)g[s] + i;
            acc[s] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(b->d)), yd), _mm256_cvtepi32_ps(I[s]), acc[s]);
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < G; s++) _mm256_storeu_ps(out[s], acc[s]);
}

/* Q3_K_R8 (three) / Q2_K_R8 records of G groups: each record's half h
 * (its 256 code bytes, with Q3_K's high bits and the half's scales) for
 * every group in turn, as q6k_r8_groups. Per 32-element step g: two int16
 * sums of 4 code vectors (codes <= 7: 4 x 2 x 7 x 127 < 2^15), one per
 * 16-element sub-block, madd with its scale. Q3_K's offset term goes in
 * per half like Q6_K's (the same int32 result); Q2_K's mins term is
 * summed apart for the dmin step. */
AINLINE void q23k_r8_groups(int three, int tern, int G, int64_t nsb, const uint8_t *const *g, const vx_block_q8_K *y,
                            float *const *out) {
    const size_t rs = ksize(three ? GK_Q3_K_R8 : tern ? GK_TQ2_R8 : GK_Q2_K_R8), half = rs / 2;
    __m256 acc[GEMV_R8_STREAMS];
#pragma GCC unroll 8
    for (int s = 0; s < G; s++) acc[s] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const vx_block_q8_K *yi = &y[i];
        const int32_t *bp = (const int32_t *)(const void *)yi->bsums; /* pair p: bsums 2p, 2p + 1 */
        __m256i I[GEMV_R8_STREAMS], M[GEMV_R8_STREAMS];
#pragma GCC unroll 8
        for (int s = 0; s < G; s++) I[s] = M[s] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
#pragma GCC unroll 8
            for (int s = 0; s < G; s++) {
                const uint8_t *rec = g[s] + (size_t)i * rs;
                const vx_block_q2_K_r8 *b2 = (const vx_block_q2_K_r8 *)(const void *)rec;
                const vx_block_q3_K_r8 *b3 = (const vx_block_q3_K_r8 *)(const void *)rec;
                const uint8_t(*qs)[8][8][4] = q23_qs(three, tern, rec);
                prefetch_ahead(rec + half * h, PF_R8 * rs, h == 0 ? half : rs - half);
                __m256i J = I[s], Mh = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const int p = 4 * h + j; /* step p: sub-blocks 2p, 2p + 1 */
                    __m256i mn = _mm256_set1_epi16(1); /* TQ2_0: scales and mins 1 */
                    const __m256i x =
                        tern ? mn : q23_pair(three, three ? (const uint8_t *)b3->sc[p][0] : b2->sc[p][0], &mn);
                    __m256i lo = _mm256_setzero_si256(), hi = lo;
#pragma GCC unroll 8
                    for (int q = 0; q < 8; q++) {
                        const __m256i c = three ? q23_code(1, qs[h][q][0], b3->hm[q][0], h, j)
                                                : q23_code(0, qs[h][q][0], NULL, h, j);
                        const __m256i m = _mm256_maddubs_epi16(c, bq(yi, 32 * p + 4 * q));
                        if (q < 4) lo = _mm256_add_epi16(lo, m);
                        else hi = _mm256_add_epi16(hi, m);
                    }
                    J = _mm256_add_epi32(J, _mm256_add_epi32(_mm256_madd_epi16(lo, dup_lo(x)),
                                                             _mm256_madd_epi16(hi, dup_hi(x))));
                    Mh = _mm256_add_epi32(Mh, _mm256_madd_epi16(three ? x : mn, bcast_i32(bp, p)));
                }
                if (three) I[s] = _mm256_sub_epi32(J, _mm256_slli_epi32(Mh, 2)); /* codes are u - 4 */
                else {
                    I[s] = J;
                    M[s] = _mm256_add_epi32(M[s], Mh);
                }
            }
        }
        const __m256 yd = _mm256_set1_ps(yi->d);
#pragma GCC unroll 8
        for (int s = 0; s < G; s++) {
            const uint8_t *rec = g[s] + (size_t)i * rs;
            acc[s] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(rec)), yd), _mm256_cvtepi32_ps(I[s]),
                                     acc[s]); /* both records start with d[8] */
            if (!three) /* TQ2_0's dmin is d */
                acc[s] = _mm256_fnmadd_ps(
                    _mm256_mul_ps(_mm256_cvtph_ps(load128(tern ? rec : (const uint8_t *)((const vx_block_q2_K_r8 *)(const void *)rec)->dmin)), yd),
                    _mm256_cvtepi32_ps(M[s]), acc[s]);
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < G; s++) _mm256_storeu_ps(out[s], acc[s]);
}

AINLINE void gemv_r8_groups(int k, int G, int64_t nsb, const uint8_t *const *g, const vx_block_q8_K *y,
                            const int32_t (*prt)[4], float *const *out) {
    if (k == GK_Q4_K_R8) q45k_r8_groups(0, G, nsb, g, y, prt, out);
    else if (k == GK_Q5_K_R8) q45k_r8_groups(1, G, nsb, g, y, prt, out);
    else if (k == GK_Q3_K_R8) q23k_r8_groups(1, 0, G, nsb, g, y, out);
    else if (k == GK_Q2_K_R8) q23k_r8_groups(0, 0, G, nsb, g, y, out);
    else if (k == GK_TQ2_R8) q23k_r8_groups(0, 1, G, nsb, g, y, out);
    else q6k_r8_groups(G, nsb, g, y, out);
}

AINLINE void gemv_r8(int k, int64_t n, const void *w, size_t stride, int nrows, const void *vy, float *out) {
    const int64_t nsb = n / QK;
    const vx_block_q8_K *y = vy;
    /* Q4_K's activation pairs (per-32 sums) once per call for all rows
     * (Q6_K's are the blocks' own bsums); rows over PRT super-blocks long
     * compute them per record */
    int32_t prt[PRT][4];
    const int tab = (k == GK_Q4_K_R8 || k == GK_Q5_K_R8) && nsb <= PRT;
    for (int64_t i = 0; tab && i < nsb; i++) _mm_storeu_si128((__m128i *)(void *)prt[i], bsums32(&y[i]));
    const uint8_t *g[GEMV_R8_STREAMS];
    float *o[GEMV_R8_STREAMS];
#define GEMV_R8_RUN(n) gemv_r8_groups(k, n, nsb, g, y, tab ? (const int32_t(*)[4])prt : NULL, o)
    GEMV_FAR_GROUPS(w, stride, nrows, out, GEMV_R8_STREAMS, g, o, GEMV_R8_RUN);
#undef GEMV_R8_RUN
}

GEMV_ENTRY(vx_gemv_q4_K_r8_avx2, gemv_r8, GK_Q4_K_R8)
GEMV_ENTRY(vx_gemv_q6_K_r8_avx2, gemv_r8, GK_Q6_K_R8)
GEMV_ENTRY(vx_gemv_q5_K_r8_avx2, gemv_r8, GK_Q5_K_R8)
GEMV_ENTRY(vx_gemv_q3_K_r8_avx2, gemv_r8, GK_Q3_K_R8)
GEMV_ENTRY(vx_gemv_q2_K_r8_avx2, gemv_r8, GK_Q2_K_R8)
GEMV_ENTRY(vx_gemv_tq2_0_r8_avx2, gemv_r8, GK_TQ2_R8)

/* With no unpacking to pay back, the panel serves from 2 tokens. */
#define MIN_TOK_R8 2

DEFINE_GEMM_ENTRY(vx_gemm_q4_K_r8_avx2, vx_gemv_q4_K_r8_avx2, gemmK, GK_Q4_K_R8, MIN_TOK_R8)
DEFINE_GEMM_ENTRY(vx_gemm_q6_K_r8_avx2, vx_gemv_q6_K_r8_avx2, gemmK, GK_Q6_K_R8, MIN_TOK_R8)
DEFINE_GEMM_ENTRY(vx_gemm_q5_K_r8_avx2, vx_gemv_q5_K_r8_avx2, gemmK, GK_Q5_K_R8, MIN_TOK_R8)
DEFINE_GEMM_ENTRY(vx_gemm_q3_K_r8_avx2, vx_gemv_q3_K_r8_avx2, gemmK, GK_Q3_K_R8, MIN_TOK_R8)
DEFINE_GEMM_ENTRY(vx_gemm_q2_K_r8_avx2, vx_gemv_q2_K_r8_avx2, gemmK, GK_Q2_K_R8, MIN_TOK_R8)
DEFINE_GEMM_ENTRY(vx_gemm_tq2_0_r8_avx2, vx_gemv_tq2_0_r8_avx2, gemmK, GK_TQ2_R8, MIN_TOK_R8)
