/*
 * test_chat.c - chat templates: every case of fixtures/chat/manifest.json
 * (byte-exact HF renderings, raise_exception and error cases) and of
 * tests/data/chat_tools (tool calls through real templates), Jinja
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

/* Counts of a manifest's cases by status, and how many passed. */
typedef struct tally {
    int ok_total, ok_pass, raise_total, raise_pass, err_total, err_pass;
} tally;

/* Judges one rendering (st, out, err) against its manifest case: "ok"
 * must give want[0, want_len) (NULL: unreadable) byte for byte,
 * "raise_exception" must fail with msg in the error, any other status
 * (jinja2 itself failed) must fail. */
static bool judge(tally *t, const char *name, const char *status, const char *msg, vx_status st, const char *out,
                  const char *err, const char *want, size_t want_len) {
    if (!strcmp(status, "ok")) {
        const bool same = st == VX_OK && want && same_bytes(want, want_len, out);
        CHECKF(same, "%s: %s", name, st == VX_OK ? "output differs" : err);
        if (!same && st == VX_OK && want && out) report_diff(name, want, want_len, out);
        t->ok_total++;
        t->ok_pass += same;
        return same;
    }
    const bool is_raise = !strcmp(status, "raise_exception");
    const bool good = st != VX_OK && out == NULL && (!is_raise || strstr(err, msg) != NULL);
    CHECKF(good, "%s: want %s \"%s\", got %s", name, status, msg, st == VX_OK ? "success" : err);
    if (is_raise) t->raise_total++, t->raise_pass += good;
    else t->err_total++, t->err_pass += good;
    return good;
}

static void test_manifest(void) {
    cJSON *man = load_json("chat/manifest.json");
    CHECKF(man != NULL, "cannot read %s", vx_test_fixture_path("chat/manifest.json"));
    if (!man) return;
    const cJSON *templates = cJSON_GetObjectItem(man, "templates");
    const cJSON *cases = cJSON_GetObjectItem(man, "cases");
    tally tl = {0};
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cases) {
        const char *tname = jstr(cs, "template");
        const char *status = jstr(cs, "status");
        const char *conv_file = jstr(cs, "conversation_file");
        const cJSON *tinfo = cJSON_GetObjectItem(templates, tname);
        char rel[512];
        snprintf(rel, sizeof rel, "chat/%s", jstr(tinfo, "file"));
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
            msgs[i].role = jstr(m, "role");
            msgs[i].content = jstr(m, "content");
        }
        struct tm now = fixed_time();
        vx_chat_render_params p = vx_chat_render_default_params();
        p.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(conv, "add_generation_prompt"));
        p.bos_token = jstr(tinfo, "bos_token");
        p.eos_token = jstr(tinfo, "eos_token");
        p.now = &now;

        char err[512] = "", *out = NULL, name[512];
        snprintf(name, sizeof name, "%s / %s", tname, jstr(cs, "conversation"));
        vx_chat_template *t = NULL;
        vx_status st = vx_chat_template_parse(src, &t, err, sizeof err);
        if (st == VX_OK) st = vx_chat_template_render_ex(t, msgs, (size_t)n, &p, &out, err, sizeof err);
        vx_chat_template_free(t);

        size_t want_len = 0;
        char *want = NULL;
        if (!strcmp(status, "ok")) {
            snprintf(rel, sizeof rel, "chat/%s", jstr(cs, "expected"));
            want = vx_test_read_file(vx_test_fixture_path(rel), &want_len);
        }
        judge(&tl, name, status, jstr(cs, "message"), st, out, err, want, want_len);
        free(want);
        free(out);
        free(msgs);
        free(src);
        cJSON_Delete(conv);
    }
    printf("manifest: %d/%d ok cases byte-exact, %d/%d raise_exception, %d/%d error\n", tl.ok_pass,
           tl.ok_total, tl.raise_pass, tl.raise_total, tl.err_pass, tl.err_total);
    CHECK(tl.ok_total == 44);
    cJSON_Delete(man);
}

/* Whitespace control, literals, operators, tests, filters and tojson. The
 * expected strings are what Python jinja2 renders with HF's settings. */
static void test_lexer_and_expressions(void) {
    EXPECT("a\n{% if true %}\nb\n{% endif %}\nc",
           "a\nb\nc");
    EXPECT("a\n  {% if true %}\n  b\n  {% endif %}\n  c",
           "a\n  b\n  c");
    EXPECT("a  {% if true %}  b  {% endif %}  c",
           "a    b    c");
    EXPECT("a\n  {%- if true -%}\n  b\n  {%- endif -%}\n  c",
           "abc");
    EXPECT("a\n  {%+ if true %}\n  b\n  {% endif +%}\n  c",
           "a\n    b\n\n  c");
    EXPECT("  {{ 'x' }}  \n  {{- 'y' -}}  \n z",
           "  xyz");
    EXPECT("  {# comment #}\nx\n  {#- c -#}  y\n{# c #}z",
           "xy\nz");
    EXPECT("line1\n\t {% set x = 1 %}\t\nline2",
           "line1\n\t\nline2");
    EXPECT("{% raw %}{{ not }} {% evaluated %}{% endraw %}",
           "{{ not }} {% evaluated %}");
    EXPECT("a\n  {% raw %}\n  {{x}}\n  {% endraw %}\nb",
           "a\n\n  {{x}}\nb");
    EXPECT("a\n  {%- raw -%}\n  {{x}}\n  {%- endraw -%}\nb",
           "a{{x}}b");
    EXPECT("x\r\ny\r\n{% if 1 %}\r\nz\r\n{% endif %}\r\n",
           "x\ny\nz\n");
    EXPECT("trailing\n\n",
           "trailing\n");
    EXPECT("trailing\n",
           "trailing");
    EXPECT("{{ 'a' }}\n{{ 'b' }}\n",
           "a\nb");
    EXPECT("{% for i in range(3) %}\n  {{ i }}\n{% endfor %}\n",
           "  0\n  1\n  2\n");
    EXPECT("{% for i in range(3) -%}\n  {{ i }}\n{%- endfor %}",
           "012");
    EXPECT("{{ {'a': {'b': 1}} }}",
           "{'a': {'b': 1}}");
    EXPECT("{{ {'a': {'b': 1}}['a']['b'] }}",
           "1");
    EXPECT("{{- ' x ' -}}",
           " x ");
    EXPECT("   \n   {% if true %}x{% endif %}",
           "   \nx");
    EXPECT("{{ 1 }}  {% if true %}x{% endif %}",
           "1  x");
    EXPECT("{{ 1 }}\n  {% if true %}x{% endif %}",
           "1\nx");
    EXPECT("{% if true %}  {% endif %}|",
           "  |");
    EXPECT("{%- if true %}\n\n  x\n{% endif -%}\n\n|",
           "\n  x\n|");
    EXPECT("{#- hi -#}\n  x",
           "x");
    EXPECT("{{ '{{' }} {{ '}}' }}",
           "{{ }}");
    EXPECT("{ { } } {% if 1 %}}{% endif %}",
           "{ { } } }");
    EXPECT("{{ 'a\\nb' }}|{{ \"q\\\"q\" }}|{{ 'tab\\tx' }}|{{ '\\x41\\u00e9\\U0001F600' }}|{{ '\\d\\w' }}|{{ '\\101' }}",
           "a\nb|q\"q|tab\tx|A\303\251\360\237\230\200|\\d\\w|A");
    EXPECT("{{ 'a' 'b' \"c\" }}",
           "abc");
    EXPECT("{{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 1e-5 }} {{ 2.50 }} {{ 1E10 }}",
           "1000 31 15 5 1500.0 1e-05 2.5 10000000000.0");
    EXPECT("{{ true }} {{ True }} {{ none }} {{ None }} {{ false }}",
           "True True None None False");
    EXPECT("{{ [1, 'a', none, true, 1.0] }}",
           "[1, 'a', None, True, 1.0]");
    EXPECT("{{ (1,) }} {{ (1, 2) }} {{ () }}",
           "(1,) (1, 2) ()");
    EXPECT("{{ {'a': 1, 'b': [1, 2], 'c': {'d': none}} }}",
           "{'a': 1, 'b': [1, 2], 'c': {'d': None}}");
    EXPECT("{{ [1,2,] }} {{ {'a':1,} }}",
           "[1, 2] {'a': 1}");
    EXPECT("{{ 1, 2 }}",
           "(1, 2)");
    EXPECT("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
           "3 -4 1 2 3.5 3.0 1024 0.5");
    EXPECT("{{ 1e16 }} {{ 1e15 }} {{ 123456789012345678.0 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 1.0 }} {{ 100.0 }}",
           "1e+16 1000000000000000.0 1.2345678901234568e+17 0.0001 1e-05 -0.0 1.0 100.0");
    EXPECT("{{ 'ab' * 3 }} {{ 3 * 'ab' }} {{ [1] * 3 }} {{ 'a' * -1 }}",
           "ababab ababab [1, 1, 1] ");
    EXPECT("{{ 'a' ~ 1 ~ none ~ true ~ [1] }}",
           "a1NoneTrue[1]");
    EXPECT("{{ undefined_var ~ 'x' }}",
           "x");
    EXPECT("{{ 2 + 3 * 4 ** 2 }} {{ (2 + 3) * 4 }} {{ -2 ** 2 }} {{ - 3 | abs }}",
           "50 20 4 3");
    EXPECT("{{ [1,2] + [3] }} {{ (1,) + (2,) }}",
           "[1, 2, 3] (1, 2)");
    EXPECT("{{ True + 1 }} {{ True * 3 }} {{ 1 == 1.0 }} {{ True == 1 }}",
           "2 3 True True");
    EXPECT("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ (1,2) == [1,2] }}",
           "True False True True False");
    EXPECT("{{ 'a' in 'cat' }} {{ 'x' not in 'cat' }} {{ 1 in [1,2] }} {{ 'k' in {'k':1} }} {{ 'z' in undefined_thing }}",
           "True True True True False");
    EXPECT("{{ none == none }} {{ undefined_x == undefined_y }} {{ undefined_x == none }}",
           "True True False");
    EXPECT("{{ 0 or 'b' }} {{ 'a' and 'b' }} {{ '' and 'x' }} {{ not 0 }} {{ not [] }} {{ none or [] }}",
           "b b  True True []");
    EXPECT("{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }} [{{ 'yes' if 0 }}]",
           "yes no []");
    EXPECT("{{ 1 if 0 else 2 if 0 else 3 }}",
           "3");
    EXPECT("{{ not 1 == 2 }} {{ not 'a' in 'b' }}",
           "True True");
    EXPECT("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 1 is number }} {{ 1.0 is float }} {{ true is number }} {{ true is integer }} {{ 1 is integer }}",
           "False True True True True True False True");
    EXPECT("{{ 'a' is string }} {{ {} is mapping }} {{ [] is sequence }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ x is iterable }} {{ x is sequence }} {{ none is iterable }}",
           "True True True True False True True False");
    EXPECT("{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ true is boolean }}",
           "True False True False True");
    EXPECT("{{ 4 is divisibleby 2 }} {{ 5 is divisibleby(2) }} {{ 3 is odd }} {{ 4 is even }} {{ 'ab' is lower }} {{ 'AB' is upper }}",
           "True False True True True True");
    EXPECT("{{ 1 is equalto 1 }} {{ 1 is eq 2 }} {{ 2 is gt 1 }} {{ 2 is ge 2 }} {{ 1 is lt 2 }} {{ 1 is le 0 }} {{ 1 is ne 2 }} {{ 1 is in [1] }} {{ 1 is sameas 1 }}",
           "True False True True True False True True True");
    EXPECT("{{ x is not defined }} {{ 1 is not none }} {{ not x is defined }}",
           "True True True");
    EXPECT("{{ range is callable }} {{ 1 is callable }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'nope' is filter }}",
           "True False True True False");
    EXPECT("{{ tools is none }} {{ tools is defined }} {{ documents is none }}",
           "True True True");
    EXPECT("{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ none | trim }}|{{ undefined_x | trim }}",
           "a b|a|None|");
    EXPECT("{{ 'abc' | length }} {{ [1,2] | length }} {{ {'a':1} | length }} {{ undefined_x | length }} {{ 'h\303\251llo' | length }} {{ [1,2]|count }}",
           "3 2 1 0 5 2");
    EXPECT("{{ 'Hello World' | upper }} {{ 'Hello World' | lower }} {{ 'hello world' | capitalize }} {{ 'hELLO wORLD-foo (bar) [baz]' | title }}",
           "HELLO WORLD hello world Hello world Hello World-Foo (Bar) [Baz]");
    EXPECT("{{ [1,2,3] | join(', ') }} {{ ['a', 1, none] | join }} {{ [{'a':1},{'a':2}] | join('-', attribute='a') }}",
           "1, 2, 3 a1None 1-2");
    EXPECT("{{ [3,1,2] | first }} {{ [3,1,2] | last }} {{ [] | first }} {{ 'abc' | first }} {{ 'abc' | last }} {{ {'k':1,'j':2} | first }}",
           "3 2  a c k");
    EXPECT("{{ x | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) }} {{ 0 | d('z', true) }} {{ x | d }}",
           "d None d z ");
    EXPECT("{{ '42' | int }} {{ '4.7' | int }} {{ 'abc' | int }} {{ 'abc' | int(5) }} {{ 3.9 | int }} {{ none | int }} {{ true | int }} {{ ' 12 ' | int }} {{ '0x1f' | int(base=16) }} {{ '1_000' | int }}",
           "42 4 0 5 3 0 1 12 31 1000");
    EXPECT("{{ '4.5' | float }} {{ 'x' | float }} {{ 3 | float }} {{ '1e3' | float }} {{ 'inf' | float }} {{ 'nan' | float }}",
           "4.5 0.0 3.0 1000.0 inf nan");
    EXPECT("{{ 5 | string }} {{ [1, 'a'] | string }} {{ none | string }} {{ x | string }}|",
           "5 [1, 'a'] None |");
    EXPECT("{{ {'a': 1, 'b': 'x'} | items | list }} {{ x | items | list }}",
           "[('a', 1), ('b', 'x')] []");
    EXPECT("{{ [1, 2, 2, 'a', 'A'] | unique | list }} {{ ['a', 'A'] | unique(case_sensitive=true) | list }}",
           "[1, 2, 'a'] ['a', 'A']");
    EXPECT("{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [3,1,2] | sort(reverse=true) }}",
           "[1, 2, 3] ['A', 'b', 'c'] ['A', 'b', 'c'] [3, 2, 1]");
    EXPECT("{{ [{'n':2,'m':'b'},{'n':1,'m':'a'},{'n':2,'m':'a'}] | sort(attribute='n,m') }}",
           "[{'n': 1, 'm': 'a'}, {'n': 2, 'm': 'a'}, {'n': 2, 'm': 'b'}]");
    EXPECT("{{ [{'n':2},{'n':1}] | sort(attribute='n') | map(attribute='n') | list }}",
           "[1, 2]");
    EXPECT("{{ ['a','b'] | map('upper') | list }} {{ [1,2] | map('string') | join('|') }} {{ [{'a':{'b':1}}] | map(attribute='a.b') | list }} {{ [{'a':1},{}] | map(attribute='a', default=0) | list }}",
           "['A', 'B'] 1|2 [1] [1, 0]");
    EXPECT("{{ [1,2,3,4] | select('odd') | list }} {{ [1,2,3,4] | reject('odd') | list }} {{ [0,1,'',2] | select | list }} {{ [1,2,3] | select('gt', 1) | list }}",
           "[1, 3] [2, 4] [1, 2] [2, 3]");
    EXPECT("{{ [{'r':'u'},{'r':'a'},{'x':1}] | selectattr('r', 'equalto', 'u') | list }} {{ [{'r':'u'},{'x':1}] | selectattr('r', 'defined') | list }} {{ [{'r':'u'},{'x':1}] | rejectattr('r') | list }} {{ [{'r':'u'},{'r':''}] | selectattr('r') | list }}",
           "[{'r': 'u'}] [{'r': 'u'}] [{'x': 1}] [{'r': 'u'}]");
    EXPECT("{% if [] | select('odd') %}truthy{% endif %}",
           "truthy");
    EXPECT("{{ 'a\\nb\\n' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'x\\ny' | indent('>>') }}",
           "a\n    b\n|  a\n  b|a\n\n  b|a\n  \n  b|x\n>>y");
    EXPECT("{{ 'abc' | replace('b', 'X') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'abc' | replace('', '-') }}",
           "aXc bba -a-b-c-");
    EXPECT("{{ '<a>&\"\\'' | escape }} {{ '<a>' | e }} {{ '<a>' | safe }} {{ ('<a>' | safe) + '<b>' }} {{ '<b>' + ('<a>' | safe) }} {{ ('<a>' | safe) ~ '<b>' }}",
           "&lt;a&gt;&amp;&#34;&#39; &lt;a&gt; <a> <a>&lt;b&gt; &lt;b&gt;<a> <a><b>");
    EXPECT("{{ [1,2,3] | sum }} {{ [{'a':1},{'a':2}] | sum(attribute='a') }} {{ [1.5, 2] | sum }} {{ [[1],[2]] | sum(start=[]) }}",
           "6 3 3.5 [1, 2]");
    EXPECT("{{ [3,1,2] | min }} {{ [3,1,2] | max }} {{ ['b','A'] | min }} {{ [] | max }}|{{ [{'a':3},{'a':1}] | max(attribute='a') }}",
           "1 3 A |{'a': 3}");
    EXPECT("{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.1 | round(method='ceil') }} {{ 2.9 | round(method='floor') }} {{ 3 | round }} {{ 1234 | round(-2) }}",
           "2.0 4.0 2.67 3.0 2.0 3 1200");
    EXPECT("{{ -3 | abs }} {{ -2.5 | abs }}",
           "3 2.5");
    EXPECT("{{ {'b':1,'a':2} | dictsort }} {{ {'b':1,'a':2} | dictsort(by='value') }} {{ {'b':1,'A':2,'a':0} | dictsort }}",
           "[('a', 2), ('b', 1)] [('b', 1), ('a', 2)] [('A', 2), ('a', 0), ('b', 1)]");
    EXPECT("{{ '%s-%d' | format('a', 3) }} {{ '%05.1f|%-4s|%x' | format(3.14159, 'ab', 255) }} {{ '%(a)s' | format(a=1) }}",
           "a-3 003.1|ab  |ff 1");
    EXPECT("{{ 'abc' | center(9) }}|{{ 'hello world foo bar' | truncate(9) }}|{{ 'hello world foo bar' | truncate(9, true) }}|{{ 'one two three' | wordcount }}",
           "   abc   |hello...|hello ...|3");
    EXPECT("{{ [1,2,3,4,5] | batch(2) | list }} {{ [1,2,3] | batch(2, 'x') | list }}",
           "[[1, 2], [3, 4], [5]] [[1, 2], [3, 'x']]");
    EXPECT("{{ {'a':1} | attr('a') }}|{{ {'a':1} | attr('items') is defined }}",
           "|True");
    EXPECT("{% if false %}{{ 'x' | nosuchfilter }}{% endif %}ok",
           "ok");
    EXPECT("{{ {'a': [1, 2.5, true, none, '\303\251\"\\n'], 'b': {}} | tojson }}",
           "{\"a\": [1, 2.5, true, null, \"\303\251\\\"\\n\"], \"b\": {}}");
    EXPECT("{{ {'a': [1, {'c': []}], 'b': 'x'} | tojson(indent=2) }}",
           "{\n  \"a\": [\n    1,\n    {\n      \"c\": []\n    }\n  ],\n  \"b\": \"x\"\n}");
    EXPECT("{{ {'a': [1, 2]} | tojson(indent=0) }}",
           "{\n\"a\": [\n1,\n2\n]\n}");
    EXPECT("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}",
           "{\"a\": 2, \"b\": 1}");
    EXPECT("{{ {'a': [1, 2]} | tojson(separators=(',', ':')) }}",
           "{\"a\":[1,2]}");
    EXPECT("{{ '\303\251\360\237\230\200' | tojson(ensure_ascii=true) }} {{ '\303\251' | tojson }}",
           "\"\\u00e9\\ud83d\\ude00\" \"\303\251\"");
    EXPECT("{{ {1: 'a', none: 'b', true: 'c', 2.5: 'd'} | tojson }}",
           "{\"1\": \"c\", \"null\": \"b\", \"2.5\": \"d\"}");
    EXPECT("{{ '<>&\\'' | tojson }}",
           "\"<>&'\"");
    EXPECT("{{ (1, 2) | tojson }} {{ 1e100 | tojson }} {{ (0.1 + 0.2) | tojson }}",
           "[1, 2] 1e+100 0.30000000000000004");
    EXPECT("{{ {'a': 1} | tojson(indent='\\t') }}",
           "{\n\t\"a\": 1\n}");

}

/* Loops, scoping, macros, call/filter/set blocks, attribute and item access,
 * slicing, Python str/dict/list methods and repr(). Expected as above. */
static void test_statements_and_methods(void) {
    EXPECT("{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}{{ ',' if not loop.last }}{% endfor %}",
           "1/2:user,2/2:assistant");
    EXPECT("{% for m in messages %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.depth }}{% endfor %}",
           "0TrueFalse2111FalseTrue101");
    EXPECT("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}",
           "-2;1-3;2-;");
    EXPECT("{% for x in [] %}a{% else %}empty{% endfor %}",
           "empty");
    EXPECT("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.index }}{{ loop.length }}{% endfor %}",
           "212422");
    EXPECT("{% for x in [1,2,3] if x > 5 %}{{ x }}{% else %}none{% endfor %}",
           "none");
    EXPECT("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}",
           "a=1;b=2;");
    EXPECT("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}",
           "a=1;b=2;");
    EXPECT("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}",
           "ab");
    EXPECT("{% for c in 'h\303\251y' %}[{{ c }}]{% endfor %}",
           "[h][\303\251][y]");
    EXPECT("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}",
           "37");
    EXPECT("{% for (a, b) in [(1, 2)] %}{{ a }}{{ b }}{% endfor %}",
           "12");
    EXPECT("{% for x in undefined_thing %}x{% else %}e{% endfor %}",
           "e");
    EXPECT("{% for x in [1,2,3,4,5] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
           "13");
    EXPECT("{% for x in [1,2] %}{% for y in [1,2] %}{% if y == 2 %}{% break %}{% endif %}{{ x }}{{ y }}{% endfor %}{% endfor %}",
           "1121");
    EXPECT("{% for x in [1,2,3] %}{{ loop.cycle('a', 'b') }}{% endfor %}",
           "aba");
    EXPECT("{% for x in [1,1,2,2,1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}",
           "121");
    EXPECT("{% for x in range(3) %}{% for y in range(2) %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}",
           "121|122|123|");
    EXPECT("{{ range(5) | list }} {{ range(1, 4) | list }} {{ range(10, 0, -3) | list }} {{ range(0) | list }}",
           "[0, 1, 2, 3, 4] [1, 2, 3] [10, 7, 4, 1] []");
    /* the extremes of int64 (no signed overflow on the way: UBSan) */
    EXPECT("{{ range((-9223372036854775807 - 1), 9223372036854775807, 4611686018427387904) | list }}|"
           "{{ 'x' | truncate(9223372036854775807) }}",
           "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]|x");
    EXPECT("{% set x = 1 %}{% for i in range(3) %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}",
           "2221");
    EXPECT("{% set ns = namespace(x=1) %}{% for i in range(3) %}{% set ns.x = ns.x + 1 %}{% endfor %}{{ ns.x }}",
           "4");
    EXPECT("{% for i in range(2) %}{{ y }}{% set y = i %}{{ y }}{% endfor %}[{{ y }}]",
           "01[]");
    EXPECT("{% if true %}{% set z = 5 %}{% endif %}{{ z }}",
           "5");
    EXPECT("{% set a, b = 1, 2 %}{{ a }}{{ b }}",
           "12");
    EXPECT("{% set t = 1, 2 %}{{ t }}",
           "(1, 2)");
    EXPECT("{% set x = 5 %}{% set x = x * 2 %}{{ x }}",
           "10");
    EXPECT("{% set ns = namespace() %}{% set ns.a = 1 %}{{ ns.a }}{{ ns.b }}|{{ ns }}",
           "1|<Namespace {'a': 1}>");
    EXPECT("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}",
           "12");
    EXPECT("{% set ns = namespace(items=[]) %}{% for i in range(3) %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.items }}",
           "[0, 1, 2]");
    EXPECT("{% set messages = messages[1:] %}{{ messages | length }}",
           "1");
    EXPECT("{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]",
           "[inner 2]");
    EXPECT("{% set x | upper %}inner{% endset %}[{{ x }}]",
           "[INNER]");
    EXPECT("{% filter upper %}hello {{ 'world' }}{% endfilter %}",
           "HELLO WORLD");
    EXPECT("{% filter trim | upper %}  hi  {% endfilter %}|",
           "HI|");
    EXPECT("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]",
           "3[]");
    EXPECT("{% set a = 5 %}{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}",
           "15");
    EXPECT("{% macro m(x, y='d') %}[{{ x }}|{{ y }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(y=3, x=4) }}{{ m() }}",
           "[1|d][1|2][4|3][|d]");
    EXPECT("{% macro m(x) %}{{ x }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}",
           "1(2, 3){'k': 4}");
    EXPECT("{% macro outer() %}{{ inner() }}{% endmacro %}{% macro inner() %}in{% endmacro %}{{ outer() }}",
           "in");
    EXPECT("{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{% set g = 'H' %}{{ m() }}",
           "H");
    EXPECT("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}",
           "54321");
    EXPECT("{% macro m() %}{% set x = 1 %}{{ x }}{% endmacro %}{{ m() }}{{ x }}",
           "1");
    EXPECT("{% macro m(a, b=a) %}{{ a }}{{ b }}{% endmacro %}{{ m(3) }}",
           "33");
    EXPECT("{% macro m() %}x{% endmacro %}{{ m() | upper }}{{ m() ~ 'y' }}{{ m() + 'z' }}",
           "Xxyxz");
    EXPECT("{% macro m() %}<{{ caller() }}>{% endmacro %}{% call m() %}body{% endcall %}",
           "<body>");
    EXPECT("{% macro m() %}{% for i in [1,2] %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) m() %}[{{ x }}]{% endcall %}",
           "[1][2]");
    EXPECT("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}",
           "Hello!");
    EXPECT("{{ messages[0].role }} {{ messages[0]['role'] }} {{ messages[-1].content }} {{ messages[5] }} {{ messages.0.role }}",
           "user user Hello!  user");
    EXPECT("{{ messages[0].nope }}|{{ messages[0]['nope'] }}|{{ messages[0].nope is defined }}",
           "||False");
    EXPECT("{{ none.attr }}|{{ none['x'] }}|{{ 'abc'.nope }}|{{ 5.real }}",
           "|||5");
    EXPECT("{{ {'items': 1}['items'] }} {{ {'get': 2}.get('get') }}",
           "1 2");
    EXPECT("{{ {'a': 1}.get('b', 'dflt') }} {{ {'a': 1}.get('b') }} {{ {'a': 1}.keys() | list }} {{ {'a': 1}.values() | list }} {{ {'a': 1}.items() | list }}",
           "dflt None ['a'] [1] [('a', 1)]");
    EXPECT("{{ [1,2].append }}|{{ {}.update }}|",
           "||");
    EXPECT("{{ [1,2,3].index(2) }} {{ [1,2,2].count(2) }}",
           "1 2");
    EXPECT("{{ 'abc'[0] }} {{ 'abc'[-1] }} {{ 'abc'[5] }}| {{ 'h\303\251llo'[1] }}",
           "a c | \303\251");
    EXPECT("{{ [1,2,3,4][1:] }} {{ [1,2,3,4][:-1] }} {{ [1,2,3,4][::-1] }} {{ [1,2,3,4][::2] }} {{ [1,2,3,4][1:3] }} {{ [1,2,3,4][-2:] }} {{ [1,2,3,4][10:] }}",
           "[2, 3, 4] [1, 2, 3] [4, 3, 2, 1] [1, 3] [2, 3] [3, 4] []");
    EXPECT("{{ 'h\303\251llo w\303\266rld'[1:4] }} {{ 'h\303\251llo'[::-1] }} {{ 'abcdef'[::2] }} {{ 'abc'[:-1] }} {{ (1,2,3)[1:] }}",
           "\303\251ll oll\303\251h ace ab (2, 3)");
    EXPECT("{{ [1,2]['a':] }}|",
           "|");
    EXPECT("{{ {'a': 1}[0] }}|{{ [1][none] }}|",
           "||");
    EXPECT("{{ loop }}|{{ x.__class__ }}|",
           "||");
    EXPECT("{{ ''.__class__ }}|{{ {}._private }}|",
           "||");
    EXPECT("{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'abc'.rstrip('cb') }}",
           "x|a|x|x|x\n|a");
    EXPECT("{{ 'a,b,,c'.split(',') }} {{ '  a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a  b c '.split(none, 1) }} {{ ' a b '.rsplit(none, 1) }} {{ ''.split(',') }} {{ ''.split() }}",
           "['a', 'b', '', 'c'] ['a', 'b', 'c'] ['a', 'b c'] ['a,b', 'c'] ['a', 'b c '] [' a', 'b'] [''] []");
    EXPECT("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.startswith('l', 2) }} {{ 'hello'.endswith('l', 0, 4) }}",
           "True True True True True");
    EXPECT("{{ 'Hello World'.upper() }} {{ 'Hello World'.lower() }} {{ \"they're bill's 2nd\".title() }} {{ 'hELLO wORLD'.capitalize() }} {{ 'Hello'.swapcase() }}",
           "HELLO WORLD hello world They'Re Bill'S 2Nd Hello world hELLO");
    EXPECT("{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ 'abc'.replace('', '-') }} {{ 'abc'.replace('', '-', 2) }}",
           "bbb baa -a-b-c- -a-bc");
    EXPECT("{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'h\303\251llo'.find('l') }} {{ 'hello'.index('e') }} {{ 'hello'.count('l') }} {{ 'hello'.count('') }} {{ 'hello'.find('l', 3) }}",
           "2 3 -1 2 1 2 6 3");
    EXPECT("{{ ', '.join(['a', 'b']) }} {{ ''.join('abc') }}",
           "a, b abc");
    EXPECT("{{ '{} and {}'.format(1, 'b') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='n') }} {{ '{{x}}'.format() }} {{ '{:>5}|{:<4}|{:^6}|{:05d}|{:.2f}'.format('a', 'b', 'c', 42, 3.14159) }} {{ '{!r}'.format('q') }}",
           "1 and b xyx n! {x}     a|b   |  c   |00042|3.14 'q'");
    EXPECT("{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ '  '.isspace() }} {{ 'ABC'.isupper() }} {{ 'abc'.islower() }} {{ ''.isdigit() }} {{ 'a1'.islower() }}",
           "True True True True True True False True");
    EXPECT("{{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'a\\nb\\n'.splitlines(true) }}",
           "['a', 'b', 'c'] ['a\\n', 'b\\n']");
    EXPECT("{{ 'ab'.center(6, '*') }}|{{ 'ab'.ljust(4) }}|{{ 'ab'.rjust(4, '.') }}|{{ '42'.zfill(5) }}|{{ '-42'.zfill(5) }}|{{ 'abc'.center(6) }}",
           "**ab**|ab  |..ab|00042|-0042| abc  ");
    EXPECT("{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'abc'.partition('x') }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.txt'.removesuffix('.txt') }}",
           "('a', '=', 'b=c') ('a=b', '=', 'c') ('abc', '', '') x x");
    EXPECT("{{ '%s and %s' % ('a', 'b') }} {{ '%d%%' % 50 }} {{ '%s' % [1, 2] }} {{ '%r' % 'x' }} {{ '%.2f' % 3.14159 }} {{ '%5s|%-5s|' % ('a', 'b') }}",
           "a and b 50% [1, 2] 'x' 3.14     a|b    |");
    EXPECT("{{ 'x' ~ messages[0].content.upper() }}",
           "xHI");
    EXPECT("{{ ['it\\'s', \"q\\\"\", 'a\\nb', 'tab\\t', '\\x00', '\303\251', '\\\\'] }}",
           "[\"it's\", 'q\"', 'a\\nb', 'tab\\t', '\\x00', '\303\251', '\\\\']");
    EXPECT("{{ {'k': 'v', 1: 2.5, none: [true, false]} }}",
           "{'k': 'v', 1: 2.5, None: [True, False]}");
    EXPECT("{{ [1.0, 2.5, 1e20, 1e-7, -0.5] }}",
           "[1.0, 2.5, 1e+20, 1e-07, -0.5]");
    EXPECT("{{ namespace(a=1) }}",
           "<Namespace {'a': 1}>");
    EXPECT("{{ messages }}",
           "[{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello!'}]");
    EXPECT("{{ (1, 'a') }} {{ ('x',) }}",
           "(1, 'a') ('x',)");
    EXPECT("{{ 'x' | safe | list }}",
           "['x']");
    EXPECT("{{ strftime_now('%Y-%m-%d %H:%M:%S %a %b %d %B %A %j %%') }} {{ strftime_now('%f') }} {{ strftime_now('') }}|",
           "2025-02-21 12:00:00 Fri Feb 21 February Friday 052 % 000000 |");
    EXPECT("{{ strftime_now is defined }} {{ raise_exception is defined }} {{ namespace is defined }} {{ dict(a=1) }}",
           "True True True {'a': 1}");

}

/* Sorting, aggregation, Unicode, number formatting, str.format and more
 * scoping corners. Expected as above. */
static void test_more_semantics(void) {
    EXPECT("{{ [{'a':1,'b':'x'},{'a':0,'b':'y'},{'a':1,'b':'z'}] | sort(attribute='a', reverse=true) | map(attribute='b') | join }}",
           "xzy");
    EXPECT("{{ [{'a':{'b':2}},{'a':{'b':1}}] | sort(attribute='a.b') | map(attribute='a.b') | list }}",
           "[1, 2]");
    EXPECT("{{ ['B','a','C'] | max }} {{ ['B','a','C'] | max(case_sensitive=true) }} {{ ['B','a','C'] | min(case_sensitive=true) }}",
           "C a B");
    EXPECT("{{ ['1','2'] | map('int') | sum }} {{ ['a','b'] | select('equalto', 'a') | list }} {{ [{'a':1},{'a':5}] | selectattr('a', 'in', [5]) | list }}",
           "3 ['a'] [{'a': 5}]");
    EXPECT("{{ [1,2,3] | select('odd') | first }} {{ [1,2,3] | select('odd') | join('-') }} {{ [1,2,3,4] | select('even') | map('string') | join }}",
           "1 1-3 24");
    EXPECT("{{ messages | selectattr('role','equalto','user') | list | length }} {{ messages | map(attribute='role') | join(',') }}",
           "1 user,assistant");
    EXPECT("{% for m in messages if m.role == 'assistant' %}{{ loop.length }}{{ loop.revindex }}{{ m.content }}{% endfor %}",
           "11Hello!");
    EXPECT("{{ {'b':1,'a':2} | dictsort(reverse=true) }} {{ {'b':1,'a':2} | dictsort(true) }}",
           "[('b', 1), ('a', 2)] [('a', 2), ('b', 1)]");
    EXPECT("{{ [[1,2],[1]] | sort }} {{ [(2,'a'),(1,'b')] | sort }} {{ [3, 1.5, True] | sort }}",
           "[[1], [1, 2]] [(1, 'b'), (2, 'a')] [True, 1.5, 3]");
    EXPECT("{{ [1, 1.0, True, '1'] | unique | list }}",
           "[1, '1']");
    EXPECT("{{ 1.0 ~ '' }} {{ 1e3 ~ '' }} {{ [1.0] ~ '' }} {{ 3.0 | int }} {{ -3.7 | int }} {{ 2.5 | round(0) }}",
           "1.0 1000.0 [1.0] 3 -3 2.0");
    EXPECT("{{ 'abc'|upper|lower|capitalize }} {{ 'x'|safe|upper }} {{ ('<'|safe).upper() ~ '' }}",
           "Abc X <");
    EXPECT("{{ x is none }} {{ x is not none }} {{ x is string }} {{ x is mapping }} {{ x is number }}",
           "False True False False False");
    EXPECT("{{ 'a' if x else 'b' }} {{ x or 'default' }} {{ x and 'y' }}|",
           "b default |");
    EXPECT("{{ [] or 'empty' }} {{ {} or 'e' }} {{ 0.0 or 'z' }} {{ '0' or 'nz' }}",
           "empty e z 0");
    EXPECT("{{ 'x' in ['x'] and 'y' not in ['x'] }} {{ 1 in {1: 2} }} {{ (1,2) in [(1,2)] }} {{ [1,2] in [[1,2]] }}",
           "True True True True");
    EXPECT("{{ messages[-1]['content'] | trim | length }} {{ messages | length > 1 }} {{ (messages | length) - 1 }} {{ messages|length - 1 }}",
           "6 True 1 1");
    EXPECT("{{ range(messages|length - 1, -1, -1) | list }}",
           "[1, 0]");
    EXPECT("{{ '\316\243\316\257\317\203\317\205\317\206\316\277\317\202' | upper }} {{ '\316\221\316\222\316\223' | lower }} {{ '\320\237\321\200\320\270\320\262\320\265\321\202' | upper }}",
           "\316\243\316\212\316\243\316\245\316\246\316\237\316\243 \316\261\316\262\316\263 \320\237\320\240\320\230\320\222\320\225\320\242");
    EXPECT("{{ '  \343\200\200x\302\240 ' | trim | length }} {{ '\342\200\250a\342\200\251'.strip() | length }} {{ 'a\302\240b'.split() }}",
           "1 1 ['a', 'b']");
    EXPECT("{{ '%-5d|%+d|% d|%05d|%x|%X|%o|%e|%g|%10.3f|%c|%c' % (3, 3, 3, -3, 255, 255, 8, 12345.678, 0.0001, 3.14159, 65, 'z') }}",
           "3    |+3| 3|-0003|ff|FF|10|1.234568e+04|0.0001|     3.142|A|z");
    EXPECT("{{ '%s' % none }} {{ '%s %s' % ('a', [1]) }} {{ '%(x)s-%(y)d' % {'x': 'q', 'y': 2} }} {{ '%.3s' % 'abcdef' }} {{ '%5.1s|' % 'xyz' }}",
           "None a [1] q-2 abc     x|");
    EXPECT("{{ '{:,}'.format(1234567) }}",
           "1,234,567");
    EXPECT("{{ 'abc'.startswith('') }} {{ ''.startswith('') }} {{ 'abc'.endswith('c', 0, 2) }} {{ 'abc'.find('', 5) }} {{ 'abc'.find('', 3) }} {{ 'abc'.count('', 1) }}",
           "True True False -1 3 3");
    EXPECT("{{ 'a b'.split(' ', -1) }} {{ 'a  b'.split(' ') }} {{ 'abcabc'.rsplit('b') }} {{ 'a,b,c'.split(',', 0) }} {{ ' a b '.split(none, 0) }} {{ ' a b '.rsplit(none, 0) }}",
           "['a', 'b'] ['a', '', 'b'] ['a', 'ca', 'c'] ['a,b,c'] ['a b '] [' a b']");
    EXPECT("{{ 'aXbXc'.replace('X', '') }} {{ 'aaaa'.replace('aa', 'b') }} {{ 'ab'.replace('a', 'xa', -1) }}",
           "abc bb xab");
    EXPECT("{{ 'hello'[1:-1] }} {{ 'hello'[-3:] }} {{ 'hello'[:100] }} {{ 'hello'[3:1] }} {{ 'hello'[::-2] }} {{ 'hello'[-100:2] }} {{ [1,2,3][-100:100] }}",
           "ell llo hello  olh he [1, 2, 3]");
    EXPECT("{{ [1,2,3,4,5][4:1:-1] }} {{ [1,2,3,4,5][::-3] }} {{ [1,2,3][true:] }}",
           "[5, 4, 3] [5, 2] [2, 3]");
    EXPECT("{% set d = {'a': 1} %}{{ d.a }}{{ d['a'] }}{{ d.get('a') }}{{ d.b is defined }}{{ d.keys() | list }}",
           "111False['a']");
    EXPECT("{% set l = [3,1,2] %}{{ l | sort }}{{ l }}{{ l | reverse | list }}{{ l }}",
           "[1, 2, 3][3, 1, 2][2, 1, 3][3, 1, 2]");
    EXPECT("{% set s = 'abc' %}{{ s | list }} {{ s | first }} {{ s[1] }} {{ s | length }}",
           "['a', 'b', 'c'] a b 3");
    EXPECT("{{ namespace(a=1).a }} {{ namespace(a=1) is mapping }} {{ dict(a=1, b=2) | tojson }} {{ dict({'x': 1}, y=2) }}",
           "1 False {\"a\": 1, \"b\": 2} {'x': 1, 'y': 2}");
    EXPECT("{{ {'a': none} | tojson }} {{ [none, true, false] | tojson }} {{ 'a\\u0001b\\u007fc' | tojson }} {{ '\\u2028' | tojson }}",
           "{\"a\": null} [null, true, false] \"a\\u0001b\177c\" \"\342\200\250\"");
    EXPECT("{{ 1.5e300 * 1e10 }} {{ -1e400 }} {{ (1e400 - 1e400) }}",
           "inf -inf nan");
    EXPECT("{{ 0.1 | tojson }} {{ 1e22 | tojson }} {{ 1e-7 | tojson }} {{ 123456789.123 }} {{ 5e-324 }} {{ 1.7976931348623157e308 }}",
           "0.1 1e+22 1e-07 123456789.123 5e-324 1.7976931348623157e+308");
    EXPECT("{{ 0 }} {{ 00 }} {{ 0_0 }}",
           "0 0 0");
    EXPECT("{{ true | string }} {{ none | string }} {{ (1,) | string }} {{ {'a': (1, 2)} | string }}",
           "True None (1,) {'a': (1, 2)}");
    EXPECT("{{ messages[0] }}",
           "{'role': 'user', 'content': 'Hi'}");
    EXPECT("{{ {'it\\'s': \"a\\\"b\"} }} {{ ['\\n', '\\\\'] }} {{ '\303\251' | string }} {{ ['\303\251', '\\u00a0', '\\u200b'] }}",
           "{\"it's\": 'a\"b'} ['\\n', '\\\\'] \303\251 ['\303\251', '\\xa0', '\\u200b']");
    EXPECT("{% for a, b in {'x': 1}.items() %}{{ a }}{{ b }}{% endfor %}{% for a in {'x': 1}.items() %}{{ a }}{% endfor %}",
           "x1('x', 1)");
    EXPECT("{% for i in range(3) %}{% set j = i * 2 %}{% if loop.last %}{{ j }}{% endif %}{% endfor %}[{{ j }}]",
           "4[]");
    EXPECT("{% set ns = namespace(v=0) %}{% macro inc() %}{% set ns.v = ns.v + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ ns.v }}",
           "2");
    EXPECT("{% macro m(a, b) %}{{ a }}-{{ b }}{% endmacro %}{{ m(b=1, a=2) }}{{ m(1) }}",
           "2-11-");
    EXPECT("{% macro m() %}{{ varargs }}{% endmacro %}{{ m(1, 2) }}",
           "(1, 2)");
    EXPECT("{% macro m() %}{{ kwargs }}{% endmacro %}{{ m(a=1) }}",
           "{'a': 1}");
    EXPECT("{% macro m(x) %}{{ caller(x) }}{% endmacro %}{% call(y) m(5) %}got {{ y }}{% endcall %}",
           "got 5");
    EXPECT("{% filter indent(2, true) %}a\nb{% endfilter %}",
           "  a\n  b");
    EXPECT("{% set a = 'x' %}{% filter upper %}{{ a }}{% set a = 'y' %}{{ a }}{% endfilter %}{{ a }}",
           "XYx");
    EXPECT("{% for x in [1,2,3] %}{% set x = x * 10 %}{{ x }}{% endfor %}",
           "102030");
    EXPECT("{% if true %}{% set v = 1 %}{% else %}{% set v = 2 %}{% endif %}{{ v }}",
           "1");
    EXPECT("{% for x in [1] %}{% for y in [2] %}{{ x }}{{ y }}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}",
           "1211");
    EXPECT("{{ range(3) | length }} {{ range(3)[1] }} {{ range(1, 10, 3) | join(',') }} {{ range(-3) | list }}",
           "3 1 1,4,7 []");
    EXPECT("{{ 'a' * 0 }}|{{ [1] * -2 }}|{{ 2 * [1, 2] }}|{{ (1,) * 2 }}",
           "|[]|[1, 2, 1, 2]|(1, 1)");
    EXPECT("{{ 5 % -3 }} {{ -5 % 3 }} {{ 5.5 % -2 }} {{ -7 // 2.0 }} {{ 7 // -2 }} {{ 2 ** 0.5 }} {{ (-8) ** 2 }} {{ 4 ** -2 }}",
           "-1 1 -0.5 -4.0 -4 1.4142135623730951 64 0.0625");
    EXPECT("{{ -9223372036854775807 - 1 }}",
           "-9223372036854775808");
    EXPECT("{{ 1 - -1 }} {{ - - 1 }} {{ +1 }} {{ -(1) }} {{ not not 1 }} {{ -true }}",
           "2 1 1 -1 True -1");
    EXPECT("{{ 'abc' is sameas 'abc' }} {{ none is sameas none }} {{ 1 is sameas 1 }} {{ [] is sameas [] }}",
           "False True True False");
    EXPECT("{{ 'aBc' is lower }} {{ '123' is lower }} {{ 'ABC1' is upper }}",
           "False False True");
    EXPECT("{{ 2.0 is even }} {{ 3 is odd }}",
           "True True");
    EXPECT("{{ '{:^9}|{:*<5}|{:#>4}'.format('mid', 'l', 7) }}",
           "   mid   |l****|###7");
    EXPECT("{% set x %}{% set y = 1 %}{{ y }}{% endset %}{{ x }}[{{ y }}]",
           "1[]");
    EXPECT("{% for i in [1,2] %}{% set x %}{% if i == 2 %}{% break %}{% endif %}v{{ i }}{% endset %}{{ x }}{% endfor %}",
           "v1");
    EXPECT("{% set y = 5 %}{% set x %}{{ y }}{% set y = 6 %}{{ y }}{% endset %}{{ x }}{{ y }}",
           "565");
    EXPECT("{% macro m() %}{% set x %}in{% endset %}{{ x }}{% endmacro %}{{ m() }}",
           "in");

}

/* Template-level failures: what jinja2 raises, we report (never crash). */
static void test_runtime_errors(void) {
    EXPECT_ERROR("{{ 1 + 'a' }}", "unsupported operand type(s) for +: 'int' and 'str'");
    EXPECT_ERROR("{{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str");
    EXPECT_ERROR("{{ undefined_var + 1 }}", "'undefined_var' is undefined");
    EXPECT_ERROR("{{ 1 / 0 }}", "division by zero");
    EXPECT_ERROR("{{ 5 // 0 }}", "integer division or modulo by zero");
    EXPECT_ERROR("{{ [1,2] + (3,) }}", "can only concatenate list (not \"tuple\") to list");
    EXPECT_ERROR("{{ 1 < 'a' }}", "'<' not supported between instances of 'int' and 'str'");
    EXPECT_ERROR("{{ 1 in 'abc' }}", "'in <string>' requires string as left operand");
    EXPECT_ERROR("{{ 'a' in none }}", "argument of type 'NoneType' is not iterable");
    EXPECT_ERROR("{{ x is foo }}", "no test named 'foo'");
    EXPECT_ERROR("{{ 'x' | nosuchfilter }}", "no filter named 'nosuchfilter'");
    EXPECT_ERROR("{{ none | length }}", "object of type 'NoneType' has no len()");
    EXPECT_ERROR("{{ ([1,2] | select('odd')) | length }}", "object of type 'generator' has no len()");
    EXPECT_ERROR("{{ x | tojson }}", "Object of type Undefined is not JSON serializable");
    EXPECT_ERROR("{% for a, b in [[1, 2, 3]] %}{% endfor %}", "too many values to unpack (expected 2)");
    EXPECT_ERROR("{% for x in none %}{% endfor %}", "'NoneType' object is not iterable");
    EXPECT_ERROR("{% for x in 5 %}{% endfor %}", "'int' object is not iterable");
    EXPECT_ERROR("{{ range(200000) | length }}", "range too big");
    EXPECT_ERROR("{% set x = 1 %}{% set x.y = 2 %}", "cannot assign attribute on non-namespace object");
    EXPECT_ERROR("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro calls nested more than");
    EXPECT_ERROR("{% macro m(x) %}{{ x }}{% endmacro %}{{ m(1, 2) }}", "macro 'm' takes not more than 1 argument(s)");
    EXPECT_ERROR("{% macro m(x) %}{% endmacro %}{{ m(y=1) }}", "macro 'm' takes no keyword argument 'y'");
    EXPECT_ERROR("{{ m() }}", "'m' is undefined");
    EXPECT_ERROR("{{ messages[5].role }}", "list object has no element 5");
    EXPECT_ERROR("{{ messages[0].nope.deeper }}", "'dict object' has no attribute 'nope'");
    EXPECT_ERROR("{{ [1,2].append(3) }}", "access to attribute 'append' of 'list' object is unsafe");
    EXPECT_ERROR("{{ [1,2][::0] }}", "slice step cannot be zero");
    EXPECT_ERROR("{{ 'a'.split('') }}", "empty separator");
    EXPECT_ERROR("{{ 'hello'.index('z') }}", "substring not found");
    EXPECT_ERROR("{{ ', '.join([1, 2]) }}", "sequence item 0: expected str instance, int found");
    EXPECT_ERROR("{{ '%s %s' % ('a',) }}", "not enough arguments for format string");
    EXPECT_ERROR("{{ 'abc' % 5 }}", "not all arguments converted during string formatting");
    EXPECT_ERROR("{{ raise_exception('boom') }}", "boom");
    EXPECT("{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 2 ** 62 }}",
           "3.0 0.5 0.30000000000000004 0.3333333333333333 4611686018427387904");
    EXPECT_ERROR("{{ 10 ** 20 }}", "integer overflow"); /* Python has big ints; we stop at 64 bits */
    /* runtime errors name the template line */
    EXPECT_ERROR("a\n{% if true %}\n{{ none.x.y }}\n{% endif %}", "line 3: 'None' has no attribute 'x'");
    EXPECT_ERROR("{# one #}\n\n{% for m in tools %}{% endfor %}", "line 3: 'NoneType' object is not iterable");
}

/* Syntax errors come back as VX_EFORMAT with line:column. */
static void test_syntax_errors(void) {
    static const struct {
        const char *src, *part;
    } cases[] = {
        {"{% if 1 %}", "at 1:11: unexpected end of template, expected 'elif' or 'else' or 'endif' to close the block opened at 1:4"},
        {"a\n{% for x in y %}\nb", "expected 'endfor' or 'else' to close the block opened at 2:4"},
        {"{% endfor %}", "at 1:4: unknown tag 'endfor'"},
        {"line\n\n{{ 1 + }}", "at 3:8: unexpected end of print statement"},
        {"{{ 'unterminated }}", "at 1:4: unterminated string literal"},
        {"x\n{# unterminated", "at 2:1: missing end of comment tag"},
        {"{% foo %}", "unknown tag 'foo'"},
        {"{{ x | }}", "expected name, got end of print statement"},
        {"{{ (1 }}", "unexpected '}', expected ')'"},
        {"{{ [1, 2 }}", "unexpected '}', expected ']'"},
        {"{{ } }}", "unexpected '}'"},
        {"{% if x %}{% else %}{% else %}{% endif %}", "unknown tag 'else'"},
        {"{% set %}", "can't assign to this expression"},
        {"{% set 1 = 2 %}", "can't assign to this expression"},
        {"{% macro %}{% endmacro %}", "expected macro name"},
        {"{{ 1 ! 2 }}", "unexpected char '!'"},
        {"{% include 'x' %}", "the 'include' tag is not supported"},
        {"{% break %}", "'break' outside of a loop"},
        {"{% for x in [1] %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", "'continue' outside of a loop"},
        {"{{ x is sameas is y }}", "you cannot chain multiple tests with is"},
        {"{{ '\\x4' }}", "truncated \\x escape"},
        {"{{ 99999999999999999999 }}", "integer literal too large"},
        {"{% for x in y recursive %}{% endfor %}", "recursive loops are not supported"},
        {"{{ f(a=1, 2) }}", "positional argument follows keyword argument"},
        {"{% macro m(a=1, b) %}{% endmacro %}", "non-default argument follows default argument"},
        {"{{ x }", "unexpected '}'"},
        {"{{ x", "'{{' opened at 1:1 is not closed"},
        {"{% raw %}never closed", "missing end of raw directive"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vx_chat_template *t = (vx_chat_template *)1;
        char err[512] = "";
        vx_status st = vx_chat_template_parse(cases[i].src, &t, err, sizeof err);
        CHECKF(st == VX_EFORMAT && t == NULL && strstr(err, cases[i].part) != NULL,
               "template \"%s\": status %d, error \"%s\", want \"%s\"", cases[i].src, st, err,
               cases[i].part);
        vx_chat_template_free(t);
    }
    /* hostile nesting is an error, not a stack overflow */
    size_t n = 100000;
    char *deep = malloc(n * 2 + 16);
    strcpy(deep, "{{ ");
    for (size_t i = 0; i < n; i++) deep[3 + i] = '(';
    deep[3 + n] = 0;
    vx_chat_template *t = NULL;
    char err[512] = "";
    CHECK(vx_chat_template_parse(deep, &t, err, sizeof err) == VX_EFORMAT);
    strcpy(deep, "");
    for (size_t i = 0; i < 3000; i++) strcat(deep, "{% if 1 %}");
    CHECK(vx_chat_template_parse(deep, &t, err, sizeof err) == VX_EFORMAT && strstr(err, "nested too deeply"));
    strcpy(deep, "{{ ");
    for (size_t i = 0; i < 3000; i++) strcat(deep, "not ");
    strcat(deep, "1 }}");
    CHECK(vx_chat_template_parse(deep, &t, err, sizeof err) == VX_EFORMAT);
    free(deep);
    /* many top-level nodes (a fuzzer find: the height check's first push) */
    char *flat = malloc(6 * 2000 + 1);
    for (int i = 0; i < 2000; i++) memcpy(flat + 6 * i, "a{{1}}", 6);
    flat[6 * 2000] = 0;
    CHECK(vx_chat_template_parse(flat, &t, err, sizeof err) == VX_OK);
    vx_chat_template_free(t);
    t = NULL;
    free(flat);
    /* long left-associative chains build tall trees without parser recursion */
    static const char *const links[] = {" + 1", ".a", "|trim", "[0]", " or x", "(1)"};
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) {
        size_t reps = 50000, len = strlen(links[k]);
        char *chain = malloc(reps * len + 16);
        size_t pos = (size_t)sprintf(chain, "{{ x");
        for (size_t i = 0; i < reps; i++, pos += len) memcpy(chain + pos, links[k], len);
        strcpy(chain + pos, " }}");
        CHECKF(vx_chat_template_parse(chain, &t, err, sizeof err) == VX_EFORMAT &&
                   strstr(err, "nested too deeply"),
               "chain of '%s': %s", links[k], err);
        free(chain);
    }
}

/* Runaway templates hit limits and fail cleanly. */
static void test_limits(void) {
    char err[512];
    vx_status st;
    char *out = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                       NULL, NULL, true, &st, err, sizeof err);
    CHECKF(!out && st == VX_ERANGE && strstr(err, "evaluation steps"), "%s", err);
    out = render("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 NULL, NULL, true, &st, err, sizeof err);
    CHECKF(!out && st == VX_ERANGE, "%s", err);
    out = render("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                 NULL, NULL, true, &st, err, sizeof err);
    CHECKF(!out && st == VX_ERANGE, "%s", err);
    out = render("{{ 'x' * 1000000000000 }}", NULL, NULL, true, &st, err, sizeof err);
    CHECKF(!out && st == VX_ERANGE, "%s", err);
    out = render("{% set ns = namespace(v=[]) %}{% for i in range(60) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v|length }}",
                 NULL, NULL, true, &st, err, sizeof err);
    CHECKF(out && !strcmp(out, "1"), "%s", out ? out : err);
    free(out);
    out = render("{% set ns = namespace(v=[]) %}{% for i in range(300) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}",
                 NULL, NULL, true, &st, err, sizeof err);
    CHECKF(!out && strstr(err, "nested too deeply"), "%s", err);
    out = render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", NULL, NULL, true, &st, err, sizeof err);
    CHECKF(!out && strstr(err, "nested too deeply"), "%s", err); /* a namespace holding itself */

    /* deep expressions inside deep macro recursion stop at the nesting bound
     * (about 600 levels) instead of exhausting the C stack */
    char deep[1024];
    strcpy(deep, "{% macro f(n) %}{% if n < 99 %}{{ ");
    for (int i = 0; i < 150; i++) strcat(deep, "-");
    strcat(deep, "(f(n + 1)|length) }}{% endif %}{% endmacro %}{{ f(0) }}");
    out = render(deep, NULL, NULL, true, &st, err, sizeof err);
    CHECKF(!out && st == VX_ERANGE && strstr(err, "nested too deeply"), "%s", err);

    /* filters that call filters recurse through C too */
    char *maps = malloc(20 * 2000 + 64);
    strcpy(maps, "{{ 'abc' | map('map'");
    for (int i = 0; i < 2000; i++) strcat(maps, ", 'map'");
    strcat(maps, ") | list }}");
    out = render(maps, NULL, NULL, true, &st, err, sizeof err);
    CHECKF(!out && st == VX_ERANGE && strstr(err, "nested too deeply"), "%s", err);
    free(maps);

    /* explicit small limits through the parameters */
    vx_chat_template *t = NULL;
    CHECK(vx_chat_template_parse("{% for i in range(1000) %}{{ i }}{% endfor %}", &t, err, sizeof err) == VX_OK);
    vx_chat_render_params p = vx_chat_render_default_params();
    p.max_output = 100;
    CHECK(vx_chat_template_render_ex(t, NULL, 0, &p, &out, err, sizeof err) == VX_ERANGE && !out);
    p.max_output = 0;
    p.max_memory = 4096;
    CHECK(vx_chat_template_render_ex(t, NULL, 0, &p, &out, err, sizeof err) == VX_ERANGE && !out);
    p.max_memory = 0;
    p.max_steps = 50;
    CHECK(vx_chat_template_render_ex(t, NULL, 0, &p, &out, err, sizeof err) == VX_ERANGE && !out);
    p.max_steps = 0;
    CHECK(vx_chat_template_render_ex(t, NULL, 0, &p, &out, err, sizeof err) == VX_OK && out && strlen(out) == 2890);
    free(out);
    vx_chat_template_free(t);
}

static char *render_builtin(const char *name) {
    const vx_chat_message msgs[] = {
        {"system", "You are helpful."},
        {"user", "Hi"},
        {"assistant", "Hello! How can I help?"},
        {"user", "Tell me a joke."},
    };
    const char *src = vx_chat_template_builtin(name);
    vx_chat_template *t = NULL;
    char err[512] = "", *out = NULL;
    CHECKF(src != NULL, "no builtin %s", name);
    if (!src || vx_chat_template_parse(src, &t, err, sizeof err) != VX_OK) {
        CHECKF(false, "builtin %s does not parse: %s", name, err);
        return NULL;
    }
    vx_status st = vx_chat_template_render(t, msgs, 4, true, "<s>", "</s>", &out, err, sizeof err);
    CHECKF(st == VX_OK, "builtin %s: %s", name, err);
    vx_chat_template_free(t);
    return out;
}

static void test_builtins(void) {
    static const struct {
        const char *name, *want;
    } cases[] = {
        {"chatml", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                   "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\n"
                   "Tell me a joke.<|im_end|>\n<|im_start|>assistant\n"},
        {"qwen2", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\n"
                  "Tell me a joke.<|im_end|>\n<|im_start|>assistant\n"},
        {"llama3", "<s><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
                   "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>"
                   "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n"},
        {"llama2", "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi [/INST] Hello! How can I help? "
                   "</s><s>[INST] Tell me a joke. [/INST]"},
        {"mistral", "<s>[INST] You are helpful.\n\nHi [/INST] Hello! How can I help?</s>"
                    "[INST] Tell me a joke. [/INST]"},
        {"phi3", "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n"
                 "Hello! How can I help?<|end|>\n<|user|>\nTell me a joke.<|end|>\n<|assistant|>\n"},
        {"gemma", "<s><start_of_turn>user\nYou are helpful.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
                  "Hello! How can I help?<end_of_turn>\n<start_of_turn>user\nTell me a joke.<end_of_turn>\n"
                  "<start_of_turn>model\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = render_builtin(cases[i].name);
        CHECKF(out && !strcmp(out, cases[i].want), "builtin %s rendered:\n%s", cases[i].name,
               out ? out : "(error)");
        free(out);
    }
    CHECK(vx_chat_template_builtin("nope") == NULL);
    CHECK(vx_chat_template_builtin(NULL) == NULL);
}

/* The C API around the interpreter. */
static void test_api(void) {
    char err[512] = "", *out = (char *)1;
    vx_chat_template *t = (vx_chat_template *)1;
    CHECK(vx_chat_template_parse(NULL, &t, err, sizeof err) == VX_EINVAL && t == NULL);
    CHECK(vx_chat_template_parse("x", NULL, err, sizeof err) == VX_EINVAL);
    CHECK(vx_chat_template_render(NULL, NULL, 0, false, NULL, NULL, &out, err, sizeof err) == VX_EINVAL && !out);
    vx_chat_template_free(NULL);

    /* an empty template renders "" (not NULL); a single trailing newline is dropped */
    CHECK(vx_chat_template_parse("", &t, err, sizeof err) == VX_OK);
    CHECK(vx_chat_template_render(t, NULL, 0, false, NULL, NULL, &out, err, sizeof err) == VX_OK && out && !*out);
    free(out);
    vx_chat_template_free(t);

    /* C messages: NULL content is None; NULL tokens are "" */
    const vx_chat_message msgs[] = {{"assistant", NULL}, {"user", "q"}};
    CHECK(vx_chat_template_parse("{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}"
                                 "[{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools }}|{{ documents }}]\n",
                                 &t, err, sizeof err) == VX_OK);
    CHECK(vx_chat_template_render(t, msgs, 2, true, NULL, NULL, &out, err, sizeof err) == VX_OK);
    CHECKF(out && !strcmp(out, "assistant=None;user=q;[||True|None|None]"), "%s", out ? out : err);
    free(out);
    const vx_chat_message bad[] = {{NULL, "x"}};
    CHECK(vx_chat_template_render(t, bad, 1, true, NULL, NULL, &out, err, sizeof err) == VX_EINVAL && !out);
    vx_chat_template_free(t);

    /* the real clock by default */
    CHECK(vx_chat_template_parse("{{ strftime_now('%Y') | int > 2000 }}", &t, err, sizeof err) == VX_OK);
    CHECK(vx_chat_template_render(t, NULL, 0, false, NULL, NULL, &out, err, sizeof err) == VX_OK);
    CHECKF(out && !strcmp(out, "True"), "%s", out ? out : err);
    free(out);
    vx_chat_template_free(t);

    /* extra variables and structured messages as JSON */
    EXPECT_X("{{ tools | map(attribute='name') | join(',') }} {{ enable_thinking }} {{ n * 2 }} {{ f }} {{ u }}",
             "{\"tools\": [{\"name\": \"a\"}, {\"name\": \"b\"}], \"enable_thinking\": false, \"n\": 21, \"f\": 1.5e3, \"u\": \"\\u00e9\\ud83d\\ude00\\n\"}",
             "a,b False 42 1500.0 \303\251\360\237\230\200\n");
    /* JSON integers at both ends of int64 stay integers (they used to become floats) */
    EXPECT_X("{{ a }} {{ b | tojson }} {{ a is integer }} {{ b is integer }} {{ c }}",
             "{\"a\": -9223372036854775808, \"b\": 9223372036854775807, \"c\": -9223372036854775807}",
             "-9223372036854775808 9223372036854775807 True True -9223372036854775807");
    expect_with(__LINE__, "{{ messages[0].tool_calls[0].function.arguments | tojson }}",
                "[{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": [1, 2.5, null, true]}}}]}]",
                NULL, "{\"x\": [1, 2.5, null, true]}");
    CHECK(render("x", "{\"not\": \"a list\"}", NULL, true, NULL, err, sizeof err) == NULL);
    CHECK(render("x", "[1, 2", NULL, true, NULL, err, sizeof err) == NULL && strstr(err, "invalid JSON"));
    CHECK(render("x", NULL, "[1]", true, NULL, err, sizeof err) == NULL);
    CHECK(render("x", NULL, "{\"a\": tru}", true, NULL, err, sizeof err) == NULL);

    /* one parsed template renders many times, each render independent */
    CHECK(vx_chat_template_parse("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}",
                                 &t, err, sizeof err) == VX_OK);
    for (int i = 0; i < 3; i++) {
        CHECK(vx_chat_template_render(t, msgs, 2, false, NULL, NULL, &out, err, sizeof err) == VX_OK && !strcmp(out, "2"));
        free(out);
    }
    vx_chat_template_free(t);
}

/* ------------------------------------------------------------ tool calls
 * Every case of tests/data/chat_tools/manifest.json (written by gen.py
 * there with jinja2 and HF transformers' settings): the conversation's
 * `tools` as an extra variable and its messages (tool calls, tool results)
 * as JSON, as the server passes them. Test data paths are relative to the
 * repository root, where the tests run. */

#define DATA_DIR "tests/data/chat_tools"

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

static void test_tools_manifest(void) {
    char *man_text = vx_test_read_file(DATA_DIR "/manifest.json", NULL);
    cJSON *man = man_text ? cJSON_Parse(man_text) : NULL;
    free(man_text);
    CHECKF(man != NULL, "cannot read %s (run from the repository root)", DATA_DIR "/manifest.json");
    if (!man) return;
    const cJSON *templates = cJSON_GetObjectItem(man, "templates");
    const cJSON *convs = cJSON_GetObjectItem(man, "conversations");
    tally tl = {0};
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
        size_t want_len = 0;
        char *want = NULL;
        if (!strcmp(status, "ok")) {
            snprintf(path, sizeof path, DATA_DIR "/%s", jstr(cs, "expected"));
            want = vx_test_read_file(path, &want_len);
            CHECKF(want != NULL, "%s: cannot read %s", name, path);
        }
        /* the comparison must see a single changed byte */
        if (judge(&tl, name, status, jstr(cs, "message"), st, out, err, want, want_len) && want && want_len > 0 &&
            !corruption_checked) {
            want[want_len / 2] ^= 0x01;
            CHECK(!same_bytes(want, want_len, out));
            corruption_checked = true;
        }
        free(want);
        free(out);
        free(src);
        free(conv_text);
        cJSON_Delete(conv);
    }
    printf("chat_tools: %d/%d ok cases byte-exact, %d/%d raise_exception, %d/%d jinja2 errors also fail\n",
           tl.ok_pass, tl.ok_total, tl.raise_pass, tl.raise_total, tl.err_pass, tl.err_total);
    /* a manifest that lost cases must not pass quietly */
    CHECK(tl.ok_total == 57 && tl.raise_total == 3 && tl.err_total == 20);
    CHECK(corruption_checked);
    cJSON_Delete(man);
}

int main(void) {
    test_manifest();
    test_tools_manifest();
    test_lexer_and_expressions();
    test_statements_and_methods();
    test_more_semantics();
    test_runtime_errors();
    test_syntax_errors();
    test_limits();
    test_builtins();
    test_api();
    return vx_test_finish("test_chat");
}
