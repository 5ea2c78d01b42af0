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

AINLINE const void *row_at(const void *w, size_t stride, int r) {
    return (const uint8_t *)w + (size_t)r * stride;
}

/* The 32 4-bit codes of a legacy block (byte j holds element j in its low
 * nibble and element j + 16 in its high one) as 32 bytes in element order:
 * both 128-bit lanes get the 16 bytes, the upper lane shifted by 4. */
AINLINE __m256i nibbles32(const uint8_t *qs) {
    const __m256i v = _mm256_broadcastsi128_si256(load128(qs));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)),
                            _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of bits is set, else 0: byte j of the result
 * starts as byte j / 8 of bits, every bit but bit j % 8 is forced on, and
 * only a set bit j % 8 then makes the byte all ones. */
AINLINE __m256i bits_to_bytes(uint32_t bits) {
    const __m256i pick = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
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

/* Software prefetch distance (bytes ahead in each row stream; 0: none)
 * and rows per group in gemv. */
#ifndef VX_GEMV_PREFETCH
#define VX_GEMV_PREFETCH 0
#endif
#ifndef VX_GEMV_ROWS
#define VX_GEMV_ROWS 4
#endif

/* Prefetches the cache lines of a size-byte block dist bytes ahead of p
 * (prefetches never fault, so running past the end is fine). */
AINLINE void prefetch_ahead(const void *p, size_t dist, size_t size) {
#if VX_GEMV_PREFETCH != 0
    for (size_t o = 0; o < size; o += 64) _mm_prefetch((const char *)p + dist + o, _MM_HINT_T0);
#else
    (void)p;
    (void)dist;
    (void)size;
#endif
}

/* The prefetch distance of a group of R rows: VX_GEMV_PREFETCH bytes, or
 * with -1 the same position in the next group's rows (R rows on). */
AINLINE size_t prefetch_dist(int R, size_t stride) {
#if VX_GEMV_PREFETCH < 0
    return stride ? (size_t)R * stride : 1024;
#else
    (void)R;
    (void)stride;
    return VX_GEMV_PREFETCH;
#endif
}

/* Rows in groups of VX_GEMV_ROWS, then the remainder; R is a compile-time
 * constant in every call, so the per-row loops unroll into registers. */
#define GEMV_DISPATCH(rows_fn, n, w, stride, nrows, y, out)                              \
    do {                                                                                 \
        int r_ = 0;                                                                      \
        for (; r_ + VX_GEMV_ROWS <= (nrows); r_ += VX_GEMV_ROWS)                         \
            rows_fn((n), row_at((w), (stride), r_), (stride), VX_GEMV_ROWS, (y), (out) + r_); \
        switch ((nrows) - r_) {                                                          \
        case 3: rows_fn((n), row_at((w), (stride), r_), (stride), 3, (y), (out) + r_); break; \
        case 2: rows_fn((n), row_at((w), (stride), r_), (stride), 2, (y), (out) + r_); break; \
        case 1: rows_fn((n), row_at((w), (stride), r_), (stride), 1, (y), (out) + r_); break; \
        default: break;                                                                  \
        }                                                                                \
    } while (0)

/* vec_dot (reference signature) and gemv entry points of a *_rows kernel. */
#define DEFINE_QDOT(rows_fn, vec_dot_name, gemv_name)                                           \
    void vec_dot_name(int64_t n, float *s, const void *x, const void *y) {                      \
        rows_fn(n, x, 0, 1, y, s);                                                              \
    }                                                                                           \
    void gemv_name(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y, \
                   float *out) {                                                                \
        GEMV_DISPATCH(rows_fn, n, w_rows, row_stride, nrows, y, out);                           \
    }

#endif
