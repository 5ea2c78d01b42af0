/* kernels_x86.h - declarations of the per-ISA kernels (src/x86/<isa>_*.c,
 * each compiled with its own -m flags; called only after CPU dispatch). */
#ifndef VX_KERNELS_X86_H
#define VX_KERNELS_X86_H

#include <stdint.h>

float vx_dot_f32_avx2(const float *a, const float *b, int64_t n);
void vx_axpy_f32_avx2(float *y, float a, const float *x, int64_t n);

#endif
