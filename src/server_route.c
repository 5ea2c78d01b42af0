/* server_route.c - the endpoints table (server_route.h). */
#include "server_route.h"

#include <stddef.h>
#include <string.h>

vx_route vx_server_find_route(const char *path, bool *post) {
    static const struct {
        const char *path;
        vx_route r;
        bool post;
    } table[] = {
        {"/health", R_HEALTH, false},           {"/metrics", R_METRICS, false},
        {"/v1/models", R_MODELS, false},        {"/models", R_MODELS, false},
        {"/v1/chat/completions", R_CHAT, true}, {"/chat/completions", R_CHAT, true},
        {"/v1/completions", R_COMPLETIONS, true}, {"/completions", R_COMPLETIONS, true},
        {"/tokenize", R_TOKENIZE, true},        {"/detokenize", R_DETOKENIZE, true},
        {"/apply-template", R_APPLY, true},
        {"/v1/embeddings", R_EMBED, true},      {"/embeddings", R_EMBED_LEGACY, true},
        {"/embedding", R_EMBED_LEGACY, true}, /* llama-server's: its own format */
        {"/completion", R_LCPP_COMPLETION, true}, {"/infill", R_LCPP_INFILL, true}, /* llama-server's own */
        {"/props", R_PROPS, false},
        /* ollama's native API */
        {"/", R_ROOT, false},                   {"/api/version", R_OLL_VERSION, false},
        {"/api/tags", R_OLL_TAGS, false},       {"/api/ps", R_OLL_PS, false},
        {"/api/show", R_OLL_SHOW, true},        {"/api/chat", R_OLL_CHAT, true},
        {"/api/generate", R_OLL_GENERATE, true}, {"/api/embed", R_OLL_EMBED, true},
        {"/api/embeddings", R_OLL_EMBEDDINGS, true},
        {"/api/pull", R_OLL_MANAGE, true},      {"/api/push", R_OLL_MANAGE, true},
        {"/api/create", R_OLL_MANAGE, true},    {"/api/copy", R_OLL_MANAGE, true},
        {"/api/delete", R_OLL_MANAGE, true},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(path, table[i].path)) {
            *post = table[i].post;
            return table[i].r;
        }
    return R_NONE;
}
