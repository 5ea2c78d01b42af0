/*
 * bits512.h - helpers shared by the AVX-512 kernels of the packed types
 * (avx512_gemm.c, avx512_gemm_k.c, amx_gemm_i8.c): the loads that put two
 * 8-row groups' record fields side by side (group A in the low half,
 * group B in the high one), and Q5's byte-field bits. Included after
 * isa512.h and avx2_quant_util.h (AINLINE, load128, load256), by .c
 * files only.
 */
#ifndef VX_BITS512_H
#define VX_BITS512_H

/* 32 bytes at a into lanes 0-7, at b into lanes 8-15 */
AINLINE __m512i pair256(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a)), load256(b), 1);
}
/* 16 bytes at a, then 16 at b */
AINLINE __m256i pair128(const void *a, const void *b) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(load128(a)), load128(b), 1);
}
/* 16 fp16 values: 8 at a (group A), 8 at b (group B) */
AINLINE __m512 f16_pair(const void *a, const void *b) { return _mm512_cvtph_ps(pair128(a, b)); }

/* bits 4 of a byte from bit q of the same byte of h (the Q5_0_R8 qh layout:
 * bit q of byte b of row r's dword is the fifth bit of element 4q + b), by
 * a 16-bit shift that never moves a bit 4 across bytes; other bits: junk. */
AINLINE __m512i q5_shift(__m512i h, int q) {
    switch (q) { /* immediates (q is a constant at every call once inlined) */
    case 0: return _mm512_slli_epi16(h, 4);
    case 1: return _mm512_slli_epi16(h, 3);
    case 2: return _mm512_slli_epi16(h, 2);
    case 3: return _mm512_slli_epi16(h, 1);
    case 4: return h;
    case 5: return _mm512_srli_epi16(h, 1);
    case 6: return _mm512_srli_epi16(h, 2);
    default: return _mm512_srli_epi16(h, 3);
    }
}
/* a | (b & 0x10) bytewise: one vpternlogd (A | (B & C), C = 0x10 bytes) */
AINLINE __m512i or_bit4(__m512i a, __m512i b) {
    return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(0x10), 0xF8);
}

#endif
