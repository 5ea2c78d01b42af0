/*
 * kv_cache.h - the paged key/value cache the attention kernels read
 * through: a pool of fixed-size blocks (block_size positions of every
 * layer), a block table per sequence, reference counts, prefix caching
 * (full blocks identified by a hash of the token prefix they end, kept on
 * an LRU list when unused) and copy-on-write for forked sequences.
 *
 * Layout: K and V pools are [n_layer][n_blocks][block_size][kv_dim] of the
 * element type (F32, F16 or Q8_0 rows), so one layer's blocks are contiguous.
 */
#ifndef VX_KV_CACHE_H
#define VX_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "vortex.h"

typedef struct vx_kv_cache vx_kv_cache;

/* Positions per block of the contexts' caches (vLLM's default). */
#define VX_KV_BLOCK 16
/* n positions rounded up to whole blocks */
static inline int64_t vx_kv_whole_blocks(int64_t n) { return (n + VX_KV_BLOCK - 1) / VX_KV_BLOCK * VX_KV_BLOCK; }

typedef struct vx_kv_params {
    int32_t n_layer;
    int32_t kv_dim;     /* n_head_kv * head_dim */
    int32_t n_seq_max;  /* sequence ids [0, n_seq_max) */
    int32_t n_ctx;      /* max positions of one sequence */
    int32_t kv_size;    /* positions the pool holds in total (0 = n_ctx) */
    int32_t block_size; /* positions per block */
    vx_kv_type type;
    int32_t layer0; /* the first layer held: layers [layer0, layer0 + n_layer) (pipeline parallelism) */
} vx_kv_params;

vx_status vx_kv_init(const vx_kv_params *p, vx_kv_cache **out);
void vx_kv_free(vx_kv_cache *kv);

int32_t vx_kv_block_size(const vx_kv_cache *kv);
vx_kv_type vx_kv_type_of(const vx_kv_cache *kv);
/* Bytes of one position (kv_dim elements); head h of a row starts at
 * h * head_dim elements, i.e. vx_row_size(type, h * head_dim) bytes. */
size_t vx_kv_row_bytes(const vx_kv_cache *kv);
int32_t vx_kv_n_ctx(const vx_kv_cache *kv);
int32_t vx_kv_n_seq_max(const vx_kv_cache *kv);
int32_t vx_kv_free_blocks(const vx_kv_cache *kv);
int32_t vx_kv_total_blocks(const vx_kv_cache *kv);
/* Unreferenced blocks kept for their prefix (counted as free above too). */
int32_t vx_kv_cached_blocks(const vx_kv_cache *kv);
/* Prefix blocks looked up and found by vx_kv_attach_prefix. */
void vx_kv_prefix_stats(const vx_kv_cache *kv, uint64_t *lookups, uint64_t *hits);

/* Positions cached for seq (the next position to write). */
int32_t vx_kv_len(const vx_kv_cache *kv, int32_t seq);
/* Makes room for positions [0, n_pos) of seq; VX_EFULL when the pool or the
 * per-sequence limit is exhausted (nothing changes then). */
vx_status vx_kv_reserve(vx_kv_cache *kv, int32_t seq, int32_t n_pos);
/* Records the token at a reserved position (a block's identity is its tokens). */
void vx_kv_set_token(vx_kv_cache *kv, int32_t seq, int32_t pos, vx_token t);
/* Marks positions [0, n_pos) as written (after a successful forward); blocks
 * that became full are registered for prefix reuse. */
void vx_kv_set_len(vx_kv_cache *kv, int32_t seq, int32_t n_pos);
/* Drops positions >= p0 and returns their blocks to the pool. */
void vx_kv_truncate(vx_kv_cache *kv, int32_t seq, int32_t p0);

/* For an empty sequence: attaches the cached blocks that hold the longest
 * block-aligned prefix of tokens[0, n); returns the positions now cached. */
int32_t vx_kv_attach_prefix(vx_kv_cache *kv, int32_t seq, const vx_token *tokens, int32_t n);
/* Makes empty sequence dst share all of src's blocks; a later write into a
 * shared partial block copies it first. */
vx_status vx_kv_fork(vx_kv_cache *kv, int32_t src, int32_t dst);

/* Block ids of seq, in position order ((len + bs - 1) / bs of them). */
const int32_t *vx_kv_blocks(const vx_kv_cache *kv, int32_t seq);
/* Base of one block of one layer: [block_size][kv_dim] elements. */
void *vx_kv_k_block(const vx_kv_cache *kv, int32_t layer, int32_t block);
void *vx_kv_v_block(const vx_kv_cache *kv, int32_t layer, int32_t block);
/* Row of position pos of seq (which must be reserved). */
void *vx_kv_k_row(const vx_kv_cache *kv, int32_t layer, int32_t seq, int32_t pos);
void *vx_kv_v_row(const vx_kv_cache *kv, int32_t layer, int32_t seq, int32_t pos);

#endif
