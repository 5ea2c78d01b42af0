/*
 * server_route.h - the HTTP server's endpoints: which path is which
 * route, and whether it takes a POST.
 */
#ifndef VX_SERVER_ROUTE_H
#define VX_SERVER_ROUTE_H

#include <stdbool.h>

typedef enum vx_route {
    R_NONE, R_HEALTH, R_METRICS, R_MODELS, R_CHAT, R_COMPLETIONS, R_TOKENIZE, R_DETOKENIZE, R_APPLY, R_EMBED, R_EMBED_LEGACY,
    R_LCPP_COMPLETION, R_LCPP_INFILL, R_PROPS,
    R_ROOT, R_OLL_VERSION, R_OLL_TAGS, R_OLL_PS, R_OLL_SHOW, R_OLL_CHAT, R_OLL_GENERATE, R_OLL_EMBED, R_OLL_EMBEDDINGS,
    R_OLL_MANAGE
} vx_route;

/* The route of path (R_NONE: none); *post: whether it is a POST endpoint. */
vx_route vx_server_find_route(const char *path, bool *post);

#endif
