/*
 * amx_emu.h - a plain-C model of the AMX tile instructions Vortex uses
 * (ldtilecfg, tilerelease, tilezero, tileloadd, tilestored, tdpbf16ps),
 * so the AMX kernels (src/x86/amx_*.c, compiled with -DVX_EMU) run and are
 * tested on any x86 machine. Semantics from Intel's ISA reference: palette 1,
 * 8 tiles of up to 16 rows x 64 bytes; each instruction checks the shapes
 * it is given against the configuration (a mismatch is #UD on hardware:
 * here it is an assertion, since it is a bug in the kernel, not bad input).
 * tdpbf16ps: c[m][n] += a[m][2k] * b[k][2n] + a[m][2k + 1] * b[k][2n + 1]
 * in fp32 (the products are exact), inputs with denormals read as zero.
 * State is per thread, as on hardware.
 */
#ifndef VX_AMX_EMU_H
#define VX_AMX_EMU_H

#include <stdint.h>
#include <string.h>

#include "common.h"

typedef struct vx_emu_tiles {
    int configured;
    uint8_t rows[8];
    uint16_t colsb[8];
    uint8_t t[8][16][64];
} vx_emu_tiles;

static _Thread_local vx_emu_tiles vx_emu_tile_state;

static inline void vx_emu_tile_loadconfig(const void *cfg) {
    const uint8_t *c = cfg;
    vx_emu_tiles *s = &vx_emu_tile_state;
    VX_ASSERT(c[0] == 1); /* palette 1 */
    for (int i = 0; i < 8; i++) {
        memcpy(&s->colsb[i], c + 16 + 2 * i, 2);
        s->rows[i] = c[48 + i];
        VX_ASSERT(s->rows[i] <= 16 && s->colsb[i] <= 64);
    }
    memset(s->t, 0, sizeof s->t);
    s->configured = 1;
}

static inline void vx_emu_tile_release(void) {
    memset(&vx_emu_tile_state, 0, sizeof vx_emu_tile_state);
}

static inline void vx_emu_tile_zero(int i) {
    VX_ASSERT(vx_emu_tile_state.configured);
    memset(vx_emu_tile_state.t[i], 0, sizeof vx_emu_tile_state.t[i]);
}

static inline void vx_emu_tile_loadd(int i, const void *base, int64_t stride) {
    vx_emu_tiles *s = &vx_emu_tile_state;
    VX_ASSERT(s->configured);
    memset(s->t[i], 0, sizeof s->t[i]);
    for (int r = 0; r < s->rows[i]; r++) memcpy(s->t[i][r], (const uint8_t *)base + r * stride, s->colsb[i]);
}

static inline void vx_emu_tile_stored(int i, void *base, int64_t stride) {
    vx_emu_tiles *s = &vx_emu_tile_state;
    VX_ASSERT(s->configured);
    for (int r = 0; r < s->rows[i]; r++) memcpy((uint8_t *)base + r * stride, s->t[i][r], s->colsb[i]);
}

static inline float vx_emu_bf16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    if ((h & 0x7f80) == 0) h &= 0x8000; /* denormals are zero */
    return vx_bf16_to_fp32(h);
}

/* C += A . B over dwords: with i8, C int32 and four int8 products per
 * dword (tdpbssd), else C fp32 and two bf16 products (tdpbf16ps). */
static inline void vx_emu_tile_dp(int c, int a, int b, int i8) {
    vx_emu_tiles *s = &vx_emu_tile_state;
    VX_ASSERT(s->configured);
    const int M = s->rows[c], N = s->colsb[c] / 4, K = s->colsb[a] / 4;
    VX_ASSERT(s->rows[a] == M && s->rows[b] == K && s->colsb[b] == s->colsb[c]);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            uint8_t *cp = &s->t[c][m][4 * n];
            const uint8_t *ap = s->t[a][m], *bp = &s->t[b][0][4 * n];
            if (i8) {
                int32_t acc;
                memcpy(&acc, cp, 4);
                for (int k = 0; k < K; k++)
                    for (int i = 0; i < 4; i++) acc += (int32_t)(int8_t)ap[4 * k + i] * (int32_t)(int8_t)bp[64 * k + i];
                memcpy(cp, &acc, 4);
            } else {
                float acc;
                memcpy(&acc, cp, 4);
                for (int k = 0; k < K; k++) {
                    acc += vx_emu_bf16(ap + 4 * k) * vx_emu_bf16(bp + 64 * k);
                    acc += vx_emu_bf16(ap + 4 * k + 2) * vx_emu_bf16(bp + 64 * k + 2);
                }
                memcpy(cp, &acc, 4);
            }
        }
}

#undef _tile_loadconfig
#undef _tile_release
#undef _tile_zero
#undef _tile_loadd
#undef _tile_stored
#undef _tile_dpbf16ps
#undef _tile_dpbssd
#define _tile_loadconfig(cfg) vx_emu_tile_loadconfig(cfg)
#define _tile_release() vx_emu_tile_release()
#define _tile_zero(i) vx_emu_tile_zero(i)
#define _tile_loadd(i, base, stride) vx_emu_tile_loadd(i, base, stride)
#define _tile_stored(i, base, stride) vx_emu_tile_stored(i, base, stride)
#define _tile_dpbf16ps(c, a, b) vx_emu_tile_dp(c, a, b, 0)
#define _tile_dpbssd(c, a, b) vx_emu_tile_dp(c, a, b, 1)

#endif
