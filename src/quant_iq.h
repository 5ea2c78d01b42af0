/*
 * quant_iq.h - the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S): their code books and one integer form every kernel of
 * them computes in.
 *
 * A block decodes to 256 signed 8-bit integers w, 16 integer scales ls (one
 * per 16 elements) and one float f, element i being f ls[i / 16] w[i]
 * exactly (the file's float arithmetic gives the same number: every factor
 * split off is a power of two). Magnitudes come from the books (8, 25, 43
 * for IQ2; up to 62 for IQ3), IQ1's values -1, 0, +1 plus a shift of
 * +-1/8 become 8 g +- 1, so |w| <= 62 and |ls| <= 31: a 16-element
 * integer dot with Q8_K codes stays far inside int32 and each product
 * pair inside int16 (maddubs).
 */
#ifndef VX_QUANT_IQ_H
#define VX_QUANT_IQ_H

#include <stdbool.h>
#include <stdint.h>

#include "quant.h"

/* The code books (quant_iq_grids.c): byte j of an entry is element j. */
extern const uint64_t vx_iq2xxs_grid[256];
extern const uint64_t vx_iq2xs_grid[512];
extern const uint64_t vx_iq2s_grid[1024];
extern const uint32_t vx_iq3xxs_grid[256];
extern const uint32_t vx_iq3s_grid[512];
extern const uint64_t vx_iq1s_grid[2048]; /* int8 bytes -1, 0, +1 */

/* The eight signs of a 7-bit sign index (IQ2_XXS, IQ2_XS, IQ3_XXS): bit j
 * set = element j negative; the eighth makes the count of minus signs
 * even. */
static inline unsigned vx_iq_signs7(unsigned i) { return (i & 127) | (unsigned)__builtin_parity(i & 127) << 7; }

typedef struct {
    int8_t w[VX_QK_K];
    int16_t ls[VX_QK_K / 16];
    float f;
} vx_iq_block;

/* True for the seven types above. */
bool vx_iq_is_grid(int type);
/* Block blk of a grid type as integers (see above). */
void vx_iq_decode(int type, const void *blk, vx_iq_block *out);
/* The fp16 block scale of an IQ1_M block (it has no field of its own). */
uint16_t vx_iq1_m_scale(const vx_block_iq1_m *b);
/* Sets the fp16 block scale of block blk of a grid type (IQ1_M: in its
 * scale nibbles); every other byte is a valid code. */
void vx_iq_set_scale(int type, void *blk, uint16_t h);

#endif
