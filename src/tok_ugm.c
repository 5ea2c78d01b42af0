/*
 * tok_ugm.c - SentencePiece Unigram ("t5" tokenizer model: T5, XLM-RoBERTa
 * and bge-m3, ALBERT).
 *
 * Normalization as SentencePiece's normalizer does it: the precompiled
 * charsmap (tokenizer.ggml.precompiled_charsmap: a little-endian uint32 n,
 * a double-array trie of n bytes, then NUL-terminated replacement strings
 * the trie's values point into) rewrites the longest prefix it knows, a
 * malformed UTF-8 byte becomes U+FFFD, spaces become "▁"; with
 * remove_extra_whitespaces, leading, trailing and repeated spaces go; with
 * add_dummy_prefix (tokenizer.ggml.add_space_prefix) a "▁" leads.
 *
 * Segmentation: the Viterbi best path over the normalized text (the
 * pieces that start at a character found by walking a byte trie of them),
 * where a piece scores its log-probability (normal pieces), a character no piece
 * starts with costs the unknown score (the lowest normal score - 10),
 * unused pieces are skipped and user-defined ones score length x the
 * highest score - 0.1 (SentencePiece's bonus, so they win); ties keep the
 * earlier path (float sums, strict >, starts in text order: SentencePiece's
 * order). Runs of unknown characters come out as one <unk>, or as their
 * bytes when the vocabulary has byte pieces (byte_fallback).
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tok_internal.h"

/* The pieces the Viterbi takes (normal, user-defined) as a byte trie:
 * node 0 the root, children in a list (child, then next). */
typedef struct tnode {
    int32_t child, next;
    vx_token tok; /* the piece ending here, -1 none */
    uint8_t byte;
} tnode;

struct vx_ugm {
    tnode *trie;
    uint32_t *units; /* the charsmap trie's double array */
    size_t n_units;
    char *repl; /* replacement strings */
    size_t repl_len;
    bool remove_ws, dummy_prefix, byte_fallback;
    float unk_score, max_score;
};

void vx_ugm_free(vx_ugm *u) {
    if (!u) return;
    free(u->trie);
    free(u->units);
    free(u->repl);
    free(u);
}

vx_status vx_ugm_create(const vx_vocab *v, const uint8_t *charsmap, size_t n, bool remove_ws, bool dummy_prefix,
                        vx_ugm **out, char *err, size_t err_size) {
    *out = NULL;
    vx_ugm *u = calloc(1, sizeof *u);
    if (!u) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (unigram)");
    u->remove_ws = remove_ws;
    u->dummy_prefix = dummy_prefix;
    if (n > 0) {
        uint32_t blob = 0;
        if (n >= 4) memcpy(&blob, charsmap, 4);
        if (n < 4 || blob % 4 || (uint64_t)blob > n - 4) {
            vx_ugm_free(u);
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "tokenizer.ggml.precompiled_charsmap: a trie of %u bytes does not fit its %zu bytes",
                             blob, n);
        }
        u->n_units = blob / 4;
        u->repl_len = n - 4 - blob;
        u->units = malloc(blob ? blob : 1);
        u->repl = malloc(u->repl_len ? u->repl_len : 1);
        if (!u->units || !u->repl) {
            vx_ugm_free(u);
            return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (unigram)");
        }
        for (size_t i = 0; i < u->n_units; i++) { /* little-endian whatever the host */
            const uint8_t *p = charsmap + 4 + 4 * i;
            u->units[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        }
        memcpy(u->repl, charsmap + 4 + blob, u->repl_len);
    }
    /* the pieces' trie: at most one node per byte of their texts */
    size_t total = 1;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->tok[id].attr & (VX_TATTR_NORMAL | VX_TATTR_USER_DEFINED)) total += v->tok[id].len;
    if (total > INT32_MAX || !(u->trie = malloc(total * sizeof *u->trie))) {
        vx_ugm_free(u);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (unigram trie)");
    }
    u->trie[0] = (tnode){-1, -1, -1, 0};
    int32_t n_nodes = 1;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (!(v->tok[id].attr & (VX_TATTR_NORMAL | VX_TATTR_USER_DEFINED))) continue;
        const unsigned char *t = (const unsigned char *)vx_tok_str(v, id);
        int32_t cur = 0;
        for (uint32_t k = 0; k < v->tok[id].len; k++) {
            int32_t ch = u->trie[cur].child;
            while (ch >= 0 && u->trie[ch].byte != t[k]) ch = u->trie[ch].next;
            if (ch < 0) {
                ch = n_nodes++;
                u->trie[ch] = (tnode){-1, u->trie[cur].child, -1, t[k]};
                u->trie[cur].child = ch;
            }
            cur = ch;
        }
        if (cur > 0 && u->trie[cur].tok < 0) u->trie[cur].tok = id;
    }
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->tok[id].attr & VX_TATTR_NORMAL) {
            if (v->tok[id].score < lo) lo = v->tok[id].score;
            if (v->tok[id].score > hi) hi = v->tok[id].score;
        }
    if (lo > hi) lo = hi = 0; /* no normal piece */
    u->unk_score = lo - 10.0f;
    u->max_score = hi;
    u->byte_fallback = true;
    for (int b = 0; b < 256 && u->byte_fallback; b++)
        u->byte_fallback = v->byte_tok[b] >= 0 && (v->tok[v->byte_tok[b]].attr & VX_TATTR_BYTE);
    *out = u;
    return VX_OK;
}

/* ------------------------------------------------------- normalization */

/* Length of the well-formed UTF-8 character at s[0..n) (n > 0), 0 if it
 * is malformed (overlong, surrogate, past U+10FFFF, cut short). */
static size_t utf8_valid(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t l;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) l = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        l = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        l = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (l > n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < l; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return l;
}

/* The charsmap's longest rule for a prefix of s[0..n): its length (0:
 * none) and *val, the replacement's offset. Darts-clone units: bit 8 a
 * leaf below, bits 0-7 (and 31) the label, the rest the offset. */
static size_t longest_rule(const vx_ugm *u, const unsigned char *s, size_t n, uint32_t *val) {
    if (u->n_units == 0) return 0;
#define OFFSET(x) (((x) >> 10) << (((x) & (1u << 9)) >> 6))
    size_t best = 0, pos = OFFSET(u->units[0]);
    for (size_t i = 0; i < n; i++) {
        pos ^= s[i];
        if (pos >= u->n_units) break;
        const uint32_t x = u->units[pos];
        if ((x & (0x80000000u | 0xFFu)) != s[i]) break;
        pos ^= OFFSET(x);
        if (pos >= u->n_units) break;
        if (x >> 8 & 1) {
            best = i + 1;
            *val = u->units[pos] & 0x7FFFFFFFu;
        }
    }
#undef OFFSET
    return best;
}

/* One step of the normalizer at s[0..n) (n > 0): the text it stands for
 * (*out, *out_len) and the bytes it consumes. */
static size_t norm_prefix(const vx_ugm *u, const char *s, size_t n, const char **out, size_t *out_len) {
    uint32_t val = 0;
    const size_t l = longest_rule(u, (const unsigned char *)s, n, &val);
    if (l > 0 && val < u->repl_len) {
        const char *r = u->repl + val, *z = memchr(r, 0, u->repl_len - val);
        *out = r;
        *out_len = z ? (size_t)(z - r) : u->repl_len - val;
        return l;
    }
    const size_t c = utf8_valid((const unsigned char *)s, n);
    if (c == 0) {
        *out = "\xEF\xBF\xBD";
        *out_len = 3;
        return 1;
    }
    *out = s;
    *out_len = c;
    return c;
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

#define WS "\xe2\x96\x81"

/* SentencePiece's Normalizer::Normalize (spaces escaped as "▁"). */
static void normalize(const vx_ugm *u, const char *s, size_t n, sbuf *o) {
    const char *r;
    size_t rl;
    if (u->remove_ws) /* leading spaces */
        while (n > 0) {
            const size_t c = norm_prefix(u, s, n, &r, &rl);
            if (!(rl == 1 && r[0] == ' ')) break;
            s += c, n -= c;
        }
    if (n == 0) return;
    if (u->dummy_prefix) put(o, WS, 3);
    bool prev_space = u->remove_ws;
    while (n > 0) {
        const size_t c = norm_prefix(u, s, n, &r, &rl);
        if (prev_space)
            while (rl > 0 && r[0] == ' ') r++, rl--;
        if (rl > 0) {
            for (size_t i = 0; i < rl; i++) {
                if (r[i] == ' ') put(o, WS, 3);
                else put(o, r + i, 1);
            }
            prev_space = r[rl - 1] == ' ';
        }
        s += c, n -= c;
        if (!u->remove_ws) prev_space = false;
    }
    if (u->remove_ws)
        while (o->n >= 3 && !memcmp(o->p + o->n - 3, WS, 3)) o->n -= 3;
}

/* ------------------------------------------------------------- Viterbi */

typedef struct node {
    float score;   /* best path's score up to here */
    int32_t start; /* where its last piece starts (-1: not reached) */
    vx_token id;   /* that piece (the unknown id for an unknown character) */
} node;

static void emit_unknown(const vx_vocab *v, const vx_ugm *u, const char *s, size_t n, vx_tokvec *out) {
    if (u->byte_fallback) {
        for (size_t i = 0; i < n; i++) vx_tokvec_push(out, v->byte_tok[(unsigned char)s[i]]);
    } else if (v->unk >= 0) {
        vx_tokvec_push(out, v->unk);
    }
}

bool vx_ugm_tokenize(const vx_vocab *v, const char *text, size_t len, vx_tokvec *out) {
    const vx_ugm *u = v->ugm;
    sbuf b = {0};
    normalize(u, text, len, &b);
    if (b.oom) {
        free(b.p);
        return false;
    }
    const size_t m = b.n;
    if (m == 0) {
        free(b.p);
        return true;
    }
    if (m > INT32_MAX - 1) {
        free(b.p);
        return false;
    }
    node *nd = malloc((m + 1) * sizeof *nd);
    int32_t *path = malloc((m + 1) * sizeof *path);
    if (!nd || !path) {
        free(nd), free(path), free(b.p);
        return false;
    }
    const char *s = b.p;
    for (size_t i = 0; i <= m; i++) nd[i] = (node){0.0f, -1, -1};
    nd[0].start = 0;
    for (size_t i = 0; i < m;) {
        const size_t c = VX_MIN(vx_utf8_len((unsigned char)s[i]), m - i);
        const float here = nd[i].score;
        bool single = false;
        /* the pieces that start here, shortest first, down the trie */
        for (int32_t cur = 0, j = (int32_t)i; j < (int32_t)m; j++) {
            int32_t ch = u->trie[cur].child;
            while (ch >= 0 && u->trie[ch].byte != (unsigned char)s[j]) ch = u->trie[ch].next;
            if (ch < 0) break;
            cur = ch;
            const vx_token id = u->trie[cur].tok;
            if (id < 0) continue;
            const size_t l = (size_t)j + 1 - i;
            const uint32_t a = v->tok[id].attr;
            const float sc = a & VX_TATTR_USER_DEFINED ? (float)l * u->max_score - 0.1f : v->tok[id].score;
            node *t = &nd[i + l];
            const float cand = sc + here;
            if (t->start < 0 || cand > t->score) *t = (node){cand, (int32_t)i, id};
            if (l == c) single = true;
        }
        if (!single) {
            node *t = &nd[i + c];
            const float cand = u->unk_score + here;
            if (t->start < 0 || cand > t->score) *t = (node){cand, (int32_t)i, -1};
        }
        i += c;
    }
    /* back from the end, then forward, runs of unknowns as one */
    size_t np = 0;
    for (int32_t e = (int32_t)m; e > 0; e = nd[e].start) path[np++] = e;
    int32_t unk_from = -1;
    for (size_t k = np; k-- > 0;) {
        const int32_t e = path[k], st = nd[e].start;
        if (nd[e].id < 0) {
            if (unk_from < 0) unk_from = st;
            continue;
        }
        if (unk_from >= 0) emit_unknown(v, u, s + unk_from, (size_t)(st - unk_from), out);
        unk_from = -1;
        vx_tokvec_push(out, nd[e].id);
    }
    if (unk_from >= 0) emit_unknown(v, u, s + unk_from, m - (size_t)unk_from, out);
    free(nd), free(path), free(b.p);
    return !out->oom;
}
