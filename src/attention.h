/*
 * attention.h - causal self-attention over the paged KV cache,
 * FlashAttention-style: KV positions are visited in chunks of 16 (a cache
 * block or part of one) with an online softmax, so no score row of context
 * length is ever materialized.
 *
 * Work units are (query tile, range of kv heads): a query tile is up to
 * vx_attn_tile_tokens() consecutive positions of one sequence (a single
 * token when decoding), and all query heads of the GQA group of each kv
 * head are its rows. Each K/V chunk of a head is read once per unit and
 * serves every row. Units go round-robin to the threads; when there are
 * fewer tiles than threads (decode of few sequences), a decode token's
 * positions are split into ranges of segments (vx_attn_args), so every
 * thread streams its own cache blocks, and where the segments are too few
 * its kv heads into contiguous ranges.
 */
#ifndef VX_ATTENTION_H
#define VX_ATTENTION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv_cache.h"
#include "ops.h"

typedef struct vx_attn_args {
    const vx_kv_cache *kv; /* already holds K/V of every batch token */
    int32_t layer;
    int32_t n_head, n_head_kv, head_dim;
    float scale;            /* applied to q.k (usually 1/sqrt(head_dim)) */
    const float *q;         /* [n_tok][n_head * head_dim] */
    float *out;             /* [n_tok][n_head * head_dim] */
    const int32_t *pos;     /* [n_tok] */
    const int32_t *seq_id;  /* [n_tok] */
    int32_t n_tok;
    /* query tiles of 16+ rows over an F16 cache may run on the kernel
     * table's AMX attention (attn_tiles_*, bf16 operands: not the bits of
     * the other paths, which are batch-invariant) */
    bool tiles;
    /* a counter shared by the threads (zeroed before the call): units are
     * handed out from it, longest first, so a thread slowed down (a shared
     * host) takes fewer; NULL: a static round-robin deal. Either way each
     * unit's results are the same bits. */
    atomic_int *next;
    /* Gemma 2: scores s = scale q.k become softcap tanh(s / softcap) (0:
     * none), and a token at p sees positions p - window < p' <= p (0: all);
     * the tile kernels take both, the fused decode kernels neither (the
     * per-chunk path runs those units) */
    float softcap;
    int32_t window;
    /* Segments (0: none): a row's positions are taken in segments of seg
     * positions (multiples of seg apart, a multiple of 16), each with its
     * own online softmax, and the segments' states are folded left to
     * right (vx_attn_fold's arithmetic). The result depends only on seg,
     * so with one seg for a context every non-tile path gives the same
     * bits. With seg_buf (seg_groups slots of vx_attn_seg_floats floats)
     * and seg_done (seg_groups counters, zero; each left at zero again),
     * a decode token of fewer tiles than threads is split by segments:
     * each part stores its segments' states and the last part to finish
     * folds them all. Tile i's kv head h takes slot i n_head_kv + h, so
     * (n_threads - 1) n_head_kv slots serve every split. */
    int32_t seg;
    float *seg_buf;
    atomic_int *seg_done;
    int32_t seg_groups, seg_max; /* slots; segments a slot holds */
    /* Not causal (encoders): a token of sequence s sees every position
     * [0, seq_len[s]) of its sequence, all of them already in the cache;
     * NULL: causal. Such calls take neither the tiles nor segments (tiles
     * and seg are ignored). */
    const int32_t *seq_len;
    /* gpt-oss: a learned logit per query head (n_head floats, or NULL)
     * that joins every row's softmax as a position with no value: the
     * result is o / (l + exp(sink - m)). The tile kernels do not take it
     * (tiles is ignored). */
    const float *sinks;
} vx_attn_args;

/* The segment length for a context of n_ctx positions: 256 positions, or
 * more so that a row has at most 64 segments. */
int32_t vx_attn_seg_len(int64_t n_ctx);

/* Floats of one split group's segment states: seg_max segments of g rows
 * of head_dim values, each row's maximum and sum. */
size_t vx_attn_seg_floats(int32_t seg_max, int32_t g, int32_t head_dim);

/* Query tokens per tile for a GQA group of g heads (tile rows = tokens x g). */
int32_t vx_attn_tile_tokens(int32_t g);

/* Floats of per-thread scratch vx_attention() needs. The KV cache block
 * size must be a multiple of 16. */
size_t vx_attn_scratch_floats(int32_t n_head, int32_t n_head_kv, int32_t head_dim);

/* Attention of every batch token: thread ith of nth takes its share of the
 * units. scratch: vx_attn_scratch_floats() floats, 32-byte aligned, owned
 * by this thread. Writes only out rows of its own units. */
void vx_attention(const vx_kernels *k, const vx_attn_args *a, int ith, int nth, float *scratch);

/* Attention of every batch token for kv heads [h0, h1) (and their query
 * heads) only: for a caller that splits the heads itself. The same bits
 * as vx_attention. */
void vx_attention_heads(const vx_kernels *k, const vx_attn_args *a, int32_t h0, int32_t h1, float *scratch);

#endif
