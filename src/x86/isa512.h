/*
 * isa512.h - the AVX-512 intrinsics for the avx512_*.c kernel files, native
 * or emulated. The Makefile compiles every src/x86/avx512_*.c twice:
 *   - natively (-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni ...):
 *     <immintrin.h>, exported names get the suffix _avx512;
 *   - with -DVX_EMU and the AVX2 flags: the same _mm512_* names come from
 *     SIMD Everywhere (Debian's libsimde-dev, header-only), which implements
 *     them with AVX2 (or plain C), and the names get the suffix
 *     _avx512emu. That copy runs on any AVX2 machine, so the AVX-512 code
 *     paths are tested (and whole models run through them, VX_EMULATE=avx512)
 *     on hardware without AVX-512; its speed means nothing.
 * Kernel files name every exported function VX512(name) and use only
 * _mm512_* / _mm256_* / _mm_* intrinsics that both sides provide: SIMDe
 * 0.7.4 lacks a few 512-bit conversions, supplied below (in the emulated
 * build only) from their 256-bit halves.
 */
#ifndef VX_ISA512_H
#define VX_ISA512_H

#ifdef VX_EMU
/* SIMDe's 64-byte vector types cross function boundaries without AVX-512
 * (clang warns about the ABI; the emulated copy is only ever called from
 * code compiled the same way). */
#pragma GCC diagnostic ignored "-Wpsabi"
#define SIMDE_ENABLE_NATIVE_ALIASES
/* clang: SIMDe marks immediate operands with diagnose_if, which fires on a
 * shift count that is constant only after inlining (bit_to, field2 in
 * avx512_gemm_k.c); SIMDe's own code takes any count. */
#define SIMDE_NO_CHECK_IMMEDIATE_CONSTANT
#include <simde/x86/avx512.h>
#include <simde/x86/gfni.h>
/* SIMDe pulls in <complex.h>, whose macro I would shadow any variable I */
#undef I
#define VX512(name) name##_avx512emu

/* The 512-bit forms SIMDe 0.7.4 does not provide, from two 256-bit halves
 * (exact: lanewise conversions). */
static inline __m512 vx_emu_cvtepi32_ps(__m512i a) {
    const __m256 lo = _mm256_cvtepi32_ps(_mm512_castsi512_si256(a));
    const __m256 hi = _mm256_cvtepi32_ps(_mm512_extracti64x4_epi64(a, 1));
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}
static inline __m512 vx_emu_cvtph_ps(__m256i a) {
    const __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(a));
    const __m256 hi = _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1));
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}
static inline __m512i vx_emu_srai_epi32(__m512i a, int n) {
    const __m128i c = _mm_cvtsi32_si128(n);
    const __m256i lo = _mm256_sra_epi32(_mm512_castsi512_si256(a), c);
    const __m256i hi = _mm256_sra_epi32(_mm512_extracti64x4_epi64(a, 1), c);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
/* 16 bytes -> 16 dwords, each 8-byte half by the AVX2 conversion cvt */
#define VX_EMU_WIDEN_BYTES(name, cvt)                                                          \
    static inline __m512i name(__m128i a) {                                                    \
        const __m256i lo = cvt(a), hi = cvt(_mm_srli_si128(a, 8));                             \
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);                          \
    }
VX_EMU_WIDEN_BYTES(vx_emu_cvtepi8_epi32, _mm256_cvtepi8_epi32)
VX_EMU_WIDEN_BYTES(vx_emu_cvtepu8_epi32, _mm256_cvtepu8_epi32)
#undef VX_EMU_WIDEN_BYTES
/* 256-bit integer vector -> 512-bit, widening each half with the AVX2
 * conversion cvt */
#define VX_EMU_WIDEN(name, cvt)                                                                    \
    static inline __m512i name(__m256i a) {                                                        \
        const __m256i lo = cvt(_mm256_castsi256_si128(a)), hi = cvt(_mm256_extracti128_si256(a, 1)); \
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);                              \
    }
VX_EMU_WIDEN(vx_emu_cvtepu8_epi16, _mm256_cvtepu8_epi16)
VX_EMU_WIDEN(vx_emu_cvtepu16_epi32, _mm256_cvtepu16_epi32)
VX_EMU_WIDEN(vx_emu_cvtepi16_epi32, _mm256_cvtepi16_epi32)
#undef VX_EMU_WIDEN
#define _mm512_cvtepi8_epi32(a) vx_emu_cvtepi8_epi32(a)
#define _mm512_cvtepu8_epi32(a) vx_emu_cvtepu8_epi32(a)
#define _mm512_cvtepi16_epi32(a) vx_emu_cvtepi16_epi32(a)
#define _mm512_cvtepu16_epi32(a) vx_emu_cvtepu16_epi32(a)
#define _mm512_cvtepi32_ps(a) vx_emu_cvtepi32_ps(a)
#define _mm512_srai_epi32(a, n) vx_emu_srai_epi32(a, n)
#define _mm512_cvtph_ps(a) vx_emu_cvtph_ps(a)
#define _mm512_cvtepu8_epi16(a) vx_emu_cvtepu8_epi16(a)
#else
#include <immintrin.h>
#define VX512(name) name##_avx512
#endif

#endif
