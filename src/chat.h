/*
 * chat.h - chat templates: a Jinja subset interpreter that renders the
 * `tokenizer.chat_template` of real models the way Hugging Face transformers
 * does (jinja2 with trim_blocks + lstrip_blocks, loopcontrols, HF's tojson),
 * plus built-in fallbacks by name.
 */
#ifndef VX_CHAT_H
#define VX_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vortex.h"

typedef struct vx_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content; /* UTF-8 */
} vx_chat_message;

typedef struct vx_chat_template vx_chat_template;

/* Parses a Jinja template. A syntax error gives VX_EFORMAT with line:column. */
vx_status vx_chat_template_parse(const char *source, vx_chat_template **out, char *err,
                                 size_t err_size);
/* Built-in templates by name: "chatml", "llama3", "llama2", "mistral", "phi3",
 * "gemma", "qwen2", ... NULL when unknown. Returns Jinja source text. */
const char *vx_chat_template_builtin(const char *name);
void vx_chat_template_free(vx_chat_template *t);

/* Renders messages. *out is malloc'd (caller frees). Errors (including the
 * template's own raise_exception(msg)) give a status and a message.
 * The text is exactly what HF's apply_chat_template(tokenize=False) gives:
 * a leading bos_token / trailing eos_token the template writes is kept.
 * A NULL content renders as None. Variables besides messages,
 * add_generation_prompt, bos_token and eos_token: tools=None,
 * documents=None, and strftime_now() reads the current local time.
 * A parsed template is never modified by rendering, so several threads may
 * render the same template at once. */
vx_status vx_chat_template_render(const vx_chat_template *t, const vx_chat_message *msgs,
                                  size_t n_msgs, bool add_generation_prompt,
                                  const char *bos_token, const char *eos_token, char **out,
                                  char *err, size_t err_size);

/* Everything a render takes besides the messages (the variant below). */
struct tm;
typedef struct vx_chat_render_params {
    bool add_generation_prompt;
    const char *bos_token; /* NULL = "" */
    const char *eos_token; /* NULL = "" */
    /* Optional JSON object whose members become extra template variables,
     * e.g. {"tools": [...], "enable_thinking": false}. They override the
     * defaults HF passes (tools=None, documents=None). NULL = none. */
    const char *extra_vars_json;
    /* Optional JSON array of message objects used instead of msgs, for
     * messages with tool_calls or other structured fields. NULL = use msgs. */
    const char *messages_json;
    /* The clock strftime_now() formats; NULL = the current local time. */
    const struct tm *now;
    /* Runaway-template limits; 0 = default. */
    size_t max_output;  /* bytes of rendered text (default 64 MiB) */
    size_t max_memory;  /* bytes of working memory per render (default 256 MiB) */
    uint64_t max_steps; /* work units: nodes, iterations, bulk work (default 20 million) */
} vx_chat_render_params;

vx_chat_render_params vx_chat_render_default_params(void);

/* Like vx_chat_template_render, with extra variables, a fixed clock and
 * limits. Errors: VX_EINVAL for template errors (raise_exception, undefined
 * values, type errors) and bad JSON, VX_ERANGE when a limit is hit,
 * VX_EUNSUPPORTED for unknown filters/tests, VX_ENOMEM. */
vx_status vx_chat_template_render_ex(const vx_chat_template *t, const vx_chat_message *msgs,
                                     size_t n_msgs, const vx_chat_render_params *params,
                                     char **out, char *err, size_t err_size);

#endif
