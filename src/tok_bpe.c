/*
 * tok_bpe.c - byte-level BPE ("gpt2" tokenizer model): the merges table
 * (pair of strings -> rank), the GPT-2 byte <-> unicode alphabet, and the
 * merge loop.
 *
 * A text fragment is split into words by the pre-tokenizer; each word's
 * bytes are mapped to the printable byte alphabet, then adjacent symbols
 * are merged lowest rank first (ties: leftmost first) using a binary heap
 * and a doubly linked list of symbols, so a long word costs O(n log n).
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tok_internal.h"

/* ------------------------------------------------------ byte alphabet */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves;
 * the other 68 bytes (0-32, 127-160, 173) map in order to U+0100.. */
static uint32_t byte_to_cp(uint8_t b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    if (b <= 32) return 256u + b;
    if (b >= 127 && b <= 160) return 256u + 33 + (b - 127u);
    return 256u + 33 + 34; /* 173 */
}

/* Inverse of byte_to_cp, -1 for code points outside the alphabet. */
static int cp_to_byte(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    if (cp >= 256 && cp <= 288) return (int)(cp - 256);
    if (cp >= 289 && cp <= 322) return (int)(cp - 289 + 127);
    if (cp == 323) return 173;
    return -1;
}

/* Encodes one byte as the UTF-8 of its alphabet character; returns 1 or 2. */
static size_t encode_byte(uint8_t b, char *out) {
    uint32_t cp = byte_to_cp(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Decodes one well-formed UTF-8 sequence at s (n bytes available). Returns
 * its length, or 0 if the bytes are not well-formed. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len = vx_utf8_len(c);
    if (len < 2 || len > n) return 0;
    uint32_t v = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

size_t vx_bpe_decode_text(const char *s, size_t len, char *buf) {
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0, i = 0;
    while (i < len) {
        if (u[i] < 0x80) { /* ASCII is either its own byte or kept as is */
            if (buf) buf[o] = s[i];
            o++;
            i++;
            continue;
        }
        uint32_t cp;
        size_t l = utf8_decode(u + i, len - i, &cp);
        int b = l ? cp_to_byte(cp) : -1;
        if (b >= 0) {
            if (buf) buf[o] = (char)b;
            o++;
        } else { /* not a byte character: keep it as it is */
            if (l == 0) l = 1;
            if (buf) memcpy(buf + o, s + i, l);
            o += l;
        }
        i += l;
    }
    return o;
}

/* ------------------------------------------------------------ merges */

typedef struct merge_rec {
    uint32_t l_off, l_len, r_off, r_len; /* in pool */
} merge_rec;

struct vx_bpe_merges {
    size_t n;
    merge_rec *rec; /* by rank */
    char *pool;
    uint64_t *slots; /* hash tag << 32 | (rank + 1), 0 = empty */
    uint32_t mask;
    uint32_t max_l, max_r;
};

#define MERGE_SEED 0x6d657267ull

void vx_bpe_merges_free(vx_bpe_merges *m) {
    if (!m) return;
    free(m->rec);
    free(m->pool);
    free(m->slots);
    free(m);
}

size_t vx_bpe_merges_count(const vx_bpe_merges *m) { return m ? m->n : 0; }

static uint64_t pair_hash(const char *l, size_t ll, const char *r, size_t rl) {
    return vx_tok_hash(r, rl, vx_tok_hash(l, ll, MERGE_SEED));
}

vx_status vx_bpe_merges_load(const vx_gguf_kv *kv, vx_bpe_merges **out, char *err,
                             size_t err_size) {
    *out = NULL;
    if (!kv || kv->type != VX_GGUF_ARRAY || kv->v.arr.type != VX_GGUF_STRING)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tokenizer.ggml.merges must be an array of strings");
    uint64_t n = kv->v.arr.n;
    if (n > (uint64_t)INT32_MAX / 4)
        return vx_seterr(err, err_size, VX_EFORMAT, "too many merges (%llu)",
                         (unsigned long long)n);
    uint64_t pool_size = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (vx_add_ovf(pool_size, kv->v.arr.strs[i].len + 1, &pool_size) ||
            pool_size > UINT32_MAX)
            return vx_seterr(err, err_size, VX_EFORMAT, "merges too large");
    }
    vx_bpe_merges *m = calloc(1, sizeof *m);
    if (!m) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (merges)");
    uint32_t cap = 16;
    while (cap < n + n / 2 + 16) cap <<= 1; /* load factor <= 2/3 */
    m->rec = malloc((n ? n : 1) * sizeof *m->rec);
    m->pool = malloc(pool_size ? pool_size : 1);
    m->slots = calloc(cap, sizeof *m->slots);
    uint64_t *hashes = malloc((n ? n : 1) * sizeof *hashes);
    if (!m->rec || !m->pool || !m->slots || !hashes) {
        free(hashes);
        vx_bpe_merges_free(m);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (merges)");
    }
    m->mask = cap - 1;
    m->n = n;
    size_t po = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = kv->v.arr.strs[i].s;
        size_t len = kv->v.arr.strs[i].len;
        memcpy(m->pool + po, s, len);
        m->pool[po + len] = 0;
        /* "left right": the separator is the first space after the first
         * byte, so a left part that is itself a space still works. */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        merge_rec *r = &m->rec[i];
        size_t ll = sp ? (size_t)(sp - s) : 0;
        r->l_off = (uint32_t)po;
        r->l_len = (uint32_t)ll;
        r->r_off = (uint32_t)(po + ll + 1);
        r->r_len = sp ? (uint32_t)(len - ll - 1) : 0;
        po += len + 1;
        /* a malformed entry keeps its rank but never matches */
        hashes[i] = r->r_len ? pair_hash(m->pool + r->l_off, r->l_len, m->pool + r->r_off,
                                         r->r_len)
                             : 0;
        if (r->r_len && r->l_len > m->max_l) m->max_l = r->l_len;
        if (r->r_len > m->max_r) m->max_r = r->r_len;
    }
    /* Insert in rank order; prefetching a few slots ahead hides the cache
     * misses that otherwise dominate loading 100k+ merges. */
    for (uint64_t i = 0; i < n; i++) {
        if (i + 8 < n) __builtin_prefetch(&m->slots[(uint32_t)hashes[i + 8] & m->mask]);
        const merge_rec *r = &m->rec[i];
        if (r->r_len == 0) continue;
        uint64_t h = hashes[i];
        uint32_t tag = (uint32_t)(h >> 32), j = (uint32_t)h & m->mask;
        for (;; j = (j + 1) & m->mask) {
            uint64_t e = m->slots[j];
            if (e == 0) {
                m->slots[j] = ((uint64_t)tag << 32) | (uint32_t)(i + 1);
                break;
            }
            const merge_rec *q = &m->rec[(uint32_t)e - 1];
            if ((uint32_t)(e >> 32) == tag && q->l_len == r->l_len && q->r_len == r->r_len &&
                memcmp(m->pool + q->l_off, m->pool + r->l_off, r->l_len) == 0 &&
                memcmp(m->pool + q->r_off, m->pool + r->r_off, r->r_len) == 0)
                break; /* duplicate: the first (lowest) rank wins */
        }
    }
    free(hashes);
    *out = m;
    return VX_OK;
}

/* Rank of merging l and r, or -1. */
static int32_t merge_rank(const vx_bpe_merges *m, const char *l, size_t ll, const char *r,
                          size_t rl) {
    if (ll > m->max_l || rl > m->max_r || ll == 0 || rl == 0) return -1;
    uint64_t h = pair_hash(l, ll, r, rl);
    uint32_t tag = (uint32_t)(h >> 32), j = (uint32_t)h & m->mask;
    for (;; j = (j + 1) & m->mask) {
        uint64_t e = m->slots[j];
        if (e == 0) return -1;
        const merge_rec *q = &m->rec[(uint32_t)e - 1];
        if ((uint32_t)(e >> 32) == tag && q->l_len == ll && q->r_len == rl &&
            memcmp(m->pool + q->l_off, l, ll) == 0 && memcmp(m->pool + q->r_off, r, rl) == 0)
            return (int32_t)((uint32_t)e - 1);
    }
}

/* ------------------------------------------------------- merge session */

/* 32-bit offsets keep symbols and heap entries at 16 bytes: long words are
 * cache-bound. vx_bpe_tokenize rejects words that would not fit. */
typedef struct sym {
    uint32_t off; /* in the encoded word */
    uint32_t n;   /* bytes; 0 once merged into its left neighbour */
    int32_t prev, next;
} sym;


typedef struct session {
    const vx_vocab *v;
    char *word; /* byte-encoded word */
    size_t word_cap;
    sym *syms;
    size_t syms_cap;
    vx_bigram_heap heap;
    bool oom;
} session;

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem) return false;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* Heap order: lower rank first, then leftmost. */



static void add_bigram(session *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const sym *l = &s->syms[left], *r = &s->syms[right];
    int32_t rank = merge_rank(s->v->merges, s->word + l->off, l->n, s->word + r->off, r->n);
    if (rank < 0) return;
    vx_bigram b = {-(float)rank, left, right, l->n + r->n}; /* lowest rank first */
    if (!vx_bigram_push(&s->heap, b)) s->oom = true;
}

/* Emits the tokens of one byte-encoded word s->word[0..n). */
static void bpe_word(session *s, size_t n, vx_tokvec *out) {
    const vx_vocab *v = s->v;
    if (v->ignore_merges) {
        vx_token id = vx_tok_find(v, s->word, n);
        if (id >= 0) {
            vx_tokvec_push(out, id);
            return;
        }
    }
    if (n == 0) return;
    /* one symbol per alphabet character (one per original byte) */
    size_t ns = 0;
    for (size_t o = 0; o < n; ns++) o += VX_MIN(vx_utf8_len((unsigned char)s->word[o]), n - o);
    if (!grow((void **)&s->syms, &s->syms_cap, ns, sizeof *s->syms)) {
        s->oom = true;
        return;
    }
    size_t o = 0;
    for (size_t i = 0; i < ns; i++) {
        size_t l = VX_MIN(vx_utf8_len((unsigned char)s->word[o]), n - o);
        s->syms[i] = (sym){(uint32_t)o, (uint32_t)l, (int32_t)i - 1,
                           i + 1 < ns ? (int32_t)(i + 1) : -1};
        o += l;
    }
    s->heap.n = 0;
    for (size_t i = 1; i < ns; i++) add_bigram(s, (int32_t)(i - 1), (int32_t)i);
    while (s->heap.n > 0 && !s->oom) {
        vx_bigram b = vx_bigram_pop(&s->heap);
        sym *l = &s->syms[b.left], *r = &s->syms[b.right];
        /* stale if either side changed since the pair was queued */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->syms[r->next].prev = b.left;
        add_bigram(s, l->prev, b.left);
        add_bigram(s, b.left, l->next);
    }
    if (s->oom) return;
    for (int32_t i = 0; i >= 0; i = s->syms[i].next) {
        const sym *y = &s->syms[i];
        vx_token id = vx_tok_find(v, s->word + y->off, y->n);
        if (id >= 0) {
            vx_tokvec_push(out, id);
            continue;
        }
        /* Not in the vocab (inconsistent merges or alphabet): fall back to
         * single-byte tokens where they exist, as llama.cpp does. */
        for (size_t k = 0; k < y->n; k++) {
            vx_token bid = vx_tok_find(v, s->word + y->off + k, 1);
            if (bid >= 0) vx_tokvec_push(out, bid);
        }
    }
}

bool vx_bpe_tokenize(const vx_vocab *v, const char *text, size_t len, vx_tokvec *out) {
    if (len == 0) return true;
    vx_spanvec words = {0};
    if (!vx_pretok_split(v->pretok, text, len, &words)) {
        vx_spanvec_free(&words);
        return false;
    }
    session s = {.v = v};
    for (size_t w = 0; w < words.n && !s.oom && !out->oom; w++) {
        const char *src = text + words.v[w].off;
        size_t wl = words.v[w].len;
        if (wl > INT32_MAX || !grow((void **)&s.word, &s.word_cap, 2 * wl, 1)) {
            s.oom = true;
            break;
        }
        size_t n = 0;
        for (size_t i = 0; i < wl; i++) n += encode_byte((uint8_t)src[i], s.word + n);
        bpe_word(&s, n, out);
    }
    bool ok = !s.oom;
    free(s.word);
    free(s.syms);
    free(s.heap.a);
    vx_spanvec_free(&words);
    return ok;
}
