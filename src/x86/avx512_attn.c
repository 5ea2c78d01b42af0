/*
 * avx512_attn.c - the fused decode attention (attn_dec_f16, contract in
 * ops.h) on 512-bit vectors, natively and emulated (isa512.h), for GQA
 * groups of 1 to 8 query rows and head dims of 64 or 128 (Llama's,
 * Mistral's and Qwen's shapes), and 256 over F16 caches (Gemma's: 0.58 ->
 * 0.33 ms a layer at 4096 positions, bench_attention 4096 1 20 8 1 256);
 * other shapes go to the AVX2 kernel. The
 * same bits as the AVX2
 * kernel (avx2_ops.c), i.e. as gemm_abt_f16b + attn_softmax16 + gemm_f16b:
 *
 *  - scores: one zmm holds the 8-lane dot chains (gemm_abt's association,
 *    one FMA chain over the 8-element steps) of one row against two
 *    positions, j in the low half and j + 1 in the high half: the K
 *    elements 8t .. 8t + 7 of both rows are widened by one conversion,
 *    and each FMA advances both chains. The fold tree (lanes l + 4, then
 *    l + 2, then l + 1, AVX2's fold1 / fold2 / fold3) adds the same pairs
 *    with 128-bit lane shuffles; the result is AVX2's score vectors, two
 *    per zmm. (On 8-lane vectors the decode attention ran at ~50 GFLOP/s
 *    per core whether its cache rows came from L2 or from L3: bound by
 *    the widening and the FMAs of the GQA group's rows.)
 *  - softmax: AVX2's vertical max / exp_neg / sum with two score vectors
 *    per zmm, summed in the same association.
 *  - P.V: 64 columns (4 zmm) of up to 4 rows, or 32 of up to 8, per
 *    pass: each V element widened once, up to 16 independent FMA chains.
 *  - The 8-element steps are the scores' outer loop (4 unrolled), over 8
 *    positions for up to 4 rows or 4 for up to 8: 16 accumulators, each
 *    broadcast of q serving all their position pairs. Fully unrolled, GCC
 *    spilled ~380 zmm a chunk.
 *  - Chunk-heads are software-pipelined (dec_run): i's softmax, i + 1's
 *    scores, i's P.V, so the softmax's dependency chain (max, exp, sums,
 *    rescale) runs beside independent FMAs. Together with the above:
 *    205 -> 148 ns a chunk-head (g 4, hd 64), 428 -> 284 (g 4, hd 128),
 *    one core, cache rows in L2.
 * Prefetching as the AVX2 kernel: the chunk-head VX_ATTN_DEC_AHEAD steps
 * ahead (past the run, of the next run's first chunk).
 */
#include <math.h>
#include <string.h>

#include "isa512.h"

#include "kernels_x86.h"
#include "ops.h"

#define AINLINE static inline __attribute__((always_inline))

/* 128-bit lanes of a and b (_mm512_shuffle_f32x4, which SIMDe 0.7.4 does
 * not alias; the integer form moves the same bits) */
#define LANES4(a, b, imm)                                                                          \
    _mm512_castsi512_ps(_mm512_shuffle_i32x4(_mm512_castps_si512(a), _mm512_castps_si512(b), imm))

#include "exp512.h"

/* The cache's element types: fp16 rows, or Q8_0 rows (blocks of an fp16
 * scale d and 32 int8, widened as q8_0_to_f32 does: d * (float) q). Rows
 * are byte pointers here; HB(Q, n) is the bytes of n elements of one. */
enum { KF16 = 0, KQ8 = 1 };
#define HB(Q, HD) ((Q) == KF16 ? 2 * (HD) : (HD) / 32 * 34)

AINLINE float q8_scale(const uint8_t *blk) {
    uint16_t h;
    memcpy(&h, blk, 2);
    return _cvtsh_ss(h);
}

/* Elements 8t .. 8t + 7 of K rows a and b (head starts), widened: [a | b]. */
AINLINE __m512 k_pair(const int Q, const uint8_t *a, const uint8_t *b, int t) {
    if (Q == KF16) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(a + 16 * t));
        const __m128i y = _mm_loadu_si128((const __m128i *)(const void *)(b + 16 * t));
        return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(x), y, 1));
    }
    const uint8_t *ba = a + (t / 4) * 34, *bb = b + (t / 4) * 34;
    const __m128i x = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(ba + 2 + (t % 4) * 8)),
                                         _mm_loadl_epi64((const __m128i *)(const void *)(bb + 2 + (t % 4) * 8)));
    const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(q8_scale(ba)), _mm256_set1_ps(q8_scale(bb)), 1);
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x)));
}

/* Elements e .. e + 15 of a V row (head start), widened (e a multiple of 16). */
AINLINE __m512 v16(const int Q, const uint8_t *r, int e) {
    if (Q == KF16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(r + 2 * e)));
    const uint8_t *blk = r + (e / 32) * 34;
    const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2 + e % 32));
    return _mm512_mul_ps(_mm512_set1_ps(q8_scale(blk)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x)));
}

/* AVX2's fold1 on both halves: per half [a.lo + a.hi | b.lo + b.hi], laid
 * out [a's half 0, a's half 1, b's half 0, b's half 1] in 128-bit lanes. */
AINLINE __m512 fold1z(__m512 a, __m512 b) {
    return _mm512_add_ps(LANES4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                         LANES4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}
AINLINE __m512 fold2z(__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
}
AINLINE __m512 fold3z(__m512 w, __m512 u) {
    return _mm512_add_ps(_mm512_shuffle_ps(w, u, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(w, u, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Prefetches the lines of nb bytes at p (as the AVX2 kernel). */
AINLINE void prefetch_row(const uint8_t *p, int64_t nb) {
    const char *c = (const char *)(const void *)p;
    for (int64_t b = 0; b < nb; b += 64) _mm_prefetch(c + b, _MM_HINT_T0);
    _mm_prefetch(c + nb - 1, _MM_HINT_T0);
}

/* Scores of positions j .. j + 4 NQ - 1 (NQ quads), quad u into Z + u
 * (G = 4) or Z + 2 u (G = 8). Per quad, R <= 4 rows (G = 4): Z = [S(j,
 * j+1) | S(j+2, j+3)] in AVX2's layout (lane = row + 4 (position - first
 * of the pair)); R of 5 .. 8 rows (G = 8): Z[0] = [S(j) | S(j+1)], Z[1] =
 * [S(j+2) | S(j+3)] (lane = row), the rows folded in AVX2's slot order 0
 * 4 1 5 2 6 3 7. The 8-element steps are the outer loop: each row's
 * broadcast of q serves the 2 NQ position pairs (2 NQ G <= 16
 * accumulators). */
AINLINE void scores_q(const int Q, const int G, const int R, const int HD, const int NQ, const float *q,
                      const uint8_t *k, int64_t ld, __m512 *Z) {
    static const int rs4[8] = {0, 1, 2, 3, 8, 8, 8, 8}, rs8[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    const int *rs = G == 4 ? rs4 : rs8;
    __m512 acc[4][8];
#pragma GCC unroll 4
    for (int x = 0; x < 2 * NQ; x++)
#pragma GCC unroll 8
        for (int r = 0; r < G; r++) acc[x][r] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < HD / 8; t++) {
        __m512 qb[8];
#pragma GCC unroll 8
        for (int r = 0; r < G; r++)
            if (rs[r] < R) qb[r] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + rs[r] * HD + 8 * t));
#pragma GCC unroll 4
        for (int x = 0; x < 2 * NQ; x++) {
            const __m512 kw = k_pair(Q, k + (2 * x) * ld, k + (2 * x + 1) * ld, t);
#pragma GCC unroll 8
            for (int r = 0; r < G; r++)
                if (rs[r] < R) acc[x][r] = _mm512_fmadd_ps(qb[r], kw, acc[x][r]);
        }
    }
#pragma GCC unroll 2
    for (int u = 0; u < NQ; u++) {
        __m512(*ac)[8] = acc + 2 * u;
        __m512 W[2];
#pragma GCC unroll 2
        for (int x = 0; x < 2; x++) /* [w_j.lo, w_j1.lo, w_j.hi, w_j1.hi] */
            W[x] = fold2z(fold1z(ac[x][0], ac[x][1]), fold1z(ac[x][2], ac[x][3]));
        if (G == 4) {
            const __m512 A = LANES4(W[0], W[1], _MM_SHUFFLE(2, 0, 2, 0));
            const __m512 B = LANES4(W[0], W[1], _MM_SHUFFLE(3, 1, 3, 1));
            const __m512i perm = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
            Z[u] = _mm512_permutexvar_ps(perm, fold3z(A, B));
            continue;
        }
#pragma GCC unroll 2
        for (int x = 0; x < 2; x++) {
            const __m512 U = fold2z(fold1z(ac[x][4], ac[x][5]), fold1z(ac[x][6], ac[x][7]));
            /* [S_j.lo, S_j1.lo, S_j.hi, S_j1.hi] -> [S_j | S_j1] */
            const __m512 F = fold3z(W[x], U);
            Z[2 * u + x] = LANES4(F, F, _MM_SHUFFLE(3, 1, 2, 0));
        }
    }
}

/* P.V for R rows of a group of G over 16 NC columns from c0 (R NC <= 16
 * accumulators: each V element is widened once for all rows):
 * o = corr o + sum_p P[G p + i] v[p]. */
AINLINE void pv_cols(const int Q, const int G, const int R, const int NC, int64_t hd, const float *P,
                     const uint8_t *v, int64_t ld, const float *corr, float *o, int64_t c0,
                     const uint8_t *vnext) {
    __m512 acc[8][4];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int x = 0; x < NC; x++)
            acc[i][x] = _mm512_mul_ps(_mm512_set1_ps(corr[i]), _mm512_loadu_ps(o + i * hd + c0 + 16 * x));
#pragma GCC unroll 2
    for (int p = 0; p < 16; p++) {
        const uint8_t *vp = v + p * ld;
        if (vnext) prefetch_row(vnext + p * ld + HB(Q, c0), HB(Q, 16 * NC));
        __m512 b[4];
#pragma GCC unroll 4
        for (int x = 0; x < NC; x++)
            b[x] = v16(Q, vp, (int)c0 + 16 * x);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            const __m512 a = _mm512_set1_ps(P[G * p + i]);
#pragma GCC unroll 4
            for (int x = 0; x < NC; x++) acc[i][x] = _mm512_fmadd_ps(a, b[x], acc[i][x]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int x = 0; x < NC; x++) _mm512_storeu_ps(o + i * hd + c0 + 16 * x, acc[i][x]);
}

/* Scores of one chunk of 16 positions for one kv head (G lanes per
 * position, R rows) into Z (G zmm), prefetching the K rows at kn. */
AINLINE void dec_scores(const int Q, const int G, const int R, const int HD, const float *q, const uint8_t *k,
                        int64_t ld, const uint8_t *kn, __m512 *Z) {
    const int NQ = G == 4 ? 2 : 1; /* quads of positions per pass */
#pragma GCC unroll 1
    for (int jq = 0; jq < 4; jq += NQ) {
        if (kn)
            for (int j = 0; j < 4 * NQ; j++) prefetch_row(kn + (4 * jq + j) * ld, HB(Q, HD));
        scores_q(Q, G, R, HD, NQ, q, k + 4 * jq * ld, ld, Z + (G == 4 ? jq : 2 * jq));
    }
}

/* The online softmax of a chunk's scores Z (AVX2's dec_chunk): the
 * numerators into P (G lanes per position), the rows' corrections into
 * corr, their max and sum updated. */
AINLINE void dec_softmax(const int G, const int R, __m512 *Z, __m512 vs, const __m512 *cap, float *mx, float *l,
                         float *P, float *corr) {
    const int nz = G; /* zmm of scores: 16 positions x G lanes */
    if (cap) /* softcap's */
#pragma GCC unroll 8
        for (int x = 0; x < nz; x++) Z[x] = cap512(Z[x], cap[0], cap[1]);
    /* online softmax: lanes are rows (AVX2's score vectors, two per zmm) */
    float mold[16], mnew[16], sm[8];
    for (int i = 0; i < 16; i++) mold[i] = i % G < R ? mx[i % G] : -INFINITY;
    Z[0] = _mm512_mul_ps(vs, Z[0]);
    __m512 M = Z[0];
#pragma GCC unroll 8
    for (int x = 1; x < nz; x++) {
        Z[x] = _mm512_mul_ps(vs, Z[x]);
        M = _mm512_max_ps(M, Z[x]);
    }
    /* the max over the positions, in every lane of its row */
    M = _mm512_max_ps(M, LANES4(M, M, _MM_SHUFFLE(1, 0, 3, 2)));
    if (G == 4) M = _mm512_max_ps(M, LANES4(M, M, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512 mb = _mm512_max_ps(M, _mm512_loadu_ps(mold));
#pragma GCC unroll 8
    for (int x = 0; x < nz; x++) {
        Z[x] = exp_neg512(_mm512_sub_ps(Z[x], mb));
        _mm512_storeu_ps(P + 16 * x, Z[x]);
    }
    /* AVX2's sums: G = 4: X_x = S_x + S_(x+4), (X0 + X2) + (X1 + X3), then
     * the halves; G = 8: X_x = S_x + S_(x+8), H_x = X_x + X_(x+4),
     * (H0 + H2) + (H1 + H3). Z[k] holds S_2k and S_2k+1. */
    __m256 sum;
    if (G == 4) {
        const __m512 Y = _mm512_add_ps(_mm512_add_ps(Z[0], Z[2]), _mm512_add_ps(Z[1], Z[3]));
        const __m256 A = _mm256_add_ps(_mm512_castps512_ps256(Y), upper_half(Y));
        sum = _mm256_castps128_ps256(_mm_add_ps(_mm256_castps256_ps128(A), _mm256_extractf128_ps(A, 1)));
    } else {
        const __m512 T0 = _mm512_add_ps(Z[0], Z[4]), T1 = _mm512_add_ps(Z[1], Z[5]);
        const __m512 T2 = _mm512_add_ps(Z[2], Z[6]), T3 = _mm512_add_ps(Z[3], Z[7]);
        const __m512 V = _mm512_add_ps(_mm512_add_ps(T0, T2), _mm512_add_ps(T1, T3));
        sum = _mm256_add_ps(_mm512_castps512_ps256(V), upper_half(V));
    }
    _mm512_storeu_ps(mnew, mb);
    _mm256_storeu_ps(sm, sum);
    vx_attn_rows_rescale(R, mold, mnew, sm, corr, l, mx);
}

/* ld, hs, cs: bytes from one position's row to the next, from one head
 * to the next, from one chunk to the next (ops.h). The chunk-heads (chunk
 * outer, head inner) are software-pipelined: chunk-head i's softmax, then
 * the scores of i + 1, then i's P.V, so the softmax's long dependency
 * chain (max, exp, sums) overlaps independent FMAs; each head's steps keep
 * their order, so the bits are those of the plain sequence. */
AINLINE void dec_run(const int Q, const int G, const int R, const int HD, int64_t nh, const float *q,
                     const uint8_t *k, const uint8_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n,
                     const uint8_t *kx,
                     const uint8_t *vx, float scale, float cap, float *mx, float *l, float *o) {
    const __m512 vs = _mm512_set1_ps(scale);
    const __m512 cv[2] = {_mm512_set1_ps(cap > 0 ? scale / cap : 0), _mm512_set1_ps(cap > 0 ? cap / scale : 0)};
    const int64_t dist = VX_ATTN_DEC_AHEAD, total = n / 16 * nh;
    const int NC = R > 4 ? 2 : 4; /* zmm of columns per row */
    if (total <= 0) return;
    /* the rows chunk-head t prefetches (the one dist ahead; past the run,
     * the next run's first chunk) */
#define NEXT_ROWS(t, kn, vn)                                                                       \
    do {                                                                                           \
        const int64_t t_ = (t) + dist, cn_ = t_ / nh * 16, hn_ = t_ % nh;                          \
        kn = cn_ < n ? k + cn_ / 16 * cs + hn_ * hs : kx ? kx + hn_ * hs : NULL;                   \
        vn = cn_ < n ? v + cn_ / 16 * cs + hn_ * hs : vx ? vx + hn_ * hs : NULL;                   \
    } while (0)
    __m512 Z[8];
    const uint8_t *kn, *vn;
    NEXT_ROWS(0, kn, vn);
    dec_scores(Q, G, R, HD, q, k, ld, kn, Z);
    int64_t c0 = 0, h = 0; /* chunk-head i's chunk and head */
    for (int64_t i = 0; i < total; i++) {
        float P[16 * 8], corr[8];
        dec_softmax(G, R, Z, vs, cap > 0 ? cv : NULL, mx + h * R, l + h * R, P, corr);
        const uint8_t *vcur = vn;
        if (i + 1 < total) {
            const int64_t c1 = h + 1 < nh ? c0 : c0 + 16, h1 = h + 1 < nh ? h + 1 : 0;
            NEXT_ROWS(i + 1, kn, vn);
            dec_scores(Q, G, R, HD, q + h1 * R * HD, k + c1 / 16 * cs + h1 * hs, ld, kn, Z);
        }
#pragma GCC unroll 4
        for (int cc = 0; cc < HD; cc += 16 * NC)
            pv_cols(Q, G, R, NC, HD, P, v + c0 / 16 * cs + h * hs, ld, corr, o + h * R * HD, cc, vcur);
        if (++h == nh) {
            h = 0;
            c0 += 16;
        }
    }
#undef NEXT_ROWS
}

#define DEC_G(Q, HD)                                                                               \
    switch (g) {                                                                                   \
    case 1: dec_run(Q, 4, 1, HD, nh, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;            \
    case 2: dec_run(Q, 4, 2, HD, nh, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;            \
    case 3: dec_run(Q, 4, 3, HD, nh, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;            \
    case 4: dec_run(Q, 4, 4, HD, nh, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;            \
    case 5: dec_run(Q, 8, 5, HD, nh, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;            \
    case 6: dec_run(Q, 8, 6, HD, nh, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;            \
    case 7: dec_run(Q, 8, 7, HD, nh, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;            \
    default: dec_run(Q, 8, 8, HD, nh, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;           \
    }

void VX512(vx_attn_dec_f16)(int64_t nh, int64_t g, int64_t hd, const float *q, const uint16_t *kh,
                            const uint16_t *vh, int64_t ldh, int64_t hsh, int64_t csh, int64_t n,
                            const uint16_t *kxh, const uint16_t *vxh, float scale, float cap, float *mx, float *l,
                            float *o) {
    const uint8_t *k = (const uint8_t *)kh, *v = (const uint8_t *)vh;
    const uint8_t *kx = (const uint8_t *)kxh, *vx = (const uint8_t *)vxh;
    const int64_t ld = 2 * ldh, hs = 2 * hsh, cs = 2 * csh;
    if (g >= 1 && g <= 8 && hd == 64) DEC_G(KF16, 64)
    if (g >= 1 && g <= 8 && hd == 128) DEC_G(KF16, 128)
    if (g >= 1 && g <= 8 && hd == 256) DEC_G(KF16, 256)
    vx_attn_dec_f16_avx2(nh, g, hd, q, kh, vh, ldh, hsh, csh, n, kxh, vxh, scale, cap, mx, l, o);
}

static void dec_q8_0(int64_t nh, int64_t g, int64_t hd, const float *q, const uint8_t *k, const uint8_t *v,
                     int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint8_t *kx, const uint8_t *vx, float scale,
                     float cap, float *mx, float *l, float *o) {
    if (hd == 64) DEC_G(KQ8, 64)
    DEC_G(KQ8, 128)
}

int VX512(vx_attn_dec_q8_0)(int64_t nh, int64_t g, int64_t hd, const float *q, const uint8_t *k,
                            const uint8_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint8_t *kx,
                            const uint8_t *vx, float scale, float cap, float *mx, float *l, float *o) {
    if (g < 1 || g > 8 || (hd != 64 && hd != 128)) return 0;
    dec_q8_0(nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o);
    return 1;
}
