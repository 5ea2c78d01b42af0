/*
 * kv_cache.c - the paged KV cache (see kv_cache.h), organized like a page
 * cache: a pool of fixed-size blocks, a block table per sequence, a
 * reference count per block. A block that is full has an identity: a hash
 * of its tokens chained with its predecessor's hash (so it names the whole
 * prefix). Identified blocks that nobody references stay on an LRU list,
 * still findable by hash, until the pool needs them: a later sequence with
 * the same prefix attaches them instead of recomputing (prefix caching).
 * A sequence writing into a block others share copies it first
 * (copy-on-write); only partial blocks can be shared that way, by a fork.
 */
#include "kv_cache.h"

#include <stdlib.h>

#include "common.h"

typedef struct seq_state {
    int32_t len;      /* positions written */
    int32_t n_blocks; /* blocks held */
    int32_t *blocks;  /* [max_blocks_per_seq] */
} seq_state;

typedef struct block_meta {
    int32_t ref;        /* sequences holding it */
    bool hashed;        /* full and registered in the hash table */
    uint64_t hash;      /* identity of the prefix ending with this block */
    uint64_t parent;    /* identity of the prefix before it (0 for the first) */
    int32_t lru_prev, lru_next; /* on the LRU list when hashed && ref == 0 */
    int32_t hnext;      /* hash bucket chain */
} block_meta;

struct vx_kv_cache {
    vx_kv_params p;
    size_t head_bytes;  /* bytes of one position's head_dim elements */
    size_t head_stride; /* bytes of one head's block_size positions */
    size_t block_bytes; /* bytes of one block of one layer */
    int32_t n_blocks;   /* pool size */
    int32_t max_blocks; /* per sequence */
    uint8_t *k, *v;     /* pools */
    int32_t *free_list; /* stack of free (unidentified, unreferenced) blocks */
    int32_t n_free;
    block_meta *meta;   /* [n_blocks] */
    vx_token *tokens;   /* [n_blocks][block_size] token of every position */
    int32_t lru_head, lru_tail, n_lru; /* least recently used first */
    int32_t *buckets;   /* [n_buckets] hash table of identified blocks */
    uint32_t n_buckets;
    seq_state *seqs;
    uint64_t lookups, hits; /* prefix blocks asked for / found */
};

vx_status vx_kv_init(const vx_kv_params *p, vx_kv_cache **out) {
    *out = NULL;
    if (p->n_layer <= 0 || p->kv_dim <= 0 || p->n_seq_max <= 0 || p->n_ctx <= 0 ||
        p->block_size <= 0)
        return VX_EINVAL;
    const int32_t hd = p->head_dim > 0 ? p->head_dim : p->kv_dim;
    if (p->kv_dim % hd != 0 || (p->type == VX_KV_Q8_0 && hd % 32 != 0)) return VX_EINVAL;
    vx_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return VX_ENOMEM;
    kv->p = *p;
    kv->p.head_dim = hd;
    kv->head_bytes = p->type == VX_KV_Q8_0 ? (size_t)hd / 32 * 34 : (size_t)hd * (p->type == VX_KV_F16 ? 2 : 4);
    kv->head_stride = (size_t)p->block_size * kv->head_bytes;
    kv->max_blocks = (p->n_ctx + p->block_size - 1) / p->block_size;
    kv->n_blocks = p->kv_size > 0 ? (p->kv_size + p->block_size - 1) / p->block_size : kv->max_blocks;
    kv->block_bytes = (size_t)(p->kv_dim / hd) * kv->head_stride;
    uint64_t total;
    if (vx_mul_ovf((uint64_t)kv->block_bytes, (uint64_t)kv->n_blocks * (uint64_t)p->n_layer,
                   &total) ||
        total > (1ull << 40)) {
        free(kv);
        return VX_ENOMEM;
    }
    /* 64-byte alignment for SIMD loads; no zeroing: positions are always
     * written before they are read */
    if (posix_memalign((void **)&kv->k, 64, total) || posix_memalign((void **)&kv->v, 64, total)) {
        vx_kv_free(kv);
        return VX_ENOMEM;
    }
    kv->n_buckets = 64;
    while (kv->n_buckets < (uint32_t)kv->n_blocks) kv->n_buckets <<= 1;
    kv->free_list = malloc((size_t)kv->n_blocks * sizeof(int32_t));
    kv->meta = calloc((size_t)kv->n_blocks, sizeof *kv->meta);
    kv->tokens = malloc((size_t)kv->n_blocks * (size_t)p->block_size * sizeof(vx_token));
    kv->buckets = malloc(kv->n_buckets * sizeof(int32_t));
    kv->seqs = calloc((size_t)p->n_seq_max, sizeof *kv->seqs);
    if (!kv->free_list || !kv->meta || !kv->tokens || !kv->buckets || !kv->seqs) {
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
    for (uint32_t i = 0; i < kv->n_buckets; i++) kv->buckets[i] = -1;
    /* lowest ids on top of the stack, so a single sequence gets ascending blocks */
    for (int32_t i = 0; i < kv->n_blocks; i++) kv->free_list[i] = kv->n_blocks - 1 - i;
    kv->n_free = kv->n_blocks;
    kv->lru_head = kv->lru_tail = -1;
    *out = kv;
    return VX_OK;
}

void vx_kv_free(vx_kv_cache *kv) {
    if (!kv) return;
    if (kv->seqs)
        for (int32_t i = 0; i < kv->p.n_seq_max; i++) free(kv->seqs[i].blocks);
    free(kv->seqs);
    free(kv->free_list);
    free(kv->meta);
    free(kv->tokens);
    free(kv->buckets);
    free(kv->k);
    free(kv->v);
    free(kv);
}

int32_t vx_kv_block_size(const vx_kv_cache *kv) { return kv->p.block_size; }
vx_kv_type vx_kv_type_of(const vx_kv_cache *kv) { return kv->p.type; }
size_t vx_kv_head_bytes(const vx_kv_cache *kv) { return kv->head_bytes; }
size_t vx_kv_head_stride(const vx_kv_cache *kv) { return kv->head_stride; }
int32_t vx_kv_n_ctx(const vx_kv_cache *kv) { return kv->p.n_ctx; }
int32_t vx_kv_n_seq_max(const vx_kv_cache *kv) { return kv->p.n_seq_max; }
int32_t vx_kv_free_blocks(const vx_kv_cache *kv) { return kv->n_free + kv->n_lru; }
int32_t vx_kv_total_blocks(const vx_kv_cache *kv) { return kv->n_blocks; }
int32_t vx_kv_cached_blocks(const vx_kv_cache *kv) { return kv->n_lru; }
int32_t vx_kv_len(const vx_kv_cache *kv, int32_t seq) { return kv->seqs[seq].len; }
const int32_t *vx_kv_blocks(const vx_kv_cache *kv, int32_t seq) { return kv->seqs[seq].blocks; }

void vx_kv_prefix_stats(const vx_kv_cache *kv, uint64_t *lookups, uint64_t *hits) {
    if (lookups) *lookups = kv->lookups;
    if (hits) *hits = kv->hits;
}

/* ------------------------------------------------------------ LRU, hash */

static void lru_remove(vx_kv_cache *kv, int32_t b) {
    block_meta *m = &kv->meta[b];
    if (m->lru_prev >= 0) kv->meta[m->lru_prev].lru_next = m->lru_next;
    else kv->lru_head = m->lru_next;
    if (m->lru_next >= 0) kv->meta[m->lru_next].lru_prev = m->lru_prev;
    else kv->lru_tail = m->lru_prev;
    kv->n_lru--;
}

static void lru_push(vx_kv_cache *kv, int32_t b) {
    block_meta *m = &kv->meta[b];
    m->lru_next = -1;
    m->lru_prev = kv->lru_tail;
    if (kv->lru_tail >= 0) kv->meta[kv->lru_tail].lru_next = b;
    else kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_lru++;
}

static uint64_t block_hash(uint64_t parent, const vx_token *t, int32_t n) {
    uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)t[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h ? h : 1; /* 0 means "no parent" */
}

static void hash_remove(vx_kv_cache *kv, int32_t b) {
    int32_t *pp = &kv->buckets[kv->meta[b].hash & (kv->n_buckets - 1)];
    while (*pp >= 0 && *pp != b) pp = &kv->meta[*pp].hnext;
    if (*pp == b) *pp = kv->meta[b].hnext;
    kv->meta[b].hashed = false;
}

static int32_t hash_find(const vx_kv_cache *kv, uint64_t h, uint64_t parent, const vx_token *t) {
    const int32_t bs = kv->p.block_size;
    for (int32_t b = kv->buckets[h & (kv->n_buckets - 1)]; b >= 0; b = kv->meta[b].hnext) {
        const block_meta *m = &kv->meta[b];
        if (m->hash == h && m->parent == parent &&
            memcmp(kv->tokens + (size_t)b * bs, t, (size_t)bs * sizeof *t) == 0)
            return b;
    }
    return -1;
}

static int cmp_block_asc(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}
static int cmp_block_desc(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x < y) - (x > y);
}

/* Moves the up to EVICT_BATCH least recently used cached blocks to the free
 * stack (forgetting their identities), lowest block on top. Sequences release
 * their blocks tail first (children reach the LRU list before their parents,
 * and so are evicted first), so the LRU list hands blocks out in descending
 * order; attention reads a block table front to back, and ascending runs of
 * blocks are contiguous memory it streams (hardware prefetch) where
 * descending ones are not. Evicting a batch in LRU order and handing it out
 * in ascending order keeps the eviction order and makes runs ascend; it
 * evicts at most EVICT_BATCH - 1 blocks earlier than strictly needed. */
enum { EVICT_BATCH = 16 };
static void evict_batch(vx_kv_cache *kv) {
    int32_t *dst = kv->free_list + kv->n_free; /* n_free == 0 here */
    int32_t n = 0;
    while (n < EVICT_BATCH && kv->lru_head >= 0) {
        const int32_t b = kv->lru_head;
        lru_remove(kv, b);
        hash_remove(kv, b);
        kv->meta[b].hashed = false;
        dst[n++] = b;
    }
    qsort(dst, (size_t)n, sizeof *dst, cmp_block_desc);
    kv->n_free += n;
}

/* A block for writing: a free one, else one of the least recently used
 * cached ones (forgetting its identity); -1 when every block is referenced. */
static int32_t alloc_block(vx_kv_cache *kv) {
    if (kv->n_free == 0) evict_batch(kv);
    if (kv->n_free == 0) return -1;
    const int32_t b = kv->free_list[--kv->n_free];
    kv->meta[b].ref = 1;
    kv->meta[b].hashed = false;
    return b;
}

static void unref_block(vx_kv_cache *kv, int32_t b) {
    block_meta *m = &kv->meta[b];
    VX_ASSERT(m->ref > 0);
    if (--m->ref > 0) return;
    if (m->hashed) lru_push(kv, b); /* still worth keeping for its prefix */
    else kv->free_list[kv->n_free++] = b;
}

/* ------------------------------------------------------------ sequences */

static void copy_block(vx_kv_cache *kv, int32_t dst, int32_t src) {
    for (int32_t l = kv->p.layer0; l < kv->p.layer0 + kv->p.n_layer; l++) {
        memcpy(vx_kv_k_block(kv, l, dst), vx_kv_k_block(kv, l, src), kv->block_bytes);
        memcpy(vx_kv_v_block(kv, l, dst), vx_kv_v_block(kv, l, src), kv->block_bytes);
    }
    memcpy(kv->tokens + (size_t)dst * kv->p.block_size, kv->tokens + (size_t)src * kv->p.block_size,
           (size_t)kv->p.block_size * sizeof(vx_token));
}

vx_status vx_kv_reserve(vx_kv_cache *kv, int32_t seq, int32_t n_pos) {
    VX_ASSERT(seq >= 0 && seq < kv->p.n_seq_max);
    if (n_pos > kv->p.n_ctx) return VX_EFULL;
    seq_state *s = &kv->seqs[seq];
    const int32_t bs = kv->p.block_size;
    const int32_t need = (n_pos + bs - 1) / bs;
    /* the block the next write lands in, if it is partial and shared */
    const bool cow = s->len % bs != 0 && s->len < n_pos && kv->meta[s->blocks[s->len / bs]].ref > 1;
    if (need - s->n_blocks + (cow ? 1 : 0) > vx_kv_free_blocks(kv)) return VX_EFULL;
    if (cow) {
        const int32_t i = s->len / bs, old = s->blocks[i];
        const int32_t b = alloc_block(kv);
        copy_block(kv, b, old);
        unref_block(kv, old);
        s->blocks[i] = b;
    }
    const int32_t first_new = s->n_blocks;
    while (s->n_blocks < need) s->blocks[s->n_blocks++] = alloc_block(kv);
    /* free-stack blocks and an evicted batch: one ascending run */
    if (need - first_new > 1)
        qsort(s->blocks + first_new, (size_t)(need - first_new), sizeof(int32_t), cmp_block_asc);
    return VX_OK;
}

void vx_kv_set_token(vx_kv_cache *kv, int32_t seq, int32_t pos, vx_token t) {
    const seq_state *s = &kv->seqs[seq];
    const int32_t bs = kv->p.block_size;
    VX_ASSERT(pos / bs < s->n_blocks);
    kv->tokens[(size_t)s->blocks[pos / bs] * bs + pos % bs] = t;
}

void vx_kv_set_len(vx_kv_cache *kv, int32_t seq, int32_t n_pos) {
    seq_state *s = &kv->seqs[seq];
    const int32_t bs = kv->p.block_size;
    VX_ASSERT(n_pos <= s->n_blocks * bs);
    /* blocks that became full get their identity */
    for (int32_t i = s->len / bs; i < n_pos / bs; i++) {
        const int32_t b = s->blocks[i];
        block_meta *m = &kv->meta[b];
        if (m->hashed) continue;
        m->parent = i > 0 ? kv->meta[s->blocks[i - 1]].hash : 0;
        if (i > 0 && !kv->meta[s->blocks[i - 1]].hashed) break; /* no identity without a parent */
        m->hash = block_hash(m->parent, kv->tokens + (size_t)b * bs, bs);
        if (hash_find(kv, m->hash, m->parent, kv->tokens + (size_t)b * bs) >= 0) {
            /* the same prefix is cached already: ours stays anonymous, but the
             * chain continues through the hash value alone */
            continue;
        }
        uint32_t bucket = (uint32_t)(m->hash & (kv->n_buckets - 1));
        m->hnext = kv->buckets[bucket];
        kv->buckets[bucket] = b;
        m->hashed = true;
    }
    s->len = n_pos;
}

void vx_kv_truncate(vx_kv_cache *kv, int32_t seq, int32_t p0) {
    seq_state *s = &kv->seqs[seq];
    if (p0 < 0) p0 = 0;
    if (p0 < s->len) s->len = p0;
    const int32_t bs = kv->p.block_size;
    const int32_t keep = (s->len + bs - 1) / bs;
    /* a kept partial block that was identified as full no longer is */
    if (s->len % bs != 0 && keep > 0) {
        const int32_t b = s->blocks[keep - 1];
        if (kv->meta[b].hashed && kv->meta[b].ref == 1) hash_remove(kv, b);
    }
    /* release the tail first, so children reach the LRU before parents */
    while (s->n_blocks > keep) unref_block(kv, s->blocks[--s->n_blocks]);
}

int32_t vx_kv_attach_prefix(vx_kv_cache *kv, int32_t seq, const vx_token *tokens, int32_t n) {
    seq_state *s = &kv->seqs[seq];
    VX_ASSERT(s->len == 0 && s->n_blocks == 0);
    const int32_t bs = kv->p.block_size;
    uint64_t parent = 0;
    int32_t i = 0;
    for (; (i + 1) * bs <= n && i < kv->max_blocks; i++) {
        const vx_token *t = tokens + (size_t)i * bs;
        const uint64_t h = block_hash(parent, t, bs);
        kv->lookups++;
        const int32_t b = hash_find(kv, h, parent, t);
        if (b < 0) break;
        kv->hits++;
        if (kv->meta[b].ref == 0) lru_remove(kv, b);
        kv->meta[b].ref++;
        s->blocks[s->n_blocks++] = b;
        parent = h;
    }
    s->len = i * bs;
    return s->len;
}

vx_status vx_kv_fork(vx_kv_cache *kv, int32_t src, int32_t dst) {
    seq_state *a = &kv->seqs[src], *d = &kv->seqs[dst];
    if (src == dst || d->n_blocks != 0) return VX_EINVAL;
    for (int32_t i = 0; i < a->n_blocks; i++) {
        d->blocks[i] = a->blocks[i];
        kv->meta[a->blocks[i]].ref++;
    }
    d->n_blocks = a->n_blocks;
    d->len = a->len;
    return VX_OK;
}

void *vx_kv_k_block(const vx_kv_cache *kv, int32_t layer, int32_t block) {
    return kv->k + ((size_t)(layer - kv->p.layer0) * (size_t)kv->n_blocks + (size_t)block) * kv->block_bytes;
}

void *vx_kv_v_block(const vx_kv_cache *kv, int32_t layer, int32_t block) {
    return kv->v + ((size_t)(layer - kv->p.layer0) * (size_t)kv->n_blocks + (size_t)block) * kv->block_bytes;
}

static void *head_row(const vx_kv_cache *kv, uint8_t *block, int32_t pos, int32_t h) {
    VX_ASSERT(h >= 0 && h < kv->p.kv_dim / kv->p.head_dim);
    return block + (size_t)h * kv->head_stride + (size_t)(pos % kv->p.block_size) * kv->head_bytes;
}

static int32_t block_of(const vx_kv_cache *kv, int32_t seq, int32_t pos) {
    const seq_state *s = &kv->seqs[seq];
    const int32_t b = pos / kv->p.block_size;
    VX_ASSERT(b < s->n_blocks);
    return s->blocks[b];
}

void *vx_kv_k_head(const vx_kv_cache *kv, int32_t layer, int32_t seq, int32_t pos, int32_t h) {
    return head_row(kv, vx_kv_k_block(kv, layer, block_of(kv, seq, pos)), pos, h);
}

void *vx_kv_v_head(const vx_kv_cache *kv, int32_t layer, int32_t seq, int32_t pos, int32_t h) {
    return head_row(kv, vx_kv_v_block(kv, layer, block_of(kv, seq, pos)), pos, h);
}
