/*
 * tok_spm.c - SentencePiece-style BPE ("llama" tokenizer model).
 *
 * The fragment arrives with spaces already escaped as "▁" (and the leading
 * "▁" added when the vocab asks for it; see vocab.c). It is split into UTF-8
 * characters; then the adjacent pair whose concatenation is the vocab token
 * with the highest score is merged, repeatedly (ties: leftmost first), via a
 * binary heap over a doubly linked list of symbols. Symbols that are not
 * tokens at the end fall back to byte tokens <0xXX>, else to <unk>.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tok_internal.h"

/* 32-bit offsets keep symbols and heap entries at 16 bytes: long texts
 * are cache-bound. vx_spm_tokenize rejects texts that would not fit. */
typedef struct sym {
    uint32_t off, n; /* n = 0 once merged into the left neighbour */
    int32_t prev, next;
} sym;


typedef struct session {
    const vx_vocab *v;
    const char *text;
    sym *syms;
    size_t syms_cap;
    vx_bigram_heap heap;
    bool oom;
} session;

/* Heap order: higher score first, then leftmost. */



static void try_bigram(session *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const sym *l = &s->syms[left], *r = &s->syms[right];
    uint32_t size = l->n + r->n; /* symbols are contiguous in the text */
    if (size > s->v->max_token_len) return;
    vx_token id = vx_tok_find(s->v, s->text + l->off, size);
    /* a token no merge makes (-inf: from a tokenizer.json) is never
     * merged into, as in Hugging Face's BPE */
    if (id < 0 || !isfinite(s->v->tok[id].score)) return;
    vx_bigram b = {s->v->tok[id].score, left, right, size};
    if (!vx_bigram_push(&s->heap, b)) s->oom = true;
}

/* Emits a final symbol: its token, else its bytes as byte tokens. */
static void emit(const session *s, const sym *y, vx_tokvec *out) {
    const vx_vocab *v = s->v;
    vx_token id = vx_tok_find(v, s->text + y->off, y->n);
    if (id >= 0) {
        vx_tokvec_push(out, id);
        return;
    }
    for (size_t k = 0; k < y->n; k++) {
        vx_token b = v->byte_tok[(unsigned char)s->text[y->off + k]];
        if (b < 0) b = v->unk;
        if (b >= 0) vx_tokvec_push(out, b);
    }
}

/* Tokenizes one chunk text[0..len) (len > 0), appending to out. */
static void spm_chunk(session *s, const char *text, size_t len, vx_tokvec *out) {
    s->text = text;
    s->heap.n = 0;
    size_t ns = 0;
    /* one symbol per UTF-8 character; unlike llama.cpp, a malformed
     * sequence is split into single bytes so it round-trips as byte tokens */
    for (size_t o = 0; o < len; ns++) o += vx_utf8_seq_len(text + o, len - o);
    if (ns > s->syms_cap) {
        free(s->syms);
        s->syms = ns < SIZE_MAX / sizeof *s->syms ? malloc(ns * sizeof *s->syms) : NULL;
        s->syms_cap = s->syms ? ns : 0;
        if (!s->syms) {
            s->oom = true;
            return;
        }
    }
    size_t o = 0;
    for (size_t i = 0; i < ns; i++) {
        size_t l = vx_utf8_seq_len(text + o, len - o);
        s->syms[i] = (sym){(uint32_t)o, (uint32_t)l, (int32_t)i - 1,
                           i + 1 < ns ? (int32_t)(i + 1) : -1};
        o += l;
    }
    for (size_t i = 1; i < ns; i++) try_bigram(s, (int32_t)(i - 1), (int32_t)i);
    while (s->heap.n > 0 && !s->oom) {
        vx_bigram b = vx_bigram_pop(&s->heap);
        sym *l = &s->syms[b.left], *r = &s->syms[b.right];
        /* stale if either side changed since the pair was queued */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->syms[r->next].prev = b.left;
        try_bigram(s, l->prev, b.left);
        try_bigram(s, b.left, l->next);
    }
    if (!s->oom)
        for (int32_t i = 0; i >= 0; i = s->syms[i].next) emit(s, &s->syms[i], out);
}

#define SPACE_ESC "\xe2\x96\x81" /* "▁" */

/* Where the next chunk starts: just before a "▁" that follows another
 * character. With v->spm_word_cut no token has such a "▁" inside, so no
 * merge can cross that point and chunks tokenize independently, in the
 * same order of merges as the whole text would. Small chunks keep the
 * heap small (a 1 MB text in one heap is cache-bound). */
static size_t next_cut(const char *t, size_t len, size_t from) {
    size_t p = from + 1;
    while (p + 3 <= len) {
        const char *q = memchr(t + p, 0xe2, len - p - 2);
        if (!q) break;
        p = (size_t)(q - t);
        if (memcmp(t + p, SPACE_ESC, 3) == 0 &&
            (p < from + 3 || memcmp(t + p - 3, SPACE_ESC, 3) != 0))
            return p;
        p++;
    }
    return len;
}

/* With v->spm_split (HF's Metaspace split): the next "▁" after from;
 * each "▁" starts a piece, tokenized alone. */
static size_t next_space(const char *t, size_t len, size_t from) {
    for (size_t p = from + 1; p + 3 <= len; p++) {
        const char *q = memchr(t + p, 0xe2, len - p - 2);
        if (!q) break;
        p = (size_t)(q - t);
        if (memcmp(t + p, SPACE_ESC, 3) == 0) return p;
    }
    return len;
}

bool vx_spm_tokenize(const vx_vocab *v, const char *text, size_t len, vx_tokvec *out) {
    if (len == 0) return true;
    if (len > (size_t)INT32_MAX) return false; /* int32 indices, uint32 offsets */
    session s = {.v = v};
    size_t a = 0;
    while (a < len && !s.oom && !out->oom) {
        size_t b = v->spm_split ? next_space(text, len, a) : v->spm_word_cut ? next_cut(text, len, a) : len;
        spm_chunk(&s, text + a, b - a, out);
        a = b;
    }
    free(s.syms);
    free(s.heap.a);
    return !s.oom;
}
