/*
 * avx512_init.c - the AVX-512 tier's table entries (compiled natively and
 * emulated, isa512.h): vx_kernels_add_avx512 / vx_kernels_add_avx512emu
 * replace, in a table filled for AVX2 (cpu.c), the kernels this tier
 * speeds up; every other entry stays AVX2. The packed 8-row layouts are
 * the AVX2 tier's (model_repack.c packs for any tier >= AVX2).
 */
#include "isa512.h"

#include "kernels_x86.h"
#include "ops.h"

void VX512(vx_kernels_add)(struct vx_kernels *k) {
    k->gemv[VX_TYPE_Q4_0_R8] = VX512(vx_gemv_q4_0_r8);
    k->gemv[VX_TYPE_Q5_0_R8] = VX512(vx_gemv_q5_0_r8);
    k->gemv[VX_TYPE_Q8_0_R8] = VX512(vx_gemv_q8_0_r8);
    k->gemv[VX_TYPE_Q4_1_R8] = VX512(vx_gemv_q4_1_r8);
    k->gemv[VX_TYPE_Q5_1_R8] = VX512(vx_gemv_q5_1_r8);
    k->gemv[VX_TYPE_IQ4_NL_R8] = VX512(vx_gemv_iq4_nl_r8);
    k->gemv[VX_TYPE_MXFP4_R8] = VX512(vx_gemv_mxfp4_r8);
    k->gemm[VX_TYPE_Q4_0_R8] = VX512(vx_gemm_q4_0_r8);
    k->gemm[VX_TYPE_Q5_0_R8] = VX512(vx_gemm_q5_0_r8);
    k->gemm[VX_TYPE_Q8_0_R8] = VX512(vx_gemm_q8_0_r8);
    k->gemm[VX_TYPE_Q4_1_R8] = VX512(vx_gemm_q4_1_r8);
    k->gemm[VX_TYPE_Q5_1_R8] = VX512(vx_gemm_q5_1_r8);
    k->gemm[VX_TYPE_IQ4_NL_R8] = VX512(vx_gemm_iq4_nl_r8);
    k->gemm[VX_TYPE_MXFP4_R8] = VX512(vx_gemm_mxfp4_r8);
    k->gemm_tab[VX_TYPE_Q4_0_R8] = VX512(vx_gemm_tab_q4_0_r8);
    k->gemm_tab[VX_TYPE_Q5_0_R8] = VX512(vx_gemm_tab_q5_0_r8);
    k->gemm_tab[VX_TYPE_Q8_0_R8] = VX512(vx_gemm_tab_q8_0_r8);
    k->gemm_tab[VX_TYPE_IQ4_NL_R8] = VX512(vx_gemm_tab_iq4_nl_r8);
    k->gemm_tab[VX_TYPE_MXFP4_R8] = VX512(vx_gemm_tab_mxfp4_r8);
    k->gemv[VX_TYPE_Q4_K_R8] = VX512(vx_gemv_q4_K_r8);
    k->gemv[VX_TYPE_Q6_K_R8] = VX512(vx_gemv_q6_K_r8);
    k->gemv[VX_TYPE_Q5_K_R8] = VX512(vx_gemv_q5_K_r8);
    k->gemv[VX_TYPE_Q3_K_R8] = VX512(vx_gemv_q3_K_r8);
    k->gemv[VX_TYPE_Q2_K_R8] = VX512(vx_gemv_q2_K_r8);
    k->gemm[VX_TYPE_Q4_K_R8] = VX512(vx_gemm_q4_K_r8);
    k->gemm[VX_TYPE_Q6_K_R8] = VX512(vx_gemm_q6_K_r8);
    k->gemm[VX_TYPE_Q5_K_R8] = VX512(vx_gemm_q5_K_r8);
    k->gemm[VX_TYPE_Q3_K_R8] = VX512(vx_gemm_q3_K_r8);
    k->gemm[VX_TYPE_Q2_K_R8] = VX512(vx_gemm_q2_K_r8);
    k->gemv[VX_TYPE_TQ2_0_R8] = VX512(vx_gemv_tq2_0_r8);
    k->gemm[VX_TYPE_TQ2_0_R8] = VX512(vx_gemm_tq2_0_r8);
    k->gemm[VX_TYPE_F16] = VX512(vx_gemm_f16);
    k->gemm[VX_TYPE_BF16] = VX512(vx_gemm_bf16);
    k->swiglu = VX512(vx_swiglu);
    k->geglu = VX512(vx_geglu);
    k->attn_dec_f16 = VX512(vx_attn_dec_f16);
    k->attn_dec_q8_0 = VX512(vx_attn_dec_q8_0);
#define IQ(T, name) k->gemv[VX_TYPE_##T] = VX512(vx_gemv_##name), k->gemm[VX_TYPE_##T] = VX512(vx_gemm_##name);
    VX_IQ_GRID_KERNELS(IQ)
#undef IQ
}
