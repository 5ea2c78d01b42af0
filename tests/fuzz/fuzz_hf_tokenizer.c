/*
 * fuzz_hf_tokenizer.c - libFuzzer target for the Hugging Face tokenizer
 * import (src/hf_tokenizer.c): the input is tokenizer.json, then optionally
 * "\n@@\n" and tokenizer_config.json, then "\n@@\n" and config.json. It is
 * converted with vx_hf_tokenizer_to_gguf (an embedding of 0 or 600 rows,
 * chosen by the input's length); an accepted vocabulary is opened as a
 * reader, loaded as a vocabulary and used to tokenize and detokenize a
 * fixed text. Rejections must carry a message.
 *
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *       -Iinclude -Isrc tests/fuzz/fuzz_hf_tokenizer.c src/hf_tokenizer.c src/gguf.c src/gguf_write.c \
 *       src/name_index.c src/vocab.c src/tok_*.c src/common.c src/quant*.c src/chat.c src/jinja_*.c \
 *       -lcjson -lpcre2-8 -lm -o /tmp/fuzz_hf_tokenizer
 *   (add whatever else the linker asks for, or link build/libvortex.a after the target)
 * Seeds: small tokenizer.json files, e.g. one written by tests/test_hf.c's export.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "hf_import.h"
#include "vocab.h"
#include "vortex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void release_writer(void *w) { vx_gguf_writer_free(w); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    const char *part[3] = {buf, NULL, NULL};
    size_t len[3] = {size, 0, 0};
    for (int i = 1; i < 3; i++) {
        char *sep = memmem(part[i - 1], len[i - 1], "\n@@\n", 4);
        if (!sep) break;
        part[i] = sep + 4;
        len[i] = len[i - 1] - (size_t)(part[i] - part[i - 1]);
        len[i - 1] = (size_t)(sep - part[i - 1]);
    }
    char err[512] = "";
    vx_gguf_writer *w = vx_gguf_writer_init();
    vx_status st = vx_hf_tokenizer_to_gguf(part[0], len[0], part[1], len[1], part[2], len[2], size % 2 ? 600 : 0, w,
                                           err, sizeof err);
    if (st) {
        if (!err[0]) abort(); /* harness: a rejection without a message */
        vx_gguf_writer_free(w);
        free(buf);
        return 0;
    }
    vx_gguf *g = NULL;
    if (vx_gguf_writer_open_reader(w, release_writer, w, &g, err, sizeof err) != VX_OK) {
        vx_gguf_writer_free(w);
        free(buf);
        return 0;
    }
    vx_vocab *v = NULL;
    if (vx_vocab_load(g, &v, err, sizeof err) == VX_OK) {
        static const char text[] = "Hello world! 123 <|im_start|> \xc3\xa9t\xc3\xa9\n\n";
        vx_token t[256];
        const int32_t n = vx_tokenize(v, text, (int32_t)sizeof text - 1, t, 256, true, true);
        char out[4096];
        if (n > 0) vx_detokenize(v, t, n, out, sizeof out, false, false);
        vx_vocab_free(v);
    } else if (!err[0]) {
        abort();
    }
    vx_gguf_close(g);
    free(buf);
    return 0;
}
