/*
 * test_grammar.c - GBNF grammars and constrained decoding (grammar.h),
 * judged as a black box against the header's contract and llama.cpp's
 * GBNF semantics:
 *
 *  - parsing: llama.cpp-style grammars accepted (every escape, classes,
 *    repetitions, comments, rules over several lines, a JSON grammar, an
 *    arithmetic one, ...); malformed ones refused with VX_EINVAL, *out
 *    NULL and a message naming the line;
 *  - matching: tables of complete sentences, proper prefixes and refusals
 *    (at an exact byte, leaving the matcher as it was), fed byte by byte,
 *    in random chunks and whole; UTF-8 (ranges of code points, partial
 *    characters, invalid and overlong encodings); repetition bounds;
 *    ambiguous grammars over long texts;
 *  - an independent reference recognizer (sets of end positions over
 *    hand-written combinators) for seven fixed grammars, compared on every
 *    string over {a,b,c} up to 7 bytes (5 under the sanitizers);
 *  - the token filter over real vocabularies (llama.cpp's test GGUFs):
 *    every token's answer against a matcher fed the text and the token's
 *    piece, along generated texts.
 */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "grammar.h"
#include "testutil.h"
#include "vocab.h"

static uint64_t rnd(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static vx_grammar *parse_ok(const char *text) {
    char err[VX_ERRMSG_MAX] = "";
    vx_grammar *g = NULL;
    const vx_status st = vx_grammar_parse(text, strlen(text), &g, err, sizeof err);
    CHECKF(st == VX_OK && g != NULL, "status %d (%s) for:\n%s", st, err, text);
    return st == VX_OK ? g : NULL;
}

/* Refused with VX_EINVAL, *out set to NULL, a message naming the line
 * (and containing want, when given). */
static void parse_bad_n(const char *text, size_t len, const char *want) {
    static char dummy;
    char err[VX_ERRMSG_MAX];
    memset(err, 0, sizeof err);
    vx_grammar *g = (vx_grammar *)(void *)&dummy;
    const vx_status st = vx_grammar_parse(text, len, &g, err, sizeof err);
    CHECKF(st == VX_EINVAL && g == NULL && err[0] && (strstr(err, "line") || (want && !strcmp(want, "bytes"))) &&
               (!want || strstr(err, want)),
           "status %d, message \"%s\" (want \"%s\") for: %.80s", st, err, want ? want : "", text);
    if (st == VX_OK && g != (vx_grammar *)(void *)&dummy) vx_grammar_free(g);
}

static void parse_bad(const char *text, const char *want) { parse_bad_n(text, strlen(text), want); }

/* ---------------------------------------------------------------- parsing */

static const char JSON_G[] =
    "# JSON, written for this test\n"
    "root    ::= ws value ws\n"
    "value   ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object  ::= \"{\" ws ( member ( ws \",\" ws member )* ws )? \"}\"\n"
    "member  ::= string ws \":\" ws value\n"
    "array   ::= \"[\" ws ( value ( ws \",\" ws value )* ws )? \"]\"\n"
    "string  ::= \"\\\"\" char* \"\\\"\"\n"
    "char    ::= [^\\\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\\\"\\\\/bfnrt] | \"u\" hex{4} )\n"
    "hex     ::= [0-9a-fA-F]\n"
    "number  ::= \"-\"? int frac? exp?\n"
    "int     ::= \"0\" | [1-9] [0-9]*\n"
    "frac    ::= \".\" [0-9]+\n"
    "exp     ::= [eE] (\"+\" | \"-\")? [0-9]+\n"
    "ws      ::= [ \\t\\n\\r]*\n";

static const char ARITH_G[] = "root   ::= expr\n"
                              "expr   ::= term ((\"+\" | \"-\") term)*\n"
                              "term   ::= factor ((\"*\" | \"/\") factor)*\n"
                              "factor ::= number | \"(\" ws expr ws \")\" | \"-\" factor\n"
                              "number ::= [0-9]+\n"
                              "ws     ::= \" \"?\n";

static const char LIST_G[] = "root ::= item+\nitem ::= \"- \" [^\\n]+ \"\\n\"\n";

static const char DATE_G[] = "root  ::= year \"-\" month \"-\" day\n"
                             "year  ::= [0-9]{4}\n"
                             "month ::= \"0\" [1-9] | \"1\" [0-2]\n"
                             "day   ::= \"0\" [1-9] | [12] [0-9] | \"3\" [01]\n";

static const char CHESS_G[] = "root  ::= move (\" \" move)*\n"
                              "move  ::= piece? [a-h] [1-8] | \"O-O\" \"-O\"?\n"
                              "piece ::= [KQRBN]\n";

/* newlines after ::=, after |, inside parentheses, a line starting with
 * '|', comments everywhere, names with '-', '_' and digits */
static const char MULTI_G[] = "# a grammar over several lines\n"
                              "\n"
                              "root ::=\n"
                              "  item-1 (   # inside a group\n"
                              "    \",\" item_2\n"
                              "  )*\n"
                              "# between rules\n"
                              "item-1 ::= \"a\" |\n"
                              "   \"b\"\n"
                              "item_2 ::= \"c\"\n"
                              "  | \"d2\" # a line starting with '|'\n"
                              "Unused-rule_3 ::= [0-9]\n";

static const char ESC_G[] = "root ::= \"\\n\\r\\t\\\\\\\"\\x41\\u00e9\\U0001F600\" [\\x30-\\x39\\t] [^\\\"\\\\]";

static void test_parse_accepted(void) {
    static const char *const ok[] = {
        ESC_G, JSON_G, ARITH_G, LIST_G, DATE_G, CHESS_G, MULTI_G,
        "root ::= [a-zA-Z0-9_] [^\\n\\t] [\\x41-\\x5A] [\\u00e0-\\u00ff] [\\U0001F600-\\U0001F64F] .",
        "root ::= (\"a\" | \"b\" (\"c\" | [d-f])*)+ \"g\"? \"h\"{2} \"i\"{2,} \"j\"{2,5} \"k\"{,3}",
        "root::=\"a\"(\"b\"|\"c\")*",
        "root ::= \"a\"\t\"b\"   # trailing comment\n\n\n",
        "root ::= x\nx ::= \"#\" [#] \"\\x23\" # comment \"not a literal\"\n",
        "root ::= \"(\" root \")\" | \"x\"",            /* recursion after a character */
        "root ::= n \"a\" root | n \"b\"\nn ::= \"c\"?", /* a nullable rule, then a character */
        "root ::= \"a\"{10000}",
        "root ::= \"a\"{0,10000}",
        "root ::= [α-ω]+ [\\u4e00-\\u9fff]",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) vx_grammar_free(parse_ok(ok[i]));
    /* len bounds the text: what follows it is not read */
    char err[VX_ERRMSG_MAX];
    vx_grammar *g = NULL;
    static const char tail[] = "root ::= \"a\"$$ garbage ::=";
    CHECK(vx_grammar_parse(tail, 12, &g, err, sizeof err) == VX_OK && g);
    if (g) {
        vx_gmatch *m = vx_gmatch_new(g);
        CHECK(m && vx_gmatch_feed(m, "a", 1) && vx_gmatch_complete(m) && !vx_gmatch_can_continue(m));
        vx_gmatch_free(m);
        vx_grammar_free(g);
    }
}

static void test_parse_refused(void) {
    parse_bad("root ::= \"abc", NULL);
    parse_bad("root ::= \"abc\nx ::= \"y\"", NULL);
    parse_bad("root ::= [a-z", NULL);
    parse_bad("root ::= [a-z\n", NULL);
    parse_bad("root \"a\"", NULL);
    parse_bad("root := \"a\"", NULL);
    parse_bad("root ::= foo", "foo");
    parse_bad("root ::= \"a\" undefined-rule_2 \"b\"", "undefined-rule_2");
    parse_bad("a ::= \"x\"", NULL);
    parse_bad("root ::= \"a\"\nroot ::= \"b\"", NULL);
    parse_bad("root ::= x\nx ::= \"a\"\nx ::= \"b\"", NULL);
    parse_bad("root ::= root \"x\" | \"y\"", NULL);
    parse_bad("root ::= a root \"x\" | \"y\"\na ::= \"z\"?", NULL);
    /* a left cycle whose references all close their alternatives ends
     * (the continuation is the same stack): taken, where llama.cpp refuses */
    {
        static const char *const tail_ok[] = {"root ::= \"a\"* root | \"b\"", "root ::= \"a\"{0,3} root | \"b\"",
                                              "root ::= (\"a\"? | \"b\") root | \"b\"",
                                              "root ::= item*\nitem ::= word\nword ::= [a-z]*"};
        for (int i = 0; i < 4; i++) {
            vx_grammar *g = parse_ok(tail_ok[i]);
            vx_gmatch *m = g ? vx_gmatch_new(g) : NULL;
            CHECKF(m && vx_gmatch_feed(m, "aab", 3) && (i == 3 || vx_gmatch_complete(m)) && !vx_gmatch_feed(m, "-", 1),
                   "%s", tail_ok[i]);
            vx_gmatch_free(m);
            vx_grammar_free(g);
        }
    }
    parse_bad("root ::= a \"x\"\na ::= \"a\"* a \"b\" | \"c\"", "'a' is left-recursive");
    /* no sentence at all, or none past a prefix: refused / the dead alternative dropped */
    parse_bad("root ::= \"a\" [\\uD800-\\uDFFF]", "no text");
    parse_bad("root ::= x\nx ::= \"a\" x", "no text");
    parse_bad("root ::= <[1000]>", "token references");
    {
        vx_grammar *g = parse_ok("root ::= \"a\" [\\uD800-\\uDFFF] | \"ab\"");
        vx_gmatch *m = g ? vx_gmatch_new(g) : NULL;
        CHECK(m && vx_gmatch_feed(m, "a", 1) && vx_gmatch_can_continue(m) && !vx_gmatch_feed(m, "\xed", 1) &&
              vx_gmatch_feed(m, "b", 1) && vx_gmatch_complete(m));
        vx_gmatch_free(m);
        vx_grammar_free(g);
    }
    parse_bad("root ::= b \"x\" | \"y\"\nb ::= c\nc ::= root \"z\"", NULL);
    parse_bad("root ::= \"x\" a\na ::= a \"y\" | \"z\"", NULL);
    parse_bad("root ::= \"\\q\"", NULL);
    parse_bad("root ::= \"\\xZZ\"", NULL);
    parse_bad("root ::= \"\\u12\"", NULL);
    parse_bad("root ::= [\\q]", NULL);
    parse_bad("root ::= \"x\"{3,2}", NULL);
    parse_bad("root ::= \"x\"{10001}", NULL);
    parse_bad("root ::= \"x\"{2,10001}", NULL);
    parse_bad("root ::= \"x\"{,10001}", NULL);
    parse_bad("root ::= \"x\"{99999999999999999999}", NULL);
    parse_bad("root ::= \"x\"{2", NULL);
    parse_bad("root ::= \"x\"{a}", NULL);
    parse_bad("root ::= (\"a\"", NULL);
    parse_bad("root ::= ((\"a\")", NULL);
    parse_bad("root ::= \"a\")", NULL);
    parse_bad("root ::= (\"a\"\nx ::= \"b\"", NULL);
    parse_bad_n("", 0, NULL);
    parse_bad("  \n# only a comment\n\n", NULL);
    parse_bad("root ::= * \"a\"", NULL);
    parse_bad("root ::= \"a\" | + \"b\"", NULL);
    parse_bad("root ::= ( ? )", NULL);
    parse_bad("root ::= {2}", NULL);
    parse_bad("root ::= \"a\" $", NULL);
    parse_bad("ro$ot ::= \"a\"", NULL);
    parse_bad("root ::= \"a\" ::= \"b\"", NULL);
    /* the line of the error is the right one */
    parse_bad("root ::= a\na ::= \"x\"\nb ::= \"y\" \"z\n", "line 3");
    /* bounds: elements after expansion, bytes of text (the limit itself passes) */
    {
        /* 110 x 10000 single-character elements (a group or a longer literal
         * may be repeated as one rule reference, as llama.cpp does: either
         * answer is fine for the nested one, quickly) */
        char t[110 * 12 + 16] = "root ::=";
        for (int i = 0; i < 110; i++) strcat(t, " \"a\"{10000}");
        parse_bad(t, NULL);
        static const char nested[] = "root ::= (\"abcdefgh\"{10000}){100}";
        char err[VX_ERRMSG_MAX] = "";
        vx_grammar *g = NULL;
        const vx_status st = vx_grammar_parse(nested, sizeof nested - 1, &g, err, sizeof err);
        CHECKF(st == VX_OK || (st == VX_EINVAL && !g && strstr(err, "line")), "%s: %d %s", nested, st, err);
        vx_grammar_free(g);
    }
    {
        const size_t big = (size_t)VX_GRAMMAR_MAX_TEXT + 1;
        char *t = malloc(big);
        if (t) {
            static const char head[] = "root ::= \"a\"\n#";
            memset(t, 'c', big);
            memcpy(t, head, sizeof head - 1);
            parse_bad_n(t, big, "bytes"); /* no position: the message names the size */
            char err[VX_ERRMSG_MAX] = "";
            vx_grammar *g = NULL;
            CHECKF(vx_grammar_parse(t, big - 1, &g, err, sizeof err) == VX_OK, "text of the maximum size: %s", err);
            vx_grammar_free(g);
            free(t);
        }
    }
    /* err: NULL, size 0 (nothing written), too small (terminated) */
    vx_grammar *g = NULL;
    CHECK(vx_grammar_parse("root ::= \"a", 11, &g, NULL, 0) == VX_EINVAL && !g);
    char e0[4] = "zzz";
    CHECK(vx_grammar_parse("root ::= \"a", 11, &g, e0, 0) == VX_EINVAL && !g && !strcmp(e0, "zzz"));
    char e8[16];
    memset(e8, 'z', sizeof e8);
    CHECK(vx_grammar_parse("root ::= \"a", 11, &g, e8, 8) == VX_EINVAL && !g && memchr(e8, 0, 8) && e8[8] == 'z');
    CHECK(vx_grammar_parse("root ::= foo", 12, &g, NULL, 0) == VX_EINVAL && !g);
    vx_grammar_free(NULL);
}

/* --------------------------------------------------------------- matching */

enum { C = -1, P = -2 }; /* complete; a proper prefix; >= 0: refused at that byte */

typedef struct {
    const char *s;
    int at;
    const char *fix; /* after a refusal: completes s[0..at) (NULL: not tried) */
} mcase;

static uint64_t g_chunk_seed = 0x9e3779b97f4a7c15ull;

static void run_case(const vx_grammar *g, const char *gname, const mcase *c) {
    const int n = (int)strlen(c->s), want = c->at < 0 ? n : c->at;
    /* byte by byte */
    vx_gmatch *m = vx_gmatch_new(g);
    CHECK(m != NULL);
    if (!m) return;
    int pos = 0;
    while (pos < n) {
        const bool cb = vx_gmatch_complete(m), kb = vx_gmatch_can_continue(m);
        if (!vx_gmatch_feed(m, c->s + pos, 1)) {
            CHECKF(vx_gmatch_complete(m) == cb && vx_gmatch_can_continue(m) == kb, "%s: \"%s\": state changed", gname,
                   c->s);
            break;
        }
        pos++;
    }
    CHECKF(pos == want, "%s: \"%s\": %d bytes accepted, want %d", gname, c->s, pos, want);
    if (pos == want && c->at < 0)
        CHECKF(vx_gmatch_complete(m) == (c->at == C), "%s: \"%s\": complete %d", gname, c->s, vx_gmatch_complete(m));
    if (pos > 0) CHECKF(vx_gmatch_complete(m) || vx_gmatch_can_continue(m), "%s: \"%s\": dead", gname, c->s);
    if (c->at >= 0 && c->fix && pos == want)
        CHECKF(vx_gmatch_feed(m, c->fix, (int32_t)strlen(c->fix)) && vx_gmatch_complete(m),
               "%s: \"%s\": not completed by \"%s\" after the refusal", gname, c->s, c->fix);
    vx_gmatch_free(m);
    /* random chunks (they split UTF-8 characters); a refused chunk leaves the
     * matcher as it was, so its bytes one by one find the same place */
    for (int rep = 0; rep < 3; rep++) {
        m = vx_gmatch_new(g);
        pos = 0;
        while (pos < n) {
            int k = 1 + (int)(rnd(&g_chunk_seed) % 6);
            if (k > n - pos) k = n - pos;
            if (vx_gmatch_feed(m, c->s + pos, k)) {
                pos += k;
                continue;
            }
            while (pos < n && vx_gmatch_feed(m, c->s + pos, 1)) pos++;
            break;
        }
        CHECKF(pos == want, "%s: \"%s\" in chunks: %d bytes accepted, want %d", gname, c->s, pos, want);
        if (pos == want && c->at < 0) CHECK(vx_gmatch_complete(m) == (c->at == C));
        vx_gmatch_free(m);
    }
    /* whole */
    m = vx_gmatch_new(g);
    CHECKF(vx_gmatch_feed(m, c->s, n) == (c->at < 0), "%s: \"%s\" in one chunk", gname, c->s);
    if (c->at < 0) CHECK(vx_gmatch_complete(m) == (c->at == C));
    if (c->at >= 0) {
        CHECKF(vx_gmatch_feed(m, c->s, want), "%s: \"%s\": its first %d bytes after the refusal", gname, c->s, want);
        if (c->fix)
            CHECKF(vx_gmatch_feed(m, c->fix, (int32_t)strlen(c->fix)) && vx_gmatch_complete(m),
                   "%s: \"%s\" + \"%s\" after a refused chunk", gname, c->s, c->fix);
    }
    vx_gmatch_free(m);
}

static void run_table(const char *gtext, const mcase *cs, size_t n) {
    vx_grammar *g = parse_ok(gtext);
    if (!g) return;
    char name[48];
    snprintf(name, sizeof name, "%.40s", gtext);
    for (char *p = name; *p; p++)
        if (*p == '\n') *p = ' ';
    for (size_t i = 0; i < n; i++) run_case(g, name, &cs[i]);
    vx_grammar_free(g);
}

#define TABLE(g, ...)                                                                                                  \
    do {                                                                                                               \
        static const mcase cs_[] = {__VA_ARGS__};                                                                      \
        run_table(g, cs_, sizeof cs_ / sizeof *cs_);                                                                   \
    } while (0)

#define EMOJI "\xF0\x9F\x98\x80"
#define ESC_TEXT "\n\r\t\\\"A\xC3\xA9" EMOJI

static void test_tables(void) {
    TABLE(ESC_G, {ESC_TEXT "7x", C, 0}, {ESC_TEXT "\t\xCE\xB1", C, 0}, {"\n\r", P, 0}, {"\n\r\t\\\"A\xC3", P, 0},
          {"\n\r\t\\\"A\xC3\xA9\xF0\x9F\x98", P, 0}, {ESC_TEXT "\t", P, 0}, {"\n\n", 1, "\r\t\\\"A\xC3\xA9" EMOJI "0x"},
          {"\n\r\t\\\"a", 5, "A\xC3\xA9" EMOJI "0x"}, {"\n\r\t\\\"A\xE9", 6, "\xC3\xA9" EMOJI "0x"},
          {ESC_TEXT "a", 12, "9x"}, {ESC_TEXT "1\"", 13, "~"}, {ESC_TEXT "1\\", 13, "\n"});
    TABLE("root ::= [a-cx-z_] [^a-z\\n] [\\x30-\\x39\\t]+ \".\"", {"a!0.", C, 0}, {"z\xCE\xB1\t9.", C, 0},
          {"_A01234.", C, 0}, {"b", P, 0}, {"bA", P, 0}, {"bA0", P, 0}, {"y\xCE", P, 0}, {"c~\t\t", P, 0},
          {"d", 0, "a!0."}, {"w", 0, "x!0."}, {"-", 0, "y!0."}, {"ab", 1, "!0."}, {"a\n", 1, "Z0."},
          {"aA.", 2, "0."}, {"aA0a", 3, "."});
    /* '.' is any character (newline included), never invalid UTF-8 */
    TABLE("root ::= . . \"x\"", {"abx", C, 0}, {EMOJI "\nx", C, 0}, {"é中x", C, 0}, {"", P, 0}, {"\xF0", P, 0},
          {"\xF0\x9F\x98", P, 0}, {EMOJI, P, 0}, {"a\xE4\xB8", P, 0}, {"\xFF", 0, "abx"}, {"\x80", 0, "abx"},
          {"\xC0\xAF", 0, "abx"}, {"\xC1\x81", 0, "abx"}, {"ab" EMOJI, 2, "x"}, {"\xF0\x9F\x98x", 3, "\x80" "ax"},
          {"\xF8\x88\x80\x80\x80", 0, "abx"}, {"\xF5\x80\x80\x80", 0, "abx"},
          {"\xED\xA0\x80", 1, "\x9F\xBF" "ax"},            /* a surrogate */
          {"\xF4\x90\x80\x80", 1, "\x8F\xBF\xBF" "ax"},    /* past U+10FFFF */
          {"\xE0\x80\xAF", 1, "\xA0\x80" "ax"},            /* overlong */
          {"\xF0\x80\x80\x80", 1, "\x90\x80\x80" "ax"},    /* overlong */
          {"a\xC3" "a", 2, "\xA9x"}, {"abxx", 3, ""});
    TABLE("root ::= [^α-ω]+", {"abc", C, 0}, {"\xCE\x91", C, 0}, {"中", C, 0}, {EMOJI, C, 0}, {"a\xCF\x8A", C, 0},
          {"\xCE\xB0", C, 0}, {"", P, 0}, {"\xCE", P, 0}, {"a\xCF", P, 0}, {"\xCE\xB2", 1, "\x91"},
          {"a\xCE\xB1", 2, "\xB0"}, {"\xCF\x89", 1, "\x8A"}, {"\xCF\x80", 1, "\x8A"}, {"\xFF", 0, "a"});
    TABLE("root ::= [α-ω]+ \" \" [\\u4e00-\\u9fff]{1,2}", {"αβγ 中", C, 0}, {"ω 中文", C, 0},
          {"α \xE4\xB8\x80", C, 0}, {"α \xE9\xBF\xBF", C, 0}, {"α", P, 0}, {"α ", P, 0}, {"α \xE4", P, 0},
          {"α \xE4\xB8", P, 0}, {"α 中\xE6", P, 0}, {"a", 0, "α 中"}, {"\xCE\x91", 1, "\xB1 中"}, {"α a", 3, "中"},
          {"α 中文字", 9, ""}, {"α \xE3\x80\x80", 3, "中"}, {"α \xE4\xB7\xBF", 4, "\xB8\x80"},
          {"α \xEA\x80\x80", 3, "中"}, {"ωx", 2, " 中"});
    TABLE("root ::= \"a\"{2,4}", {"aa", C, 0}, {"aaa", C, 0}, {"aaaa", C, 0}, {"", P, 0}, {"a", P, 0},
          {"aaaaa", 4, ""}, {"ab", 1, "a"});
    TABLE("root ::= \"ab\"{3}", {"ababab", C, 0}, {"", P, 0}, {"a", P, 0}, {"ababa", P, 0}, {"abababa", 6, ""},
          {"abb", 2, "abab"});
    TABLE("root ::= \"a\"{,2} \"b\"", {"b", C, 0}, {"ab", C, 0}, {"aab", C, 0}, {"", P, 0}, {"a", P, 0},
          {"aa", P, 0}, {"aaa", 2, "b"}, {"bb", 1, ""});
    TABLE("root ::= \"a\"{2,} \"b\"", {"aab", C, 0}, {"aaaaab", C, 0}, {"a", P, 0}, {"aaaaaaa", P, 0},
          {"ab", 1, "ab"});
    TABLE("root ::= (\"x\" | \"yz\")? \"w\"+", {"w", C, 0}, {"xw", C, 0}, {"yzww", C, 0}, {"", P, 0}, {"x", P, 0},
          {"y", P, 0}, {"yw", 1, "zw"}, {"xx", 1, "w"}, {"wx", 1, ""});
    TABLE("root ::= ([a-c] [0-9]?){1,3} \".\"", {"a.", C, 0}, {"a1b.", C, 0}, {"a1b2c3.", C, 0}, {"a1", P, 0},
          {"a1b2c3d", 6, "."}, {"a12", 2, "."});
    TABLE(MULTI_G, {"a", C, 0}, {"b,c", C, 0}, {"a,c,d2,c", C, 0}, {"a,", P, 0}, {"a,d", P, 0}, {"c", 0, "a"},
          {"a,a", 2, "c"}, {"ab", 1, ""}, {"a,d3", 3, "2"}, {"0", 0, "b"});
    TABLE("root::=\"a\"(\"b\"|\"c\")*", {"a", C, 0}, {"abcb", C, 0}, {"ad", 1, "c"});
    TABLE("root ::= \"#\" [#] \"\\x23\" # a comment \"x\"\n", {"###", C, 0}, {"#", P, 0}, {"###x", 3, ""});
    TABLE(JSON_G, {"{}", C, 0}, {"{\"a\":1}", C, 0}, {" [1, -2.5e+3, true, null, \"x\\u00e9\\n\"] ", C, 0},
          {"{ \"a\" : [ 1 , 2 ] }", C, 0}, {"\"é" EMOJI "\"", C, 0}, {"12", C, 0}, {"-0.5E-7", C, 0},
          {"{\"k\": {\"l\": [[], {}]}}", C, 0}, {"{", P, 0}, {"{\"a\"", P, 0}, {"{\"a\":", P, 0}, {"[1,", P, 0},
          {"\"abc", P, 0}, {"tru", P, 0}, {"-", P, 0}, {"1.", P, 0}, {"1e+", P, 0}, {"\"\\u12", P, 0},
          {"{]", 1, "}"}, {"{\"a\" 1}", 5, ":1}"}, {"01", 1, ""}, {"[1,]", 3, "2]"}, {"\"\\x\"", 2, "n\""},
          {"{'a'}", 1, "}"}, {"\"a\x01", 2, "\""}, {"nul1", 3, "l"}, {"1.e", 2, "5"}, {"[1 2]", 3, "]"},
          {"{\"a\":1}x", 7, ""}, {"--1", 1, "1"}, {"\"\xFF", 1, "\""}, {"\"\\u12g", 5, "34\""}, {"1e+-", 3, "1"},
          {"truE", 3, "e"});
    TABLE(ARITH_G, {"1", C, 0}, {"12+3*4", C, 0}, {"( 1+2 )*-3", C, 0}, {"--4", C, 0}, {"((7))", C, 0},
          {"1/2-3", C, 0}, {"", P, 0}, {"(", P, 0}, {"1+", P, 0}, {"( 1", P, 0}, {"-", P, 0}, {"((1)", P, 0},
          {"1+2*", P, 0}, {"+1", 0, "1"}, {"1++", 2, "1"}, {"()", 1, "1)"}, {"1)", 1, ""}, {"1 +2", 1, ""},
          {"a", 0, "0"}, {"(1  )", 3, ")"});
    TABLE(LIST_G, {"- a\n", C, 0}, {"- milk\n- eggs \xF0\x9F\xA5\x9A\n", C, 0}, {"", P, 0}, {"-", P, 0},
          {"- ", P, 0}, {"- a", P, 0}, {"- a\n-", P, 0}, {"-a", 1, " a\n"}, {"- \n", 2, "x\n"}, {"* a", 0, "- a\n"},
          {"- a\n\n", 4, ""});
    TABLE(DATE_G, {"2024-01-31", C, 0}, {"1999-12-09", C, 0}, {"0000-10-20", C, 0}, {"2024", P, 0},
          {"2024-1", P, 0}, {"2024-12-3", P, 0}, {"", P, 0}, {"202-", 3, "4-01-01"}, {"2024-13", 6, "2-01"},
          {"2024-00", 6, "1-01"}, {"2024-01-32", 9, "0"}, {"2024-01-310", 10, ""}, {"2024-01-00", 9, "1"});
    TABLE(CHESS_G, {"e4 Nf3 O-O", C, 0}, {"O-O-O", C, 0}, {"O-O", C, 0}, {"Qh8", C, 0}, {"N", P, 0},
          {"O-", P, 0}, {"O-O-", P, 0}, {"e4 ", P, 0}, {"e9", 1, "1"}, {"Kx", 1, "a1"}, {"i4", 0, "a1"},
          {"O-O-X", 4, "O"}, {"e4  ", 3, "a1"}, {"O-O-O-O", 5, ""});
}

static vx_gmatch *fed(const vx_grammar *g, const char *s, int n) {
    vx_gmatch *m = vx_gmatch_new(g);
    if (m && !vx_gmatch_feed(m, s, n)) {
        vx_gmatch_free(m);
        return NULL;
    }
    return m;
}

static void test_states(void) {
    vx_grammar *g = parse_ok("root ::= \"ab\"");
    vx_gmatch *m = g ? vx_gmatch_new(g) : NULL;
    if (m) {
        CHECK(!vx_gmatch_complete(m) && vx_gmatch_can_continue(m));
        CHECK(vx_gmatch_feed(m, "", 0) && vx_gmatch_feed(m, "a", 1));
        CHECK(!vx_gmatch_complete(m) && vx_gmatch_can_continue(m));
        CHECK(vx_gmatch_feed(m, "b", 1) && vx_gmatch_complete(m) && !vx_gmatch_can_continue(m));
        CHECK(!vx_gmatch_feed(m, "b", 1) && vx_gmatch_complete(m) && !vx_gmatch_can_continue(m));
    }
    vx_gmatch_free(m);
    vx_grammar_free(g);
    g = parse_ok("root ::= \"a\"+");
    m = g ? fed(g, "aaa", 3) : NULL;
    CHECK(m && vx_gmatch_complete(m) && vx_gmatch_can_continue(m));
    vx_gmatch_free(m);
    vx_grammar_free(g);
    g = parse_ok("root ::= \"a\"*");
    m = g ? vx_gmatch_new(g) : NULL;
    CHECK(m && vx_gmatch_complete(m) && vx_gmatch_can_continue(m));
    vx_gmatch_free(m);
    vx_grammar_free(g);
    /* a refused chunk that starts well: nothing of it stays */
    g = parse_ok("root ::= \"a\"+ \"b\"");
    m = g ? fed(g, "a", 1) : NULL;
    CHECK(m && !vx_gmatch_feed(m, "aab!", 4) && !vx_gmatch_feed(m, "aa\xFF", 3) && !vx_gmatch_feed(m, "a\xE2\x82", 3));
    CHECK(m && vx_gmatch_feed(m, "b", 1) && vx_gmatch_complete(m));
    vx_gmatch_free(m);
    vx_grammar_free(g);
    /* many matchers on one grammar, independent */
    g = parse_ok(LIST_G);
    vx_gmatch *a = g ? fed(g, "- x\n", 4) : NULL, *b = g ? fed(g, "- y", 3) : NULL;
    CHECK(a && b && vx_gmatch_complete(a) && !vx_gmatch_complete(b));
    vx_gmatch_free(a);
    vx_gmatch_free(b);
    vx_grammar_free(g);
    /* an empty class (found by fuzz_grammar): refused, or a class of nothing */
    static const char *const empty_cls[] = {"root ::= [] | \"a\"", "root ::= []*", "root ::= \"a\" []?"};
    for (int i = 0; i < 3; i++) {
        char err[VX_ERRMSG_MAX] = "";
        g = NULL;
        const vx_status st = vx_grammar_parse(empty_cls[i], strlen(empty_cls[i]), &g, err, sizeof err);
        CHECKF(st == VX_OK || (st == VX_EINVAL && !g && err[0]), "%s: %d %s", empty_cls[i], st, err);
        m = g ? vx_gmatch_new(g) : NULL;
        if (m) {
            CHECK(vx_gmatch_feed(m, "", 0) && vx_gmatch_complete(m) == (i == 1) && !vx_gmatch_feed(m, "b", 1));
            CHECK(vx_gmatch_feed(m, "a", 1) == (i != 1) && vx_gmatch_complete(m));
        }
        vx_gmatch_free(m);
        vx_grammar_free(g);
    }
    /* x{0}: nothing; a grammar of the empty text alone */
    g = parse_ok("root ::= \"a\"{0}");
    m = g ? vx_gmatch_new(g) : NULL;
    CHECK(m && vx_gmatch_complete(m) && !vx_gmatch_can_continue(m) && vx_gmatch_feed(m, "", 0) &&
          !vx_gmatch_feed(m, "a", 1) && vx_gmatch_complete(m));
    vx_gmatch_free(m);
    vx_grammar_free(g);
    /* {10000}: the bound itself */
    g = parse_ok("root ::= \"a\"{10000}");
    char *t = malloc(10001);
    if (g && t) {
        memset(t, 'a', 10001);
        m = fed(g, t, 9999);
        CHECK(m && !vx_gmatch_complete(m) && vx_gmatch_feed(m, t, 1) && vx_gmatch_complete(m) &&
              !vx_gmatch_feed(m, t, 1) && !vx_gmatch_can_continue(m));
        vx_gmatch_free(m);
    }
    free(t);
    vx_grammar_free(g);
}

/* Ambiguous grammars over long texts: every parse at once, shared, so this
 * is linear (an exponential recognizer never returns). */
static void test_ambiguity(void) {
    static const char *const gs[] = {
        "root ::= (\"a\" | \"a\" | \"a\")*",
        "root ::= x x x x\nx ::= \"a\"*",
        "root ::= (\"a\" | \"aa\" | \"aaa\")+",
        "root ::= (x | y)*\nx ::= \"a\" y?\ny ::= \"a\"+",
        "root ::= \"a\" root | \"a\"",
    };
    char text[2001];
    memset(text, 'a', 2000);
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++) {
        vx_grammar *g = parse_ok(gs[i]);
        vx_gmatch *m = g ? vx_gmatch_new(g) : NULL;
        if (!m) continue;
        int ok = 0;
        for (int k = 0; k < 2000; k++) ok += vx_gmatch_feed(m, "a", 1);
        CHECKF(ok == 2000 && vx_gmatch_complete(m) && vx_gmatch_can_continue(m) && !vx_gmatch_feed(m, "b", 1),
               "%s: %d of 2000 bytes", gs[i], ok);
        vx_gmatch_free(m);
        m = fed(g, text, 2000);
        CHECKF(m && vx_gmatch_complete(m), "%s: 2000 bytes at once", gs[i]);
        vx_gmatch_free(m);
        vx_grammar_free(g);
    }
    /* a deep stack of optional closers: a^k b^j is a sentence for j < k */
    vx_grammar *g = parse_ok("root ::= y\ny ::= \"a\" y \"b\"? | \"a\"");
    memset(text, 'a', 500);
    memset(text + 500, 'b', 500);
    vx_gmatch *m = g ? fed(g, text, 999) : NULL;
    CHECK(m && vx_gmatch_complete(m) && !vx_gmatch_can_continue(m) && !vx_gmatch_feed(m, "b", 1));
    vx_gmatch_free(m);
    m = g ? fed(g, text, 700) : NULL;
    CHECK(m && vx_gmatch_complete(m) && vx_gmatch_can_continue(m));
    vx_gmatch_free(m);
    vx_grammar_free(g);
}

/* ------------------------------------------------ an independent reference */

/* A recognizer by sets of positions: bit i, a parse of what was read so far
 * can stand at byte i of R_s; REOF, a parse ran into the end of the text
 * (the text is a prefix of more). Every rule of the grammars below derives
 * some string, so REOF means "a proper prefix of a sentence". Every
 * function passes REOF through. */
typedef uint64_t ps;
#define REOF (1ull << 63)
static const char *R_s;
static int R_n;
typedef ps (*r_fn)(ps);

static ps r_lit(ps from, const char *w) {
    ps out = from & REOF;
    const int k = (int)strlen(w);
    for (int i = 0; i <= R_n; i++) {
        if (!(from >> i & 1)) continue;
        int j = 0;
        while (j < k && i + j < R_n && R_s[i + j] == w[j]) j++;
        if (j == k) out |= 1ull << (i + k);
        else if (i + j == R_n) out |= REOF;
    }
    return out;
}

static ps r_cls(ps from, const char *set, bool neg) {
    ps out = from & REOF;
    for (int i = 0; i <= R_n; i++) {
        if (!(from >> i & 1)) continue;
        if (i == R_n) out |= REOF;
        else if ((strchr(set, R_s[i]) != NULL) != neg) out |= 1ull << (i + 1);
    }
    return out;
}

/* f{mn,mx}; mx < 0: unbounded */
static ps r_rep(ps from, r_fn f, int mn, int mx) {
    ps out = 0, eof = from & REOF, cur = from & ~REOF;
    for (int k = 0; cur; k++) {
        if (k >= mn) out |= cur;
        if (mx >= 0 && k == mx) break;
        const ps r = f(cur);
        eof |= r & REOF;
        cur = r & ~REOF;
        if (mx < 0 && k >= mn) cur &= ~out;
    }
    return out | eof;
}

static ps lit_a(ps x) { return r_lit(x, "a"); }
static ps lit_b(ps x) { return r_lit(x, "b"); }
static ps lit_c(ps x) { return r_lit(x, "c"); }
/* root ::= ("a" b)* "c"?   b ::= "b" | "bb" */
static ps g1_ab(ps x) {
    const ps a = lit_a(x);
    return r_lit(a, "b") | r_lit(a, "bb");
}
static ps g1(ps x) { return r_rep(r_rep(x, g1_ab, 0, -1), lit_c, 0, 1); }
/* root ::= ("a" root "b" | "c")* */
static ps g2(ps x);
static ps g2_item(ps x) { return r_lit(g2(lit_a(x)), "b") | lit_c(x); }
static ps g2(ps x) { return x & ~REOF ? r_rep(x, g2_item, 0, -1) : x; }
/* root ::= x x x   x ::= "a"* | "b"{1,2} */
static ps g3_x(ps x) { return r_rep(x, lit_a, 0, -1) | r_rep(x, lit_b, 1, 2); }
static ps g3(ps x) { return g3_x(g3_x(g3_x(x))); }
/* root ::= ("a" | "ab"){2,3} "c"{,2} | "b"+ "a"? */
static ps g4_item(ps x) { return r_lit(x, "a") | r_lit(x, "ab"); }
static ps g4(ps x) { return r_rep(r_rep(x, g4_item, 2, 3), lit_c, 0, 2) | r_rep(r_rep(x, lit_b, 1, -1), lit_a, 0, 1); }
/* root ::= [ab]+ [^ab] | "c"{2,} "a" */
static ps g5_ab(ps x) { return r_cls(x, "ab", false); }
static ps g5(ps x) { return r_cls(r_rep(x, g5_ab, 1, -1), "ab", true) | lit_a(r_rep(x, lit_c, 2, -1)); }
/* root ::= "a" root "a" | "b" root "b" | "c" */
static ps g6(ps x) {
    if (!(x & ~REOF)) return x;
    return lit_a(g6(lit_a(x))) | lit_b(g6(lit_b(x))) | lit_c(x);
}
/* root ::= n "a" root | n "b"   n ::= "c"? */
static ps g7(ps x) {
    if (!(x & ~REOF)) return x;
    const ps n = r_rep(x, lit_c, 0, 1);
    return g7(lit_a(n)) | lit_b(n);
}

static void ref_answer(r_fn root, const char *s, int n, bool *complete, bool *prefix) {
    R_s = s, R_n = n;
    const ps r = root(1);
    *complete = r >> n & 1;
    *prefix = *complete || (r & REOF);
}

static void test_reference(int max_len) {
    static const struct {
        const char *g;
        r_fn f;
    } gs[] = {
        {"root ::= (\"a\" b)* \"c\"?\nb ::= \"b\" | \"bb\"", g1},
        {"root ::= (\"a\" root \"b\" | \"c\")*", g2},
        {"root ::= x x x\nx ::= \"a\"* | \"b\"{1,2}", g3},
        {"root ::= (\"a\" | \"ab\"){2,3} \"c\"{,2} | \"b\"+ \"a\"?", g4},
        {"root ::= [ab]+ [^ab] | \"c\"{2,} \"a\"", g5},
        {"root ::= \"a\" root \"a\" | \"b\" root \"b\" | \"c\"", g6},
        {"root ::= n \"a\" root | n \"b\"\nn ::= \"c\"?", g7},
    };
    for (size_t gi = 0; gi < sizeof gs / sizeof *gs; gi++) {
        vx_grammar *g = parse_ok(gs[gi].g);
        if (!g) continue;
        int strings = 0, agree = 0, sentences = 0, prefixes = 0;
        for (int len = 0; len <= max_len; len++) {
            int total = 1;
            for (int i = 0; i < len; i++) total *= 3;
            for (int code = 0; code < total; code++) {
                char s[9];
                for (int i = 0, c = code; i < len; i++, c /= 3) s[i] = (char)('a' + c % 3);
                bool rc, rp, ok = false;
                ref_answer(gs[gi].f, s, len, &rc, &rp);
                bool cont = false; /* some byte of the alphabet continues it */
                for (char b = 'a'; b <= 'c' && rp; b++) {
                    s[len] = b;
                    bool c2, p2;
                    ref_answer(gs[gi].f, s, len + 1, &c2, &p2);
                    cont |= p2;
                }
                vx_gmatch *m = vx_gmatch_new(g), *w = vx_gmatch_new(g);
                if (m && w) {
                    int k = 0;
                    while (k < len && vx_gmatch_feed(m, s + k, 1)) k++;
                    const bool whole = vx_gmatch_feed(w, s, len);
                    ok = (k == len) == rp && whole == rp &&
                         (!rp || (vx_gmatch_complete(m) == rc && vx_gmatch_complete(w) == rc &&
                                  vx_gmatch_can_continue(m) == cont));
                }
                if (!ok && strings - agree < 5)
                    fprintf(stderr, "reference %zu: \"%.*s\": want complete %d prefix %d continue %d\n", gi, len, s,
                            rc, rp, cont);
                strings++, agree += ok, sentences += rc, prefixes += rp;
                vx_gmatch_free(m);
                vx_gmatch_free(w);
            }
        }
        CHECKF(agree == strings, "reference %zu (%s): %d of %d strings agree", gi, gs[gi].g, agree, strings);
        CHECKF(sentences > 3 && prefixes >= sentences, "reference %zu: %d sentences, %d prefixes", gi, sentences,
               prefixes);
        vx_grammar_free(g);
    }
}

/* ----------------------------------------------------------- token filter */

typedef struct {
    const vx_vocab *v;
    int32_t n;
    char **piece;
    int32_t *len;
    bool *eog;
} pieces;

static bool pieces_load(pieces *pc, const vx_vocab *v) {
    pc->v = v;
    pc->n = vx_vocab_n_tokens(v);
    const int32_t cap = vx_vocab_max_piece(v) + 1;
    pc->piece = calloc((size_t)pc->n, sizeof *pc->piece);
    pc->len = calloc((size_t)pc->n, sizeof *pc->len);
    pc->eog = calloc((size_t)pc->n, sizeof *pc->eog);
    char *buf = malloc((size_t)cap);
    if (!pc->piece || !pc->len || !pc->eog || !buf) {
        free(buf);
        return false;
    }
    for (vx_token t = 0; t < pc->n; t++) {
        const int32_t k = vx_token_to_piece(v, t, buf, cap, false);
        CHECK(k >= 0);
        pc->len[t] = k > 0 ? k : 0;
        pc->piece[t] = malloc((size_t)pc->len[t] + 1);
        if (pc->piece[t]) memcpy(pc->piece[t], buf, (size_t)pc->len[t]);
        pc->eog[t] = vx_vocab_is_eog(v, t);
    }
    free(buf);
    return true;
}

static void pieces_free(pieces *pc) {
    for (int32_t t = 0; pc->piece && t < pc->n; t++) free(pc->piece[t]);
    free(pc->piece);
    free(pc->len);
    free(pc->eog);
}

/* What the filter must answer after text: a token with text when a matcher
 * fed the text takes its bytes; an end-of-generation token when the text
 * is complete. (A refused piece leaves the matcher as it was, which the
 * tables check, so one matcher serves until a piece is taken.) */
static void ref_allowed(const vx_grammar *g, const char *text, int tl, const pieces *pc, bool *want) {
    vx_gmatch *m = fed(g, text, tl);
    CHECK(m != NULL);
    if (!m) return;
    const bool complete = vx_gmatch_complete(m);
    for (vx_token t = 0; t < pc->n; t++) {
        want[t] = pc->eog[t] && complete;
        if (pc->len[t] == 0 || !vx_gmatch_feed(m, pc->piece[t], pc->len[t])) continue;
        want[t] = true;
        vx_gmatch_free(m);
        m = fed(g, text, tl);
        if (!m) return;
    }
    vx_gmatch_free(m);
}

static long full_check(vx_gfilter *f, const vx_grammar *g, const char *text, int tl, const pieces *pc, bool *want,
                       const char *what) {
    ref_allowed(g, text, tl, pc, want);
    const vx_token_filter allows = vx_gfilter_allows; /* the sampler's filter type */
    long bad = 0, yes = 0;
    for (vx_token t = 0; t < pc->n; t++) {
        const bool a = allows(f, t);
        yes += a;
        if (a != want[t] && bad++ < 4)
            fprintf(stderr, "%s: after \"%.*s\": token %d \"%.*s\" (eog %d) allowed %d, want %d\n", what, tl, text, t,
                    pc->len[t], pc->piece[t], pc->eog[t], a, want[t]);
    }
    CHECKF(bad == 0, "%s: after \"%.*s\": %ld of %d tokens answered wrong", what, tl, text, bad, pc->n);
    return yes;
}

static vx_token longest_piece(const pieces *pc, const char *s, int n);

/* Generates up to `steps` tokens, each the first allowed one in a fixed
 * random order (or spelling `script` with the longest pieces); every
 * `every` steps (and at the end), every token's answer against
 * ref_allowed. At each step: done = complete and nothing may follow; a
 * refused token is refused by feed and changes no answer. */
static void filter_run(const pieces *pc, const vx_gvocab *gv, const char *gtext, const char *what, int steps,
                       int every, uint64_t seed, const char *script) {
    vx_grammar *g = parse_ok(gtext);
    vx_gfilter *f = g ? vx_gfilter_new(g, gv) : NULL;
    vx_gmatch *cur = g ? vx_gmatch_new(g) : NULL;
    int32_t *perm = malloc(sizeof *perm * (size_t)pc->n);
    bool *want = malloc((size_t)pc->n);
    CHECK(f && cur && perm && want);
    if (!f || !cur || !perm || !want) goto out;
    for (int32_t i = 0; i < pc->n; i++) perm[i] = i;
    for (int32_t i = pc->n - 1; i > 0; i--) {
        const int32_t j = (int32_t)(rnd(&seed) % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
    char text[4096];
    int tl = 0, step = 0, checks = 0;
    long allowed = 0;
    for (;; step++) {
        const bool complete = vx_gmatch_complete(cur), more = vx_gmatch_can_continue(cur);
        CHECKF(vx_gfilter_done(f) == (complete && !more), "%s: after \"%.*s\": done %d", what, tl, text,
               vx_gfilter_done(f));
        bool checked = false;
        if (step % every == 0) allowed += full_check(f, g, text, tl, pc, want, what), checks++, checked = true;
        /* a refused token: feed says no, and the answers stay */
        for (int32_t i = 0; i < pc->n; i++) {
            const vx_token t = perm[(i + step * 7919) % pc->n];
            if (pc->len[t] == 0 || vx_gfilter_allows(f, t)) continue;
            bool before[64];
            for (int k = 0; k < 64; k++) before[k] = vx_gfilter_allows(f, perm[(k * 499) % pc->n]);
            CHECKF(!vx_gfilter_feed(f, t), "%s: refused token %d fed", what, t);
            int same = 0;
            for (int k = 0; k < 64; k++) same += before[k] == vx_gfilter_allows(f, perm[(k * 499) % pc->n]);
            CHECKF(same == 64 && vx_gfilter_done(f) == (complete && !more), "%s: a refused token changed the filter",
                   what);
            break;
        }
        vx_token pick = -1;
        if (script && tl < (int)strlen(script)) {
            pick = longest_piece(pc, script + tl, (int)strlen(script) - tl);
            CHECKF(pick >= 0 && vx_gfilter_allows(f, pick), "%s: the script's token %d at byte %d refused", what, pick,
                   tl);
            if (pick >= 0 && !vx_gfilter_allows(f, pick)) pick = -1;
        }
        for (int32_t i = 0; !script && step < steps && i < pc->n && pick < 0; i++) {
            const vx_token t = perm[(i + step * 7919) % pc->n];
            if (pc->len[t] > 0 && tl + pc->len[t] <= (int)sizeof text && vx_gfilter_allows(f, t)) pick = t;
        }
        if (pick < 0) {
            if (!checked) allowed += full_check(f, g, text, tl, pc, want, what), checks++;
            break;
        }
        CHECKF(vx_gfilter_feed(f, pick), "%s: allowed token %d refused by feed", what, pick);
        CHECKF(vx_gmatch_feed(cur, pc->piece[pick], pc->len[pick]), "%s: token %d \"%.*s\" allowed after \"%.*s\"",
               what, pick, pc->len[pick], pc->piece[pick], tl, text);
        memcpy(text + tl, pc->piece[pick], (size_t)pc->len[pick]);
        tl += pc->len[pick];
    }
    if (script)
        CHECKF(tl == (int)strlen(script) && vx_gmatch_complete(cur), "%s: %d bytes of the script fed", what, tl);
    for (int i = 0; i < tl; i++)
        if ((unsigned char)text[i] < 0x20) text[i] = '~'; /* for the line below */
    printf("grammar: %s: %d tokens, %d full checks of %d tokens (%.1f%% allowed), text \"%.*s\"\n", what, step,
           checks, pc->n, 100.0 * (double)allowed / ((double)checks * pc->n + 1), tl > 60 ? 60 : tl, text);
out:
    free(perm);
    free(want);
    vx_gmatch_free(cur);
    vx_gfilter_free(f);
    vx_grammar_free(g);
}

/* The token whose piece is the longest prefix of s (-1: none). */
static vx_token longest_piece(const pieces *pc, const char *s, int n) {
    vx_token best = -1;
    for (vx_token t = 0; t < pc->n; t++)
        if (pc->len[t] > 0 && pc->len[t] <= n && !memcmp(pc->piece[t], s, (size_t)pc->len[t]) &&
            (best < 0 || pc->len[t] > pc->len[best]))
            best = t;
    return best;
}

static void test_yes_no(const pieces *pc, const vx_gvocab *gv, const char *name) {
    vx_grammar *g = parse_ok("root ::= \"yes\" | \"no\"");
    vx_gfilter *f = g ? vx_gfilter_new(g, gv) : NULL;
    CHECK(f != NULL);
    vx_token eog = -1;
    for (vx_token t = 0; t < pc->n && eog < 0; t++)
        if (pc->eog[t]) eog = t;
    if (f) {
        CHECK(!vx_gfilter_done(f) && (eog < 0 || !vx_gfilter_allows(f, eog)));
        const vx_token n = longest_piece(pc, "no", 2), s = longest_piece(pc, "s", 1);
        CHECK(n >= 0 && vx_gfilter_allows(f, n) && s >= 0 && !vx_gfilter_allows(f, s) && !vx_gfilter_feed(f, s));
        int at = 0, fedn = 0;
        while (at < 3) {
            const vx_token t = longest_piece(pc, "yes" + at, 3 - at);
            CHECKF(t >= 0 && !vx_gfilter_done(f) && vx_gfilter_feed(f, t), "%s: \"yes\" at %d", name, at);
            if (t < 0) break;
            at += pc->len[t], fedn++;
            if (at < 3) CHECK(!vx_gfilter_feed(f, n));
        }
        CHECKF(at == 3 && vx_gfilter_done(f), "%s: done after \"yes\" in %d tokens", name, fedn);
        CHECK(eog < 0 || vx_gfilter_allows(f, eog));
        CHECK(!vx_gfilter_allows(f, s) && !vx_gfilter_allows(f, n));
        int any = 0;
        for (vx_token t = 0; t < pc->n; t++) any += pc->len[t] > 0 && vx_gfilter_allows(f, t);
        CHECKF(any == 0, "%s: %d tokens with text allowed after \"yes\"", name, any);
    }
    vx_gfilter_free(f);
    /* "a"+: complete but not done; the end allowed */
    vx_grammar *g2 = parse_ok("root ::= \"a\"+");
    f = g2 ? vx_gfilter_new(g2, gv) : NULL;
    const vx_token a = longest_piece(pc, "a", 1);
    if (f && a >= 0) {
        CHECK(vx_gfilter_feed(f, a) && !vx_gfilter_done(f) && (eog < 0 || vx_gfilter_allows(f, eog)));
        CHECK(vx_gfilter_allows(f, a));
    }
    vx_gfilter_free(f);
    vx_grammar_free(g2);
    vx_grammar_free(g);
}

static void test_filter_vocab(const char *name, int steps, int every, int script_every) {
    char rel[256], err[VX_ERRMSG_MAX];
    snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf", name);
    vx_gguf *gg = NULL;
    vx_vocab *v = NULL;
    CHECKF(vx_gguf_open(vx_test_fixture_path(rel), &gg, err, sizeof err) == VX_OK, "%s: %s", rel, err);
    if (gg) CHECKF(vx_vocab_load(gg, &v, err, sizeof err) == VX_OK, "%s: %s", rel, err);
    vx_gguf_close(gg);
    if (!v) return;
    pieces pc;
    memset(&pc, 0, sizeof pc);
    vx_gvocab *gv = vx_gvocab_new(v);
    CHECK(gv != NULL);
    if (gv && pieces_load(&pc, v)) {
        char what[128];
        snprintf(what, sizeof what, "%s json", name);
        filter_run(&pc, gv, JSON_G, what, steps, every, 0x1234567ull, NULL);
        /* the same rules, an object at the top, ws at most one space */
        char obj[sizeof JSON_G];
        memcpy(obj, JSON_G, sizeof JSON_G);
        char *r = strstr(obj, "root    ::= ws value ws");
        if (r) memcpy(r, "root    ::= object     ", 23);
        char *w = strstr(obj, "ws      ::= [ \\t\\n\\r]*"); /* and at most one space for ws */
        if (w) memcpy(w + 12, "\" \"?      ", 10);
        snprintf(what, sizeof what, "%s json object", name);
        filter_run(&pc, gv, obj, what, steps / 2, every, 0xabcdefull, NULL);
        static const char doc[] = "{\"a\": [1, -2.5e3, \"x\\u00e9 \xC3\xA9\"], \"b\": {\"c\": null}, \"d\": true}";
        snprintf(what, sizeof what, "%s json object, scripted", name);
        filter_run(&pc, gv, obj, what, 1 << 20, script_every, 1, doc);
        snprintf(what, sizeof what, "%s digits", name);
        filter_run(&pc, gv, "root ::= [0-9]+ \".\"", what, steps, every, 0x777ull, NULL);
        snprintf(what, sizeof what, "%s greek", name);
        filter_run(&pc, gv, "root ::= ([α-ω] | \" \" | [\\u4e00-\\u9fff])+ \"!\"", what, steps / 2, every, 0x99ull, NULL);
        test_yes_no(&pc, gv, name);
    }
    pieces_free(&pc);
    vx_gvocab_free(gv);
    vx_vocab_free(v);
}

/* Bounds: a grammar whose parses double with each byte (distinct stacks,
 * so deduplication cannot help) is cut off at 4096 parses; the filter then
 * says so (vx_gfilter_limited) rather than passing a short mask off as the
 * grammar's. x++++ is one repetition, not nested ones. */
static void test_bounds(void) {
    char err[VX_ERRMSG_MAX];
    vx_gguf *gg = NULL;
    vx_vocab *v = NULL;
    CHECKF(vx_gguf_open(vx_test_fixture_path("tokenizer/ggml-vocab-llama-spm.gguf"), &gg, err, sizeof err) == VX_OK,
           "%s", err);
    if (gg) CHECKF(vx_vocab_load(gg, &v, err, sizeof err) == VX_OK, "%s", err);
    vx_gguf_close(gg);
    vx_token a = -1;
    char piece[64];
    for (vx_token t = 0; v && t < vx_vocab_n_tokens(v) && a < 0; t++)
        if (vx_token_to_piece(v, t, piece, sizeof piece, false) == 1 && piece[0] == 'a') a = t;
    vx_gvocab *gv = v ? vx_gvocab_new(v) : NULL;
    vx_grammar *g = parse_ok("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"d\"");
    vx_gfilter *f = gv && g ? vx_gfilter_new(g, gv) : NULL;
    CHECK(a >= 0 && f);
    int fed = 0;
    while (f && fed < 40 && vx_gfilter_allows(f, a) && vx_gfilter_feed(f, a)) fed++;
    CHECKF(f && fed >= 8 && fed < 40 && vx_gfilter_limited(f), "fed %d 'a' tokens, limited %d", fed,
           f ? vx_gfilter_limited(f) : -1);
    vx_gfilter_free(f);
    vx_grammar_free(g);
    char text[200] = "root ::= \"a\"";
    for (int i = 0; i < 150; i++) strcat(text, "+");
    g = parse_ok(text);
    vx_gmatch *m = g ? vx_gmatch_new(g) : NULL;
    fed = 0;
    while (m && fed < 3000 && vx_gmatch_feed(m, "a", 1)) fed++;
    CHECKF(fed == 3000 && vx_gmatch_complete(m), "\"a\"+++...: %d bytes", fed);
    vx_gmatch_free(m);
    vx_grammar_free(g);
    vx_gvocab_free(gv);
    vx_vocab_free(v);
}

int main(void) {
    test_bounds();
    test_parse_accepted();
    test_parse_refused();
    test_tables();
    test_states();
    test_ambiguity();
    const bool san = vx_test_sanitized();
    test_reference(san ? 5 : 7);
    test_filter_vocab("llama-spm", 20, san ? 20 : 5, san ? 40 : 6);
    test_filter_vocab("llama-bpe", 12, san ? 12 : 6, san ? 40 : 17);
    return vx_test_finish("test_grammar");
}
