/* embed.h - pooling steps shared by vx_embed_texts and the engine's
 * embedding requests. */
#ifndef VX_EMBED_H
#define VX_EMBED_H

#include <stdbool.h>

#include "vortex.h"

/* Whether an embedding can be pooled this way (none is per token). */
static inline bool vx_pool_valid(vx_pooling pooling) {
    return pooling == VX_POOLING_MEAN || pooling == VX_POOLING_CLS || pooling == VX_POOLING_LAST;
}

/* Whether position p of an n-token text goes into its pooled vector. */
static inline bool vx_pool_wants(vx_pooling pooling, int32_t p, int32_t n) {
    return pooling == VX_POOLING_MEAN || (pooling == VX_POOLING_CLS && p == 0) ||
           (pooling == VX_POOLING_LAST && p == n - 1);
}

/* Adds (mean) or copies (cls, last) token embedding v into out[n_embd]. */
static inline void vx_pool_add(vx_pooling pooling, float *out, const float *v, int32_t n_embd) {
    for (int32_t k = 0; k < n_embd; k++) out[k] = pooling == VX_POOLING_MEAN ? out[k] + v[k] : v[k];
}

/* The mean, once every token is in (n of them). */
static inline void vx_pool_end(vx_pooling pooling, float *out, int32_t n_embd, int32_t n) {
    if (pooling == VX_POOLING_MEAN)
        for (int32_t k = 0; k < n_embd; k++) out[k] /= (float)n;
}

#endif
