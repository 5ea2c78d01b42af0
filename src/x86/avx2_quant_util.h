/*
 * avx2_quant_util.h - small inline helpers shared by the AVX2 quantization
 * kernels (avx2_quant.c, avx2_quant_k.c). Include only from files compiled
 * with the AVX2 flags (src/x86/avx2_*.c).
 */
#ifndef VX_AVX2_QUANT_UTIL_H
#define VX_AVX2_QUANT_UTIL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "matmul.h"
#include "quant.h"

#define AINLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------- helpers */

/* Unaligned loads and stores through void *: block fields are byte
 * arrays, and a cast from them to a vector pointer trips -Wcast-align. */
AINLINE __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
AINLINE __m128i load128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }
AINLINE void store256(void *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }
AINLINE void store128(void *p, __m128i v) { _mm_storeu_si128((__m128i *)p, v); }

AINLINE float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AINLINE int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

AINLINE float hmax_ps(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* F16C conversions: exact, and identical to vx_fp16_to_fp32 and (round to
 * nearest even, overflow to inf) vx_fp32_to_fp16 for every non-NaN value. */
AINLINE float f16(uint16_t h) { return _cvtsh_ss(h); }
AINLINE uint16_t to_f16(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
/* 8 fp16 / bf16 values as floats (bf16 is the top half of an f32: widen
 * to 32 bits and shift into place), and one bf16 value. */
AINLINE __m256 load_f16x8(const uint16_t *p) { return _mm256_cvtph_ps(load128(p)); }
AINLINE __m256 load_bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
}
AINLINE float bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* A uint16 (an fp16 scale) from any address. */
AINLINE uint16_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* The first R results of a GEMM tile into an output row: written, or
 * added to it (accumulate). */
AINLINE void store_rows(float *dst, const float *o, int R, int accumulate) {
    if (accumulate)
        for (int r = 0; r < R; r++) dst[r] += o[r];
    else
        for (int r = 0; r < R; r++) dst[r] = o[r];
}

AINLINE const void *row_at(const void *w, size_t stride, int r) {
    return (const uint8_t *)w + (size_t)r * stride;
}

/* The gemv once per token, 16 rows at a time so that the rows stay in L1
 * for all the tokens (few tokens: batched decoding). With the canonical
 * order the results are the gemm's bits. */
AINLINE void gemv_tokens(vx_gemv_fn gemv, int64_t n, const void *w, size_t stride, int nrows,
                         const void *act, size_t act_stride, int ntok, float *out, int64_t ldo,
                         int accumulate) {
    float tmp[16];
    for (int r0 = 0; r0 < nrows; r0 += 16) {
        const int nr = nrows - r0 < 16 ? nrows - r0 : 16;
        for (int t = 0; t < ntok; t++) {
            gemv(n, row_at(w, stride, r0), stride, nr, (const uint8_t *)act + (size_t)t * act_stride, tmp);
            float *o = out + t * ldo + r0;
            if (accumulate)
                for (int r = 0; r < nr; r++) o[r] += tmp[r];
            else
                for (int r = 0; r < nr; r++) o[r] = tmp[r];
        }
    }
}


/* vx_e8m0_half of 8 exponents (one per 32-bit lane): (e - 1) << 23 as
 * float bits, the subnormal 0x200000 << e for e < 2 */
AINLINE __m256 e8m0_half8(__m256i e) {
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

/* The 32 4-bit codes of a legacy block (byte j holds element j in its low
 * nibble and element j + 16 in its high one) as 32 bytes in element order:
 * both 128-bit lanes get the 16 bytes, the upper lane shifted by 4. */
AINLINE __m256i nibbles32(const uint8_t *qs) {
    const __m256i v = _mm256_broadcastsi128_si256(load128(qs));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of bits is set, else 0: byte j of the result
 * starts as byte j / 8 of bits, every bit but bit j % 8 is forced on, and
 * only a set bit j % 8 then makes the byte all ones. */
AINLINE __m256i bits_to_bytes(uint32_t bits) {
    const __m256i pick =
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), pick);
    v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFE));
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi8(-1));
}

AINLINE uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4); /* qh sits at an odd offset inside 2-aligned blocks */
    return v;
}

/* Pair sums of a 16-lane int16 vector as 8 int32 lanes. */
AINLINE __m256i pairs_to_i32(__m256i p) { return _mm256_madd_epi16(p, _mm256_set1_epi16(1)); }

/*
 * Row grouping and prefetch in gemv, tuned on Zen 3 (single thread, 64 MiB
 * of weights; see tests/bench_kernels.c):
 *   - rows are contiguous, so one row at a time is one sequential stream,
 *     which the hardware prefetcher follows well; groups of 4 rows load
 *     each activation block once for 4 rows and keep 4 streams in flight,
 *     which pulls more bandwidth from DRAM. 4 adjacent rows are 4 short
 *     streams (Q8_0 at n = 896: 10 GB/s in groups of 4 vs 15 row by row);
 *     since session 8 a group's rows are a quarter of the call apart
 *     (GEMV_DISPATCH), so each stream runs on through consecutive rows
 *     (2 threads, F16 at n = 2048: 46-50 GB/s vs 33-36 for adjacent rows);
 *     since session 9 narrow rows too (VX_GEMV_WIDE_ROW 0): their streams
 *     run on through consecutive rows as well (Llama-1B decode, 2 threads,
 *     medians: Q5_K_M 33.5 -> 39.0 t/s, Q4_1 37.0 -> 40.2);
 *   - either way, a software prefetch ahead along each stream turns the
 *     access back into a stream the memory system can run ahead on;
 *     without it groups of 4 reached only 6-9 GB/s.
 * VX_GEMV_WIDE_ROW (bytes of row stride from which rows go in groups of 4;
 * 0: always, a huge value: never), VX_GEMV_PREFETCH (0: no software
 * prefetch) and VX_GEMV_PREFETCH_INSN (the instruction, "prefetcht0" by
 * default; e.g. "prefetcht1") override the choice at compile time, for
 * retuning elsewhere.
 */
#ifndef VX_GEMV_WIDE_ROW
#define VX_GEMV_WIDE_ROW 0
#endif
#ifndef VX_GEMV_PREFETCH
#define VX_GEMV_PREFETCH 1
#endif
#ifndef VX_GEMV_PF_GROUP
#define VX_GEMV_PF_GROUP 512
#endif
#ifndef VX_GEMV_PREFETCH_INSN
#define VX_GEMV_PREFETCH_INSN "prefetcht0"
#endif

/* A software prefetch of the cache line at p (prefetches never fault, so
 * running past the end is fine), as a volatile asm statement rather than
 * _mm_prefetch: GCC's default (-mtune=generic) scheduling hoists the
 * builtin prefetches of an unrolled block to its top, which put the 14
 * prefetches of a Q6_K half record of each of 4 streams back to back, and
 * that kernel read 10-14% slower from DRAM (2 threads, 1 GiB matrix,
 * alternated in one process) than with the prefetches where the source
 * puts them. The asm statement keeps its place among the loads. */
AINLINE void prefetch_line(const void *p) {
#if VX_GEMV_PREFETCH
    __asm__ volatile(VX_GEMV_PREFETCH_INSN " %0" : : "m"(*(const char *)p));
#else
    (void)p;
#endif
}

/* Prefetches the cache lines of a size-byte block dist bytes ahead of p. */
AINLINE void prefetch_ahead(const void *p, size_t dist, size_t size) {
    /* sizes are compile-time constants: unrolled, no loop per record */
#pragma GCC unroll 32
    for (size_t o = 0; o < size; o += 64) prefetch_line((const char *)p + dist + o);
}

/* Prefetch distance, in bytes ahead along each row's stream: a row read
 * alone runs on into the next row, so 2 rows on; a group of R > 1 rows
 * (far apart, GEMV_DISPATCH) runs each of its R streams on into the next
 * row of the same stream, VX_GEMV_PF_GROUP bytes ahead; 1 KiB within the
 * row for a single vec_dot (stride 0). */
AINLINE size_t prefetch_dist(int R, size_t stride) {
    return R > 1 ? (size_t)VX_GEMV_PF_GROUP : stride ? 2 * stride : 1024;
}

#define HALF_NT 3 /* tokens half_rows4 takes at most */

/* F16 (bf = 0) / BF16 rows w[0..3] (far apart: GEMV_DISPATCH's groups)
 * against nt (1..HALF_NT) tokens' f32 rows x[u]: out[u][r]. Per row and
 * token two 8-lane chains (a0: elements 0-7 and 16-23 of each 32, a1:
 * 8-15 and 24-31; one accumulator per row would wait on the FMA latency),
 * then the 8-element and scalar tails: the AVX2 GEMV's arithmetic for any
 * nt, so batched tokens get its bits (avx512_half.c). */
AINLINE void half_rows4(int64_t n, const uint16_t *const w[4], int nt, const float *const *x, int bf,
                        float (*out)[4]) {
    const size_t pf = prefetch_dist(4, 0);
    __m256 a0[HALF_NT][4], a1[HALF_NT][4];
    for (int u = 0; u < nt; u++)
        for (int r = 0; r < 4; r++) a0[u][r] = a1[u][r] = _mm256_setzero_ps();
#define LOADW(p) (bf ? load_bf16x8(p) : load_f16x8(p))
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const uint16_t *p = w[r] + i;
            prefetch_ahead(p, pf, 64);
            const __m256 w0 = LOADW(p), w1 = LOADW(p + 8), w2 = LOADW(p + 16), w3 = LOADW(p + 24);
            for (int u = 0; u < nt; u++) {
                const float *xu = x[u] + i;
                a0[u][r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xu), a0[u][r]);
                a1[u][r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xu + 8), a1[u][r]);
                a0[u][r] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xu + 16), a0[u][r]);
                a1[u][r] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xu + 24), a1[u][r]);
            }
        }
    }
    for (; i + 8 <= n; i += 8)
        for (int r = 0; r < 4; r++) {
            const __m256 wv = LOADW(w[r] + i);
            for (int u = 0; u < nt; u++) a0[u][r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[u] + i), a0[u][r]);
        }
#undef LOADW
    for (int u = 0; u < nt; u++)
        for (int r = 0; r < 4; r++) {
            float s = hsum_ps(_mm256_add_ps(a0[u][r], a1[u][r]));
            for (int64_t j = i; j < n; j++) s += (bf ? bf16(w[r][j]) : f16(w[r][j])) * x[u][j];
            out[u][r] = s;
        }
}

/* stride >= VX_GEMV_WIDE_ROW, written so that a knob of 0 does not make
 * it an always-true comparison (-Wtype-limits); strides are far from
 * SIZE_MAX, so the + 1 cannot wrap. */
AINLINE int wide_rows(size_t stride) { return stride + 1 > (size_t)VX_GEMV_WIDE_ROW; }

/* Rows go in groups of 4 rows a quarter of the call's rows apart (rows
 * i, i + q, i + 2q, i + 3q for i = 0..q-1, q = nrows / 4): four long
 * streams, each running on through consecutive rows; the rest (and rows
 * narrower than VX_GEMV_WIDE_ROW) one at a time. R is a compile-time constant in every call,
 * so the per-row loops of the kernels unroll into registers. Each row's
 * result depends only on whether it went in a group, and a call's rows
 * beyond 4q are the only ones that go alone. */
AINLINE int gemv_quarter(size_t stride, int nrows) { return wide_rows(stride) ? nrows / 4 : 0; }

AINLINE void gemv_scatter4(const float *o, float *out, int i, int q) {
    for (int k = 0; k < 4; k++) out[i + k * q] = o[k];
}

/* The packed gemvs' G far groups: groups i, i + q, ..., i + (G-1) q of 8
 * rows (their first records g[s], their outputs o[s]). */
AINLINE void gemv_far_groups(const void *w, size_t stride, float *out, int i, int q, int G, const uint8_t **g,
                             float **o) {
    for (int s = 0; s < G; s++) {
        g[s] = (const uint8_t *)row_at(w, stride, 8 * (i + s * q));
        o[s] = out + 8 * (i + s * q);
    }
}

/* Every 8-row group of a packed gemv call: q turns of G far groups
 * (gemv_far_groups), then the groups past G q one at a time. RUN(n) is a
 * macro running one turn of n groups from g[] into o[]. */
#define GEMV_FAR_GROUPS(w, stride, nrows, out, G, g, o, RUN)                                         \
    do {                                                                                          \
        const int q_ = (nrows) / 8 / (G);                                                         \
        for (int i_ = 0; i_ < q_; i_++) {                                                         \
            gemv_far_groups((w), (stride), (out), i_, q_, (G), (g), (o));                         \
            RUN(G);                                                                               \
        }                                                                                         \
        for (int r_ = 8 * (G) * q_; r_ < (nrows); r_ += 8) {                                      \
            (g)[0] = (const uint8_t *)row_at((w), (stride), r_);                                  \
            (o)[0] = (out) + r_;                                                                  \
            RUN(1);                                                                               \
        }                                                                                         \
    } while (0)

#define GEMV_DISPATCH(rows_fn, n, w, stride, nrows, y, out)                                               \
    do {                                                                                                  \
        const int q_ = gemv_quarter((stride), (nrows));                                                   \
        float o_[4];                                                                                      \
        for (int i_ = 0; i_ < q_; i_++) {                                                                 \
            rows_fn((n), row_at((w), (stride), i_), (size_t)q_ * (stride), 4, (y), o_);                   \
            gemv_scatter4(o_, (out), i_, q_);                                                             \
        }                                                                                                 \
        for (int r_ = 4 * q_; r_ < (nrows); r_++)                                                         \
            rows_fn((n), row_at((w), (stride), r_), (stride), 1, (y), (out) + r_);                        \
    } while (0)

/* A gemv entry point (kernels_x86.h's signature) that runs fn(k, ...). */
#define GEMV_ENTRY(name, fn, k)                                                                     \
    void name(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y, float *out) { \
        fn(k, n, w_rows, row_stride, nrows, y, out);                                                \
    }

/* vec_dot (reference signature) and gemv entry points of a *_rows kernel. */
#define DEFINE_QDOT(rows_fn, vec_dot_name, gemv_name)                                                        \
    void vec_dot_name(int64_t n, float *s, const void *x, const void *y) { rows_fn(n, x, 0, 1, y, s); }      \
    void gemv_name(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y, float *out) { \
        GEMV_DISPATCH(rows_fn, n, w_rows, row_stride, nrows, y, out);                                        \
    }

/* Bit s of each byte of h moved to bit t (s, t < 8), the other bits
 * cleared: one 16-bit shift by |s - t| (the bit kept stays within its
 * byte) and a mask. */
AINLINE __m256i byte_bit_to(__m256i h, int s, int t) {
    const __m256i x = s < t ? _mm256_slli_epi16(h, t - s) : s > t ? _mm256_srli_epi16(h, s - t) : h;
    return _mm256_and_si256(x, _mm256_set1_epi8((char)(1 << t)));
}

/* Q4_K / Q5_K: 8 (scale, min) 6-bit pairs packed in 12 bytes (see
 * vx_q4_K_unpack_scales), unpacked four at a time in 32-bit words. */
AINLINE void q4k_scales_mins(const uint8_t *p, uint64_t *sc, uint64_t *mn) {
    const uint32_t a = load_u32(p), b = load_u32(p + 4), c = load_u32(p + 8);
    const uint32_t sc_lo = a & 0x3F3F3F3F, mn_lo = b & 0x3F3F3F3F;
    const uint32_t sc_hi = (c & 0x0F0F0F0F) | ((a >> 2) & 0x30303030);
    const uint32_t mn_hi = ((c >> 4) & 0x0F0F0F0F) | ((b >> 2) & 0x30303030);
    *sc = sc_lo | (uint64_t)sc_hi << 32;
    *mn = mn_lo | (uint64_t)mn_hi << 32;
}

/* Q8_K bsums pairwise (sums of 32: the Q4_K/Q5_K sub-blocks), 8 int16. */
AINLINE __m128i bsums32(const vx_block_q8_K *y) {
    return _mm_hadd_epi16(load128(y->bsums), load128(y->bsums + 8));
}

/* ------------------------------------------- canonical order
 *
 * Every quantized type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K..Q6_K; each has a GEMM) computes
 * every output in one canonical order, so that a token's result does not
 * depend on how many tokens share the call or how rows are grouped (batch
 * invariance: greedy output is the same alone or among many requests).
 * Per row, an exact integer dot I_b per block b (32 elements, or a
 * 256-element K super-block; for Q2_K, Q4_K, Q5_K also the mins term M_b; Q4_1
 * and Q5_1 add acc = fma(m_b, s_b, acc) after the first step) and the
 * float steps
 *     acc = fma(dw_b * dy_b, (float)I_b, acc)   [acc = fnma(dmin_b * dy_b, (float)M_b, acc)]
 * in ascending block order from acc = 0. The 32-block types keep two
 * chains per row, even and odd blocks, added at the end (one chain would
 * make a one-row gemv wait on the FMA latency). The gemv keeps 1 or 4
 * rows in vector lanes, the gemm 8 rows per token.
 */

/* {sum a, sum b, sum c, sum d} of four int32 vectors. */
AINLINE __m128i hsum4_epi32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Lane i = sum of the 8 lanes of v[i]. */
AINLINE __m256i hsum8_epi32(const __m256i v[8]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* In-place transpose of an 8x8 matrix of dwords: afterwards lane r of
 * v[q] is what was lane q of v[r]. */
AINLINE void transpose8_epi32(__m256i v[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int q = 0; q < 4; q++) {
        v[q] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x20);
        v[q + 4] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x31);
    }
}

/* Four fp16 values (loaded from four places) as floats. */
AINLINE __m128 f16x4(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
    return _mm_cvtph_ps(_mm_setr_epi16((short)a, (short)b, (short)c, (short)d, 0, 0, 0, 0));
}

/* A GEMM entry point: under min_tok tokens the gemv per token (same
 * bits, see gemv_tokens), else impl(kind, ...); it takes no scratch. */
#define DEFINE_GEMM_ENTRY(name, gemv, impl, kind, min_tok)                                                 \
    void name(int64_t n, const void *w, size_t row_stride, int nrows, const void *act, size_t act_stride, \
              int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {                         \
        if (ntok < (min_tok))                                                                             \
            gemv_tokens(gemv, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate);      \
        else                                                                                              \
            impl(kind, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate);             \
    }

/* Keeps an int16 accumulator chain in program order: integer adds are
 * associative, and GCC's reassociation turned the chains of the GEMM
 * micro-kernels into trees whose 32 live products spilled to the stack
 * (a third of the speed). Emits no instruction. */
#define VX_KEEP(v) __asm__("" : "+x"(v))

#endif
