/* name_index.c - see name_index.h */
#include "name_index.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a */
static uint64_t name_hash(const char *s) {
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* The slot holding name, or the empty one where it would go. */
static uint64_t probe(const vx_name_index *x, const char *name, vx_name_of_fn name_of, const void *ctx) {
    uint64_t h = name_hash(name) & (x->cap - 1);
    while (x->slot[h] >= 0 && strcmp(name_of(ctx, x->slot[h]), name) != 0) h = (h + 1) & (x->cap - 1);
    return h;
}

bool vx_name_index_reserve(vx_name_index *x, uint64_t n, vx_name_of_fn name_of, const void *ctx) {
    if (2 * n <= x->cap) return true;
    uint64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    int64_t *slot = malloc(cap * sizeof *slot);
    if (!slot) return false;
    memset(slot, 0xff, cap * sizeof *slot);
    const vx_name_index old = *x;
    x->slot = slot;
    x->cap = cap;
    for (uint64_t h = 0; h < old.cap; h++)
        if (old.slot[h] >= 0) x->slot[probe(x, name_of(ctx, old.slot[h]), name_of, ctx)] = old.slot[h];
    free(old.slot);
    return true;
}

int vx_name_index_add(vx_name_index *x, int64_t i, vx_name_of_fn name_of, const void *ctx) {
    if (!vx_name_index_reserve(x, x->n + 1, name_of, ctx)) return -1;
    const uint64_t h = probe(x, name_of(ctx, i), name_of, ctx);
    if (x->slot[h] >= 0) return 0;
    x->slot[h] = i;
    x->n++;
    return 1;
}

int64_t vx_name_index_find(const vx_name_index *x, const char *name, vx_name_of_fn name_of, const void *ctx) {
    if (!x->cap) return -1;
    return x->slot[probe(x, name, name_of, ctx)];
}

void vx_name_index_free(vx_name_index *x) {
    free(x->slot);
    *x = (vx_name_index){0};
}
