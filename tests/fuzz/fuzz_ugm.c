/*
 * fuzz_ugm.c - libFuzzer target for the Unigram normalizer's precompiled
 * charsmap (tok_ugm.c), the part of a "t5" vocabulary a file can corrupt
 * most freely: a double-array trie whose offsets and values index into the
 * blob. Loads one "t5" vocab ($VX_FUZZ_VOCAB: a GGUF whose tokenizer is a
 * Unigram model, e.g. one written from spm_train's .model with
 * vx_hf_spm_to_gguf), then per input swaps in a normalizer built from the
 * input's charsmap and tokenizes the input's text with it. A charsmap the
 * builder refuses must come with a message; an accepted one must tokenize
 * any text to valid ids.
 *
 * Input: bytes 0-1 = a little-endian word: its low 14 bits L, bit 14
 * remove_extra_whitespaces, bit 15 add_dummy_prefix; then L bytes of
 * charsmap (fewer if the input ends), then the text.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *       -Iinclude -Isrc tests/fuzz/fuzz_ugm.c src/vocab.c src/tok_*.c src/gguf.c src/name_index.c \
 *       src/quant*.c src/common.c -lpcre2-8 -lm -o /tmp/fuzz_ugm
 *   VX_FUZZ_VOCAB=/tmp/t5.gguf /tmp/fuzz_ugm -max_total_time=120 -max_len=4096 /tmp/corpus_ugm
 *
 * Seeds: a real charsmap (the vocab's own; nmt_nfkc's is ~240 KB, too long
 * for L, so a head of it: the trie is cut, and every lookup must stay in
 * bounds) followed by a text, and short made-up ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tok_internal.h"
#include "vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static vx_vocab *g_vocab;

static vx_vocab *get_vocab(void) {
    if (g_vocab) return g_vocab;
    const char *path = getenv("VX_FUZZ_VOCAB");
    char err[512];
    vx_gguf *g = NULL;
    if (!path || vx_gguf_open(path, &g, err, sizeof err) != VX_OK || vx_vocab_load(g, &g_vocab, err, sizeof err) != VX_OK ||
        g_vocab->kind != VX_VOCAB_UGM) {
        fprintf(stderr, "fuzz_ugm: VX_FUZZ_VOCAB must name a \"t5\" vocabulary (%s)\n", path ? err : "unset");
        abort(); /* test harness only */
    }
    vx_gguf_close(g);
    return g_vocab;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vx_vocab *v = get_vocab();
    if (size < 2) return 0;
    const unsigned word = (unsigned)data[0] | (unsigned)data[1] << 8;
    size_t n = word & 0x3FFF;
    const bool remove_ws = word >> 14 & 1, dummy = word >> 15 & 1;
    data += 2, size -= 2;
    if (n > size) n = size;
    char err[256] = "";
    vx_ugm *u = NULL;
    if (vx_ugm_create(v, data, n, remove_ws, dummy, &u, err, sizeof err) != VX_OK) {
        if (!err[0] || u) abort();
        return 0;
    }
    vx_ugm *keep = v->ugm;
    v->ugm = u;
    const int32_t len = (int32_t)(size - n);
    vx_token buf[4096];
    const int32_t k = vx_tokenize(v, (const char *)data + n, len, buf, 4096, false, false);
    for (int32_t i = 0; i < k; i++)
        if (buf[i] < 0 || buf[i] >= v->n_tokens) abort();
    v->ugm = keep;
    vx_ugm_free(u);
    return 0;
}
