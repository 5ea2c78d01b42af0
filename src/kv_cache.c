/* kv_cache.c - see kv_cache.h. */
#include "kv_cache.h"

#include <stdlib.h>

#include "common.h"

typedef struct seq_state {
    int32_t len;      /* positions written */
    int32_t n_blocks; /* blocks held */
    int32_t *blocks;  /* [max_blocks_per_seq] */
} seq_state;

struct vx_kv_cache {
    vx_kv_params p;
    size_t elem;        /* bytes per element */
    size_t block_bytes; /* bytes of one block of one layer */
    int32_t n_blocks;   /* pool size */
    int32_t max_blocks; /* per sequence */
    uint8_t *k, *v;     /* pools */
    int32_t *free_list; /* stack of free block ids */
    int32_t n_free;
    seq_state *seqs;
};

vx_status vx_kv_init(const vx_kv_params *p, vx_kv_cache **out) {
    *out = NULL;
    if (p->n_layer <= 0 || p->kv_dim <= 0 || p->n_seq_max <= 0 || p->n_ctx <= 0 ||
        p->block_size <= 0)
        return VX_EINVAL;
    vx_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return VX_ENOMEM;
    kv->p = *p;
    kv->elem = p->type == VX_KV_F16 ? 2 : 4;
    kv->max_blocks = (p->n_ctx + p->block_size - 1) / p->block_size;
    kv->n_blocks = p->kv_size > 0 ? (p->kv_size + p->block_size - 1) / p->block_size : kv->max_blocks;
    kv->block_bytes = (size_t)p->block_size * (size_t)p->kv_dim * kv->elem;
    uint64_t total;
    if (vx_mul_ovf((uint64_t)kv->block_bytes, (uint64_t)kv->n_blocks * (uint64_t)p->n_layer,
                   &total) ||
        total > (1ull << 40)) {
        free(kv);
        return VX_ENOMEM;
    }
    /* 64-byte alignment for SIMD loads; calloc-like zeroing is not needed
     * because positions are always written before they are read. */
    if (posix_memalign((void **)&kv->k, 64, total) || posix_memalign((void **)&kv->v, 64, total)) {
        vx_kv_free(kv);
        return VX_ENOMEM;
    }
    kv->free_list = malloc((size_t)kv->n_blocks * sizeof(int32_t));
    kv->seqs = calloc((size_t)p->n_seq_max, sizeof *kv->seqs);
    if (!kv->free_list || !kv->seqs) {
        vx_kv_free(kv);
        return VX_ENOMEM;
    }
    for (int32_t i = 0; i < p->n_seq_max; i++) {
        kv->seqs[i].blocks = malloc((size_t)kv->max_blocks * sizeof(int32_t));
        if (!kv->seqs[i].blocks) {
            vx_kv_free(kv);
            return VX_ENOMEM;
        }
    }
    /* lowest ids on top of the stack, so a single sequence gets ascending blocks */
    for (int32_t i = 0; i < kv->n_blocks; i++) kv->free_list[i] = kv->n_blocks - 1 - i;
    kv->n_free = kv->n_blocks;
    *out = kv;
    return VX_OK;
}

void vx_kv_free(vx_kv_cache *kv) {
    if (!kv) return;
    if (kv->seqs)
        for (int32_t i = 0; i < kv->p.n_seq_max; i++) free(kv->seqs[i].blocks);
    free(kv->seqs);
    free(kv->free_list);
    free(kv->k);
    free(kv->v);
    free(kv);
}

int32_t vx_kv_block_size(const vx_kv_cache *kv) { return kv->p.block_size; }
vx_kv_type vx_kv_type_of(const vx_kv_cache *kv) { return kv->p.type; }
size_t vx_kv_elem_size(const vx_kv_cache *kv) { return kv->elem; }
int32_t vx_kv_n_ctx(const vx_kv_cache *kv) { return kv->p.n_ctx; }
int32_t vx_kv_n_seq_max(const vx_kv_cache *kv) { return kv->p.n_seq_max; }
int32_t vx_kv_free_blocks(const vx_kv_cache *kv) { return kv->n_free; }
int32_t vx_kv_total_blocks(const vx_kv_cache *kv) { return kv->n_blocks; }
int32_t vx_kv_len(const vx_kv_cache *kv, int32_t seq) { return kv->seqs[seq].len; }
const int32_t *vx_kv_blocks(const vx_kv_cache *kv, int32_t seq) { return kv->seqs[seq].blocks; }

vx_status vx_kv_reserve(vx_kv_cache *kv, int32_t seq, int32_t n_pos) {
    VX_ASSERT(seq >= 0 && seq < kv->p.n_seq_max);
    if (n_pos > kv->p.n_ctx) return VX_EFULL;
    seq_state *s = &kv->seqs[seq];
    int32_t need = (n_pos + kv->p.block_size - 1) / kv->p.block_size;
    if (need - s->n_blocks > kv->n_free) return VX_EFULL;
    while (s->n_blocks < need) s->blocks[s->n_blocks++] = kv->free_list[--kv->n_free];
    return VX_OK;
}

void vx_kv_set_len(vx_kv_cache *kv, int32_t seq, int32_t n_pos) {
    VX_ASSERT(n_pos <= kv->seqs[seq].n_blocks * kv->p.block_size);
    kv->seqs[seq].len = n_pos;
}

void vx_kv_truncate(vx_kv_cache *kv, int32_t seq, int32_t p0) {
    seq_state *s = &kv->seqs[seq];
    if (p0 < 0) p0 = 0;
    if (p0 < s->len) s->len = p0;
    int32_t keep = (s->len + kv->p.block_size - 1) / kv->p.block_size;
    while (s->n_blocks > keep) kv->free_list[kv->n_free++] = s->blocks[--s->n_blocks];
}

void *vx_kv_k_block(const vx_kv_cache *kv, int32_t layer, int32_t block) {
    return kv->k + ((size_t)layer * (size_t)kv->n_blocks + (size_t)block) * kv->block_bytes;
}

void *vx_kv_v_block(const vx_kv_cache *kv, int32_t layer, int32_t block) {
    return kv->v + ((size_t)layer * (size_t)kv->n_blocks + (size_t)block) * kv->block_bytes;
}

void *vx_kv_k_row(const vx_kv_cache *kv, int32_t layer, int32_t seq, int32_t pos) {
    const seq_state *s = &kv->seqs[seq];
    int32_t b = pos / kv->p.block_size, o = pos % kv->p.block_size;
    VX_ASSERT(b < s->n_blocks);
    return (uint8_t *)vx_kv_k_block(kv, layer, s->blocks[b]) + (size_t)o * kv->p.kv_dim * kv->elem;
}

void *vx_kv_v_row(const vx_kv_cache *kv, int32_t layer, int32_t seq, int32_t pos) {
    const seq_state *s = &kv->seqs[seq];
    int32_t b = pos / kv->p.block_size, o = pos % kv->p.block_size;
    VX_ASSERT(b < s->n_blocks);
    return (uint8_t *)vx_kv_v_block(kv, layer, s->blocks[b]) + (size_t)o * kv->p.kv_dim * kv->elem;
}
