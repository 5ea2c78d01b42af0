/*
 * attention.c - causal attention over the paged KV cache with an online
 * softmax (see attention.h). The arithmetic runs through the kernel table
 * (ops.h): gemm_f32 for the score and P.V block products, attn_softmax16
 * for the per-chunk softmax update, pack_kt_* / q8_0_to_f32 / f16_to_f32
 * to bring a chunk of the cache to f32.
 *
 * Per unit, with M = tile tokens x g rows padded to a multiple of 4:
 *   Q  [M][hd]   scaled query rows (row = token * g + head in group)
 *   KT [hd][16]  the chunk's keys, transposed (zero past the chunk end)
 *   S  [M][16]   scores, then softmax numerators P
 *   V  [16][hd]  the chunk's values as f32 (or the cache rows for F32)
 *   O  [M][hd]   unnormalized output; divided by l at the end
 * Per chunk: S = Q KT; P = exp(S - m_new) with the causal mask; O = corr O +
 * P V, where corr = exp(m_old - m_new) is one rescale per row and chunk.
 */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "common.h"
#include "quant.h"

enum { CHUNK = 16, MAX_ROWS = 64 };

int32_t vx_attn_tile_tokens(int32_t g) {
    const int32_t t = MAX_ROWS / (g > 0 ? g : 1);
    return t < 1 ? 1 : t;
}

static int32_t pad4(int32_t n) { return (n + 3) & ~3; }
static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Scratch layout of one thread, in floats (each part 64-byte aligned). */
typedef struct attn_scratch {
    float *q, *s, *o, *m, *l, *corr, *kt, *kr, *v;
    int32_t *nv;
} attn_scratch;

static size_t scratch_layout(int32_t g, int32_t hd, float *base, attn_scratch *sc) {
    const size_t M = (size_t)pad4(vx_attn_tile_tokens(g) * g), H = (size_t)hd;
    const size_t sizes[10] = {M * H, M * CHUNK, M * H, M, M, M, H * CHUNK, CHUNK * H, CHUNK * H, M};
    float **dst[10] = {&sc->q, &sc->s, &sc->o, &sc->m, &sc->l, &sc->corr, &sc->kt, &sc->kr, &sc->v,
                       NULL};
    size_t off = 0;
    for (int i = 0; i < 10; i++) {
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
    return scratch_layout(n_head / n_head_kv, head_dim, NULL, &sc);
}

/* Byte offset of kv head h within a cache row. */
static size_t head_off(vx_kv_type t, int32_t h, int32_t hd) {
    switch (t) {
    case VX_KV_F32: return (size_t)h * hd * 4;
    case VX_KV_F16: return (size_t)h * hd * 2;
    default: return vx_row_size(VX_TYPE_Q8_0, (int64_t)h * hd);
    }
}

/* One unit: tokens [t0, t0 + nt) (consecutive positions of one sequence)
 * against kv head kvh. */
static void attend_tile(const vx_kernels *k, const vx_attn_args *a, int32_t t0, int32_t nt,
                        int32_t kvh, float *scratch) {
    const vx_kv_cache *kv = a->kv;
    const vx_kv_type type = vx_kv_type_of(kv);
    const int32_t hd = a->head_dim, g = a->n_head / a->n_head_kv, QD = a->n_head * hd;
    const int32_t bs = vx_kv_block_size(kv);
    const size_t rb = vx_kv_row_bytes(kv), ho = head_off(type, kvh, hd);
    const size_t hbytes = head_off(type, 1, hd); /* one head of one row */
    const int32_t *blocks = vx_kv_blocks(kv, a->seq_id[t0]);
    const int32_t M = nt * g, Mp = pad4(M);
    const int32_t p_first = a->pos[t0], n_pos = p_first + nt;
    attn_scratch sc;
    scratch_layout(g, hd, scratch, &sc);

    for (int32_t i = 0; i < nt; i++) {
        const float *qt = a->q + (size_t)(t0 + i) * QD + (size_t)kvh * g * hd;
        for (int32_t r = 0; r < g * hd; r++) sc.q[(size_t)i * g * hd + r] = qt[r];
    }
    memset(sc.q + (size_t)M * hd, 0, (size_t)(Mp - M) * hd * sizeof(float));
    memset(sc.o, 0, (size_t)Mp * hd * sizeof(float));
    for (int32_t r = 0; r < Mp; r++) {
        sc.m[r] = -INFINITY;
        sc.l[r] = 0;
    }

    for (int32_t c0 = 0; c0 < n_pos; c0 += CHUNK) {
        const int nj = (int)VX_MIN(CHUNK, n_pos - c0);
        const size_t boff = (size_t)(c0 % bs) * rb + ho;
        const uint8_t *kr = (const uint8_t *)vx_kv_k_block(kv, a->layer, blocks[c0 / bs]) + boff;
        const uint8_t *vr = (const uint8_t *)vx_kv_v_block(kv, a->layer, blocks[c0 / bs]) + boff;
        if (c0 + CHUNK < n_pos) { /* the next chunk's rows of this head, while this one computes */
            const int32_t c1 = c0 + CHUNK;
            const size_t b1 = (size_t)(c1 % bs) * rb + ho;
            const uint8_t *kn = (const uint8_t *)vx_kv_k_block(kv, a->layer, blocks[c1 / bs]) + b1;
            const uint8_t *vn = (const uint8_t *)vx_kv_v_block(kv, a->layer, blocks[c1 / bs]) + b1;
            const int nn = (int)VX_MIN(CHUNK, n_pos - c1);
            for (int j = 0; j < nn; j++)
                for (size_t o = 0; o < hbytes; o += 64) {
                    __builtin_prefetch(kn + (size_t)j * rb + o);
                    __builtin_prefetch(vn + (size_t)j * rb + o);
                }
        }
        const float *v = sc.v;
        int64_t ldv = hd;
        switch (type) {
        case VX_KV_F32:
            k->pack_kt_f32((const float *)(const void *)kr, (int64_t)(rb / 4), nj, hd, sc.kt);
            v = (const float *)(const void *)vr;
            ldv = (int64_t)(rb / 4);
            break;
        case VX_KV_F16:
            k->pack_kt_f16((const uint16_t *)(const void *)kr, (int64_t)(rb / 2), nj, hd, sc.kt);
            for (int j = 0; j < nj; j++)
                k->f16_to_f32((const uint16_t *)(const void *)(vr + (size_t)j * rb),
                              sc.v + (size_t)j * hd, hd);
            break;
        case VX_KV_Q8_0:
            for (int j = 0; j < nj; j++) {
                k->q8_0_to_f32(kr + (size_t)j * rb, sc.kr + (size_t)j * hd, hd);
                k->q8_0_to_f32(vr + (size_t)j * rb, sc.v + (size_t)j * hd, hd);
            }
            k->pack_kt_f32(sc.kr, hd, nj, hd, sc.kt);
            break;
        }
        k->gemm_f32(Mp, CHUNK, hd, sc.q, hd, sc.kt, CHUNK, sc.s, CHUNK, NULL);
        /* causal mask: row of token i sees positions <= pos[t0 + i] */
        for (int32_t i = 0; i < nt; i++) {
            const int32_t vis = p_first + i + 1 - c0;
            const int32_t n = vis < 0 ? 0 : vis > nj ? nj : vis;
            for (int32_t h = 0; h < g; h++) sc.nv[i * g + h] = n;
        }
        for (int32_t r = M; r < Mp; r++) sc.nv[r] = 0;
        k->attn_softmax16(sc.s, Mp, sc.nv, a->scale, sc.m, sc.l, sc.corr);
        k->gemm_f32(Mp, hd, nj, sc.s, CHUNK, v, ldv, sc.o, hd, sc.corr);
    }

    for (int32_t i = 0; i < nt; i++) {
        float *out = a->out + (size_t)(t0 + i) * QD + (size_t)kvh * g * hd;
        for (int32_t h = 0; h < g; h++) {
            const int32_t r = i * g + h;
            const float inv = 1.0f / sc.l[r];
            for (int32_t d = 0; d < hd; d++)
                out[(size_t)h * hd + d] = sc.o[(size_t)r * hd + d] * inv;
        }
    }
}

void vx_attention(const vx_kernels *k, const vx_attn_args *a, int ith, int nth, float *scratch) {
    VX_ASSERT(vx_kv_block_size(a->kv) % CHUNK == 0);
    const int32_t T = vx_attn_tile_tokens(a->n_head / a->n_head_kv);
    /* units (tile, kv head), dealt round-robin so long and short tiles mix */
    int64_t u = 0;
    for (int32_t t0 = 0; t0 < a->n_tok;) {
        int32_t nt = 1;
        while (nt < T && t0 + nt < a->n_tok && a->seq_id[t0 + nt] == a->seq_id[t0] &&
               a->pos[t0 + nt] == a->pos[t0] + nt)
            nt++;
        for (int32_t h = 0; h < a->n_head_kv; h++, u++)
            if (u % nth == ith) attend_tile(k, a, t0, nt, h, scratch);
        t0 += nt;
    }
}
