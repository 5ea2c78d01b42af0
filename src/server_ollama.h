/*
 * server_ollama.h - ollama's native API on `vx serve` (/api/chat,
 * /api/generate, /api/embed, /api/tags, /api/show, ...), as pure functions
 * beside server_openai.h: the clients, scripts and front-ends written for
 * ollama (ollama-js, ollama-python, Open WebUI, LangChain's ChatOllama)
 * then work against vx unchanged.
 *
 * A generation request is translated into the OpenAI request that means
 * the same (messages, tools, options as sampling fields, format as a
 * response_format, think as reasoning_format and the templates'
 * enable_thinking), which vx_oai_parse_request then validates, so both
 * APIs share one set of rules; the replies are written in ollama's shape:
 * newline-delimited JSON objects when streaming (ollama's default), one
 * object when not, the last with done true, done_reason and the counts
 * and durations (nanoseconds) of ollama's final chunk. Errors are
 * ollama's {"error": "..."} with the HTTP status.
 *
 * Sampling defaults are ollama's, not OpenAI's: temperature 0.8, top_k
 * 40, top_p 0.9, min_p 0, repeat_penalty 1.1 over the last 64 tokens,
 * num_predict -1 (until the end of generation or of the context).
 */
#ifndef VX_SERVER_OLLAMA_H
#define VX_SERVER_OLLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "server_openai.h"
#include "tool_call.h"
#include "vortex.h"

typedef enum vx_ollama_kind { VX_OLLAMA_CHAT = 1, VX_OLLAMA_GENERATE = 2 } vx_ollama_kind;

/* The version /api/version reports: the ollama API these endpoints follow
 * (think, tool calls with object arguments, /api/embed's dimensions). */
#define VX_OLLAMA_API_VERSION "0.12.0"

typedef struct vx_ollama_request {
    vx_ollama_kind kind;
    char *model;        /* as sent (NULL: not given) */
    char *oai_body;     /* the same request in OpenAI's shape (for vx_oai_parse_request) */
    size_t oai_len;
    vx_oai_kind oai_kind; /* chat; a raw /api/generate is a completion */
    int32_t max_tokens; /* options.num_predict (-1: until the end) */
    bool load_only;     /* nothing to generate (no prompt, no messages): ollama loads the
                           model and answers done_reason "load", or "unload" when
                           keep_alive is 0: vx keeps its one model loaded either way */
    bool unload;
    vx_token *context;  /* /api/generate's context: the tokens of the exchange before */
    int32_t n_context;
} vx_ollama_request;

/* Translates a /api/chat or /api/generate body. n_vocab bounds the ids of
 * context. False with err filled (its message is what the client sees). */
bool vx_ollama_translate(vx_ollama_kind kind, const char *body, size_t len, int32_t n_vocab,
                         vx_ollama_request *out, vx_oai_error *err);
void vx_ollama_request_free(vx_ollama_request *r);

/* {"error": "message"} (malloc'd; NULL when memory runs out). */
char *vx_ollama_error_json(const vx_oai_error *e);

/* One reply object and its newline: a streaming chunk (done_reason NULL:
 * "done": false, the text so far not repeated), or the final object
 * (done_reason set: "done": true with the statistics; the non-streaming
 * reply is this object with the whole text). */
typedef struct vx_ollama_reply {
    vx_ollama_kind kind;
    const char *model;
    const char *text; /* message.content (chat) or response (generate) */
    size_t text_len;
    const char *thinking; /* message.thinking / thinking, when thinking_len > 0 */
    size_t thinking_len;
    const vx_tool_call *calls; /* chat: message.tool_calls (arguments as objects) */
    int32_t n_calls;
    const vx_oai_logprob *lp; /* "logprobs" (n_lp entries; NULL: none) */
    int32_t n_lp;
    const vx_vocab *vocab;    /* token texts for logprobs */
    const char *done_reason;  /* "stop", "length", "load"; NULL: not done */
    int64_t total_ns, load_ns, prompt_ns, eval_ns;
    int32_t prompt_count, eval_count;
    const vx_token *context; /* generate's final object: the exchange's tokens */
    int32_t n_context;
} vx_ollama_reply;

void vx_ollama_reply_json(vx_sbuf *out, const vx_ollama_reply *r);

/* The served model as /api/tags, /api/ps and /api/show describe it. */
typedef struct vx_ollama_model {
    const char *name;     /* "name" and "model" (the server's model name) */
    const char *arch;     /* details.family */
    uint64_t n_params;
    const char *quant;    /* details.quantization_level ("Q4_K_M", ...) */
    uint64_t size;        /* bytes of the file */
    int64_t mtime;        /* the file's modification time (unix seconds) */
    int32_t n_ctx_train, n_ctx, n_embd, n_layer;
    const char *template_src; /* the chat template's text ("" if none) */
    bool tools, thinking, embedding; /* capabilities beside "completion" */
} vx_ollama_model;

/* GET /api/tags (ps false) and GET /api/ps (ps true). */
char *vx_ollama_tags_json(const vx_ollama_model *m, bool ps);
/* POST /api/show: the body checked ({"model": NAME}; any name shows the
 * one model; false with err for what is not such an object), the answer. */
bool vx_ollama_show_body(const char *body, size_t len, vx_oai_error *err);
char *vx_ollama_show_json(const vx_ollama_model *m);
/* POST /api/embed {model, input (a string or strings), truncate (default
 * true: inputs cut to the context), dimensions} and the older
 * /api/embeddings {model, prompt} as an OpenAI embeddings body (*oai,
 * malloc'd); the server answers them with vx_oai_embeddings_json in
 * ollama's shapes (vx_oai_embed_request.ollama). *empty: no input at
 * all (no input, [], an empty prompt), which ollama answers with no
 * vectors (clients send it to load the model). */
bool vx_ollama_embed_body(const char *body, size_t len, bool legacy, char **oai, bool *empty, vx_oai_error *err);
/* "2026-11-30T17:20:01.123456789Z" (now, UTC) into buf (>= 40 bytes). */
void vx_ollama_time(char *buf, size_t size);

#endif
