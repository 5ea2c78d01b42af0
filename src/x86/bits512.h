/*
 * bits512.h - byte-field helpers shared by the AVX-512 kernels of the
 * packed 32-element types (avx512_gemm.c, amx_gemm_i8.c). Included after
 * isa512.h and avx2_quant_util.h (AINLINE), by .c files only.
 */
#ifndef VX_BITS512_H
#define VX_BITS512_H

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
