/*
 * attention.c - causal attention over the paged KV cache with an online
 * softmax (see attention.h). The arithmetic runs through the kernel table
 * (ops.h): gemm_abt_* for the scores, attn_softmax16 for the per-chunk
 * softmax update, gemm_f32 / gemm_f16b for P.V, f16_to_f32 / q8_0_to_f32
 * where a chunk of the cache is widened once for many rows.
 *
 * Per unit (one query tile against a range of kv heads), per kv head, with
 * Mh = tile tokens x g rows (row = token * g + query head in the group):
 *   Q  [Mh][hd]   query rows
 *   S  [Mh][16]   scores of one 16-position chunk, then softmax numerators P
 *   O  [Mh][hd]   unnormalized output; divided by l at the end
 *   m, l [Mh]     running max and softmax denominator
 * Per chunk: S = Q K^T (K rows read from the cache: f32 directly, fp16
 * directly for a single row or widened once into [16][hd], Q8_0 dequantized
 * once); P = exp(scale S - m_new) under the causal mask; O = corr O + P V
 * with corr = exp(m_old - m_new): one rescale per row and chunk, fused into
 * the P.V product, and each V row is loaded once per tile of rows.
 * Decode over an F16 cache (one token, all positions visible, g <= 8)
 * runs its full chunks through attn_dec_f16, which fuses those three steps
 * for the GQA group and gives their exact bits (over a Q8_0 cache
 * attn_dec_q8_0, where the table has one and it takes the shape); a
 * partial last chunk takes the per-chunk path.
 *
 * Every score is summed in one association (one 8-lane FMA chain, then the
 * lanes' tree, see gemm_abt in avx2_ops.c) by every kernel that computes
 * one, and the softmax sums in exp_shift_sum's order; a row's positions
 * are taken in segments of a->seg (multiples of it apart), each with its
 * own online softmax from a fresh state, and the segments' states folded
 * left to right by fold_rows. So results are bit-identical whatever the
 * tiling, the blocking and the thread split: a token's output does not
 * depend on the batch it came in, nor on which thread ran which segment
 * (a decode of fewer tiles than threads is split by segments, run_unit).
 * Tokens whose positions all precede a chunk skip it (their rows are a
 * prefix of each head's rows), so a long tile wastes nothing on the
 * diagonal.
 */
#include "attention.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "common.h"
#include "quant.h"

enum { CHUNK = 16, MAX_ROWS = 128 };

int32_t vx_attn_tile_tokens(int32_t g) {
    const int32_t t = MAX_ROWS / (g > 0 ? g : 1);
    return t < 1 ? 1 : t;
}

static int32_t pad4(int32_t n) { return (n + 3) & ~3; }
static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Rows of the per-thread state (Q, S, O): at least one GQA group. */
static int32_t max_rows(int32_t g) { return pad4(vx_attn_tile_tokens(g) * g); }

/* Scratch layout of one thread, in floats (each part 64-byte aligned):
 * the state of the segment being visited (m, l, o) and the fold of the
 * segments before it (am, al, ao). */
typedef struct attn_scratch {
    float *q, *s, *o, *m, *l, *corr, *kr, *v, *am, *al, *ao;
    int32_t *nv;
} attn_scratch;

static size_t scratch_layout(int32_t g, int32_t hd, float *base, attn_scratch *sc) {
    const size_t M = (size_t)max_rows(g), H = (size_t)hd;
    enum { NPART = 12 };
    const size_t sizes[NPART] = {M * H, M * CHUNK, M * H, M, M, M, CHUNK * H, CHUNK * H, M, M, M * H, M};
    float **dst[NPART] = {&sc->q, &sc->s, &sc->o, &sc->m, &sc->l, &sc->corr, &sc->kr, &sc->v, &sc->am, &sc->al, &sc->ao, NULL};
    size_t off = 0;
    for (int i = 0; i < NPART; i++) {
        if (base) {
            if (dst[i]) *dst[i] = base + off;
            else sc->nv = (int32_t *)(void *)(base + off);
        }
        off += pad16(sizes[i]);
    }
    return off;
}

size_t vx_attn_scratch_floats(int32_t n_head, int32_t n_head_kv, int32_t head_dim) {
    attn_scratch sc;
    /* the tile attention's state follows (vx_attn_tiles_bytes) */
    return scratch_layout(n_head / n_head_kv, head_dim, NULL, &sc) + pad16(vx_attn_tiles_bytes(head_dim) / 4);
}

int32_t vx_attn_seg_len(int64_t n_ctx) {
    const int64_t per = (n_ctx + 63) / 64;
    return (int32_t)VX_MAX(256, (per + CHUNK - 1) / CHUNK * CHUNK);
}

size_t vx_attn_seg_floats(int32_t seg_max, int32_t g, int32_t head_dim) {
    return (size_t)seg_max * (size_t)g * ((size_t)head_dim + 2);
}

/* Fold a segment's state (m, l, o: rows rows of hd values) into the fold
 * of the segments before it (am, al, ao): the one place this arithmetic
 * lives, so a row's result is the same bits whoever computed which of its
 * segments. A row that saw none of the segment (m = -inf) keeps its fold;
 * a first segment is taken as it is. */
static void fold_rows(float *am, float *al, float *ao, const float *m, const float *l, const float *o,
                      int32_t rows, int32_t hd) {
    for (int32_t r = 0; r < rows; r++) {
        float *dst = ao + (size_t)r * hd;
        const float *src = o + (size_t)r * hd;
        if (m[r] == -INFINITY) continue;
        if (am[r] == -INFINITY) {
            am[r] = m[r];
            al[r] = l[r];
            memcpy(dst, src, (size_t)hd * sizeof(float));
            continue;
        }
        const float mx = VX_MAX(am[r], m[r]), ca = expf(am[r] - mx), cb = expf(m[r] - mx);
        al[r] = al[r] * ca + l[r] * cb;
        for (int32_t d = 0; d < hd; d++) dst[d] = dst[d] * ca + src[d] * cb;
        am[r] = mx;
    }
}

/* An empty fold (no segment yet) for rows rows. */
static void fold_start(const attn_scratch *sc, int32_t rows) {
    for (int32_t r = 0; r < rows; r++) {
        sc->am[r] = -INFINITY;
        sc->al[r] = 0;
    }
}

/* The first row of kv head h at position c0 of the sequence (K or V).
 * The cache is head-major within a block (kv_cache.h): a head's rows are
 * vx_kv_head_bytes apart, its next head's vx_kv_head_stride further. */
static const uint8_t *chunk_row(const vx_attn_args *a, const int32_t *blocks, bool v, int32_t c0, int32_t h) {
    const int32_t bs = vx_kv_block_size(a->kv), blk = blocks[c0 / bs];
    const void *base = v ? vx_kv_v_block(a->kv, a->layer, blk) : vx_kv_k_block(a->kv, a->layer, blk);
    return (const uint8_t *)base + (size_t)h * vx_kv_head_stride(a->kv) +
           (size_t)(c0 % bs) * vx_kv_head_bytes(a->kv);
}

/* Positions from c0 (a multiple of 16) up to end (one too) whose 16-position
 * chunks of head h lie one stride apart, the same for K and V (*cs bytes):
 * the chunks of one block, or of blocks that follow each other in memory. */
static int32_t chunk_run(const vx_attn_args *a, const int32_t *blocks, int32_t c0, int32_t end, int32_t h,
                         int64_t *cs) {
    const uint8_t *k0 = chunk_row(a, blocks, false, c0, h), *v0 = chunk_row(a, blocks, true, c0, h);
    *cs = 0;
    if (c0 + CHUNK >= end) return end - c0;
    const ptrdiff_t dk = chunk_row(a, blocks, false, c0 + CHUNK, h) - k0;
    if (dk != chunk_row(a, blocks, true, c0 + CHUNK, h) - v0) return CHUNK;
    int32_t n = 2;
    while (c0 + n * CHUNK < end && chunk_row(a, blocks, false, c0 + n * CHUNK, h) == k0 + n * dk &&
           chunk_row(a, blocks, true, c0 + n * CHUNK, h) == v0 + n * dk)
        n++;
    *cs = dk;
    return n * CHUNK;
}

/* Whether this call may use the tile attention, and whether a unit of nt
 * tokens does: 16 rows and more (the tiles' height). */
static bool tiles_ok(const vx_kernels *k, const vx_attn_args *a) {
    return a->tiles && !a->seq_len && !a->sinks && k->attn_tiles_step && vx_kv_type_of(a->kv) == VX_KV_F16 && a->head_dim % 32 == 0 &&
           a->head_dim <= 256;
}

static bool use_tiles(const vx_kernels *k, const vx_attn_args *a, int32_t nt) {
    const int32_t g = a->n_head / a->n_head_kv;
    return tiles_ok(k, a) && nt * g >= 16 && nt * g <= VX_ATTN_TILES_MAX_ROWS;
}

/* The end of the positions a unit's tokens [t0, t0 + nt) see: the last
 * one's, or (not causal) their sequence's whole length. */
static int32_t keys_end(const vx_attn_args *a, int32_t t0, int32_t nt) {
    return a->seq_len ? a->seq_len[a->seq_id[t0]] : a->pos[t0] + nt;
}

/* The first position of the step (of `step` positions) holding a token at
 * p's first visible one: 0 without a window, else the step of p - window
 * + 1 (a tile's later tokens' windows start later). */
static int32_t window_start(const vx_attn_args *a, int32_t p, int32_t step) {
    return a->window ? VX_MAX(0, p - a->window + 1) / step * step : 0;
}

/* A unit on the tile attention (see use_tiles), head by head: steps of
 * 64 positions from the start of the sequence, as 4 chunk pointers each. */
static void attend_unit_tiles(const vx_kernels *k, const vx_attn_args *a, int32_t t0, int32_t nt, int32_t h0,
                              int32_t nh, float *scratch) {
    const int32_t hd = a->head_dim, g = a->n_head / a->n_head_kv, QD = a->n_head * hd;
    const int32_t *blocks = vx_kv_blocks(a->kv, a->seq_id[t0]);
    const int32_t p_first = a->pos[t0], n_pos = p_first + nt;
    attn_scratch sc;
    void *st = scratch + scratch_layout(g, hd, NULL, &sc);
    for (int32_t h = h0; h < h0 + nh; h++) {
        const size_t qo = (size_t)t0 * QD + (size_t)h * g * hd;
        k->attn_tiles_begin(st, (int64_t)nt * g, g, hd, a->q + qo, QD, p_first, a->scale, a->softcap, a->window);
        for (int32_t c0 = window_start(a, p_first, 64); c0 < n_pos; c0 += 64) {
            /* this step's chunks and the next one's (prefetched) */
            const uint16_t *kp[8] = {NULL}, *vp[8] = {NULL};
            for (int i = 0; i < 8 && c0 + 16 * i < n_pos; i++) {
                kp[i] = (const uint16_t *)(const void *)chunk_row(a, blocks, false, c0 + 16 * i, h);
                vp[i] = (const uint16_t *)(const void *)chunk_row(a, blocks, true, c0 + 16 * i, h);
            }
            k->attn_tiles_step(st, c0, VX_MIN(64, n_pos - c0), kp, vp, (int64_t)hd);
        }
        k->attn_tiles_end(st, a->out + qo, QD);
    }
}

/* Gemma 2's score shaping on a chunk's scores s (rows of g query heads per
 * token, the first token at position p0; positions c0 ..): the soft cap
 * on scale s (kept in units of s, the softmax applies scale), and
 * positions at or past the window before a row's token set to -1e30. Not
 * -inf: a row whose chunk is all outside its window gets the finite
 * maximum -1e30 scale and P = 1 there, which its own position (always
 * visible, in a later or the same chunk) then wipes out with corr =
 * exp(-1e30 scale - m) = 0; -inf would make exp(-inf + inf) a NaN. */
static void shape_scores(const vx_kernels *k, const vx_attn_args *a, float *s, int32_t rows, int32_t g, int nj,
                         int32_t p0, int32_t c0) {
    const float cap = a->softcap;
    if (cap) k->softcap(s, (int64_t)rows * CHUNK, a->scale / cap, cap / a->scale); /* the fused kernels' bits */
    for (int32_t r = 0; r < rows; r++) {
        float *sr = s + (size_t)r * CHUNK;
        if (a->window) {
            const int32_t p = p0 + r / g;
            for (int j = 0; j < nj && p - (c0 + j) >= a->window; j++) sr[j] = -1e30f;
        }
    }
}

/* The chunks of positions [c_from, c_to) (c_from a multiple of 16) for
 * a unit's rows (see attend_unit) one at a time: scores, shaping, online
 * softmax, P.V through the table's blocks, into the state sc->m, l, o. */
static void chunk_steps(const vx_kernels *k, const vx_attn_args *a, const attn_scratch *cs, int32_t t0, int32_t nt,
                        int32_t h0, int32_t nh, int32_t c_from, int32_t c_to) {
    attn_scratch sc = *cs;
    const vx_kv_type type = vx_kv_type_of(a->kv);
    const int32_t hd = a->head_dim, g = a->n_head / a->n_head_kv;
    const size_t rb = vx_kv_head_bytes(a->kv), hs = vx_kv_head_stride(a->kv);
    const int32_t *blocks = vx_kv_blocks(a->kv, a->seq_id[t0]);
    const int32_t Mh = nt * g; /* rows per head */
    const int32_t p_first = a->pos[t0], n_pos = keys_end(a, t0, nt);
    for (int32_t c0 = c_from; c0 < c_to; c0 += CHUNK) {
        const int nj = (int)VX_MIN(CHUNK, c_to - c0);
        /* causal mask: rows of token i see positions <= pos[t0 + i] (not
         * causal: all of the sequence's) */
        for (int32_t i = 0; i < nt; i++) {
            const int32_t vis = (a->seq_len ? n_pos : p_first + i + 1) - c0;
            const int32_t n = vis < 0 ? 0 : vis > nj ? nj : vis;
            for (int32_t h = 0; h < g; h++) sc.nv[i * g + h] = n;
        }
        const uint8_t *kc = chunk_row(a, blocks, false, c0, h0);
        const uint8_t *vc = chunk_row(a, blocks, true, c0, h0);
        if (c0 + CHUNK < n_pos) {
            /* the next chunk's K and V rows of these heads, while this one
             * computes: the cache is read once per unit, mostly from L3 */
            const int32_t cn = c0 + CHUNK, nn = VX_MIN(CHUNK, n_pos - cn);
            const uint8_t *kn = chunk_row(a, blocks, false, cn, h0);
            const uint8_t *vn = chunk_row(a, blocks, true, cn, h0);
            const size_t span = (size_t)nn * rb;
            for (int32_t hh = 0; hh < nh; hh++)
                for (size_t b = 0; b < span; b += 64) {
                    __builtin_prefetch(kn + (size_t)hh * hs + b, 0, 2);
                    __builtin_prefetch(vn + (size_t)hh * hs + b, 0, 2);
                }
        }
        /* tokens before i_vis see none of this chunk: their rows (a prefix
         * of each head's rows) would get P = 0 and corr = 1, i.e. no change */
        const int32_t i_vis = a->seq_len ? 0 : VX_MAX(0, c0 - p_first), Mv = Mh - i_vis * g;
        for (int32_t hh = 0; hh < nh; hh++) {
            const uint8_t *kr = kc + (size_t)hh * hs, *vr = vc + (size_t)hh * hs;
            /* S = Q K^T, P = softmax numerators, O = corr O + P V */
            const size_t r0 = (size_t)hh * Mh + (size_t)i_vis * g;
            float *s = sc.s + r0 * CHUNK, *o = sc.o + r0 * hd;
            const float *q = sc.q + r0 * hd;
            const float *v = sc.v;
            int64_t ldv = hd;
            switch (type) {
            case VX_KV_F32:
                k->gemm_abt_f32(Mv, nj, hd, q, hd, (const float *)(const void *)kr, (int64_t)(rb / 4), s,
                                CHUNK);
                v = (const float *)(const void *)vr;
                ldv = (int64_t)(rb / 4);
                break;
            case VX_KV_F16:
                /* small tiles (a decode's partial chunk, short prefill tiles)
                 * read K and V directly, converting each row per row of Q;
                 * larger ones widen a K row once for every row of Q, and P.V
                 * widens each V row once per 8 rows of P. The scores are the
                 * same bits either way */
                if (Mv <= 8) {
                    k->gemm_abt_f16b(Mv, nj, hd, q, hd, (const uint16_t *)(const void *)kr,
                                     (int64_t)(rb / 2), s, CHUNK);
                } else {
                    for (int j = 0; j < nj; j++)
                        k->f16_to_f32((const uint16_t *)(const void *)(kr + (size_t)j * rb),
                                      sc.kr + (size_t)j * hd, hd);
                    k->gemm_abt_f32(Mv, nj, hd, q, hd, sc.kr, hd, s, CHUNK);
                }
                if (Mv <= 8) {
                    v = NULL;
                    break;
                }
                for (int j = 0; j < nj; j++)
                    k->f16_to_f32((const uint16_t *)(const void *)(vr + (size_t)j * rb),
                                  sc.v + (size_t)j * hd, hd);
                break;
            case VX_KV_Q8_0:
                for (int j = 0; j < nj; j++) {
                    k->q8_0_to_f32(kr + (size_t)j * rb, sc.kr + (size_t)j * hd, hd);
                    k->q8_0_to_f32(vr + (size_t)j * rb, sc.v + (size_t)j * hd, hd);
                }
                k->gemm_abt_f32(Mv, nj, hd, q, hd, sc.kr, hd, s, CHUNK);
                break;
            }
            if (a->softcap || a->window) shape_scores(k, a, s, Mv, g, nj, p_first + i_vis, c0);
            k->attn_softmax16(s, Mv, sc.nv + (size_t)i_vis * g, a->scale, sc.m + r0, sc.l + r0, sc.corr + r0);
            if (v)
                k->gemm_f32(Mv, hd, nj, s, CHUNK, v, ldv, o, hd, sc.corr + r0);
            else
                k->gemm_f16b(Mv, hd, nj, s, CHUNK, (const uint16_t *)(const void *)vr,
                             (int64_t)(rb / 2), o, hd, sc.corr + r0);
        }
    }
}

/* The chunks of positions [s0, s1) (s0 a multiple of 16) for a unit's
 * rows (see attend_unit), into the state sc->m, l, o: a decode's full
 * chunks through the fused kernel (soft cap included), the rest, and a
 * window's partly masked first chunk, by chunk_steps. */
static void unit_chunks(const vx_kernels *k, const vx_attn_args *a, const attn_scratch *cs, int32_t t0, int32_t nt,
                        int32_t h0, int32_t nh, int32_t s0, int32_t s1) {
    const vx_kv_type type = vx_kv_type_of(a->kv);
    const int32_t hd = a->head_dim, g = a->n_head / a->n_head_kv;
    const size_t rb = vx_kv_head_bytes(a->kv), hs = vx_kv_head_stride(a->kv);
    const int32_t *blocks = vx_kv_blocks(a->kv, a->seq_id[t0]);
    const int32_t p_first = a->pos[t0], n_pos = keys_end(a, t0, nt);

    int32_t c_first = s0;
    if (nt == 1 && g <= 8 && (type == VX_KV_F16 || (type == VX_KV_Q8_0 && k->attn_dec_q8_0))) {
        /* a window's first chunk, where positions before it are masked:
         * one step of the blocks (the rest is visible) */
        if (a->window && p_first - s0 >= a->window && s0 + CHUNK <= s1) {
            chunk_steps(k, a, cs, t0, nt, h0, nh, s0, s0 + CHUNK);
            c_first = s0 + CHUNK;
        }
        /* decode: every position is visible; the full chunks go through the
         * fused kernel, a run of chunks one stride apart per call (blocks
         * that follow each other in memory), with the next run's first
         * chunk to prefetch (a Q8_0 kernel may decline the shape: then the
         * chunks below do it all) */
        const int32_t n_full = s1 / CHUNK * CHUNK;
        for (int32_t c0 = c_first, len; c0 < n_full; c0 += len) {
            int64_t cstride;
            len = chunk_run(a, blocks, c0, n_full, h0, &cstride);
            const int32_t cx = c0 + len;
            const void *kc = chunk_row(a, blocks, false, c0, h0);
            const void *vc = chunk_row(a, blocks, true, c0, h0);
            const void *kx = cx < n_pos ? chunk_row(a, blocks, false, cx, h0) : NULL;
            const void *vx = cx < n_pos ? chunk_row(a, blocks, true, cx, h0) : NULL;
            if (type == VX_KV_F16)
                k->attn_dec_f16(nh, g, hd, cs->q, kc, vc, (int64_t)(rb / 2), (int64_t)(hs / 2), cstride / 2, len, kx,
                                vx, a->scale, a->softcap, cs->m, cs->l, cs->o);
            else if (!k->attn_dec_q8_0(nh, g, hd, cs->q, kc, vc, (int64_t)rb, (int64_t)hs, cstride, len, kx, vx,
                                       a->scale, a->softcap, cs->m, cs->l, cs->o))
                break;
            c_first = cx;
        }
    }
    chunk_steps(k, a, cs, t0, nt, h0, nh, c_first, s1);
}

/* The folded rows (sc->am, al, ao) of tokens [t0, t0 + nt) and kv heads
 * [h0, h0 + nh) to the output: o / l, or with sinks o / (l + exp(sink -
 * m)) (m, the row's maximum, in the same scaled units as the sink). */
static void write_rows(const vx_attn_args *a, const attn_scratch *sc, int32_t t0, int32_t nt, int32_t h0, int32_t nh) {
    const int32_t hd = a->head_dim, g = a->n_head / a->n_head_kv, QD = a->n_head * hd, Mh = nt * g;
    for (int32_t hh = 0; hh < nh; hh++)
        for (int32_t i = 0; i < nt; i++) {
            float *out = a->out + (size_t)(t0 + i) * QD + (size_t)(h0 + hh) * g * hd;
            for (int32_t h = 0; h < g; h++) {
                const size_t r = (size_t)hh * Mh + (size_t)i * g + (size_t)h;
                const float inv =
                    1.0f / (a->sinks ? sc->al[r] + expf(a->sinks[(h0 + hh) * g + h] - sc->am[r]) : sc->al[r]);
                for (int32_t d = 0; d < hd; d++) out[(size_t)h * hd + d] = sc->ao[r * hd + d] * inv;
            }
        }
}

/* One unit: tokens [t0, t0 + nt) (consecutive positions of one sequence)
 * against kv heads [h0, h0 + nh), positions [c_lo, c_hi) of theirs (all:
 * 0, INT32_MAX). Chunks are the outer loop, so a unit reads its heads'
 * part of every cache block in one sweep (contiguous bytes for a head
 * range: the blocks are head-major). Row r of the state is head r / (nt
 * g), token (r / g) % nt, query head r % g of the group. Segment by segment (a->seg), each from a
 * fresh state, folded into am, al, ao and written to the output at the
 * end; with seg_out (a split decode: nt = 1) each segment's state is
 * stored there instead (m, l, o of the nh g rows, segment after segment). */
static void attend_unit(const vx_kernels *k, const vx_attn_args *a, int32_t t0, int32_t nt, int32_t h0, int32_t nh,
                        int32_t c_lo, int32_t c_hi, float *seg_out, float *scratch) {
    if (use_tiles(k, a, nt)) {
        attend_unit_tiles(k, a, t0, nt, h0, nh, scratch);
        return;
    }
    const int32_t hd = a->head_dim, g = a->n_head / a->n_head_kv, QD = a->n_head * hd;
    const int32_t Mh = nt * g, M = nh * Mh; /* rows per head, rows */
    const int32_t p_first = a->pos[t0], n_pos = keys_end(a, t0, nt);
    attn_scratch sc;
    scratch_layout(g, hd, scratch, &sc);
    VX_ASSERT(M <= max_rows(g) && (!seg_out || nt == 1));

    for (int32_t hh = 0; hh < nh; hh++)
        for (int32_t i = 0; i < nt; i++)
            memcpy(sc.q + ((size_t)hh * Mh + (size_t)i * g) * hd,
                   a->q + (size_t)(t0 + i) * QD + (size_t)(h0 + hh) * g * hd,
                   (size_t)g * hd * sizeof(float));
    fold_start(&sc, M);
    const int32_t c_end = VX_MIN(n_pos, c_hi);
    float *so = seg_out;
    for (int32_t s0 = VX_MAX(window_start(a, p_first, CHUNK), c_lo), s1; s0 < c_end; s0 = s1) {
        s1 = a->seg > 0 && !a->seq_len ? (int32_t)VX_MIN((int64_t)c_end, ((int64_t)s0 / a->seg + 1) * a->seg) : c_end;
        memset(sc.o, 0, (size_t)M * hd * sizeof(float));
        for (int32_t r = 0; r < M; r++) {
            sc.m[r] = -INFINITY;
            sc.l[r] = 0;
        }
        unit_chunks(k, a, &sc, t0, nt, h0, nh, s0, s1);
        if (so) {
            memcpy(so, sc.m, (size_t)M * sizeof(float));
            memcpy(so + M, sc.l, (size_t)M * sizeof(float));
            memcpy(so + 2 * M, sc.o, (size_t)M * hd * sizeof(float));
            so += (size_t)M * (hd + 2);
        } else {
            fold_rows(sc.am, sc.al, sc.ao, sc.m, sc.l, sc.o, M, hd);
        }
    }
    if (!seg_out) write_rows(a, &sc, t0, nt, h0, nh);
}

/* Length of the tile starting at token t0: consecutive positions of one
 * sequence, at most T tokens. */
static int32_t tile_len(const vx_attn_args *a, int32_t t0, int32_t T) {
    int32_t nt = 1;
    while (nt < T && t0 + nt < a->n_tok && a->seq_id[t0 + nt] == a->seq_id[t0] &&
           a->pos[t0 + nt] == a->pos[t0] + nt)
        nt++;
    return nt;
}

/* Heads per unit of a tile of rows rows: as many as the state holds (R),
 * but split in parts. */
static int32_t unit_heads(int32_t nkv, int32_t parts, int32_t R, int32_t rows) {
    const int32_t hp = (nkv + parts - 1) / parts;
    return VX_MAX(1, VX_MIN(hp, R / rows));
}

/* The units of a call in order: tile (tokens t0.. of nt, the ti-th tile),
 * kv heads [h, h + hp) (hu ranges a tile), segment part j of sp. T, R,
 * parts: the call's tile length, state rows and parts per tile. */
typedef struct unit_cursor {
    int32_t T, R, parts;
    int32_t t0, nt, ti, h, hp, hu, sp, j;
} unit_cursor;

/* Segments of the token at t0 (its first, and how many): from its
 * window's start to its own position. */
static int32_t seg_first(const vx_attn_args *a, int32_t t0) { return window_start(a, a->pos[t0], CHUNK) / a->seg; }
static int32_t seg_count(const vx_attn_args *a, int32_t t0) { return a->pos[t0] / a->seg - seg_first(a, t0) + 1; }

/* Whether the cursor's tile may be split by segments: a decode token on
 * the block kernels when tiles are fewer than threads, given the buffers. */
static bool seg_split_ok(const vx_kernels *k, const vx_attn_args *a, const unit_cursor *c) {
    return a->seg_buf && a->seg > 0 && !a->seq_len && c->nt == 1 && c->parts > 1 && !use_tiles(k, a, 1) &&
           (c->ti + 1) * a->n_head_kv <= a->seg_groups && seg_count(a, c->t0) <= a->seg_max;
}

/* The cursor's tile's units: heads per unit (hp) and head ranges (hu),
 * and segment parts (sp). A decode token that must be split (fewer tiles
 * than threads) is split by segments of positions first, each part with
 * all the kv heads the state holds: the cache is head-major within a
 * block, so a part streams whole blocks from contiguous memory (figures
 * in kv_cache.h); by heads too only where the segments are fewer than the
 * parts. */
static void cursor_tile(const vx_kernels *k, const vx_attn_args *a, unit_cursor *c) {
    const int32_t nkv = a->n_head_kv, g = a->n_head / nkv;
    c->nt = c->t0 < a->n_tok ? tile_len(a, c->t0, c->T) : 0;
    const bool split = seg_split_ok(k, a, c);
    const int32_t ns = split ? seg_count(a, c->t0) : 1;
    if (split) {
        const int32_t ranges = VX_MIN(nkv, (c->parts + ns - 1) / ns);
        c->hp = VX_MAX(1, VX_MIN((nkv + ranges - 1) / ranges, c->R / g));
    } else {
        c->hp = unit_heads(nkv, c->parts, c->R, VX_MAX(1, c->nt) * g);
    }
    c->hu = (nkv + c->hp - 1) / c->hp;
    c->sp = split ? VX_MIN(ns, (c->parts + c->hu - 1) / c->hu) : 1;
    c->h = c->j = 0;
}

static void cursor_next(const vx_kernels *k, const vx_attn_args *a, unit_cursor *c) {
    if (++c->j < c->sp) return;
    c->j = 0;
    if ((c->h += c->hp) < a->n_head_kv) return;
    c->t0 += c->nt;
    c->ti++;
    cursor_tile(k, a, c);
}

/* The first segment of part j of sp of the token at t0's segments: the
 * parts' positions balanced to the nearest segment (the last segment is
 * partial), from its first segment to one past its last. */
static int32_t seg_bound(const vx_attn_args *a, int32_t t0, int32_t j, int32_t sp) {
    const int32_t s0 = seg_first(a, t0), ns = seg_count(a, t0);
    if (j >= sp) return s0 + ns;
    const int64_t P = (int64_t)a->pos[t0] + 1 - (int64_t)s0 * a->seg, per = (int64_t)sp * a->seg;
    return s0 + (int32_t)VX_MIN((int64_t)ns, ((int64_t)j * P + per / 2) / per);
}

/* The cursor's unit. A part of a split decode stores its segments' states
 * in its group's buffer (tile ti's kv heads [h, h + nh) own slots ti
 * n_head_kv + h ..); the last part of the group to finish folds them all
 * in order (fold_rows, as attend_unit would have) and writes the rows. */
static void run_unit(const vx_kernels *k, const vx_attn_args *a, const unit_cursor *c, float *scratch) {
    const int32_t nh = VX_MIN(c->hp, a->n_head_kv - c->h);
    if (c->sp == 1) {
        attend_unit(k, a, c->t0, c->nt, c->h, nh, 0, INT32_MAX, NULL, scratch);
        return;
    }
    const int32_t hd = a->head_dim, g = a->n_head / a->n_head_kv, M = nh * g;
    const int32_t s0 = seg_first(a, c->t0), ns = seg_count(a, c->t0);
    const int32_t lo = seg_bound(a, c->t0, c->j, c->sp), hi = seg_bound(a, c->t0, c->j + 1, c->sp);
    const int32_t group = c->ti * a->n_head_kv + c->h;
    const size_t per = (size_t)M * ((size_t)hd + 2);
    float *buf = a->seg_buf + (size_t)group * vx_attn_seg_floats(a->seg_max, g, hd);
    attend_unit(k, a, c->t0, 1, c->h, nh, lo * a->seg, (int32_t)VX_MIN((int64_t)hi * a->seg, INT32_MAX),
                buf + (size_t)(lo - s0) * per, scratch);
    if (atomic_fetch_add_explicit(&a->seg_done[group], 1, memory_order_acq_rel) != c->sp - 1) return;
    attn_scratch sc;
    scratch_layout(g, hd, scratch, &sc);
    fold_start(&sc, M);
    for (int32_t s = 0; s < ns; s++) {
        const float *st = buf + (size_t)s * per;
        fold_rows(sc.am, sc.al, sc.ao, st, st + M, st + 2 * M, M, hd);
    }
    write_rows(a, &sc, c->t0, 1, c->h, nh);
    atomic_store_explicit(&a->seg_done[group], 0, memory_order_relaxed);
}

void vx_attention(const vx_kernels *k, const vx_attn_args *a, int ith, int nth, float *scratch) {
    VX_ASSERT(vx_kv_block_size(a->kv) % CHUNK == 0 && a->seg % CHUNK == 0);
    const int32_t nkv = a->n_head_kv, g = a->n_head / nkv;
    /* the tile attention takes taller tiles: each step's K and V are
     * converted once for more rows (units under 16 rows stay within the
     * block kernels' T) */
    const int32_t T = tiles_ok(k, a) ? VX_MAX(1, VX_ATTN_TILES_MAX_ROWS / g) : vx_attn_tile_tokens(g);
    int32_t n_tiles = 0;
    for (int32_t t0 = 0; t0 < a->n_tok; t0 += tile_len(a, t0, T)) n_tiles++;
    /* heads per unit: as many as the state holds, but split each tile into
     * at least nth / n_tiles units so few tiles (decode) still use every
     * thread: by segments of positions where the buffers allow, else by
     * ranges of heads (cursor_tile) */
    unit_cursor first = {T, max_rows(g), n_tiles >= nth ? 1 : (nth + n_tiles - 1) / n_tiles, 0, 0, 0, 0, 0, 0, 0, 0};
    cursor_tile(k, a, &first);
    if (!a->next) { /* dealt round-robin, so long and short tiles mix */
        unit_cursor c = first;
        for (int64_t u = 0; c.t0 < a->n_tok; u++, cursor_next(k, a, &c))
            if (u % nth == ith) run_unit(k, a, &c, scratch);
        return;
    }
    /* handed out from the shared counter: a few units (prefill tiles)
     * last first, the longest (the latest positions) going first; many
     * (a batch of decodes) in order, walked once */
    int64_t n_units = 0;
    for (unit_cursor c = first; c.t0 < a->n_tok; c.t0 += c.nt, c.ti++, cursor_tile(k, a, &c))
        n_units += (int64_t)c.hu * c.sp;
    const bool lpt = n_units <= 64;
    int64_t u = 0;
    unit_cursor c = first;
    for (;;) {
        const int64_t got = atomic_fetch_add_explicit(a->next, 1, memory_order_relaxed);
        if (got >= n_units) break;
        const int64_t want = lpt ? n_units - 1 - got : got;
        if (want < u) { /* back to the start */
            u = 0;
            c = first;
        }
        for (; u < want; u++) cursor_next(k, a, &c);
        run_unit(k, a, &c, scratch);
    }
}

void vx_attention_heads(const vx_kernels *k, const vx_attn_args *a, int32_t h0, int32_t h1, float *scratch) {
    VX_ASSERT(vx_kv_block_size(a->kv) % CHUNK == 0 && a->seg % CHUNK == 0);
    const int32_t g = a->n_head / a->n_head_kv;
    const int32_t T = vx_attn_tile_tokens(g), R = max_rows(g);
    for (int32_t t0 = 0, nt; t0 < a->n_tok; t0 += nt) {
        nt = tile_len(a, t0, T);
        const int32_t hp = VX_MAX(1, R / (nt * g));
        for (int32_t h = h0; h < h1; h += hp)
            attend_unit(k, a, t0, nt, h, VX_MIN(hp, h1 - h), 0, INT32_MAX, NULL, scratch);
    }
}
