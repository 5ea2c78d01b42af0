/*
 * test_chat_tools.c - tool calling through real chat templates: every case
 * of tests/data/chat_tools/manifest.json (written by gen.py there with
 * jinja2 and HF transformers' settings) rendered by our interpreter with
 * the conversation's `tools` as an extra variable and its messages (tool
 * calls, tool results) as JSON, as the server passes them. "ok" cases must
 * match byte for byte, "raise_exception" cases must fail with the
 * template's message, and "error" cases (jinja2 itself failed) must fail.
 * Templates come from the shared fixtures; test data paths are relative to
 * the repository root, where the tests run.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"
#include "testutil.h"

#define DATA_DIR "tests/data/chat_tools"

/* The frozen clock of the fixtures: 2025-02-21T12:00:00 (a Friday). */
static struct tm fixed_time(void) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = 2025 - 1900;
    tm.tm_mon = 1;
    tm.tm_mday = 21;
    tm.tm_hour = 12;
    tm.tm_wday = 5;
    tm.tm_yday = 51;
    return tm;
}

static cJSON *load_json(const char *path) {
    char *text = vx_test_read_file(path, NULL);
    if (!text) return NULL;
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

/* A string member, or "" when missing (a malformed manifest fails checks, not the test). */
static const char *jstr(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(obj, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Whether got is exactly want[0, want_len). */
static bool same_bytes(const char *want, size_t want_len, const char *got) {
    return got && strlen(got) == want_len && memcmp(got, want, want_len) == 0;
}

/* Prints where got first differs from want: byte offset, line:column of
 * the expected text, and some context of both. */
static void report_diff(const char *name, const char *want, size_t want_len, const char *got) {
    size_t got_len = strlen(got), i = 0, line = 1, col = 1;
    while (i < want_len && i < got_len && want[i] == got[i]) {
        if (want[i] == '\n') line++, col = 1;
        else col++;
        i++;
    }
    size_t from = i > 60 ? i - 60 : 0;
    size_t wn = want_len - from < 160 ? want_len - from : 160;
    size_t gn = got_len - from < 160 ? got_len - from : 160;
    fprintf(stderr, "%s: first difference at byte %zu, line %zu column %zu (want %zu bytes, got %zu)\n",
            name, i, line, col, want_len, got_len);
    fprintf(stderr, "  want: \"%.*s\"\n  got:  \"%.*s\"\n", (int)wn, want + from, (int)gn, got + from);
}

/* The end of the JSON value at p (valid JSON: cJSON parsed it first). */
static const char *skip_value(const char *p) {
    int depth = 0;
    do {
        if (*p == '"') {
            for (p++; *p && *p != '"'; p += *p == '\\' && p[1] ? 2 : 1) {}
            if (*p) p++;
        } else if (*p == '{' || *p == '[') {
            depth++, p++;
        } else if (*p == '}' || *p == ']') {
            depth--, p++;
        } else if (depth == 0) {
            while (*p && !strchr(",}] \t\r\n", *p)) p++;
        } else {
            p++;
        }
    } while (*p && depth > 0);
    return p;
}

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    return p;
}

/* The text of member key (written without escapes) of the JSON object
 * text, malloc'd; NULL when missing. The interpreter gets the members as
 * written, as jinja2 did: printed again by cJSON, 1500.0 would become 1500
 * (an int) and 9007199254740993 would become 9.00719925474099e+15. */
static char *raw_member(const char *text, const char *key) {
    const char *p = skip_ws(text);
    if (*p != '{') return NULL;
    size_t klen = strlen(key);
    for (p = skip_ws(p + 1); *p == '"'; p = skip_ws(p + 1)) {
        const char *k = p + 1, *kend = skip_value(p);
        p = skip_ws(kend);
        if (*p != ':') return NULL;
        const char *v = skip_ws(p + 1), *vend = skip_value(v);
        if ((size_t)(kend - 1 - k) == klen && !memcmp(k, key, klen)) return strndup(v, (size_t)(vend - v));
        p = skip_ws(vend);
        if (*p != ',') break;
    }
    return NULL;
}

/* Renders a conversation (file text conv_text, parsed conv) the way the
 * server hands one over: its messages as messages_json, its tools as the
 * variable `tools` in extra_vars_json.
 * Returns the text (malloc'd) or NULL with err. */
static char *render_conv(const char *src, const char *conv_text, const cJSON *conv, const char *bos,
                         const char *eos, vx_status *status, char *err, size_t err_size) {
    char *messages = raw_member(conv_text, "messages"), *tools = raw_member(conv_text, "tools");
    size_t n = tools ? strlen(tools) + 16 : 0;
    char *extra = tools ? malloc(n) : NULL;
    if (extra) snprintf(extra, n, "{\"tools\": %s}", tools);

    char *out = NULL;
    vx_chat_template *t = NULL;
    vx_status st = VX_EINVAL;
    snprintf(err, err_size, "the conversation has no messages or no tools");
    if (messages && extra) st = vx_chat_template_parse(src, &t, err, err_size);
    if (st == VX_OK) {
        struct tm now = fixed_time();
        vx_chat_render_params p = vx_chat_render_default_params();
        p.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(conv, "add_generation_prompt"));
        p.bos_token = bos;
        p.eos_token = eos;
        p.messages_json = messages;
        p.extra_vars_json = extra;
        p.now = &now;
        st = vx_chat_template_render_ex(t, NULL, 0, &p, &out, err, err_size);
    }
    vx_chat_template_free(t);
    free(messages);
    free(tools);
    free(extra);
    *status = st;
    return out;
}

static void test_manifest(void) {
    cJSON *man = load_json(DATA_DIR "/manifest.json");
    CHECKF(man != NULL, "cannot read %s (run from the repository root)", DATA_DIR "/manifest.json");
    if (!man) return;
    const cJSON *templates = cJSON_GetObjectItem(man, "templates");
    const cJSON *convs = cJSON_GetObjectItem(man, "conversations");
    int ok_total = 0, ok_pass = 0, raise_total = 0, raise_pass = 0, err_total = 0, err_pass = 0;
    bool corruption_checked = false;
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cJSON_GetObjectItem(man, "cases")) {
        const char *tname = jstr(cs, "template"), *cname = jstr(cs, "conversation");
        const char *status = jstr(cs, "status");
        const cJSON *tinfo = cJSON_GetObjectItem(templates, tname);
        char path[1024], name[512];
        snprintf(name, sizeof name, "%s / %s", tname, cname);
        snprintf(path, sizeof path, "chat/%s", jstr(tinfo, "file"));
        char *src = vx_test_read_file(vx_test_fixture_path(path), NULL);
        snprintf(path, sizeof path, DATA_DIR "/%s", jstr(convs, cname));
        char *conv_text = vx_test_read_file(path, NULL);
        cJSON *conv = conv_text ? cJSON_Parse(conv_text) : NULL;
        CHECKF(src && conv, "%s: cannot read the template or %s", name, path);
        if (!src || !conv) {
            free(src);
            free(conv_text);
            cJSON_Delete(conv);
            continue;
        }

        char err[1024] = "";
        vx_status st;
        char *out = render_conv(src, conv_text, conv, jstr(tinfo, "bos_token"),
                                jstr(tinfo, "eos_token"), &st, err, sizeof err);
        if (!strcmp(status, "ok")) {
            ok_total++;
            snprintf(path, sizeof path, DATA_DIR "/%s", jstr(cs, "expected"));
            size_t want_len = 0;
            char *want = vx_test_read_file(path, &want_len);
            CHECKF(want != NULL, "%s: cannot read %s", name, path);
            bool same = st == VX_OK && want && same_bytes(want, want_len, out);
            CHECKF(same, "%s: %s", name, st == VX_OK ? "output differs" : err);
            if (!same && st == VX_OK && want && out) report_diff(name, want, want_len, out);
            ok_pass += same;
            /* the comparison must see a single changed byte */
            if (same && want_len > 0 && !corruption_checked) {
                want[want_len / 2] ^= 0x01;
                CHECK(!same_bytes(want, want_len, out));
                corruption_checked = true;
            }
            free(want);
        } else {
            const char *msg = jstr(cs, "message");
            bool is_raise = !strcmp(status, "raise_exception");
            bool good = st != VX_OK && out == NULL && (!is_raise || strstr(err, msg) != NULL);
            CHECKF(good, "%s: jinja2 gives %s \"%s\"; we give %s", name, status, msg,
                   st == VX_OK ? "success" : err);
            if (is_raise) {
                raise_total++;
                raise_pass += good;
            } else {
                err_total++;
                err_pass += good;
            }
        }
        free(out);
        free(src);
        free(conv_text);
        cJSON_Delete(conv);
    }
    printf("chat_tools: %d/%d ok cases byte-exact, %d/%d raise_exception, %d/%d jinja2 errors also fail\n",
           ok_pass, ok_total, raise_pass, raise_total, err_pass, err_total);
    /* a manifest that lost cases must not pass quietly */
    CHECK(ok_total == 57 && raise_total == 3 && err_total == 20);
    CHECK(corruption_checked);
    cJSON_Delete(man);
}

int main(void) {
    test_manifest();
    return vx_test_finish("test_chat_tools");
}
