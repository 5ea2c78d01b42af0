/*
 * fuzz_grammar.c - libFuzzer target for the GBNF parser and matcher
 * (grammar.h). Input: a grammar's text, a NUL byte, then a text. The
 * grammar is parsed from an exact-size copy (no terminator, so a read past
 * its end is caught); a refusal must carry a message and leave *out NULL.
 * An accepted grammar matches the text two ways: one matcher byte by byte
 * up to the first refusal, another in chunks (the whole text, then halving
 * the chunk after each refusal, which leaves the matcher as it was: this
 * finds the longest accepted prefix too). Their accepted lengths, complete
 * and can_continue must agree, and a matcher that took a byte is never
 * dead (complete or able to continue). Needs no data files.
 *
 * Build (from the repository root; the vocabulary sources are there for
 * the token filter's half of grammar.c, which this target does not call;
 * add what the linker asks for if the module comes to need more):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *       -std=c11 -D_GNU_SOURCE -Iinclude -Isrc tests/fuzz/fuzz_grammar.c \
 *       src/grammar.c src/grammar_parse.c src/common.c src/vocab.c src/tok_*.c \
 *       src/gguf.c src/name_index.c src/quant*.c -lpcre2-8 -lm -o /tmp/fuzz_grammar
 *
 * Run, e.g.
 *   /tmp/fuzz_grammar -max_total_time=300 -max_len=2048 CORPUS
 * Seeds: a few grammars of tests/test_grammar.c each followed by "\0" and a
 * sentence of it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, size_t gl, const char *g) {
    fprintf(stderr, "fuzz_grammar: %s\ngrammar (%zu bytes): %.*s\n", what, gl, (int)gl, g);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *z = memchr(data, 0, size);
    if (!z) return 0;
    const size_t gl = (size_t)(z - data), tl = size - gl - 1;
    char *gt = malloc(gl ? gl : 1), *text = malloc(tl ? tl : 1);
    if (!gt || !text) {
        free(gt), free(text);
        return 0;
    }
    memcpy(gt, data, gl);
    memcpy(text, z + 1, tl);
    static char dummy;
    vx_grammar *g = (vx_grammar *)(void *)&dummy;
    char err[512] = "";
    const vx_status st = vx_grammar_parse(gt, gl, &g, err, sizeof err);
    if (st != VX_OK) {
        if (g) fail("a refused grammar left *out set", gl, gt);
        if (st == VX_EINVAL && !err[0]) fail("a grammar refused without a message", gl, gt);
        goto out;
    }
    if (!g || g == (vx_grammar *)(void *)&dummy) fail("VX_OK without a grammar", gl, gt);
    vx_gmatch *a = vx_gmatch_new(g), *b = vx_gmatch_new(g);
    if (a && b) {
        size_t i = 0;
        while (i < tl && vx_gmatch_feed(a, text + i, 1)) i++;
        size_t p = 0, len = tl;
        while (len > 0 && p < tl) {
            if (len > tl - p) len = tl - p;
            if (vx_gmatch_feed(b, text + p, (int32_t)len)) p += len;
            else len /= 2;
        }
        if (p != i) {
            fprintf(stderr, "byte by byte %zu bytes, in chunks %zu\n", i, p);
            fail("the two matchers disagree on the accepted prefix", gl, gt);
        }
        if (vx_gmatch_complete(a) != vx_gmatch_complete(b) ||
            vx_gmatch_can_continue(a) != vx_gmatch_can_continue(b))
            fail("the two matchers disagree on complete / can_continue", gl, gt);
        if (i > 0 && !vx_gmatch_complete(a) && !vx_gmatch_can_continue(a))
            fail("a matcher that took bytes is dead", gl, gt);
        /* a refused byte leaves the state as it was */
        if (i < tl) {
            const bool c = vx_gmatch_complete(a), k = vx_gmatch_can_continue(a);
            if (vx_gmatch_feed(a, text + i, 1) || vx_gmatch_complete(a) != c || vx_gmatch_can_continue(a) != k)
                fail("a refused byte changed the matcher", gl, gt);
        }
    }
    vx_gmatch_free(a);
    vx_gmatch_free(b);
    vx_grammar_free(g);
out:
    free(gt);
    free(text);
    return 0;
}
