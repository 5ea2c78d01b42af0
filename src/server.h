/*
 * server.h - the HTTP server of `vx serve`: an OpenAI-compatible API over a
 * running vx_engine (libmicrohttpd, one thread per connection), and
 * ollama's native API beside it. Request and response shapes live in
 * server_openai.h and server_ollama.h; this module owns routing,
 * authentication, body limits, the hand-off of token events from the engine
 * thread to the connection threads, SSE streaming, metrics and logging.
 */
#ifndef VX_SERVER_H
#define VX_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat.h"
#include "engine.h"
#include "tool_call.h"
#include "vortex.h"

typedef struct vx_server vx_server;

typedef struct vx_server_params {
    const char *host;        /* address to bind: "127.0.0.1", "::1", "0.0.0.0", a name */
    int port;                /* 0: any free port (see vx_server_port) */
    const char *api_key;     /* NULL: no authentication */
    const char *model_name;  /* the name /v1/models reports and responses echo by default */
    int32_t n_ctx;           /* the engine's per-sequence context, for prompt checks */
    size_t max_body;         /* request body limit in bytes (413 beyond) */
    size_t max_buffered;     /* output one streaming request may buffer for a slow
                                client before it is canceled */
    unsigned timeout_s;      /* idle connection timeout (suspended while a non-streaming
                                request generates; streams send keep-alive comments) */
    unsigned header_timeout_s; /* a request's headers must be complete this many seconds
                                 after the connection opened or its previous request
                                 ended, and its body arrive at 1000 B/s on average from
                                 then on, else the connection is closed (clients that
                                 drip bytes); 0: no limit */
    unsigned max_connections; /* beyond it requests get 503 (0: 256) */
    bool log_requests;       /* one line per request on stderr */
    vx_tool_format tool_format; /* how the chat template's model writes tool calls
                                   (vx_tool_format_detect); NONE: requests with
                                   tools get a 400 */
    bool reasoning;          /* split thoughts off into reasoning_content unless a
                                request says otherwise (reasoning.h; harmony.h: the
                                analysis messages of a gpt-oss template's replies) */
    const char *template_kwargs; /* chat template variables for every request (a JSON
                                    object, vx_oai_check_kwargs), under the request's
                                    chat_template_kwargs; NULL: none */
    vx_pooling pooling;      /* /v1/embeddings: how token vectors become one (mean,
                                cls, last; anything else: last) */
    int32_t n_parallel;      /* /v1/embeddings: inputs of one request in the engine at
                                once (the engine's --parallel; < 1: 1) */
    const char *model_path;  /* the model's file, whose size and time ollama's /api/tags
                                reports (NULL: none) */
    const char *template_src; /* the chat template's text, for /api/show and /props (NULL: "") */
    int32_t n_batch;         /* the engine's batch: /infill's prefix and suffix budget (< 1: 512) */
} vx_server_params;

vx_server_params vx_server_default_params(void);

/* Starts listening. The model, engine and template must outlive the
 * server; the engine must be freed after vx_server_free. */
vx_status vx_server_start(const vx_server_params *params, const vx_model *model, vx_engine *engine,
                          const vx_chat_template *tmpl, vx_server **out, char *err, size_t err_size);
/* The port actually bound. */
int vx_server_port(const vx_server *s);
/* Stops accepting connections; requests that arrive on open connections
 * get 503. Requests in flight continue. */
void vx_server_shutdown(vx_server *s);
/* Generation requests in flight. */
int vx_server_active(vx_server *s);
/* Cancels every generation in flight (their clients get an error). */
void vx_server_cancel_all(vx_server *s);
/* Cancels what is left, closes every connection and frees the server. */
void vx_server_free(vx_server *s);

#endif
