/*
 * grammar.c - matching text to a compiled GBNF grammar (grammar.h), and
 * the token filter built on it.
 *
 * The recognizer. A parse in progress is a stack of positions in el[]:
 * where to continue once the rule above returns. Stacks are nodes
 * (pos, parent) in an arena, hash-consed so that equal stacks are one
 * node: the set of all parses is then a set of node ids (the "heads",
 * each at a CHAR element), duplicates are merged as they arise, and a
 * grammar however ambiguous stays linear in the text. A frame is one
 * state: its heads (a range of the head buffer), whether the text so far
 * is complete (some parse popped its last position), and the UTF-8
 * character being read when the bytes stopped inside one.
 *
 * Reading code point x from a frame: every head whose class holds x moves
 * to the next position of its alternative; positions are then expanded
 * (a rule reference pushes each of its alternatives, an END pops to the
 * parent) until every parse stands at a CHAR element again. Bytes inside
 * a UTF-8 character only narrow the range of code points it may become;
 * the frame lives while some head's class meets that range.
 *
 * Frames and nodes are made at the end of their buffers, so trying bytes
 * and forgetting them is a matter of truncating both (the hash chains are
 * unlinked newest first). The token filter walks the vocabulary trie that
 * way, depth first: a prefix the grammar refuses cuts off every token
 * under it. Nodes the committed state no longer reaches are collected
 * when the arena has grown.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "grammar_impl.h"

enum {
    MAX_NODES = 1 << 23, /* arena bound (128 MiB): past it matching refuses (out of memory) */
    MAX_HEADS = 4096,    /* parses alive at once: past it matching refuses */
    GC_MIN = 1 << 16,    /* collect once the arena has this many nodes more than the live ones */
    N_MASKS = 8,         /* the filter's remembered states */
};
/* Head moves and expansions one mask may take (about 0.5 s here): a grammar
 * whose parses multiply cannot stall the engine; the tokens not reached
 * are refused. */
#define WALK_BUDGET ((int64_t)1 << 26)

typedef struct frame {
    int32_t h0, nh; /* heads: buffer [h0, h0 + nh) */
    bool accept;    /* the text so far is a whole sentence (with need == 0) */
    uint8_t need;   /* continuation bytes still to come in the character being read */
    uint8_t lo, hi; /* the next continuation byte's range */
    uint32_t cp;    /* the character's bits so far */
} frame;

struct vx_gmatch {
    const vx_grammar *g;
    /* the node arena */
    int32_t *pos, *par, *chain;
    uint32_t *seen; /* step stamps: expanded in this step */
    int32_t n_nodes, cap_nodes, live;
    int32_t *bucket;
    uint32_t n_buckets; /* a power of two */
    uint32_t step;
    /* heads, frame after frame */
    int32_t *heads;
    int32_t n_heads, cap_heads;
    int32_t *work;
    int32_t cap_work;
    frame cur;       /* the committed state: its heads start the buffer */
    uint32_t epoch;  /* changes when node ids do (collection) */
    int64_t budget;  /* the filter's walk: head moves left (< 0: no bound) */
    bool oom;        /* a bound was hit: the step that hit it fails */
    bool spent;      /* the walk's budget ran out */
    bool limited;    /* some bound was hit since the start: answers may be short */
};

/* ---- the arena ---- */

static uint32_t node_hash(const vx_gmatch *m, int32_t pos, int32_t par) {
    return ((uint32_t)pos * 0x9E3779B1u ^ (uint32_t)par * 0x85EBCA77u) & (m->n_buckets - 1);
}

static void link_all(vx_gmatch *m) {
    memset(m->bucket, 0xFF, (size_t)m->n_buckets * sizeof *m->bucket);
    for (int32_t i = 0; i < m->n_nodes; i++) { /* oldest first: the newest head their chains */
        const uint32_t h = node_hash(m, m->pos[i], m->par[i]);
        m->chain[i] = m->bucket[h];
        m->bucket[h] = i;
    }
}

/* Grows n parallel arrays (*arr[i], elements of size[i] bytes) to cap
 * elements; false if one could not grow (the others stay valid, larger). */
static bool grow_parallel(void **const arr[], const size_t size[], int n, int32_t cap) {
    bool ok = true;
    for (int i = 0; i < n; i++) {
        void *p = realloc(*arr[i], (size_t)cap * size[i]);
        if (p) *arr[i] = p;
        else ok = false;
    }
    return ok;
}

static bool grow_nodes(vx_gmatch *m) {
    if (m->n_nodes >= MAX_NODES) return false;
    const int32_t cap = m->cap_nodes ? 2 * m->cap_nodes : 1024;
    void **const arr[] = {(void **)&m->pos, (void **)&m->par, (void **)&m->chain, (void **)&m->seen};
    const size_t size[] = {sizeof *m->pos, sizeof *m->par, sizeof *m->chain, sizeof *m->seen};
    if (!grow_parallel(arr, size, 4, cap)) return false;
    m->cap_nodes = cap;
    if ((uint32_t)cap > m->n_buckets) {
        int32_t *b = realloc(m->bucket, (size_t)cap * sizeof *b);
        if (!b) return false;
        m->bucket = b, m->n_buckets = (uint32_t)cap;
        link_all(m);
    }
    return true;
}

/* The node (pos, par); -2 when out of memory. */
static int32_t cons(vx_gmatch *m, int32_t pos, int32_t par) {
    const uint32_t h = node_hash(m, pos, par);
    for (int32_t i = m->bucket[h]; i >= 0; i = m->chain[i])
        if (m->pos[i] == pos && m->par[i] == par) return i;
    if (m->n_nodes == m->cap_nodes && !grow_nodes(m)) {
        m->oom = true;
        return -2;
    }
    const int32_t i = m->n_nodes++;
    const uint32_t hh = node_hash(m, pos, par); /* the table may have grown */
    m->pos[i] = pos, m->par[i] = par, m->seen[i] = 0;
    m->chain[i] = m->bucket[hh];
    m->bucket[hh] = i;
    return i;
}

/* Forgets the nodes made since there were n. */
static void truncate_nodes(vx_gmatch *m, int32_t n) {
    for (int32_t i = m->n_nodes - 1; i >= n; i--) m->bucket[node_hash(m, m->pos[i], m->par[i])] = m->chain[i];
    m->n_nodes = n;
}

/* Where a parse goes on after position pos of its alternative, with par
 * above it: par itself when pos closes the alternative. */
static int32_t next_node(vx_gmatch *m, int32_t pos, int32_t par) {
    return m->g->el[pos].type == VX_GE_END ? par : cons(m, pos, par);
}

static bool push_head(vx_gmatch *m, int32_t node) {
    if (m->n_heads == m->cap_heads) {
        const int32_t cap = m->cap_heads ? 2 * m->cap_heads : 256;
        int32_t *h = realloc(m->heads, (size_t)cap * sizeof *h);
        if (!h) return m->oom = true, false;
        m->heads = h, m->cap_heads = cap;
    }
    m->heads[m->n_heads++] = node;
    return true;
}

static uint32_t new_step(vx_gmatch *m) {
    if (++m->step == 0) { /* wrapped: no stamp may look current */
        for (int32_t i = 0; i < m->n_nodes; i++) m->seen[i] = 0;
        m->step = 1;
    }
    return m->step;
}

/* Expands node (and what it leads to) into heads at the end of the
 * buffer, for frame f; stamps with the current step. */
static void expand(vx_gmatch *m, frame *f, int32_t node) {
    const vx_grammar *g = m->g;
    int32_t nw = 0;
    for (;;) {
        if (m->budget >= 0 && --m->budget < 0) {
            m->spent = true;
            return;
        }
        if (node == -1) {
            f->accept = true;
        } else if (node >= 0 && m->seen[node] != m->step) {
            m->seen[node] = m->step;
            const vx_gelem e = g->el[m->pos[node]];
            if (e.type == VX_GE_CHAR) {
                if (f->nh >= MAX_HEADS) m->oom = true;
                else if (push_head(m, node)) f->nh++;
            } else { /* a rule: each alternative, then what follows the reference */
                const int32_t cont = next_node(m, m->pos[node] + 1, m->par[node]);
                const int32_t na = g->rule_alt[e.arg + 1] - g->rule_alt[e.arg];
                if (nw + na > m->cap_work) {
                    int32_t cap = m->cap_work ? m->cap_work : 64;
                    while (cap < nw + na) cap *= 2;
                    int32_t *w = realloc(m->work, (size_t)cap * sizeof *w);
                    if (!w) {
                        m->oom = true;
                        return;
                    }
                    m->work = w, m->cap_work = cap;
                }
                if (cont != -2)
                    for (int32_t a = g->rule_alt[e.arg + 1] - 1; a >= g->rule_alt[e.arg]; a--)
                        m->work[nw++] = next_node(m, g->alt[a], cont);
            }
        }
        if (!nw) return;
        node = m->work[--nw];
    }
}

static bool class_has(const vx_grammar *g, int32_t c, uint32_t lo, uint32_t hi) {
    for (int32_t r = g->cls[c]; r < g->cls[c + 1]; r++) {
        if (g->rng[2 * r] > hi) return false;
        if (g->rng[2 * r + 1] >= lo) return true;
    }
    return false;
}

/* ---- frames ---- */

/* The code points the character being read in f may still become. */
static void partial_range(const frame *f, uint32_t *lo, uint32_t *hi) {
    const int sh = 6 * (f->need - 1);
    *lo = (f->cp << 6 | (f->lo & 0x3Fu)) << sh;
    *hi = (f->cp << 6 | (f->hi & 0x3Fu)) << sh | ((1u << sh) - 1);
}

/* Code point x read from f into *nf (heads at the end of the buffer). */
static bool read_cp(vx_gmatch *m, const frame *f, uint32_t x, frame *nf) {
    *nf = (frame){m->n_heads, 0, false, 0, 0, 0, 0};
    if (m->budget >= 0 && (m->budget -= f->nh) < 0) return m->spent = true, false;
    new_step(m);
    for (int32_t i = 0; i < f->nh; i++) {
        const int32_t node = m->heads[f->h0 + i];
        const int32_t pos = m->pos[node];
        if (class_has(m->g, m->g->el[pos].arg, x, x)) expand(m, nf, next_node(m, pos + 1, m->par[node]));
    }
    return (nf->nh > 0 || nf->accept) && !m->spent;
}

/* Byte b read from f into *nf: false when the text cannot go on so. */
static bool read_byte(vx_gmatch *m, const frame *f, uint8_t b, frame *nf) {
    *nf = *f;
    nf->accept = false;
    if (!f->need) {
        if (b < 0x80) return read_cp(m, f, b, nf);
        if (b >= 0xC2 && b <= 0xDF) nf->need = 1, nf->cp = b & 0x1Fu, nf->lo = 0x80, nf->hi = 0xBF;
        else if (b >= 0xE0 && b <= 0xEF)
            nf->need = 2, nf->cp = b & 0x0Fu, nf->lo = b == 0xE0 ? 0xA0 : 0x80, nf->hi = b == 0xED ? 0x9F : 0xBF;
        else if (b >= 0xF0 && b <= 0xF4)
            nf->need = 3, nf->cp = b & 0x07u, nf->lo = b == 0xF0 ? 0x90 : 0x80, nf->hi = b == 0xF4 ? 0x8F : 0xBF;
        else return false;
    } else {
        if (b < f->lo || b > f->hi) return false;
        const uint32_t cp = f->cp << 6 | (b & 0x3Fu);
        if (f->need == 1) return read_cp(m, f, cp, nf);
        nf->need = (uint8_t)(f->need - 1), nf->cp = cp, nf->lo = 0x80, nf->hi = 0xBF;
    }
    uint32_t lo, hi; /* inside a character: some head must take one it may become */
    partial_range(nf, &lo, &hi);
    for (int32_t i = 0; i < f->nh; i++)
        if (class_has(m->g, m->g->el[m->pos[m->heads[f->h0 + i]]].arg, lo, hi)) return true;
    return false;
}

/* ---- the matcher ---- */

static void start(vx_gmatch *m) {
    m->n_nodes = 0;
    m->n_heads = 0;
    memset(m->bucket, 0xFF, (size_t)m->n_buckets * sizeof *m->bucket);
    m->cur = (frame){0, 0, false, 0, 0, 0, 0};
    new_step(m);
    const vx_grammar *g = m->g;
    for (int32_t a = g->rule_alt[g->root]; a < g->rule_alt[g->root + 1]; a++)
        expand(m, &m->cur, next_node(m, g->alt[a], -1));
    m->live = m->n_nodes;
}

vx_gmatch *vx_gmatch_new(const vx_grammar *g) {
    if (!g) return NULL;
    vx_gmatch *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->g = g;
    m->budget = -1;
    if (!grow_nodes(m)) {
        vx_gmatch_free(m);
        return NULL;
    }
    start(m);
    if (m->oom) {
        vx_gmatch_free(m);
        return NULL;
    }
    return m;
}

void vx_gmatch_free(vx_gmatch *m) {
    if (!m) return;
    free(m->pos);
    free(m->par);
    free(m->chain);
    free(m->seen);
    free(m->bucket);
    free(m->heads);
    free(m->work);
    free(m);
}

/* Keeps the nodes the committed heads reach, renumbered in order (a
 * parent is always older than its child, so the order stays so). */
static void collect(vx_gmatch *m) {
    int32_t *map = malloc((size_t)m->n_nodes * sizeof *map);
    if (!map) return; /* keep everything */
    memset(map, 0xFF, (size_t)m->n_nodes * sizeof *map);
    for (int32_t i = 0; i < m->cur.nh; i++)
        for (int32_t n = m->heads[i]; n >= 0 && map[n] < 0; n = m->par[n]) map[n] = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < m->n_nodes; i++) {
        if (map[i] < 0) continue;
        map[i] = k;
        m->pos[k] = m->pos[i];
        m->par[k] = m->par[i] >= 0 ? map[m->par[i]] : m->par[i];
        m->seen[k] = 0;
        k++;
    }
    for (int32_t i = 0; i < m->cur.nh; i++) m->heads[i] = map[m->heads[i]];
    m->n_nodes = m->live = k;
    link_all(m);
    m->epoch++;
    free(map);
}

/* Reads bytes from the committed state; on success they become it. */
static bool advance(vx_gmatch *m, const uint8_t *b, int32_t n) {
    const int32_t n_nodes = m->n_nodes, n_heads = m->n_heads;
    frame f = m->cur, nf;
    for (int32_t i = 0; i < n; i++) {
        if (!read_byte(m, &f, b[i], &nf) || m->oom) {
            m->limited |= m->oom;
            truncate_nodes(m, n_nodes);
            m->n_heads = n_heads;
            m->oom = false;
            return false;
        }
        f = nf;
    }
    if (f.nh) memmove(m->heads, m->heads + f.h0, (size_t)f.nh * sizeof *m->heads);
    f.h0 = 0;
    m->n_heads = f.nh;
    m->cur = f;
    if (m->n_nodes - m->live > GC_MIN) collect(m);
    return true;
}

bool vx_gmatch_feed(vx_gmatch *m, const char *bytes, int32_t n) {
    if (n < 0 || (n && !bytes)) return false;
    return advance(m, (const uint8_t *)bytes, n);
}

bool vx_gmatch_complete(const vx_gmatch *m) { return m->cur.accept && !m->cur.need; }

bool vx_gmatch_can_continue(const vx_gmatch *m) { return m->cur.nh > 0; }

/* ---- the vocabulary trie ---- */

struct vx_gvocab {
    int32_t n_vocab;
    int32_t n_nodes;
    int32_t *child, *sibling; /* first child, next sibling; -1: none */
    int32_t *parent;          /* -1 at the root */
    uint8_t *byte;            /* the byte leading into the node */
    int32_t *tok;             /* the first token whose bytes end at the node, or -1 */
    int32_t *tok_next;        /* [n_vocab] the next token of the same bytes */
    int32_t *tok_node;        /* [n_vocab] the node its bytes end at; 0: no bytes */
    int32_t depth_max;        /* the longest token's bytes */
    int32_t *eog;             /* the end-of-generation tokens */
    int32_t n_eog;
};

void vx_gvocab_free(vx_gvocab *gv) {
    if (!gv) return;
    free(gv->child);
    free(gv->sibling);
    free(gv->parent);
    free(gv->tok_node);
    free(gv->byte);
    free(gv->tok);
    free(gv->tok_next);
    free(gv->eog);
    free(gv);
}

/* Room for cap trie nodes. */
static bool trie_reserve(vx_gvocab *gv, int32_t cap) {
    void **const arr[] = {(void **)&gv->child, (void **)&gv->sibling, (void **)&gv->parent, (void **)&gv->byte,
                          (void **)&gv->tok};
    const size_t size[] = {sizeof *gv->child, sizeof *gv->sibling, sizeof *gv->parent, sizeof *gv->byte,
                           sizeof *gv->tok};
    return grow_parallel(arr, size, 5, cap);
}

static int32_t trie_child(vx_gvocab *gv, int32_t node, uint8_t b, int32_t *cap) {
    for (int32_t c = gv->child[node]; c >= 0; c = gv->sibling[c])
        if (gv->byte[c] == b) return c;
    if (gv->n_nodes == *cap) {
        if (!trie_reserve(gv, 2 * *cap)) return -1;
        *cap *= 2;
    }
    const int32_t c = gv->n_nodes++;
    gv->child[c] = -1, gv->tok[c] = -1, gv->byte[c] = b, gv->parent[c] = node;
    gv->sibling[c] = gv->child[node];
    gv->child[node] = c;
    return c;
}

vx_gvocab *vx_gvocab_new(const vx_vocab *vocab) {
    vx_gvocab *gv = calloc(1, sizeof *gv);
    const int32_t n = vocab ? vx_vocab_n_tokens(vocab) : 0;
    int32_t cap = 1024, piece_cap = vocab ? vx_vocab_max_piece(vocab) + 1 : 1;
    char *piece = malloc((size_t)piece_cap);
    if (!gv || !piece || n <= 0) goto fail;
    gv->n_vocab = n;
    gv->tok_node = calloc((size_t)n, sizeof *gv->tok_node);
    gv->tok_next = malloc((size_t)n * sizeof *gv->tok_next);
    gv->eog = malloc((size_t)n * sizeof *gv->eog);
    if (!trie_reserve(gv, cap) || !gv->tok_node || !gv->tok_next || !gv->eog) goto fail;
    gv->n_nodes = 1;
    gv->child[0] = gv->sibling[0] = gv->tok[0] = gv->parent[0] = -1;
    for (int32_t t = 0; t < n; t++) {
        gv->tok_next[t] = -1;
        if (vx_vocab_is_eog(vocab, t)) { /* ends the text, whatever it reads as */
            gv->eog[gv->n_eog++] = t;
            continue;
        }
        const int32_t len = vx_token_to_piece(vocab, t, piece, piece_cap, false);
        if (len <= 0) continue;
        int32_t node = 0;
        for (int32_t i = 0; i < len && node >= 0; i++) node = trie_child(gv, node, (uint8_t)piece[i], &cap);
        if (node < 0) goto fail;
        gv->tok_next[t] = gv->tok[node];
        gv->tok[node] = t;
        gv->tok_node[t] = node;
        if (len > gv->depth_max) gv->depth_max = len;
    }
    free(piece);
    return gv;
fail:
    free(piece);
    vx_gvocab_free(gv);
    return NULL;
}

/* ---- the filter ---- */

typedef struct mask {
    uint8_t *bits; /* [n_vocab / 8 rounded up] */
    int32_t *key;  /* the state's heads, sorted */
    int32_t n_key, cap_key;
    frame f;       /* its accept and UTF-8 fields (h0, nh unused) */
    uint32_t epoch;
    bool used;
} mask;

struct vx_gfilter {
    vx_gmatch *m;
    const vx_gvocab *gv;
    mask masks[N_MASKS];
    uint8_t *bytes; /* [depth_max] a token's bytes */
    int32_t current; /* the mask of the committed state, or -1 */
    int32_t next;    /* the mask to reuse next */
    int32_t *sorted;
    int32_t cap_sorted;
};

vx_gfilter *vx_gfilter_new(const vx_grammar *g, const vx_gvocab *gv) {
    if (!g || !gv) return NULL;
    vx_gfilter *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->gv = gv;
    f->current = -1;
    bool ok = (f->m = vx_gmatch_new(g)) != NULL && (f->bytes = malloc((size_t)gv->depth_max + 1)) != NULL;
    for (int i = 0; i < N_MASKS && ok; i++) ok = (f->masks[i].bits = malloc(((size_t)gv->n_vocab + 7) / 8)) != NULL;
    if (!ok) {
        vx_gfilter_free(f);
        return NULL;
    }
    return f;
}

void vx_gfilter_free(vx_gfilter *f) {
    if (!f) return;
    vx_gmatch_free(f->m);
    for (int i = 0; i < N_MASKS; i++) free(f->masks[i].bits), free(f->masks[i].key);
    free(f->sorted);
    free(f->bytes);
    free(f);
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Marks the tokens under trie node t read from frame f, depth first. */
static void walk(vx_gmatch *m, const vx_gvocab *gv, int32_t t, const frame *f, uint8_t *bits) {
    for (int32_t c = gv->child[t]; c >= 0; c = gv->sibling[c]) {
        const int32_t n_nodes = m->n_nodes, n_heads = m->n_heads;
        frame nf;
        m->limited |= m->oom;
        m->oom = false;
        if (read_byte(m, f, gv->byte[c], &nf) && !m->oom) {
            for (int32_t k = gv->tok[c]; k >= 0; k = gv->tok_next[k]) bits[k >> 3] |= (uint8_t)(1u << (k & 7));
            if (gv->child[c] >= 0) walk(m, gv, c, &nf, bits);
        }
        truncate_nodes(m, n_nodes);
        m->n_heads = n_heads;
        if (m->spent) return; /* the tokens not reached are refused */
    }
}

static bool same_state(const mask *k, const frame *f, uint32_t epoch, const int32_t *heads) {
    return k->used && k->epoch == epoch && k->n_key == f->nh && k->f.accept == f->accept && k->f.need == f->need &&
           k->f.cp == f->cp && k->f.lo == f->lo && k->f.hi == f->hi &&
           (!f->nh || !memcmp(k->key, heads, (size_t)f->nh * sizeof *heads));
}

/* The mask of the committed state: remembered, or computed into the
 * oldest slot. -1 when out of memory. */
static int32_t state_mask(vx_gfilter *f) {
    vx_gmatch *m = f->m;
    const frame cur = m->cur;
    if (cur.nh > f->cap_sorted) {
        int32_t *s = realloc(f->sorted, (size_t)cur.nh * sizeof *s);
        if (!s) return -1;
        f->sorted = s, f->cap_sorted = cur.nh;
    }
    if (cur.nh) {
        memcpy(f->sorted, m->heads, (size_t)cur.nh * sizeof *f->sorted);
        qsort(f->sorted, (size_t)cur.nh, sizeof *f->sorted, cmp_i32);
    }
    for (int32_t i = 0; i < N_MASKS; i++)
        if (same_state(&f->masks[i], &cur, m->epoch, f->sorted)) return i;
    mask *k = &f->masks[f->next];
    if (cur.nh > k->cap_key) {
        int32_t *key = realloc(k->key, (size_t)cur.nh * sizeof *key);
        if (!key) return -1;
        k->key = key, k->cap_key = cur.nh;
    }
    const vx_gvocab *gv = f->gv;
    memset(k->bits, 0, ((size_t)gv->n_vocab + 7) / 8);
    if (cur.accept && !cur.need)
        for (int32_t i = 0; i < gv->n_eog; i++) k->bits[gv->eog[i] >> 3] |= (uint8_t)(1u << (gv->eog[i] & 7));
    m->budget = WALK_BUDGET, m->spent = false;
    walk(m, gv, 0, &cur, k->bits);
    m->limited |= m->spent || m->oom;
    m->budget = -1;
    m->oom = m->spent = false; /* tokens it could not try are refused */
    if (cur.nh) memcpy(k->key, f->sorted, (size_t)cur.nh * sizeof *k->key);
    k->n_key = cur.nh, k->f = cur, k->epoch = m->epoch, k->used = true;
    const int32_t i = f->next;
    f->next = (f->next + 1) % N_MASKS;
    return i;
}

bool vx_gfilter_allows(void *gfilter, vx_token t) {
    vx_gfilter *f = gfilter;
    if (t < 0 || t >= f->gv->n_vocab) return false;
    if (f->current < 0 && (f->current = state_mask(f)) < 0) return false;
    return f->masks[f->current].bits[t >> 3] >> (t & 7) & 1;
}

bool vx_gfilter_feed(vx_gfilter *f, vx_token t) {
    if (!vx_gfilter_allows(f, t)) return false;
    const vx_gvocab *gv = f->gv;
    int32_t len = 0; /* the token's bytes, read up the trie */
    for (int32_t c = gv->tok_node[t]; c > 0; c = gv->parent[c]) len++;
    int32_t i = len;
    for (int32_t c = gv->tok_node[t]; c > 0; c = gv->parent[c]) f->bytes[--i] = gv->byte[c];
    if (!advance(f->m, f->bytes, len)) return false; /* (out of memory: the mask was computed without it) */
    if (len) f->current = -1;
    return true;
}

bool vx_gfilter_limited(const vx_gfilter *f) { return f->m->limited; }

bool vx_gfilter_done(const vx_gfilter *f) { return vx_gmatch_complete(f->m) && !vx_gmatch_can_continue(f->m); }
