/*
 * name_index.h - an open-addressing index from names to entry numbers, for
 * the GGUF reader and writer's keys and tensor names. The names stay in
 * the caller's entries (NUL-terminated); name_of(ctx, i) returns entry i's.
 * The index keeps itself under half full, growing on insert.
 */
#ifndef VX_NAME_INDEX_H
#define VX_NAME_INDEX_H

#include <stdbool.h>
#include <stdint.h>

typedef const char *(*vx_name_of_fn)(const void *ctx, int64_t i);

typedef struct vx_name_index {
    int64_t *slot; /* entry numbers, -1: empty */
    uint64_t cap, n;
} vx_name_index;

/* Room for n names without growing; false: out of memory. */
bool vx_name_index_reserve(vx_name_index *x, uint64_t n, vx_name_of_fn name_of, const void *ctx);
/* Entry i under its name: 1 added, 0 the name is there already, -1 out of memory. */
int vx_name_index_add(vx_name_index *x, int64_t i, vx_name_of_fn name_of, const void *ctx);
/* The entry named name, or -1. */
int64_t vx_name_index_find(const vx_name_index *x, const char *name, vx_name_of_fn name_of, const void *ctx);
void vx_name_index_free(vx_name_index *x);

#endif
