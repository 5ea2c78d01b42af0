/*
 * amx_util.h - what the AMX kernel files (amx_gemm.c, amx_attn.c) share:
 * the tile configuration (every tile 16 rows x 64 bytes), rounding floats
 * to bf16 in the tiles' pair layout (fp16 loads and the 16 x 16 dword
 * transpose that builds B tiles: zmm16.h).
 * Included after isa512.h (and amx_emu.h under VX_EMU), by .c files only.
 */
#ifndef VX_AMX_UTIL_H
#define VX_AMX_UTIL_H

#include <stdint.h>

#include "zmm16.h" /* f16x16, transpose16 */

/* Tiles 0-7, all 16 rows x 64 bytes. The configuration is a constant:
 * GCC 12 drops stores into a local array that only ldtilecfg reads (its
 * builtin does not tell the optimizer it reads memory), which left the
 * tiles unconfigured (#GP / #UD on the first tile instruction). */
static const uint8_t tile_cfg[64] __attribute__((aligned(64))) = {
    1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,         /* palette 1, start row 0 */
    64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, /* colsb of tiles 0-7 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,         /* tiles 8-15 unused */
    16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0, /* rows of tiles 0-7 */
};

static inline void tiles_config(void) { _tile_loadconfig(tile_cfg); }

/* 32 floats (lo: elements 0-15, hi: 16-31) rounded to bf16 (nearest
 * even; inputs are finite): word i of the result is element i, so dword p
 * holds the pair 2p, 2p + 1. The rounded value's upper half is the bf16. */
static inline __m512i round_bf16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
}

static const int16_t odd_words[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
                                      33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};

/* The floats of bf16 words 0-15 / 16-31 of h (exact: a shift). */
static inline __m512 bf16_words_lo(__m512i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
}
static inline __m512 bf16_words_hi(__m512i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
}

#ifndef VX_EMU
/* AVX512_BF16's vcvtne2ps2bf16 rounds to nearest even as round_bf16 does
 * (it also reads denormal inputs as zero, as the tiles do): one
 * instruction for 32 values, already in element order. */
static inline __m512i bf16x32(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }
#else
static inline __m512i bf16x32(__m512 lo, __m512 hi) {
    return _mm512_permutex2var_epi16(round_bf16(lo), _mm512_loadu_si512((const void *)odd_words), round_bf16(hi));
}
#endif

/* The same split in two: *h = bf16(v), *l = bf16(v - h), so h + l holds 16
 * significant bits (an fp16 value exactly). */
static inline void bf16x32_split(__m512 lo, __m512 hi, __m512i *h, __m512i *l) {
    *h = bf16x32(lo, hi);
    *l = bf16x32(_mm512_sub_ps(lo, bf16_words_lo(*h)), _mm512_sub_ps(hi, bf16_words_hi(*h)));
}

#endif
