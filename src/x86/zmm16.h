/*
 * zmm16.h - 16-lane helpers shared by the tile kernels (amx_gemm.c,
 * amx_attn.c, avx512_attn_tiles.c): fp16 loads and the 16 x 16 dword
 * transpose (dword p of row n -> dword n of row p). Included after
 * isa512.h, by .c files only.
 */
#ifndef VX_ZMM16_H
#define VX_ZMM16_H

#include <stdint.h>

/* 16 fp16 values to floats */
static inline __m512 f16x16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}

/* v[n] (16 dwords of row n) -> v[p] (dword p of every row): a 16 x 16
 * transpose in four rounds of in-lane unpacks and lane shuffles. */
static inline __attribute__((always_inline)) void transpose16(__m512i v[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* u[4q + j], 128-bit lane L: element 4L + j of rows 4q .. 4q + 3 */
    for (int j = 0; j < 4; j++) {
        const __m512i a0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        const __m512i a1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        const __m512i b0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        const __m512i b1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
        v[j] = _mm512_shuffle_i32x4(a0, b0, 0x88);
        v[8 + j] = _mm512_shuffle_i32x4(a0, b0, 0xdd);
        v[4 + j] = _mm512_shuffle_i32x4(a1, b1, 0x88);
        v[12 + j] = _mm512_shuffle_i32x4(a1, b1, 0xdd);
    }
}

#endif
