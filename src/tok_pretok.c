/*
 * tok_pretok.c - BPE pre-tokenizers: the regex lists selected by
 * tokenizer.ggml.pre, compiled once with PCRE2, and the splitting of a text
 * fragment into words.
 *
 * Semantics follow llama.cpp's unicode_regex_split: the regexes of a list
 * are applied one after the other; each one splits every current piece
 * further, and the text between two matches (or before the first / after
 * the last) is kept as a piece of its own. A piece is the whole subject of
 * the next regex, so lookaheads and '$' stop at the piece boundary.
 *
 * Differences from llama.cpp kept on purpose: invalid UTF-8 is never
 * matched (PCRE2_MATCH_INVALID_UTF) and lands in the unmatched pieces with
 * its raw bytes, where llama.cpp substitutes U+FFFD. Unicode categories come
 * from PCRE2's tables instead of llama.cpp's, which may differ for a few
 * rare code points.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tok_internal.h"

/* ------------------------------------------------------------ regexes */

/* Regex texts as published with each pre-tokenizer, in llama.cpp's form
 * (e.g. the case-insensitive contractions spelled out, so that PCRE2's
 * caseless matching cannot turn U+017F into an 's'); tekken keeps its
 * original \p{Lu}... form, which PCRE2 supports. Non-ASCII characters are
 * written as \x{..}. "\s" and "\S" are rewritten at compile time, see
 * rewrite_pattern(). */
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_LLAMA3                                                                           \
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                          \
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* o200k (GPT-4o, gpt-oss, Llama 4): tekken's case-split words with the
 * contractions attached, digits in threes, punctuation runs with trailing
 * newlines or slashes */
#define RX_GPT4O_WORD(first, rest)                                                     \
    "[^\\r\\n\\p{L}\\p{N}]?" first rest RX_CONTRACTIONS "?"
#define RX_GPT4O                                                                              \
    RX_GPT4O_WORD("[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*", "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+")                 \
    "|" RX_GPT4O_WORD("[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+", "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*")             \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define RX_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"

enum {
    SET_DEFAULT,
    SET_LLAMA3,
    SET_DEEPSEEK_LLM,
    SET_DEEPSEEK3_LLM,
    SET_DEEPSEEK_CODER,
    SET_FALCON,
    SET_STARCODER,
    SET_GPT2,
    SET_QWEN2,
    SET_PORO,
    SET_VIKING,
    SET_TEKKEN,
    SET_CHAMELEON,
    SET_GPT4O,
    SET_COUNT
};

#define MAX_RX 6

static const char *const k_sets[SET_COUNT][MAX_RX + 1] = {
    [SET_DEFAULT] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL},
    [SET_LLAMA3] = {RX_LLAMA3, NULL},
    [SET_DEEPSEEK_LLM] =
        {"[\r\n]",
         "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
         "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
         "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-"
         "\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
         "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
         "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
         "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
         "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-"
         "\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-"
         "\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}"
         "\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-"
         "\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
         "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"
         "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
         "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
         "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
         "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
         "\\x{1E900}-\\x{1E943}]+",
         "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}"
         "\\x{3000}-\\x{3002}]+",
         "\\s+$", RX_CJK, "\\p{N}+", NULL},
    [SET_DEEPSEEK3_LLM] = {"\\p{N}{1,3}",
                           "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
                           "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
                           "|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*"
                           "|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
                           NULL},
    [SET_DEEPSEEK_CODER] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK, "\\p{N}", NULL},
    [SET_FALCON] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]", NULL},
    [SET_STARCODER] = {"\\p{N}", RX_GPT2, NULL},
    [SET_GPT2] = {RX_GPT2, NULL},
    [SET_QWEN2] = {RX_QWEN2, NULL},
    [SET_PORO] = {RX_PORO, NULL},
    [SET_VIKING] = {RX_PORO, "\\p{N}", NULL},
    [SET_TEKKEN] = {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}"
                    "\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
                    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
                    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
                    NULL},
    [SET_GPT4O] = {RX_GPT4O, NULL},
    [SET_CHAMELEON] = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                       "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2, NULL},
};

/* Names of tokenizer.ggml.pre and what they imply (llama.cpp's table). */
static const vx_pretok_info k_pre[] = {
    /* name              regex set          clean  ign.m  bos    no_bos */
    {"default", SET_DEFAULT, true, false, false, false},
    {"llama3", SET_LLAMA3, true, true, true, false},
    {"llama-v3", SET_LLAMA3, true, true, true, false},
    {"llama-bpe", SET_LLAMA3, true, true, true, false},
    {"falcon3", SET_LLAMA3, true, true, true, false},
    {"deepseek-llm", SET_DEEPSEEK_LLM, false, false, false, false},
    {"deepseek-coder", SET_DEEPSEEK_CODER, false, false, false, false},
    {"deepseek-v3", SET_DEEPSEEK3_LLM, false, false, false, false},
    {"falcon", SET_FALCON, true, false, false, false},
    {"mpt", SET_GPT2, true, false, false, false},
    {"starcoder", SET_STARCODER, true, false, false, false},
    {"gpt-2", SET_GPT2, true, false, false, false},
    {"phi-2", SET_GPT2, true, false, false, false},
    {"jina-es", SET_GPT2, true, false, false, false},
    {"jina-de", SET_GPT2, true, false, false, false},
    {"gigachat", SET_GPT2, true, false, false, false},
    {"jina-v1-en", SET_GPT2, true, false, false, false},
    {"jina-v2-es", SET_GPT2, true, false, false, false},
    {"jina-v2-de", SET_GPT2, true, false, false, false},
    {"jina-v2-code", SET_GPT2, true, false, false, false},
    {"roberta-bpe", SET_GPT2, true, false, false, false},
    {"refact", SET_STARCODER, true, false, false, false},
    {"command-r", SET_STARCODER, false, false, false, false},
    {"qwen2", SET_QWEN2, false, false, false, false},
    {"deepseek-r1-qwen", SET_QWEN2, false, false, false, false},
    {"stablelm2", SET_QWEN2, true, false, false, false},
    {"olmo", SET_GPT2, true, false, false, false},
    {"dbrx", SET_LLAMA3, true, false, false, false},
    {"smaug-bpe", SET_LLAMA3, true, false, false, false},
    {"poro-chat", SET_PORO, false, false, false, false},
    {"chatglm-bpe", SET_LLAMA3, true, false, false, true},
    {"viking", SET_VIKING, false, false, false, false},
    {"jais", SET_GPT2, true, false, false, false},
    {"tekken", SET_TEKKEN, false, true, true, false},
    {"smollm", SET_STARCODER, false, false, false, false},
    {"codeshell", SET_STARCODER, true, false, false, false},
    {"bloom", SET_PORO, true, false, false, false},
    {"gpt3-finnish", SET_PORO, true, false, false, false},
    {"exaone", SET_STARCODER, true, false, false, false},
    {"chameleon", SET_CHAMELEON, false, false, true, false},
    {"minerva-7b", SET_STARCODER, true, false, false, false},
    {"megrez", SET_QWEN2, true, false, false, false},
    {"gpt-4o", SET_GPT4O, false, false, false, false},
    {"llama4", SET_GPT4O, false, false, false, false},
};

const vx_pretok_info *vx_pretok_lookup(const char *name) {
    if (!name || !*name) return &k_pre[0];
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++)
        if (strcmp(k_pre[i].name, name) == 0) return &k_pre[i];
    return NULL;
}

/* ----------------------------------------------------------- compiling */

/* White_Space code points, as the reference tokenizers treat them. PCRE2's
 * \s misses U+0085, so "\s" is spelled out. */
#define WS_CLASS                                                                           \
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}" \
    "\\x{205F}\\x{3000}"

/* Replaces \s and \S by explicit classes (inside a class, \s expands in
 * place). Returns a malloc'd string or NULL (OOM, or \S inside a class). */
static char *rewrite_pattern(const char *p) {
    size_t n = strlen(p), ws = strlen(WS_CLASS);
    size_t cap = n * (ws + 4) + 1; /* generous: every char could be \s */
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t o = 0;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char e = p[i + 1];
            if (e == 's' || e == 'S') {
                if (in_class && e == 'S') {
                    free(out);
                    return NULL;
                }
                const char *pre = in_class ? "" : (e == 's' ? "[" : "[^");
                memcpy(out + o, pre, strlen(pre));
                o += strlen(pre);
                memcpy(out + o, WS_CLASS, ws);
                o += ws;
                if (!in_class) out[o++] = ']';
            } else {
                out[o++] = c;
                out[o++] = e;
            }
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            out[o++] = c;
            /* a ']' right after '[' or '[^' is a literal */
            if (i + 1 < n && p[i + 1] == '^') out[o++] = p[++i];
            if (i + 1 < n && p[i + 1] == ']') out[o++] = p[++i];
            continue;
        }
        if (c == ']' && in_class) in_class = false;
        out[o++] = c;
    }
    out[o] = 0;
    return out;
}

struct vx_pretok {
    int n_rx;
    pcre2_code *rx[MAX_RX];
    pcre2_match_context *mctx;
    uint32_t max_pairs; /* capture pairs the match data needs */
};

void vx_pretok_free(vx_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n_rx; i++) pcre2_code_free(p->rx[i]);
    pcre2_match_context_free(p->mctx);
    free(p);
}

vx_status vx_pretok_create(int set, vx_pretok **out, char *err, size_t err_size) {
    *out = NULL;
    if (set < 0 || set >= SET_COUNT)
        return vx_seterr(err, err_size, VX_EINTERNAL, "bad pre-tokenizer regex set %d", set);
    vx_pretok *p = calloc(1, sizeof *p);
    if (!p) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (pre-tokenizer)");
    p->mctx = pcre2_match_context_create(NULL);
    if (!p->mctx) {
        vx_pretok_free(p);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (pre-tokenizer)");
    }
    /* Bound the work of one match: on the limit the splitter falls back to
     * one-character pieces rather than spinning on hostile input. */
    pcre2_set_match_limit(p->mctx, 10000000);
    pcre2_set_heap_limit(p->mctx, 64 * 1024); /* KiB */
    p->max_pairs = 1;
    for (int i = 0; k_sets[set][i]; i++) {
        char *pat = rewrite_pattern(k_sets[set][i]);
        if (!pat) {
            vx_pretok_free(p);
            return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (pre-tokenizer regex)");
        }
        int ecode = 0;
        PCRE2_SIZE eoff = 0;
        pcre2_code *code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF |
                                             PCRE2_DOLLAR_ENDONLY,
                                         &ecode, &eoff, NULL);
        free(pat);
        if (!code) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ecode, msg, sizeof msg);
            vx_pretok_free(p);
            return vx_seterr(err, err_size, VX_EINTERNAL,
                             "pre-tokenizer regex %d of set %d does not compile at %zu: %s", i,
                             set, (size_t)eoff, (const char *)msg);
        }
        /* JIT is an optimization only: without it the interpreter runs. */
        (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        uint32_t caps = 0;
        pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &caps);
        if (caps + 1 > p->max_pairs) p->max_pairs = caps + 1;
        p->rx[p->n_rx++] = code;
    }
    *out = p;
    return VX_OK;
}

/* ----------------------------------------------------------- splitting */

/* Finds the next match of rx in s[0..n) at or after pos. Returns 1 with
 * [*ms, *me) on a match, 0 when there is none, -1 when PCRE2 gave up
 * (limits); the caller then takes one character by itself. */
static int next_match(const vx_pretok *p, const pcre2_code *rx, pcre2_match_data *md,
                      const char *s, size_t n, size_t pos, size_t *ms, size_t *me) {
    int rc = pcre2_match(rx, (PCRE2_SPTR)s, n, pos, 0, md, p->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(rx, (PCRE2_SPTR)s, n, pos, PCRE2_NO_JIT, md, p->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) return -1;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (ov[0] < pos || ov[1] < ov[0] || ov[1] > n) return -1;
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

static size_t char_len_at(const char *s, size_t n, size_t pos) {
    return vx_utf8_seq_len(s + pos, n - pos);
}

/* Splits one piece base[0..n) (at absolute offset off) with one regex. */
static bool split_piece(const vx_pretok *p, const pcre2_code *rx, pcre2_match_data *md,
                        const char *base, size_t off, size_t n, vx_spanvec *out) {
    size_t start = 0, pos = 0;
    while (pos < n) {
        size_t ms, me;
        int r = next_match(p, rx, md, base, n, pos, &ms, &me);
        if (r == 0) break;
        if (r < 0) { /* give up on this character: a piece of its own */
            ms = pos;
            me = pos + char_len_at(base, n, pos);
        }
        if (me == ms) { /* empty match: leave the character in the gap */
            pos = ms + char_len_at(base, n, ms);
            continue;
        }
        if (ms > start && !vx_spanvec_push(out, off + start, ms - start)) return false;
        if (!vx_spanvec_push(out, off + ms, me - ms)) return false;
        start = pos = me;
    }
    if (start < n && !vx_spanvec_push(out, off + start, n - start)) return false;
    return true;
}

bool vx_pretok_split(const vx_pretok *p, const char *text, size_t len, vx_spanvec *out) {
    if (len == 0) return true;
    pcre2_match_data *md = pcre2_match_data_create(p->max_pairs, NULL);
    if (!md) return false;
    vx_spanvec a = {0}, b = {0};
    bool ok = vx_spanvec_push(&a, 0, len);
    for (int r = 0; ok && r < p->n_rx; r++) {
        b.n = 0;
        for (size_t i = 0; ok && i < a.n; i++)
            ok = split_piece(p, p->rx[r], md, text + a.v[i].off, a.v[i].off, a.v[i].len, &b);
        vx_spanvec t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; ok && i < a.n; i++) ok = vx_spanvec_push(out, a.v[i].off, a.v[i].len);
    vx_spanvec_free(&a);
    vx_spanvec_free(&b);
    pcre2_match_data_free(md);
    return ok;
}
