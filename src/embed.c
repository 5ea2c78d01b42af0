/*
 * embed.c - pooling names and the normalizations of llama.cpp's
 * --embd-normalize (the vectors themselves come from vx_decode,
 * vx_get_embeddings_ith, and vx_embed_texts in forward.c).
 */
#include <math.h>
#include <string.h>

#include "vortex.h"

static const char *const pooling_names[] = {"none", "mean", "cls", "last"};

const char *vx_pooling_name(vx_pooling p) {
    return p >= VX_POOLING_NONE && p <= VX_POOLING_LAST ? pooling_names[p] : NULL;
}

vx_pooling vx_pooling_from_name(const char *s) {
    for (int i = 0; s && i <= VX_POOLING_LAST; i++)
        if (!strcmp(s, pooling_names[i])) return (vx_pooling)i;
    return VX_POOLING_UNSPECIFIED;
}

void vx_embd_normalize(float *v, int32_t n, int32_t norm) {
    if (norm < 0 || n <= 0) return;
    double sum = 0.0;
    if (norm == 0) { /* max absolute value scaled to the int16 range */
        for (int32_t i = 0; i < n; i++) sum = fmax(sum, fabs((double)v[i]));
        sum /= 32760.0;
    } else if (norm == 1) {
        for (int32_t i = 0; i < n; i++) sum += fabs((double)v[i]);
    } else if (norm == 2) {
        for (int32_t i = 0; i < n; i++) sum += (double)v[i] * (double)v[i];
        sum = sqrt(sum);
    } else { /* in units of the largest value, so that no power overflows */
        double mx = 0.0;
        for (int32_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)v[i]));
        for (int32_t i = 0; mx > 0.0 && i < n; i++) sum += pow(fabs((double)v[i]) / mx, (double)norm);
        sum = mx * pow(sum, 1.0 / (double)norm);
    }
    if (!(sum > 0.0)) return; /* a zero vector (or NaN) stays as it is */
    const double inv = 1.0 / sum;
    for (int32_t i = 0; i < n; i++) v[i] = (float)((double)v[i] * inv);
}
