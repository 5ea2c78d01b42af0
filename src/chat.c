/*
 * chat.c - the chat-template API (chat.h): parse a template once, render it
 * per request with HF's variables (messages, add_generation_prompt,
 * bos_token, eos_token, tools=None, documents=None, plus optional JSON
 * extras), and the built-in templates that --chat-template NAME selects.
 * The interpreter itself lives in jinja_*.c.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* localtime_r */
#endif
#include "chat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "jinja.h"

#define DEFAULT_MAX_OUTPUT ((size_t)64 << 20)
#define DEFAULT_MAX_MEMORY ((size_t)256 << 20)
#define DEFAULT_MAX_STEPS 20000000ull
#define MAX_MACRO_DEPTH 100
#define MAX_JSON_DEPTH 128

struct vx_chat_template {
    jx_arena arena; /* tokens, AST and constants */
    jx_nodes body;
};

/* ------------------------------------------------------------- builtins */

/* Our own sources for the common prompt formats. They follow each family's
 * published format; message contents that are not strings render as "". */
static const char TPL_CHATML[] =
    "{%- for message in messages -%}\n"
    "{%- set content = message['content'] if message['content'] is string else '' -%}\n"
    "{{- '<|im_start|>' ~ message['role'] ~ '\\n' ~ content ~ '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

static const char TPL_LLAMA3[] =
    "{{- bos_token -}}\n"
    "{%- for message in messages -%}\n"
    "{%- set content = message['content'] if message['content'] is string else '' -%}\n"
    "{{- '<|start_header_id|>' ~ message['role'] ~ '<|end_header_id|>\\n\\n' ~ content | trim"
    " ~ '<|eot_id|>' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
    "{%- endif -%}\n";

/* <s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] ... */
static const char TPL_LLAMA2[] =
    "{%- set state = namespace(system='') -%}\n"
    "{%- for message in messages -%}\n"
    "{%- set content = (message['content'] if message['content'] is string else '') | trim -%}\n"
    "{%- if message['role'] == 'system' -%}\n"
    "{%- set state.system = content -%}\n"
    "{%- elif message['role'] == 'user' -%}\n"
    "{%- if state.system -%}\n"
    "{%- set content = '<<SYS>>\\n' ~ state.system ~ '\\n<</SYS>>\\n\\n' ~ content -%}\n"
    "{%- set state.system = '' -%}\n"
    "{%- endif -%}\n"
    "{{- bos_token ~ '[INST] ' ~ content ~ ' [/INST]' -}}\n"
    "{%- elif message['role'] == 'assistant' -%}\n"
    "{{- ' ' ~ content ~ ' ' ~ eos_token -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n";

/* <s>[INST] user [/INST] answer</s>[INST] ... ; a system message is put in
 * front of the next user message. */
static const char TPL_MISTRAL[] =
    "{{- bos_token -}}\n"
    "{%- set state = namespace(system='') -%}\n"
    "{%- for message in messages -%}\n"
    "{%- set content = message['content'] if message['content'] is string else '' -%}\n"
    "{%- if message['role'] == 'system' -%}\n"
    "{%- set state.system = content -%}\n"
    "{%- elif message['role'] == 'user' -%}\n"
    "{%- if state.system -%}\n"
    "{%- set content = state.system ~ '\\n\\n' ~ content -%}\n"
    "{%- set state.system = '' -%}\n"
    "{%- endif -%}\n"
    "{{- '[INST] ' ~ content ~ ' [/INST]' -}}\n"
    "{%- elif message['role'] == 'assistant' -%}\n"
    "{{- ' ' ~ content ~ eos_token -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n";

static const char TPL_PHI3[] =
    "{%- for message in messages -%}\n"
    "{%- set content = message['content'] if message['content'] is string else '' -%}\n"
    "{{- '<|' ~ message['role'] ~ '|>\\n' ~ content ~ '<|end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}"
    "{%- else -%}{{- eos_token -}}{%- endif -%}\n";

/* Gemma has no system role: the system text is prepended to the first user
 * turn instead of being refused. */
static const char TPL_GEMMA[] =
    "{{- bos_token -}}\n"
    "{%- set state = namespace(system='') -%}\n"
    "{%- for message in messages -%}\n"
    "{%- set content = (message['content'] if message['content'] is string else '') | trim -%}\n"
    "{%- if message['role'] == 'system' -%}\n"
    "{%- set state.system = content -%}\n"
    "{%- else -%}\n"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
    "{%- if state.system and role == 'user' -%}\n"
    "{%- set content = state.system ~ '\\n\\n' ~ content -%}\n"
    "{%- set state.system = '' -%}\n"
    "{%- endif -%}\n"
    "{{- '<start_of_turn>' ~ role ~ '\\n' ~ content ~ '<end_of_turn>\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}\n";

static const struct {
    const char *name;
    const char *source;
} BUILTINS[] = {
    {"chatml", TPL_CHATML}, {"qwen2", TPL_CHATML},   {"qwen", TPL_CHATML},
    {"llama3", TPL_LLAMA3}, {"llama2", TPL_LLAMA2},  {"mistral", TPL_MISTRAL},
    {"phi3", TPL_PHI3},     {"gemma", TPL_GEMMA},
};

const char *vx_chat_template_builtin(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof BUILTINS / sizeof BUILTINS[0]; i++)
        if (!strcmp(BUILTINS[i].name, name)) return BUILTINS[i].source;
    return NULL;
}

/* ---------------------------------------------------------------- parse */

vx_status vx_chat_template_parse(const char *source, vx_chat_template **out, char *err,
                                 size_t err_size) {
    if (!out) return vx_seterr(err, err_size, VX_EINVAL, "chat template: no output pointer");
    *out = NULL;
    if (!source) return vx_seterr(err, err_size, VX_EINVAL, "chat template: no source");
    vx_chat_template *t = calloc(1, sizeof *t);
    if (!t) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    jx_arena_init(&t->arena, 0);
    jx_tokens toks;
    vx_status st = jx_lex(&t->arena, source, strlen(source), &toks, err, err_size);
    if (st == VX_OK) st = jx_parse(&t->arena, &toks, &t->body, err, err_size);
    if (st != VX_OK) {
        vx_chat_template_free(t);
        return st;
    }
    *out = t;
    return VX_OK;
}

void vx_chat_template_free(vx_chat_template *t) {
    if (!t) return;
    jx_arena_free(&t->arena);
    free(t);
}

/* ----------------------------------------------------------------- JSON */

/* A small JSON reader producing template values (for extra variables and
 * structured messages). */
typedef struct jreader {
    jx_ctx *c;
    const char *s;
    size_t n, i;
    const char *what;
} jreader;

static bool jr_fail(jreader *r, const char *msg) {
    return jx_fail(r->c, VX_EINVAL, "invalid JSON in %s at offset %zu: %s", r->what, r->i, msg);
}

static void jr_ws(jreader *r) {
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' ||
                           r->s[r->i] == '\r'))
        r->i++;
}

static int jr_hex4(jreader *r) {
    if (r->n - r->i < 4) return -1;
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = r->s[r->i + (size_t)k];
        int d = ch >= '0' && ch <= '9'                     ? ch - '0'
                : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10
                                                           : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    r->i += 4;
    return v;
}

static bool jr_string(jreader *r, jx_val *out) {
    r->i++; /* opening quote */
    jx_buf b = {0};
    bool ok = true;
    while (ok) {
        if (r->i >= r->n) {
            ok = jr_fail(r, "unterminated string");
            break;
        }
        char ch = r->s[r->i++];
        if (ch == '"') break;
        if ((unsigned char)ch < 0x20) {
            ok = jr_fail(r, "control character in string");
            break;
        }
        if (ch != '\\') {
            ok = jx_buf_putc(r->c, &b, ch);
            continue;
        }
        if (r->i >= r->n) {
            ok = jr_fail(r, "bad escape");
            break;
        }
        char e = r->s[r->i++], ch2;
        switch (e) {
        case '"': ch2 = '"'; break;
        case '\\': ch2 = '\\'; break;
        case '/': ch2 = '/'; break;
        case 'b': ch2 = '\b'; break;
        case 'f': ch2 = '\f'; break;
        case 'n': ch2 = '\n'; break;
        case 'r': ch2 = '\r'; break;
        case 't': ch2 = '\t'; break;
        case 'u': ch2 = 0; break;
        default: ok = jr_fail(r, "bad escape"); continue;
        }
        if (e != 'u') {
            ok = jx_buf_putc(r->c, &b, ch2);
            continue;
        }
        int cp = jr_hex4(r);
        if (cp >= 0xD800 && cp <= 0xDBFF && r->n - r->i >= 6 && r->s[r->i] == '\\' &&
            r->s[r->i + 1] == 'u') {
            size_t save = r->i;
            r->i += 2;
            int lo = jr_hex4(r);
            if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else r->i = save;
        }
        if (cp < 0) {
            ok = jr_fail(r, "bad \\u escape");
            break;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        char enc[4];
        ok = jx_buf_put(r->c, &b, enc, jx_utf8_enc((uint32_t)cp, enc));
    }
    ok = ok && jx_mkstr(r->c, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    return ok;
}

static bool jr_value(jreader *r, jx_val *out, int depth);

static bool jr_container(jreader *r, jx_val *out, int depth) {
    bool obj = r->s[r->i] == '{';
    char close = obj ? '}' : ']';
    r->i++;
    if (obj) {
        jx_dict *d = jx_dict_new(r->c, 0);
        if (!d) return false;
        out->type = JX_DICT;
        out->flags = 0;
        out->u.d = d;
    } else if (!jx_mklist(r->c, 0, out)) {
        return false;
    }
    jr_ws(r);
    if (r->i < r->n && r->s[r->i] == close) {
        r->i++;
        return true;
    }
    for (;;) {
        jx_val key, v;
        jr_ws(r);
        if (obj) {
            if (r->i >= r->n || r->s[r->i] != '"') return jr_fail(r, "expected a string key");
            if (!jr_string(r, &key)) return false;
            jr_ws(r);
            if (r->i >= r->n || r->s[r->i] != ':') return jr_fail(r, "expected ':'");
            r->i++;
        }
        if (!jr_value(r, &v, depth + 1)) return false;
        if (obj ? !jx_dict_set(r->c, out->u.d, key, v) : !jx_list_push(r->c, out->u.l, v))
            return false;
        jr_ws(r);
        if (r->i < r->n && r->s[r->i] == ',') {
            r->i++;
            continue;
        }
        if (r->i < r->n && r->s[r->i] == close) {
            r->i++;
            return true;
        }
        return jr_fail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool jr_number(jreader *r, jx_val *out) {
    size_t st = r->i;
    bool is_float = false;
    if (r->i < r->n && r->s[r->i] == '-') r->i++;
    size_t digits = r->i;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
    if (r->i == digits) return jr_fail(r, "unexpected character");
    if (r->i < r->n && r->s[r->i] == '.') {
        is_float = true;
        r->i++;
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
    }
    if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
        is_float = true;
        r->i++;
        if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-')) r->i++;
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
    }
    char buf[64];
    size_t len = r->i - st;
    if (len >= sizeof buf) return jr_fail(r, "number too long");
    memcpy(buf, r->s + st, len);
    buf[len] = 0;
    /* Integers are exact across int64, both ends included (errno, not the
     * saturated LLONG_MIN/MAX, tells an overflow); past it they become
     * floats, where Python would keep an exact big integer. */
    if (!is_float) {
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        if (*end == 0 && errno == 0) {
            *out = jx_int(v);
            return true;
        }
    }
    *out = jx_float(strtod(buf, NULL));
    return true;
}

static bool jr_value(jreader *r, jx_val *out, int depth) {
    if (depth > MAX_JSON_DEPTH) return jr_fail(r, "nested too deeply");
    jr_ws(r);
    if (r->i >= r->n) return jr_fail(r, "unexpected end");
    char ch = r->s[r->i];
    if (ch == '{' || ch == '[') return jr_container(r, out, depth);
    if (ch == '"') return jr_string(r, out);
    static const struct {
        const char *word;
        int kind;
    } WORDS[] = {{"true", 1}, {"false", 2}, {"null", 3}};
    for (size_t k = 0; k < 3; k++) {
        size_t l = strlen(WORDS[k].word);
        if (r->n - r->i >= l && !memcmp(r->s + r->i, WORDS[k].word, l)) {
            r->i += l;
            *out = WORDS[k].kind == 3 ? jx_none() : jx_bool(WORDS[k].kind == 1);
            return true;
        }
    }
    return jr_number(r, out);
}

static bool parse_json(jx_ctx *c, const char *s, const char *what, jx_val *out) {
    jreader r = {c, s, strlen(s), 0, what};
    if (!jr_value(&r, out, 0)) return false;
    jr_ws(&r);
    if (r.i != r.n) return jr_fail(&r, "trailing characters");
    return true;
}

/* --------------------------------------------------------------- render */

vx_chat_render_params vx_chat_render_default_params(void) {
    vx_chat_render_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static bool set_str(jx_ctx *c, jx_scope *s, const char *name, const char *value) {
    jx_val v;
    if (!value) value = "";
    return jx_mkstr(c, value, strlen(value), &v) && jx_scope_set(c, s, name, v);
}

static bool build_messages(jx_ctx *c, const vx_chat_message *msgs, size_t n, jx_val *out) {
    if (!jx_mklist(c, n, out)) return false;
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role) return jx_fail(c, VX_EINVAL, "message %zu has no role", i);
        jx_dict *d = jx_dict_new(c, 2);
        jx_val k1, k2, role, content = jx_none();
        if (!d || !jx_mkstr(c, "role", 4, &k1) || !jx_mkstr(c, "content", 7, &k2) ||
            !jx_mkstr(c, msgs[i].role, strlen(msgs[i].role), &role) ||
            (msgs[i].content && !jx_mkstr(c, msgs[i].content, strlen(msgs[i].content), &content)) ||
            !jx_dict_set(c, d, k1, role) || !jx_dict_set(c, d, k2, content))
            return false;
        out->u.l->v[i].type = JX_DICT;
        out->u.l->v[i].flags = 0;
        out->u.l->v[i].u.d = d;
    }
    out->u.l->n = n;
    return true;
}

static bool setup_root(jx_ctx *c, jx_scope *root, const vx_chat_message *msgs, size_t n_msgs,
                       const vx_chat_render_params *p) {
    jx_val messages;
    if (p->messages_json) {
        if (!parse_json(c, p->messages_json, "messages_json", &messages)) return false;
        if (messages.type != JX_LIST)
            return jx_fail(c, VX_EINVAL, "messages_json must be a JSON array");
    } else if (!build_messages(c, msgs, n_msgs, &messages)) {
        return false;
    }
    if (!jx_scope_set(c, root, "messages", messages) ||
        !jx_scope_set(c, root, "add_generation_prompt", jx_bool(p->add_generation_prompt)) ||
        !set_str(c, root, "bos_token", p->bos_token) ||
        !set_str(c, root, "eos_token", p->eos_token) ||
        !jx_scope_set(c, root, "tools", jx_none()) ||
        !jx_scope_set(c, root, "documents", jx_none()))
        return false;
    if (p->extra_vars_json) {
        jx_val extra;
        if (!parse_json(c, p->extra_vars_json, "extra_vars_json", &extra)) return false;
        if (extra.type != JX_DICT)
            return jx_fail(c, VX_EINVAL, "extra_vars_json must be a JSON object");
        for (size_t i = 0; i < extra.u.d->n; i++)
            if (!jx_scope_set(c, root, extra.u.d->k[i].u.s->s, extra.u.d->v[i])) return false;
    }
    return true;
}

vx_status vx_chat_template_render_ex(const vx_chat_template *t, const vx_chat_message *msgs,
                                     size_t n_msgs, const vx_chat_render_params *params,
                                     char **out, char *err, size_t err_size) {
    if (!out) return vx_seterr(err, err_size, VX_EINVAL, "chat template: no output pointer");
    *out = NULL;
    if (!t) return vx_seterr(err, err_size, VX_EINVAL, "chat template: no template");
    if (n_msgs && !msgs) return vx_seterr(err, err_size, VX_EINVAL, "chat template: no messages");
    vx_chat_render_params p = params ? *params : vx_chat_render_default_params();

    jx_arena arena;
    jx_arena_init(&arena, p.max_memory ? p.max_memory : DEFAULT_MAX_MEMORY);
    jx_ctx c;
    memset(&c, 0, sizeof c);
    c.arena = &arena;
    c.lim.max_output = p.max_output ? p.max_output : DEFAULT_MAX_OUTPUT;
    c.lim.max_memory = arena.cap;
    c.lim.max_steps = p.max_steps ? p.max_steps : DEFAULT_MAX_STEPS;
    c.lim.max_depth = MAX_MACRO_DEPTH;
    if (p.now) {
        c.now = *p.now;
    } else {
        time_t now = time(NULL);
        localtime_r(&now, &c.now);
    }

    jx_buf buf = {0};
    jx_scope *root = jx_scope_new(&c, NULL);
    vx_status st = VX_OK;
    if (!root || !setup_root(&c, root, msgs, n_msgs, &p)) st = c.status;
    c.line = 0;
    if (st == VX_OK) st = jx_render(&c, &t->body, root, &buf);
    if (st == VX_OK && !buf.p) {
        buf.p = malloc(1);
        if (buf.p) buf.p[0] = 0;
        else st = vx_seterr(c.msg, sizeof c.msg, VX_ENOMEM, "out of memory");
    }
    if (st != VX_OK) {
        vx_seterr(err, err_size, st, "chat template: %s", c.msg[0] ? c.msg : vx_status_str(st));
        jx_buf_free(&buf);
    } else {
        *out = buf.p;
    }
    jx_arena_free(&arena);
    return st;
}

vx_status vx_chat_template_render(const vx_chat_template *t, const vx_chat_message *msgs,
                                  size_t n_msgs, bool add_generation_prompt,
                                  const char *bos_token, const char *eos_token, char **out,
                                  char *err, size_t err_size) {
    vx_chat_render_params p = vx_chat_render_default_params();
    p.add_generation_prompt = add_generation_prompt;
    p.bos_token = bos_token;
    p.eos_token = eos_token;
    return vx_chat_template_render_ex(t, msgs, n_msgs, &p, out, err, err_size);
}
