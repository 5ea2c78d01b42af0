/*
 * kv_cache.h - the paged key/value cache the attention kernels read
 * through: a pool of fixed-size blocks (block_size positions of every
 * layer), a block table per sequence, reference counts, prefix caching
 * (full blocks identified by a hash of the token prefix they end, kept on
 * an LRU list when unused) and copy-on-write for forked sequences.
 *
 * Layout: K and V pools are [n_layer][n_blocks][n_head_kv][block_size]
 * [head_dim] of the element type (F32, F16 or Q8_0 rows): one layer's
 * blocks are contiguous, and within a block each kv head's positions are
 * (head-major): a head's 16-position chunk is one run of bytes, and the
 * fused decode kernel's order (chunks outer, heads inner) is the memory
 * order. Decoding 16 layers x 3600 positions x 8 kv heads x 64
 * (Llama-3.2-1B) on two threads of a Zen 5 guest, each thread taking all
 * heads of half the blocks (attention.c's segment split): ~3.25 ms a
 * token head-major, ~3.5 position-major; each thread taking half the
 * heads of every block: ~3.9 position-major, ~4.6 head-major (so a
 * context's decode splits positions from 2 nth segments on, forward.c).
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
    int32_t head_dim; /* elements of one kv head (kv_dim a multiple of it; 0: kv_dim, one head) */
} vx_kv_params;

vx_status vx_kv_init(const vx_kv_params *p, vx_kv_cache **out);
void vx_kv_free(vx_kv_cache *kv);

int32_t vx_kv_block_size(const vx_kv_cache *kv);
vx_kv_type vx_kv_type_of(const vx_kv_cache *kv);
/* Bytes of one head of one position (head_dim elements), i.e. from one
 * position's row of a head to the next within a block. */
size_t vx_kv_head_bytes(const vx_kv_cache *kv);
/* Bytes from a head's first row in a block to the next head's. */
size_t vx_kv_head_stride(const vx_kv_cache *kv);
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
/* Base of one block of one layer: [n_head_kv][block_size][head_dim]. */
void *vx_kv_k_block(const vx_kv_cache *kv, int32_t layer, int32_t block);
void *vx_kv_v_block(const vx_kv_cache *kv, int32_t layer, int32_t block);
/* Head h's row (head_dim elements) of position pos of seq (which must be
 * reserved). */
void *vx_kv_k_head(const vx_kv_cache *kv, int32_t layer, int32_t seq, int32_t pos, int32_t h);
void *vx_kv_v_head(const vx_kv_cache *kv, int32_t layer, int32_t seq, int32_t pos, int32_t h);

#endif
