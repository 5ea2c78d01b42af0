/*
 * machine.h - microbenchmarks of the machine's limits, for `vx bench`:
 * DRAM read bandwidth with several interleaved streams per thread, and peak
 * fp32 FMA / int8 dot-product throughput of the best ISA present (AVX2),
 * and AMX bf16 tile throughput where the AMX tier is in use.
 */
#ifndef VX_MACHINE_H
#define VX_MACHINE_H

typedef struct vx_limits {
    int n_threads;
    double read_gbs;     /* best of several passes over a buffer far larger than L3 */
    double fma_gflops;   /* fp32 FMA */
    double int8_gops;    /* int8 multiply-adds x 2 (ops) */
    double amx_bf16_gflops; /* AMX tdpbf16ps (0 without AMX) */
    const char *isa;
} vx_limits;

/* Measures with n_threads threads (0 = all cores); takes about a second. */
int vx_measure_limits(int n_threads, vx_limits *out);

#endif
