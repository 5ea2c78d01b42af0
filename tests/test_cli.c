/*
 * test_cli.c - the `vx` command as users and outside checks drive it:
 * `vx logits` output against the ref64 fixture, `vx tokenize --ids` against
 * the tokenizer fixtures, `vx info`, `vx run` (greedy output matches the
 * library's greedy ids), `vx bench` (llama-bench's jsonl keys, one line
 * per test, or one JSON array with -o json; batched tg with -np), and
 * clean failures (exit code, message) on bad files and options. The
 * binary is $BUILD/vx (default build/vx).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char vx[512];

/* Runs a shell command, captures stdout+stderr into out; returns exit code. */
static int run(const char *cmd, char *out, size_t size) {
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_logits(void) {
    char cmd[4096], out[65536];
    const char *model = "models/llama/llama-F32.gguf";
    char mpath[1024];
    snprintf(mpath, sizeof mpath, "%s", vx_test_fixture_path(model));
    char *ids = vx_test_read_file(vx_test_fixture_path("models/prompt.json"), NULL);
    CHECK(ids != NULL);
    if (!ids) return;
    char *lb = strchr(ids, '['), *rb = strchr(ids, ']');
    CHECK(lb && rb);
    if (!lb || !rb) { free(ids); return; }
    *rb = 0;
    for (char *q = lb + 1; *q; q++)
        if (*q == ' ') *q = ',';
    for (int mode = 0; mode < 2; mode++) {
        snprintf(cmd, sizeof cmd, "%s logits -m %s --tokens '%s' -o /tmp/vx_test_cli.f32 %s", vx, mpath,
                 lb + 1, mode ? "--decode" : "");
        int rc = run(cmd, out, sizeof out);
        CHECKF(rc == 0, "vx logits failed (%d): %s", rc, out);
        size_t sz = 0, rsz = 0;
        float *got = (float *)(void *)vx_test_read_file("/tmp/vx_test_cli.f32", &sz);
        float *ref = (float *)(void *)vx_test_read_file(vx_test_fixture_path("models/llama/llama-F32.ref64.f32"), &rsz);
        CHECKF(got && ref && sz == rsz && sz == 48 * 512 * 4, "logits file size %zu, expected %zu", sz, rsz);
        if (got && ref && sz == rsz) {
            double se = 0, sr = 0;
            for (size_t i = 0; i < sz / 4; i++) {
                se += (double)(got[i] - ref[i]) * (got[i] - ref[i]);
                sr += (double)ref[i] * ref[i];
            }
            CHECKF(sqrt(se / sr) < 1e-5, "vx logits%s rel_rmse %.3g", mode ? " --decode" : "", sqrt(se / sr));
        }
        free(got);
        free(ref);
    }
    free(ids);
    remove("/tmp/vx_test_cli.f32");
}

static void test_tokenize(void) {
    char cmd[4096], out[65536];
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s --ids -p 'Hello world'", vx,
             vx_test_fixture_path("tokenizer/ggml-vocab-llama-spm.gguf"));
    int rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0, "vx tokenize: %s", out);
    /* SentencePiece Llama: BOS, "▁Hello", "▁world" */
    CHECKF(strcmp(out, "[1, 15043, 3186]\n") == 0, "vx tokenize --ids printed '%s'", out);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s --ids --no-bos -p 'Hello world'", vx,
             vx_test_fixture_path("tokenizer/ggml-vocab-llama-spm.gguf"));
    run(cmd, out, sizeof out);
    CHECKF(strcmp(out, "[15043, 3186]\n") == 0, "vx tokenize --no-bos printed '%s'", out);
}

static void test_info_and_run(void) {
    char cmd[4096], out[65536];
    snprintf(cmd, sizeof cmd, "%s info %s", vx, vx_test_fixture_path("models/qwen3/qwen3-Q4_K_M.gguf"));
    int rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0 && strstr(out, "qwen3") && strstr(out, "Q4_K"), "vx info: %s", out);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p '' -n 16 --temp 0 --no-display-prompt -t 1 --kv-type f32", vx,
             vx_test_fixture_path("models/stories260K/stories260K.gguf"));
    rc = run(cmd, out, sizeof out);
    /* greedy from BOS: ids 461 461 401 401 401 461 (llama2.c) are " story," x2, "hen" x3, " story," */
    CHECKF(rc == 0 && strncmp(out, " story, story,henhenhen story,", 30) == 0, "vx run printed: %.200s", out);
    CHECKF(strstr(out, "generation:") && strstr(out, "t/s"), "vx run prints no speed: %.300s", out);
    /* llama.cpp habits: -ngl taken (and said to do nothing), top-k -1 is
     * off, and of -f and -p the last one given counts (here -p '') */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -ngl 99 --jinja -fa on --mlock -cb --top-k -1 -f /nonexistent -p '' -n 16 --temp 0 "
             "--no-display-prompt -t 1 -fa --kv-type f32",
             vx, vx_test_fixture_path("models/stories260K/stories260K.gguf"));
    rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0 && strstr(out, "-ngl ignored") && strstr(out, "--jinja ignored") && strstr(out, "-fa ignored") &&
               strstr(out, "--mlock ignored") && strstr(out, " story, story,henhenhen story,"),
           "vx run -ngl 99 --jinja -fa on --top-k -1: %.300s", out);
    /* -md with sampling: the same text for a seed as without the draft,
     * also up to a full context (-c 23: 9 prompt tokens, 15 generated,
     * the last ones with no room for a draft) */
    static const char *const lim[2] = {"-n 64", "-c 23 -n -1"};
    char errf[64];
    snprintf(errf, sizeof errf, "/tmp/vx_test_cli_md.%d.err", (int)getpid());
    for (int l = 0; l < 2; l++) {
        char plain[8192] = "", spec[8192] = "";
        for (int i = 0; i < 2; i++) {
            /* the text, then the count of generated tokens from stderr */
            snprintf(cmd, sizeof cmd,
                     "(%s run -m %s -p 'Once upon a time' %s --temp 0.9 --seed 11 --repeat-penalty 1.2 -t 2 "
                     "--batch-invariant --no-display-prompt %s%s 2>%s && grep -o 'generation: *[0-9]*' %s)",
                     vx, vx_test_fixture_path("models/stories260K/stories260K.gguf"), lim[l], i ? "--draft 4 -md " : "",
                     i ? vx_test_fixture_path("models/stories260K/stories260K.gguf") : "", errf, errf);
            rc = run(cmd, i ? spec : plain, sizeof plain);
            CHECKF(rc == 0, "vx run %s%s with --temp 0.9: rc %d, %.300s", lim[l], i ? " -md" : "", rc, i ? spec : plain);
        }
        CHECKF(strlen(plain) > 40 && strcmp(plain, spec) == 0,
               "vx run %s -md --temp 0.9 --seed 11 printed '%.200s', without -md '%.200s'", lim[l], spec, plain);
        CHECKF(l == 0 || strstr(plain, "generation:    15\n"), "vx run -c 23 -n -1: '%.100s' (want 15 tokens)", plain);
    }
    remove(errf);
}

/* vx run --grammar / --grammar-file (llama-cli's options): the output is
 * a sentence of the grammar, and the run stops where it can only end; a
 * wrong grammar is an error naming its line and column */
static void test_grammar(void) {
    char cmd[4096], out[65536];
    const char *model = vx_test_fixture_path("models/stories260K/stories260K.gguf");
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Once upon a time' -n 200 -s 7 --no-display-prompt -t 1 --grammar "
             "'root ::= \"Answer: \" (\"yes\" | \"no\") \".\"'", vx, model);
    int rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0 && (!strncmp(out, "Answer: yes.\n", 13) || !strncmp(out, "Answer: no.\n", 12)) &&
               strstr(out, "[stopped: the grammar's text is complete]"),
           "vx run --grammar: rc %d, %.300s", rc, out);
    FILE *f = fopen("/tmp/vx_test_cli.gbnf", "w");
    CHECK(f != NULL);
    if (f) {
        fputs("# digits, then a full stop\nroot ::= [1-9] [0-9]{0,5}\n  \".\"\n", f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Once upon a time' -n 200 --no-display-prompt -t 1 --grammar-file "
             "/tmp/vx_test_cli.gbnf", vx, model);
    rc = run(cmd, out, sizeof out);
    size_t d = strspn(out, "0123456789");
    CHECKF(rc != 0 && strstr(out, "vx_test_cli.gbnf: line 3, column 3: expected a rule name"),
           "a rule's second line without '|' or parentheses: rc %d, %.300s", rc, out);
    f = fopen("/tmp/vx_test_cli.gbnf", "w");
    if (f) {
        fputs("# digits, then a full stop\nroot ::= [1-9] [0-9]{0,5} (\n  \".\")\n", f);
        fclose(f);
    }
    rc = run(cmd, out, sizeof out);
    d = strspn(out, "0123456789");
    CHECKF(rc == 0 && d >= 1 && d <= 6 && out[0] != '0' && out[d] == '.' && out[d + 1] == '\n',
           "vx run --grammar-file: rc %d, %.300s", rc, out);
    remove("/tmp/vx_test_cli.gbnf");
}

/* vx embed: texts split at newlines, unit vectors of n_embd values, one
 * text twice gives the same vector (cosine 1.00), JSON as OpenAI's list;
 * bad options are refused */
static void test_embed(void) {
    char cmd[4096], out[65536];
    const char *m = vx_test_fixture_path("models/qwen3/qwen3-Q8_0.gguf");
    char mp[1024];
    snprintf(mp, sizeof mp, "%s", m);
    snprintf(cmd, sizeof cmd, "%s embed -m %s -p \"$(printf 'the cat\\nsat on\\nthe cat')\" -t 1", vx, mp);
    int rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0 && strstr(out, "pooling: last") && strstr(out, "embedding 2: ") && strstr(out, "cosine similarity"),
           "vx embed: %.300s", out);
    const char *mat = strstr(out, "cosine similarity matrix:");
    float c[9] = {0};
    CHECK(mat && sscanf(mat + 26, "%f %f %f %f %f %f %f %f %f", &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7],
                        &c[8]) == 9);
    CHECKF(c[0] == 1.0f && c[2] == 1.0f && c[4] == 1.0f && c[1] < 0.99f, "matrix %.2f %.2f %.2f %.2f", c[0], c[1], c[2],
           c[4]);
    snprintf(cmd, sizeof cmd, "%s embed -m %s -p 'the cat' --pooling mean --embd-output-format json -t 1 2>/dev/null", vx,
             mp);
    rc = run(cmd, out, sizeof out);
    cJSON *root = rc == 0 ? cJSON_Parse(strchr(out, '{')) : NULL;
    const cJSON *e = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "data"), 0), "embedding");
    double n2 = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, e) n2 += x->valuedouble * x->valuedouble;
    CHECKF(cJSON_GetArraySize(e) == 256 && fabs(n2 - 1.0) < 1e-5, "vx embed json: %d values, norm^2 %.7f: %.200s",
           cJSON_GetArraySize(e), n2, out);
    cJSON_Delete(root);
    snprintf(cmd, sizeof cmd, "%s embed -m %s -p x --pooling rank", vx, mp);
    CHECK(run(cmd, out, sizeof out) == 2 && strstr(out, "--pooling takes mean, cls or last"));
    snprintf(cmd, sizeof cmd, "%s embed -m %s -p x --pooling cls", vx, mp);
    CHECK(run(cmd, out, sizeof out) == 2 && strstr(out, "every text would get the same vector"));
    snprintf(cmd, sizeof cmd, "%s embed -m %s -p \"$(printf 'w%%.0s ' $(seq 300))\" -c 64", vx, mp);
    CHECKF(run(cmd, out, sizeof out) == 1 && strstr(out, "the context holds 64"), "vx embed -c 64: %.300s", out);
    /* an embedding model (encoder): embed pools by cls as asked, run and chat refuse */
    const char *enc = "/tmp/vx_test_cli_bert.gguf";
    CHECK(vx_test_synth("bert-tiny", "F32", enc));
    snprintf(cmd, sizeof cmd, "%s embed -m %s -p 'the cat' --pooling cls --embd-output-format array -t 1 2>&1", vx, enc);
    CHECKF(run(cmd, out, sizeof out) == 0 && strstr(out, "pooling: cls") && strstr(out, "[["), "vx embed on bert: %.300s",
           out);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 4 2>&1", vx, enc);
    CHECKF(run(cmd, out, sizeof out) == 1 && strstr(out, "embedding model"), "vx run on bert: %.300s", out);
    snprintf(cmd, sizeof cmd, "%s chat -m %s < /dev/null 2>&1", vx, enc);
    CHECKF(run(cmd, out, sizeof out) == 1 && strstr(out, "embedding model"), "vx chat on bert: %.300s", out);
    remove(enc);
}

static void test_chat(void) {
    char cmd[4096], out[65536];
    /* two turns through the chatml fallback; the second reuses the cache */
    snprintf(cmd, sizeof cmd, "printf 'hello\\nagain\\n' | %s chat -m %s -n 4 --temp 0 -t 1 --chat-template chatml", vx,
             vx_test_fixture_path("models/qwen2/qwen2-Q8_0.gguf"));
    int rc = run(cmd, out, sizeof out);
    int lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    CHECKF(rc == 0 && lines == 2, "vx chat: rc %d, %d lines: '%s'", rc, lines, out);
    /* a line longer than any fixed buffer is one message: the count is of
     * all of it (70000 'a' and the template) */
    snprintf(cmd, sizeof cmd,
             "{ head -c 70000 /dev/zero | tr '\\0' a; echo; echo hi; } | %s chat -m %s -n 4 --temp 0 -t 1 "
             "--chat-template chatml -c 0 2>&1; echo \"rc=$?\"",
             vx, vx_test_fixture_path("models/stories260K/stories260K.gguf"));
    rc = run(cmd, out, sizeof out);
    const char *q = strstr(out, "the conversation (");
    int ntok = 0;
    CHECKF(q && sscanf(q, "the conversation (%d", &ntok) == 1 && ntok > 70000, "long line: '%.300s'", out);
    /* ... and dropped: the session goes on to the next line's reply */
    CHECKF(strstr(out, "is dropped") && strstr(out, "rc=0") && strchr(strstr(out, "is dropped\n") + 11, '\n'),
           "after the dropped message: '%.300s'", out);
    /* Ctrl-C at the prompt ends the session cleanly (llama-cli does too):
     * stdin a fifo the shell holds open, so vx waits at the prompt; env:
     * a background job of a shell without job control starts with SIGINT
     * ignored, which vx chat keeps to */
    snprintf(cmd, sizeof cmd,
             "f=/tmp/vx_test_cli_fifo.$$; rm -f $f; mkfifo $f; env --default-signal=INT %s chat -m %s -t 1 --chat-template chatml < $f & "
             "p=$!; exec 3>$f; sleep 1; kill -INT $p; wait $p; r=$?; exec 3>&-; rm -f $f; echo \"rc=$r\"",
             vx, vx_test_fixture_path("models/stories260K/stories260K.gguf"));
    run(cmd, out, sizeof out);
    CHECKF(strstr(out, "rc=0") != NULL, "SIGINT at the prompt: '%.300s'", out);
    snprintf(cmd, sizeof cmd, "echo hi | %s chat -m %s --chat-template /nonexistent.jinja", vx,
             vx_test_fixture_path("models/qwen2/qwen2-Q8_0.gguf"));
    rc = run(cmd, out, sizeof out);
    CHECKF(rc != 0 && strstr(out, "neither a built-in chat template nor a readable file"), "bad template: rc %d '%s'", rc, out);
}

static void test_errors(void) {
    char cmd[4096], out[65536];
    FILE *f = fopen("/tmp/vx_test_cli_bad.gguf", "wb");
    CHECK(f != NULL);
    if (f) {
        fwrite("GGUF\x03\0\0\0\xff\xff", 1, 10, f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "%s run -m /tmp/vx_test_cli_bad.gguf -p hi", vx);
    int rc = run(cmd, out, sizeof out);
    CHECKF(rc != 0 && strstr(out, "error:") && strstr(out, "vx_test_cli_bad.gguf"), "truncated file: rc %d, '%s'", rc, out);
    /* a directory given as a text file is an error, not empty text */
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -f /tmp", vx, vx_test_fixture_path("models/stories260K/stories260K.gguf"));
    rc = run(cmd, out, sizeof out);
    CHECKF(rc != 0 && strstr(out, "Is a directory"), "tokenize -f /tmp: rc %d, '%s'", rc, out);
    snprintf(cmd, sizeof cmd, "%s info /nonexistent/model.gguf", vx);
    rc = run(cmd, out, sizeof out);
    CHECKF(rc != 0 && strstr(out, "No such file"), "missing file: rc %d, '%s'", rc, out);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi --temp abc", vx, vx_test_fixture_path("models/stories260K/stories260K.gguf"));
    rc = run(cmd, out, sizeof out);
    CHECKF(rc == 2 && strstr(out, "--temp"), "bad option value: rc %d, '%s'", rc, out);
    snprintf(cmd, sizeof cmd, "%s frobnicate", vx);
    rc = run(cmd, out, sizeof out);
    CHECKF(rc == 2 && strstr(out, "unknown command"), "unknown command: rc %d", rc);
    snprintf(cmd, sizeof cmd, "%s run --help", vx);
    rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0 && strstr(out, "--top-p"), "run --help: rc %d", rc);
    remove("/tmp/vx_test_cli_bad.gguf");
}

/* A vocabulary without a "\u2581" piece: every space becomes 3 byte
 * tokens, more tokens than the text has bytes (the CLI must grow its
 * buffer, not fail). The synthetic "tiny" preset has such a vocabulary. */
static void test_tokenize_grows(void) {
    char cmd[2048], out[65536];
    const char *m = "/tmp/vx_test_cli_tiny.gguf";
    snprintf(cmd, sizeof cmd, "%s synth --preset tiny --type F32 -o %s", vx, m);
    int rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0, "vx synth failed (%d): %s", rc, out);
    if (rc) return;
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p 'a b c d e f g h' --ids", vx, m);
    rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0, "vx tokenize with byte-fallback spaces failed (%d): %s", rc, out);
    /* BOS + 8 letters + 7 spaces of 3 byte tokens + the leading space */
    int commas = 0;
    for (const char *p = out; *p; p++) commas += *p == ',';
    CHECKF(commas + 1 == 1 + 8 + 3 * 8, "expected %d ids, got: %s", 1 + 8 + 3 * 8, out);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'a b c d e f g h' -n 2 --temp 0", vx, m);
    rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0, "vx run with byte-fallback spaces failed (%d): %s", rc, out);
    remove(m);
}

/* vx bench --json: one object per test (pp8, tg4, tg4 x2) with the keys
 * llama-bench's jsonl has, positive speeds; the table form names the
 * tests. -n 4 -np 2 needs a KV block per sequence (4 positions each). */
static void test_bench(void) {
    char cmd[4096], out[65536];
    const char *model = vx_test_fixture_path("models/stories260K/stories260K.gguf");
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 8 -n 4 -np 1,2 -r 2 -t 1 --no-limits --json", vx, model);
    int rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0, "vx bench --json exited %d: %.500s", rc, out);
    int n = 0, seen[3] = {0, 0, 0};
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        n++;
        const char *keys[] = {"model_filename", "n_threads", "n_prompt", "n_gen", "avg_ts", "stddev_ts", "samples_ts"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            CHECKF(cJSON_GetObjectItem(j, keys[k]) != NULL, "vx bench --json: no %s in %.300s", keys[k], line);
        const cJSON *np = cJSON_GetObjectItem(j, "n_prompt"), *ng = cJSON_GetObjectItem(j, "n_gen");
        const cJSON *par = cJSON_GetObjectItem(j, "n_parallel"), *ts = cJSON_GetObjectItem(j, "avg_ts");
        const cJSON *nt = cJSON_GetObjectItem(j, "n_threads"), *sm = cJSON_GetObjectItem(j, "samples_ts");
        CHECKF(cJSON_IsNumber(ts) && ts->valuedouble > 0, "vx bench: avg_ts %.300s", line);
        CHECKF(cJSON_IsNumber(nt) && nt->valueint == 1, "vx bench: n_threads %.300s", line);
        CHECKF(cJSON_IsArray(sm) && cJSON_GetArraySize(sm) == 2, "vx bench: samples_ts (-r 2) %.300s", line);
        if (cJSON_IsNumber(np) && cJSON_IsNumber(ng)) {
            const int p = np->valueint, g = ng->valueint, q = cJSON_IsNumber(par) ? par->valueint : 1;
            if (p == 8 && g == 0 && q == 1) seen[0]++;
            else if (p == 0 && g == 4 && q == 1) seen[1]++;
            else if (p == 0 && g == 4 && q == 2) seen[2]++;
        }
        cJSON_Delete(j);
    }
    CHECKF(n == 3 && seen[0] == 1 && seen[1] == 1 && seen[2] == 1,
           "vx bench --json: %d objects, pp8 %d tg4 %d tg4x2 %d", n, seen[0], seen[1], seen[2]);
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 8 -n 4 -np 2 -r 1 -t 1 --no-limits", vx, model);
    rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0 && strstr(out, "pp8") && strstr(out, "tg4 x2") && strstr(out, "t/s"), "vx bench table: %.500s", out);

    /* -o json: the same objects as one JSON array (llama-bench's -o json),
     * the file name a JSON string */
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 8 -n 4 -r 1 -t 1 --no-limits -o json 2>/dev/null", vx, model);
    rc = run(cmd, out, sizeof out);
    cJSON *arr = rc == 0 ? cJSON_Parse(out) : NULL;
    CHECKF(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 2, "vx bench -o json exited %d: %.500s", rc, out);
    for (int i = 0; i < cJSON_GetArraySize(arr); i++) {
        const cJSON *o = cJSON_GetArrayItem(arr, i), *f = cJSON_GetObjectItem(o, "model_filename");
        const cJSON *ts = cJSON_GetObjectItem(o, "avg_ts");
        CHECKF(cJSON_IsString(f) && !strcmp(f->valuestring, model) && cJSON_IsNumber(ts) && ts->valuedouble > 0,
               "vx bench -o json: object %d", i);
    }
    cJSON_Delete(arr);

    /* --profile at depth: the profile covers the timed forwards only, not
     * the 256-token fills before them, so the time it reports inside
     * vx_decode cannot exceed the runs' timed seconds (4 / samples_ts each) */
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 0 -n 4 -d 256 -r 3 -t 1 --no-limits --json --profile", vx, model);
    rc = run(cmd, out, sizeof out);
    CHECKF(rc == 0, "vx bench --profile -d exited %d: %.500s", rc, out);
    int nprof = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        const cJSON *pn = cJSON_GetObjectItem(j, "perf_ns_decode"), *sm = cJSON_GetObjectItem(j, "samples_ts");
        double timed_ns = 0;
        for (int r = 0; cJSON_IsArray(sm) && r < cJSON_GetArraySize(sm); r++)
            timed_ns += 4e9 / cJSON_GetArrayItem(sm, r)->valuedouble;
        CHECKF(cJSON_IsNumber(pn) && pn->valuedouble > 0 && pn->valuedouble <= timed_ns * 1.001 + 1e4,
               "vx bench --profile -d 256: perf_ns_decode %.0f against %.0f ns timed: %.300s",
               cJSON_IsNumber(pn) ? pn->valuedouble : -1.0, timed_ns, line);
        nprof++;
        cJSON_Delete(j);
    }
    CHECKF(nprof == 1, "vx bench --profile -d 256: %d objects", nprof);
}

int main(void) {
    const char *b = getenv("BUILD");
    snprintf(vx, sizeof vx, "%s/vx", b && *b ? b : "build");
    test_logits();
    test_tokenize();
    test_tokenize_grows();
    test_info_and_run();
    test_bench();
    test_chat();
    test_embed();
    test_grammar();
    test_errors();
    return vx_test_finish("test_cli");
}
