/*
 * vocab.h - tokenizer internals: building a vx_vocab from GGUF metadata.
 * The public tokenize/detokenize calls are declared in vortex.h.
 *
 * Supported tokenizer.ggml.model values: "llama" (SentencePiece BPE with
 * scores and byte fallback), "gpt2" (byte-level BPE with merges; the
 * pre-tokenizer regexes are chosen by tokenizer.ggml.pre), "bert"
 * (WordPiece), "t5" (SentencePiece Unigram with its precompiled
 * normalizer). Others give VX_EUNSUPPORTED with the name.
 */
#ifndef VX_VOCAB_H
#define VX_VOCAB_H

#include "gguf.h"
#include "vortex.h"

/* Token types as stored in tokenizer.ggml.token_type. */
enum {
    VX_TOKEN_TYPE_UNDEFINED = 0,
    VX_TOKEN_TYPE_NORMAL = 1,
    VX_TOKEN_TYPE_UNKNOWN = 2,
    VX_TOKEN_TYPE_CONTROL = 3,
    VX_TOKEN_TYPE_USER_DEFINED = 4,
    VX_TOKEN_TYPE_UNUSED = 5,
    VX_TOKEN_TYPE_BYTE = 6
};

/* Builds the vocabulary from a parsed GGUF file. Strings are copied, so the
 * vocab outlives the file. */
vx_status vx_vocab_load(const vx_gguf *g, vx_vocab **out, char *err, size_t err_size);
void vx_vocab_free(vx_vocab *vocab);

#endif
