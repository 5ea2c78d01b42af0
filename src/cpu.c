/*
 * cpu.c - CPU feature detection (CPUID and XGETBV: the OS must have enabled
 * the register state, not only the CPU support it) and the kernel table.
 */
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"
#include "ops.h"
#include "x86/kernels_amx.h"
#include "x86/kernels_x86.h"

typedef struct cpu_feats {
    bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, gfni, amx_tile, amx_int8,
        amx_bf16;
    bool os_avx, os_avx512, os_amx;
    bool amd; /* AuthenticAMD */
} cpu_feats;

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static cpu_feats detect(void) {
    cpu_feats f;
    memset(&f, 0, sizeof f);
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) f.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    bool osxsave = (c >> 27) & 1;
    f.fma = (c >> 12) & 1;
    f.f16c = (c >> 29) & 1;
    if (osxsave) {
        uint64_t xcr0 = xgetbv0();
        f.os_avx = (xcr0 & 0x6) == 0x6;
        f.os_avx512 = f.os_avx && (xcr0 & 0xe0) == 0xe0;
        f.os_amx = (xcr0 & 0x60000) == 0x60000;
    }
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f.avx2 = (b >> 5) & 1;
        f.avx512f = (b >> 16) & 1;
        f.avx512dq = (b >> 17) & 1;
        f.avx512bw = (b >> 30) & 1;
        f.avx512vl = (b >> 31) & 1;
        f.avx512vnni = (c >> 11) & 1;
        f.gfni = (c >> 8) & 1;
        f.amx_bf16 = (d >> 22) & 1;
        f.amx_tile = (d >> 24) & 1;
        f.amx_int8 = (d >> 25) & 1;
        __cpuid_count(7, 1, a, b, c, d);
        f.avx512bf16 = (a >> 5) & 1;
    }
    return f;
}

static bool env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* The tier VX_ISA names (unknown or unset: no cap). */
static vx_isa isa_cap(void) {
    const char *v = getenv("VX_ISA");
    if (!v || !*v) return VX_ISA_AMX;
    if (!strcmp(v, "generic")) return VX_ISA_GENERIC;
    if (!strcmp(v, "avx2")) return VX_ISA_AVX2;
    if (!strcmp(v, "avx512")) return VX_ISA_AVX512;
    return VX_ISA_AMX;
}

/* Linux lets a process use the AMX tile data state (8 KiB per thread)
 * only after asking for it (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA):
 * without it the first tile instruction faults. Asking again is harmless. */
static bool amx_permitted(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return false;
#endif
}

vx_isa vx_cpu_best_isa(void) {
    if (env_set("VX_FORCE_GENERIC")) return VX_ISA_GENERIC;
    cpu_feats f = detect();
    vx_isa isa = VX_ISA_GENERIC;
    if (f.os_avx && f.avx2 && f.fma && f.f16c) {
        isa = VX_ISA_AVX2;
        if (f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni)
            isa = VX_ISA_AVX512;
    }
    const vx_isa cap = isa_cap();
    if (isa == VX_ISA_AVX512 && cap >= VX_ISA_AMX && f.os_amx && f.amx_tile && f.amx_bf16 && amx_permitted())
        isa = VX_ISA_AMX;
    return isa < cap ? isa : cap;
}

const char *vx_cpu_features(void) {
    cpu_feats f = detect();
    /* Constant strings: the set is small and fixed. */
    if (f.os_amx && f.amx_int8 && f.os_avx512 && f.avx512vnni)
        return "AVX2 FMA F16C AVX512F AVX512BW AVX512VL AVX512DQ AVX512VNNI AMX";
    if (f.os_avx512 && f.avx512f && f.avx512vnni) return "AVX2 FMA F16C AVX512F AVX512BW AVX512VL AVX512DQ AVX512VNNI";
    if (f.os_avx512 && f.avx512f) return "AVX2 FMA F16C AVX512F";
    if (f.os_avx && f.avx2 && f.fma) return "AVX2 FMA F16C";
    return "generic";
}

static void kernels_fill(vx_kernels *k, vx_isa isa) {
    k->name = "generic";
    k->dot_f32 = vx_dot_f32_ref;
    k->axpy_f32 = vx_axpy_f32_ref;
    k->matmul = vx_matmul_ref;
    k->f16_to_f32 = vx_f16_to_f32_ref;
    k->exp_shift_sum = vx_exp_shift_sum_ref;
    k->f32_to_f16 = vx_f32_to_f16_ref;
    k->q8_0_to_f32 = vx_q8_0_to_f32_ref;
    k->swiglu = vx_swiglu;
    k->geglu = vx_geglu;
    k->rmsnorm = vx_rmsnorm;
    k->rope = vx_rope_ref;
    k->gemm_f32 = vx_gemm_f32_ref;
    k->gemm_f16b = vx_gemm_f16b_ref;
    k->gemm_abt_f32 = vx_gemm_abt_f32_ref;
    k->gemm_abt_f16b = vx_gemm_abt_f16b_ref;
    k->attn_softmax16 = vx_attn_softmax16_ref;
    k->softcap = vx_softcap_ref;
    k->attn_dec_f16 = vx_attn_dec_f16_ref;
    k->attn_dec_q8_0 = NULL; /* the per-chunk steps (attention.c) */
    k->gemm_amx = NULL;
    k->gemm_amx_glu = NULL;
    k->gemm_amx_scratch = NULL;
    k->f32_to_bf16 = NULL;
    k->attn_tiles_begin = NULL;
    k->attn_tiles_step = NULL;
    k->attn_tiles_end = NULL;
    memset(k->gemv, 0, sizeof k->gemv);
    memset(k->act, 0, sizeof k->act);
    memset(k->gemm, 0, sizeof k->gemm);
    memset(k->gemm_tab, 0, sizeof k->gemm_tab);
    k->gemm_scratch = NULL;
    k->gemm_bf16_f32 = NULL;
    vx_matmul_kernels_ref(k->gemv, k->act);
    if (isa >= VX_ISA_AVX2) {
        k->name = "avx2";
        k->dot_f32 = vx_dot_f32_avx2;
        k->axpy_f32 = vx_axpy_f32_avx2;
        k->f16_to_f32 = vx_f16_to_f32_avx2;
        k->exp_shift_sum = vx_exp_shift_sum_avx2;
        k->f32_to_f16 = vx_f32_to_f16_avx2;
        k->q8_0_to_f32 = vx_q8_0_to_f32_avx2;
        k->swiglu = vx_swiglu_avx2;
        k->geglu = vx_geglu_avx2;
        k->rmsnorm = vx_rmsnorm_avx2;
        k->rope = vx_rope_avx2;
        k->gemm_f32 = vx_gemm_f32_avx2;
        k->gemm_f16b = vx_gemm_f16b_avx2;
        k->gemm_abt_f32 = vx_gemm_abt_f32_avx2;
        k->gemm_abt_f16b = vx_gemm_abt_f16b_avx2;
        k->attn_softmax16 = vx_attn_softmax16_avx2;
        k->softcap = vx_softcap_avx2;
        k->attn_dec_f16 = vx_attn_dec_f16_avx2;
        k->act[VX_TYPE_Q8_0] = vx_quantize_row_q8_0_avx2;
        k->act[VX_TYPE_Q8_1] = vx_quantize_row_q8_1_avx2;
        k->act[VX_TYPE_Q8_K] = vx_quantize_row_q8_K_avx2;
        k->gemv[VX_TYPE_F16] = vx_gemv_f16_avx2;
        k->gemv[VX_TYPE_BF16] = vx_gemv_bf16_avx2;
        k->gemv[VX_TYPE_Q4_0] = vx_gemv_q4_0_avx2;
        k->gemv[VX_TYPE_Q4_1] = vx_gemv_q4_1_avx2;
        k->gemv[VX_TYPE_Q5_0] = vx_gemv_q5_0_avx2;
        k->gemv[VX_TYPE_Q5_1] = vx_gemv_q5_1_avx2;
        k->gemv[VX_TYPE_Q8_0] = vx_gemv_q8_0_avx2;
        k->gemv[VX_TYPE_IQ4_NL] = vx_gemv_iq4_nl_avx2;
        k->gemv[VX_TYPE_MXFP4] = vx_gemv_mxfp4_avx2;
        k->gemv[VX_TYPE_Q2_K] = vx_gemv_q2_K_avx2;
        k->gemv[VX_TYPE_Q3_K] = vx_gemv_q3_K_avx2;
        k->gemv[VX_TYPE_Q4_K] = vx_gemv_q4_K_avx2;
        k->gemv[VX_TYPE_Q5_K] = vx_gemv_q5_K_avx2;
        k->gemv[VX_TYPE_Q6_K] = vx_gemv_q6_K_avx2;
        k->gemm[VX_TYPE_F16] = vx_gemm_f16_avx2;
        k->gemm[VX_TYPE_BF16] = vx_gemm_bf16_avx2;
        k->gemm[VX_TYPE_Q4_0] = vx_gemm_q4_0_avx2;
        k->gemm[VX_TYPE_Q5_0] = vx_gemm_q5_0_avx2;
        k->gemm[VX_TYPE_Q8_0] = vx_gemm_q8_0_avx2;
        k->gemm[VX_TYPE_Q4_1] = vx_gemm_q4_1_avx2;
        k->gemm[VX_TYPE_Q5_1] = vx_gemm_q5_1_avx2;
        k->gemm[VX_TYPE_IQ4_NL] = vx_gemm_iq4_nl_avx2;
        k->gemm[VX_TYPE_MXFP4] = vx_gemm_mxfp4_avx2;
        k->gemm[VX_TYPE_Q4_K] = vx_gemm_q4_K_avx2;
        k->gemm[VX_TYPE_Q5_K] = vx_gemm_q5_K_avx2;
        k->gemm[VX_TYPE_Q3_K] = vx_gemm_q3_K_avx2;
        k->gemm[VX_TYPE_Q2_K] = vx_gemm_q2_K_avx2;
        k->gemm[VX_TYPE_Q6_K] = vx_gemm_q6_K_avx2;
        k->gemv[VX_TYPE_Q4_K_R8] = vx_gemv_q4_K_r8_avx2;
        k->gemv[VX_TYPE_Q6_K_R8] = vx_gemv_q6_K_r8_avx2;
        k->gemm[VX_TYPE_Q4_K_R8] = vx_gemm_q4_K_r8_avx2;
        k->gemm[VX_TYPE_Q6_K_R8] = vx_gemm_q6_K_r8_avx2;
        k->gemv[VX_TYPE_Q5_K_R8] = vx_gemv_q5_K_r8_avx2;
        k->gemm[VX_TYPE_Q5_K_R8] = vx_gemm_q5_K_r8_avx2;
        k->gemv[VX_TYPE_Q3_K_R8] = vx_gemv_q3_K_r8_avx2;
        k->gemv[VX_TYPE_Q2_K_R8] = vx_gemv_q2_K_r8_avx2;
        k->gemm[VX_TYPE_Q3_K_R8] = vx_gemm_q3_K_r8_avx2;
        k->gemm[VX_TYPE_Q2_K_R8] = vx_gemm_q2_K_r8_avx2;
        k->gemv[VX_TYPE_TQ2_0_R8] = vx_gemv_tq2_0_r8_avx2;
        k->gemm[VX_TYPE_TQ2_0_R8] = vx_gemm_tq2_0_r8_avx2;
        k->gemv[VX_TYPE_Q4_0_R8] = vx_gemv_q4_0_r8_avx2;
        k->gemv[VX_TYPE_Q5_0_R8] = vx_gemv_q5_0_r8_avx2;
        k->gemv[VX_TYPE_Q8_0_R8] = vx_gemv_q8_0_r8_avx2;
        k->gemm[VX_TYPE_Q4_0_R8] = vx_gemm_q4_0_r8_avx2;
        k->gemm[VX_TYPE_Q5_0_R8] = vx_gemm_q5_0_r8_avx2;
        k->gemm[VX_TYPE_Q8_0_R8] = vx_gemm_q8_0_r8_avx2;
        k->gemv[VX_TYPE_Q4_1_R8] = vx_gemv_q4_1_r8_avx2;
        k->gemv[VX_TYPE_Q5_1_R8] = vx_gemv_q5_1_r8_avx2;
        k->gemv[VX_TYPE_IQ4_NL_R8] = vx_gemv_iq4_nl_r8_avx2;
        k->gemv[VX_TYPE_MXFP4_R8] = vx_gemv_mxfp4_r8_avx2;
        k->gemm[VX_TYPE_Q4_1_R8] = vx_gemm_q4_1_r8_avx2;
        k->gemm[VX_TYPE_Q5_1_R8] = vx_gemm_q5_1_r8_avx2;
        k->gemm[VX_TYPE_IQ4_NL_R8] = vx_gemm_iq4_nl_r8_avx2;
        k->gemm[VX_TYPE_MXFP4_R8] = vx_gemm_mxfp4_r8_avx2;
        k->gemm_scratch = vx_gemm_half_scratch_avx2;
#define IQ(T, name) k->gemv[VX_TYPE_##T] = vx_gemv_##name##_avx2, k->gemm[VX_TYPE_##T] = vx_gemm_##name##_avx2;
        VX_IQ_GRID_KERNELS(IQ)
#undef IQ
    }
}

void vx_kernels_init(vx_kernels *k, vx_isa isa) {
    kernels_fill(k, isa);
    if (isa >= VX_ISA_AVX512) {
        vx_kernels_add_avx512(k);
        const cpu_feats f = detect();
        /* the K-quants' code bits by GFNI byte maps where the CPU has them
         * (Ice Lake on; not Cascade Lake): the same bits, fewer cycles per
         * record (Q6_K ~12%, Q2_K ~25%) */
        if (f.gfni) {
            k->gemv[VX_TYPE_Q6_K_R8] = vx_gemv_q6_K_r8_gfni_avx512;
            k->gemv[VX_TYPE_Q5_K_R8] = vx_gemv_q5_K_r8_gfni_avx512;
            k->gemv[VX_TYPE_Q3_K_R8] = vx_gemv_q3_K_r8_gfni_avx512;
            k->gemm[VX_TYPE_Q5_K_R8] = vx_gemm_q5_K_r8_gfni_avx512;
            k->gemm[VX_TYPE_Q3_K_R8] = vx_gemm_q3_K_r8_gfni_avx512;
            k->gemv[VX_TYPE_Q2_K_R8] = vx_gemv_q2_K_r8_gfni_avx512;
            k->gemm[VX_TYPE_Q2_K_R8] = vx_gemm_q2_K_r8_gfni_avx512;
            k->gemv[VX_TYPE_TQ2_0_R8] = vx_gemv_tq2_0_r8_gfni_avx512;
            k->gemm[VX_TYPE_TQ2_0_R8] = vx_gemm_tq2_0_r8_gfni_avx512;
        }
        /* the 32-element types' GEMVs with two far 8-row groups per turn
         * on AMD (four on Intel, where four were faster: avx512_gemm.c).
         * Zen 4, 2 threads: bench_gemv_dram's Q8_0 at 82-93% of the
         * same-round pure-read median with two, 43-64% with four (Q5_0
         * 88-106% / 51-72%); decode t/s, medians of 6 alternations,
         * Llama-1B Q8_0 20.0 -> 25.0 (faster in 6 of 6), Qwen2.5-0.5B
         * Q8_0 47.0 -> 53.8 (5 of 6), Q4_0 and Qwen's Q4_K_M within the
         * noise. The same bits either way. */
        if (f.amd) {
            k->gemv[VX_TYPE_Q4_0_R8] = vx_gemv_q4_0_r8_g2_avx512;
            k->gemv[VX_TYPE_Q5_0_R8] = vx_gemv_q5_0_r8_g2_avx512;
            k->gemv[VX_TYPE_Q8_0_R8] = vx_gemv_q8_0_r8_g2_avx512;
            k->gemv[VX_TYPE_Q4_1_R8] = vx_gemv_q4_1_r8_g2_avx512;
            k->gemv[VX_TYPE_Q5_1_R8] = vx_gemv_q5_1_r8_g2_avx512;
            k->gemv[VX_TYPE_IQ4_NL_R8] = vx_gemv_iq4_nl_r8_g2_avx512;
            k->gemv[VX_TYPE_MXFP4_R8] = vx_gemv_mxfp4_r8_g2_avx512;
        }
        /* BF16 prefill on vdpbf16ps where it runs at twice the fp32 FMA
         * rate: AMD's Zen 4/5 (Intel's Cooper Lake and Sapphire Rapids run
         * it at a quarter of their zmm FMA rate per instruction, where the
         * fp32 panels stay faster; the AMX tier sends prefill to its tiles,
         * at the same precision as vdpbf16ps) */
        if (f.avx512bf16 && f.amd) {
            k->gemm_bf16_f32 = k->gemm[VX_TYPE_BF16];
            k->gemm[VX_TYPE_BF16] = vx_gemm_bf16_dp_avx512;
        }
        /* prefill attention in 64-position steps on fp32 FMAs (the AMX
         * tier below replaces it with its tiles) */
        k->attn_tiles_begin = vx_attn_tiles_begin_avx512;
        k->attn_tiles_step = vx_attn_tiles_step_avx512;
        k->attn_tiles_end = vx_attn_tiles_end_avx512;
        k->name = "avx512";
    }
    if (isa >= VX_ISA_AMX) {
        k->gemm_amx = vx_gemm_amx_amx;
        k->gemm_amx_glu = vx_gemm_amx_glu_amx;
        k->gemm_amx_scratch = vx_gemm_amx_scratch_amx;
        k->f32_to_bf16 = vx_f32_to_bf16_amx;
        k->attn_tiles_begin = vx_attn_tiles_begin_amx;
        k->attn_tiles_step = vx_attn_tiles_step_amx;
        k->attn_tiles_end = vx_attn_tiles_end_amx;
        if (detect().amx_int8) { /* every AMX CPU so far; the tier itself asks for bf16 */
            k->gemm[VX_TYPE_Q4_0_R8] = vx_gemm_q4_0_r8_amx;
            k->gemm[VX_TYPE_Q5_0_R8] = vx_gemm_q5_0_r8_amx;
            k->gemm[VX_TYPE_Q8_0_R8] = vx_gemm_q8_0_r8_amx;
            k->gemm[VX_TYPE_Q4_1_R8] = vx_gemm_q4_1_r8_amx;
            k->gemm[VX_TYPE_Q5_1_R8] = vx_gemm_q5_1_r8_amx;
            k->gemm[VX_TYPE_IQ4_NL_R8] = vx_gemm_iq4_nl_r8_amx;
            /* those GEMMs build their own tiles (the table is the VNNI GEMM's) */
            memset(k->gemm_tab, 0, sizeof k->gemm_tab);
        }
        k->name = "amx";
    }
}

void vx_kernels_init_emulated(vx_kernels *k) {
    kernels_fill(k, VX_ISA_AVX2);
    vx_kernels_add_avx512emu(k);
    k->gemv[VX_TYPE_Q6_K_R8] = vx_gemv_q6_K_r8_gfni_avx512emu; /* SIMDe models GFNI anywhere */
    k->gemv[VX_TYPE_Q5_K_R8] = vx_gemv_q5_K_r8_gfni_avx512emu;
    k->gemv[VX_TYPE_Q3_K_R8] = vx_gemv_q3_K_r8_gfni_avx512emu;
    k->gemm[VX_TYPE_Q5_K_R8] = vx_gemm_q5_K_r8_gfni_avx512emu;
    k->gemm[VX_TYPE_Q3_K_R8] = vx_gemm_q3_K_r8_gfni_avx512emu;
    k->gemv[VX_TYPE_Q2_K_R8] = vx_gemv_q2_K_r8_gfni_avx512emu;
    k->gemm[VX_TYPE_Q2_K_R8] = vx_gemm_q2_K_r8_gfni_avx512emu;
    k->gemv[VX_TYPE_TQ2_0_R8] = vx_gemv_tq2_0_r8_gfni_avx512emu;
    k->gemm[VX_TYPE_TQ2_0_R8] = vx_gemm_tq2_0_r8_gfni_avx512emu;
    k->name = "avx512-emu";
}

void vx_kernels_init_emulated_amx(vx_kernels *k) {
    vx_kernels_init_emulated(k);
    k->gemm_amx = vx_gemm_amx_amxemu;
    k->gemm_amx_glu = vx_gemm_amx_glu_amxemu;
    k->gemm_amx_scratch = vx_gemm_amx_scratch_amxemu;
    k->f32_to_bf16 = vx_f32_to_bf16_amxemu;
    k->attn_tiles_begin = vx_attn_tiles_begin_amxemu;
    k->attn_tiles_step = vx_attn_tiles_step_amxemu;
    k->attn_tiles_end = vx_attn_tiles_end_amxemu;
    k->gemm[VX_TYPE_Q4_0_R8] = vx_gemm_q4_0_r8_amxemu;
    k->gemm[VX_TYPE_Q5_0_R8] = vx_gemm_q5_0_r8_amxemu;
    k->gemm[VX_TYPE_Q8_0_R8] = vx_gemm_q8_0_r8_amxemu;
    k->gemm[VX_TYPE_Q4_1_R8] = vx_gemm_q4_1_r8_amxemu;
    k->gemm[VX_TYPE_Q5_1_R8] = vx_gemm_q5_1_r8_amxemu;
    k->gemm[VX_TYPE_IQ4_NL_R8] = vx_gemm_iq4_nl_r8_amxemu;
    memset(k->gemm_tab, 0, sizeof k->gemm_tab);
    k->name = "amx-emu";
}

void vx_kernels_init_best(vx_kernels *k) {
    const vx_isa isa = vx_cpu_best_isa();
    const char *emu = getenv("VX_EMULATE");
    if (isa >= VX_ISA_AVX2 && emu && !strcmp(emu, "avx512"))
        vx_kernels_init_emulated(k);
    else if (isa >= VX_ISA_AVX2 && emu && !strcmp(emu, "amx"))
        vx_kernels_init_emulated_amx(k);
    else
        vx_kernels_init(k, isa);
}

const char *vx_kernels_name(void) {
    vx_kernels k;
    vx_kernels_init_best(&k);
    return k.name;
}
