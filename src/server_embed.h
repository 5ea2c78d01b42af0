/*
 * server_embed.h - POST /v1/embeddings: the request (OpenAI's fields and
 * llama-server's embd_normalize), running its inputs through the engine
 * as embedding requests, and the response.
 */
#ifndef VX_SERVER_EMBED_H
#define VX_SERVER_EMBED_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "server_openai.h"

#define VX_OAI_MAX_INPUTS 2048 /* OpenAI's limit of inputs per request */

typedef struct vx_oai_embed_request {
    char *model;          /* NULL: not given */
    vx_token **inputs;    /* [n_inputs] tokenized (BOS / EOS as the vocabulary adds them) */
    int32_t *n_tokens;    /* [n_inputs] */
    int32_t n_inputs;
    int64_t n_tokens_total;
    bool base64;          /* encoding_format "base64": little-endian float32 bytes */
    bool legacy;          /* llama-server's own format (/embedding, /embeddings, or
                             "content" instead of "input"): [{"index", "embedding":
                             [[...]]}], floats */
    int32_t dimensions;   /* keep the first this many values (0: all), then normalize */
    int32_t normalize;    /* vx_embd_normalize's norm: 2 unless embd_normalize says */
    bool truncate;        /* "truncate": true (ollama's field): inputs over the context are
                             cut to it (their start kept) instead of refused */
    int ollama;           /* set by the caller: the answer in ollama's shape, 1: /api/embed
                             ({"embeddings": [[...]], ...}), 2: /api/embeddings ({"embedding"}) */
    int64_t elapsed_ns;   /* set by the caller: ollama's total_duration */
} vx_oai_embed_request;

/* Parses and tokenizes a request: input (a string, an array of strings,
 * of token ids, or of arrays of ids; at most VX_OAI_MAX_INPUTS, none
 * empty, none over n_ctx tokens; llama-server's "content" in its place
 * makes the request legacy), model, encoding_format (float, base64),
 * dimensions (1..n_embd), embd_normalize (-1 and up), truncate, user. legacy: the
 * answer in llama-server's own format whatever the body says. */
bool vx_oai_parse_embeddings(const char *body, size_t len, const vx_vocab *v, int32_t n_ctx, int32_t n_embd,
                             bool legacy, vx_oai_embed_request *out, vx_oai_error *err);
void vx_oai_embed_request_free(vx_oai_embed_request *r);

/* Runs the request's inputs as engine embedding requests, at most window
 * at a time, pooled as pooling says, into *out ([n_inputs][n_embd],
 * malloc'd, not normalized). gone(ud) is asked about every 100 ms: when it
 * says the client left, what is in flight is canceled and VX_ECANCELED
 * returned. VX_EFULL: the engine's queue is full with none of them in
 * flight (HTTP 429). VX_ECANCELED also when the engine canceled one (it
 * is shutting down); VX_EINTERNAL when one failed. err says why. */
vx_status vx_embed_run(vx_engine *e, const vx_oai_embed_request *r, vx_pooling pooling, int32_t window,
                       int32_t n_embd, bool (*gone)(void *ud), void *ud, float **out, char *err, size_t err_size);

/* The response (malloc'd): each vector cut to r->dimensions and
 * normalized (in place in vecs), as floats or base64; or, legacy, the
 * array llama-server's /embedding answers. */
char *vx_oai_embeddings_json(const vx_oai_embed_request *r, const char *model, float *vecs, int32_t n_embd);

#endif
