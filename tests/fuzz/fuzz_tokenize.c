/*
 * fuzz_tokenize.c - libFuzzer target for the tokenizers: loads one vocab
 * ($VX_FUZZ_VOCAB, default the qwen2 fixture), tokenizes the input with
 * parse_special on and off, checks ids and buffer-size reporting, and
 * detokenizes. With VX_FUZZ_ROUNDTRIP=1 it also requires
 * decode(encode(x)) == x for plain encodes (only meaningful for vocabs
 * without clean_spaces, e.g. qwen2).
 *
 * Input: byte 0 = flags (bit 0 add_special, bit 1 remove_special, bit 2
 * unparse_special, bit 3 special pieces), the rest = the text. Seeds: the
 * fixture .inp strings, each prefixed by a flags byte.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *       -Iinclude -Isrc tests/fuzz/fuzz_tokenize.c src/vocab.c src/tok_*.c src/gguf.c src/name_index.c \
 *       src/quant*.c src/common.c -lpcre2-8 -lm -o /tmp/fuzz_tokenize
 *   VX_FUZZ_VOCAB=../shared/fixtures/tokenizer/ggml-vocab-llama-spm.gguf \
 *       /tmp/fuzz_tokenize -max_total_time=120 -max_len=4096 /tmp/corpus_tok
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static vx_vocab *g_vocab; /* loaded once per fuzzing process */
static int g_roundtrip;

static vx_vocab *get_vocab(void) {
    if (g_vocab) return g_vocab;
    const char *path = getenv("VX_FUZZ_VOCAB");
    char buf[1024];
    if (!path || !*path) {
        const char *fx = getenv("VX_FIXTURES");
        snprintf(buf, sizeof buf, "%s/tokenizer/ggml-vocab-qwen2.gguf",
                 fx && *fx ? fx : "../shared/fixtures");
        path = buf;
    }
    const char *rt = getenv("VX_FUZZ_ROUNDTRIP");
    g_roundtrip = rt && *rt == '1';
    char err[512];
    vx_gguf *g = NULL;
    if (vx_gguf_open(path, &g, err, sizeof err) != VX_OK ||
        vx_vocab_load(g, &g_vocab, err, sizeof err) != VX_OK) {
        fprintf(stderr, "fuzz_tokenize: %s: %s\n", path, err);
        abort(); /* test harness only */
    }
    vx_gguf_close(g);
    return g_vocab;
}

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_tokenize: check failed: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const vx_vocab *v = get_vocab();
    if (size < 1 || size > (1 << 16)) return 0;
    uint8_t flags = data[0];
    const char *text = (const char *)data + 1;
    int32_t len = (int32_t)(size - 1);
    int32_t n_vocab = vx_vocab_n_tokens(v);

    for (int parse = 0; parse < 2; parse++) {
        bool add = flags & 1;
        int32_t need = vx_tokenize(v, text, len, NULL, 0, add, parse);
        check(need <= 0 && need != INT32_MIN, "measure");
        int32_t cap = -need;
        vx_token *t = malloc(((size_t)cap + 1) * sizeof *t);
        int32_t n = vx_tokenize(v, text, len, t, cap, add, parse);
        check(n == cap, "count matches measure");
        if (n > 0) check(vx_tokenize(v, text, len, t, n - 1, add, parse) == -n, "too small");
        for (int32_t i = 0; i < n; i++) check(t[i] >= 0 && t[i] < n_vocab, "id in range");

        bool rm = flags & 2, unparse = flags & 4;
        int32_t dneed = vx_detokenize(v, t, n, NULL, 0, rm, unparse);
        int32_t dcap = dneed < 0 ? -dneed : 0;
        char *d = malloc((size_t)dcap + 1);
        int32_t dn = vx_detokenize(v, t, n, d, dcap, rm, unparse);
        check(dn >= 0 && dn <= dcap, "detokenize size");
        if (g_roundtrip && !add && !parse)
            check(dn == len && memcmp(d, text, (size_t)len) == 0, "round trip");
        for (int32_t i = 0; i < n && i < 8; i++) {
            char piece[256];
            vx_token_to_piece(v, t[i], piece, sizeof piece, flags & 8);
        }
        free(d);
        free(t);
    }
    /* arbitrary ids through the piece and detokenize paths */
    if (size >= 9) {
        vx_token ids[2];
        memcpy(ids, data + 1, sizeof ids);
        char buf[64];
        vx_token_to_piece(v, ids[0], buf, sizeof buf, true);
        vx_detokenize(v, ids, 2, buf, sizeof buf, flags & 2, flags & 4);
        (void)vx_vocab_is_eog(v, ids[0]);
        (void)vx_vocab_text(v, ids[1]);
    }
    return 0;
}
