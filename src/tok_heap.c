/*
 * tok_heap.c - the priority queue both BPE tokenizers merge with: a 4-ary
 * heap of candidate bigrams (half the depth of a binary one, and the four
 * children of a node are adjacent, so a pop misses the cache half as often).
 */
#include <stdlib.h>

#include "common.h"
#include "tok_internal.h"

static bool before(const vx_bigram *a, const vx_bigram *b) {
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

bool vx_bigram_push(vx_bigram_heap *h, vx_bigram b) {
    if (h->n == h->cap) {
        size_t c = h->cap ? h->cap * 2 : 64;
        vx_bigram *a = c < SIZE_MAX / sizeof *a ? realloc(h->a, c * sizeof *a) : NULL;
        if (!a) return false;
        h->a = a;
        h->cap = c;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (!before(&b, &h->a[p])) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = b;
    return true;
}

vx_bigram vx_bigram_pop(vx_bigram_heap *h) {
    vx_bigram top = h->a[0];
    vx_bigram last = h->a[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 4 * i + 1, end = VX_MIN(c + 4, n);
        if (c >= n) break;
        for (size_t k = c + 1; k < end; k++)
            if (before(&h->a[k], &h->a[c])) c = k;
        if (!before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (n > 0) h->a[i] = last;
    return top;
}
