/* cmd_info.c - `vx info`, `vx tokenize` and `vx logits`: inspection tools. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int vx_cmd_info(int argc, char **argv) {
    const char *path = NULL;
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: vx info MODEL.gguf\n"
                   "Prints the architecture, hyperparameters, tensor types and sizes.\n");
            return 0;
        } else if (!strcmp(o, "-m") || !strcmp(o, "--model")) {
            path = cli_value(&a);
        } else if (o[0] != '-' && !path) {
            path = o;
        } else {
            fprintf(stderr, "error: unknown option '%s'\n", o);
            return 2;
        }
    }
    if (a.error) return 2;
    vx_model_params mp = vx_model_default_params();
    vx_model *m = cli_load_model_ex(path, &mp);
    if (!m) return 1;
    int32_t n = vx_model_describe(m, NULL, 0);
    char *buf = malloc((size_t)n + 1);
    if (!buf) { vx_model_free(m); return 1; }
    vx_model_describe(m, buf, (size_t)n + 1);
    fputs(buf, stdout);
    const vx_vocab *v = vx_model_get_vocab(m);
    char tm[64] = "";
    vx_model_meta_str(m, "tokenizer.ggml.model", tm, sizeof tm);
    char pre[64] = "";
    vx_model_meta_str(m, "tokenizer.ggml.pre", pre, sizeof pre);
    printf("tokenizer       %s%s%s, %d tokens, bos %d, eos %d\n", tm, pre[0] ? "/" : "", pre,
           vx_vocab_n_tokens(v), vx_vocab_bos(v), vx_vocab_eos(v));
    printf("kernels         %s (CPU: %s)\n", vx_kernels_name(), vx_cpu_features());
    uint64_t pbytes = 0;
    const int32_t npk = vx_model_n_repacked(m, &pbytes);
    if (npk > 0)
        printf("repacking       %d weights at load, %.1f MiB: quantized ones into 8-row interleaved layouts "
               "(*_R8), F16/BF16 ones copied as they are into huge pages (--no-repack: file layout)\n",
               npk, (double)pbytes / (1 << 20));
    else
        printf("repacking       none (no weights of a type with a packed layout and a multiple of 8 rows, no mapped "
               "F16/BF16 weights, or generic kernels; the grid i-quants IQ1_S..IQ3_S run from the file's layout)\n");
    free(buf);
    vx_model_free(m);
    return 0;
}

int vx_cmd_tokenize(int argc, char **argv) {
    const char *path = NULL, *text = NULL, *file = NULL;
    bool bos = true, special = false, ids = false;
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: vx tokenize -m MODEL.gguf [--no-bos] [--parse-special] [--ids] "
                   "(-p TEXT | -f FILE)\n"
                   "  --no-bos         do not add the BOS/EOS tokens the vocabulary asks for\n"
                   "  --parse-special  match control-token text such as <|im_start|>\n"
                   "  --ids            print one line [id, id, ...]\n");
            return 0;
        } else if (!strcmp(o, "-m") || !strcmp(o, "--model")) path = cli_value(&a);
        else if (!strcmp(o, "-p") || !strcmp(o, "--prompt")) text = cli_value(&a);
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) file = cli_value(&a);
        else if (!strcmp(o, "--no-bos")) bos = false;
        else if (!strcmp(o, "--parse-special")) special = true;
        else if (!strcmp(o, "--ids")) ids = true;
        else {
            fprintf(stderr, "error: unknown option '%s'\n", o);
            return 2;
        }
    }
    if (a.error) return 2;
    char *owned = NULL;
    size_t len = 0;
    if (file) {
        owned = cli_read_file(file, &len);
        if (!owned) return 1;
        text = owned;
    } else if (text) {
        len = strlen(text);
    } else {
        fprintf(stderr, "error: give the text with -p TEXT or -f FILE\n");
        return 2;
    }
    if (len > INT32_MAX / 2) {
        fprintf(stderr, "error: text too long\n");
        free(owned);
        return 1;
    }
    vx_model *m = cli_load_model(path, true);
    if (!m) { free(owned); return 1; }
    const vx_vocab *v = vx_model_get_vocab(m);
    vx_token *toks = NULL;
    const int32_t n = cli_tokenize(v, text, (int32_t)len, bos, special, 0, &toks);
    if (n < 0) {
        fprintf(stderr, "error: tokenization failed\n");
        free(toks); free(owned); vx_model_free(m);
        return 1;
    }
    if (ids) {
        putchar('[');
        for (int32_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", toks[i]);
        printf("]\n");
    } else {
        char piece[512];
        for (int32_t i = 0; i < n; i++) {
            int32_t pl = vx_token_to_piece(v, toks[i], piece, sizeof piece, true);
            if (pl < 0) pl = 0;
            printf("%6d -> '%.*s'\n", toks[i], pl, piece);
        }
    }
    free(toks);
    free(owned);
    vx_model_free(m);
    return 0;
}

static int parse_ids(const char *s, vx_token **out, int32_t *n_out) {
    int32_t cap = 64, n = 0;
    vx_token *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return -1;
    while (*s) {
        while (*s == ',' || *s == ' ' || *s == '[' || *s == ']') s++;
        if (!*s) break;
        char *end;
        errno = 0;
        long x = strtol(s, &end, 10);
        if (end == s || errno || x < 0 || x > INT32_MAX) {
            fprintf(stderr, "error: bad token id near '%.20s'\n", s);
            free(ids);
            return -1;
        }
        if (n == cap) {
            vx_token *nn = realloc(ids, (size_t)cap * 2 * sizeof *ids);
            if (!nn) { free(ids); return -1; }
            ids = nn;
            cap *= 2;
        }
        ids[n++] = (vx_token)x;
        s = end;
    }
    *out = ids;
    *n_out = n;
    return 0;
}

int vx_cmd_logits(int argc, char **argv) {
    const char *path = NULL, *tokens = NULL, *outp = NULL;
    bool decode = false, f32mm = false;
    long threads = 0;
    vx_kv_type kvt = VX_KV_F32; /* a precision tool: exact cache by default */
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: vx logits -m MODEL.gguf --tokens 1,2,3,... -o FILE [--decode] [-t N] "
                   "[--kv-type f32|f16] [--f32-matmul]\n"
                   "Evaluates the ids as one sequence (one batch, or one token at a time with\n"
                   "--decode) and writes little-endian float32 logits [n_tokens][n_vocab].\n"
                   "The KV cache is f32 unless --kv-type says otherwise. --f32-matmul: every\n"
                   "matmul on weight rows dequantized to f32 and f32 activations (the reference\n"
                   "path, slow: the exact math on the file's values, to judge the fast kernels).\n");
            return 0;
        } else if (!strcmp(o, "-m") || !strcmp(o, "--model")) path = cli_value(&a);
        else if (!strcmp(o, "--tokens")) tokens = cli_value(&a);
        else if (!strcmp(o, "-o") || !strcmp(o, "--output")) outp = cli_value(&a);
        else if (!strcmp(o, "--decode")) decode = true;
        else if (!strcmp(o, "--f32-matmul")) f32mm = true;
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) cli_int(&a, 0, 512, &threads);
        else if (!strcmp(o, "--kv-type")) {
            const char *v = cli_value(&a);
            if (v && !cli_kv_type(v, &kvt)) return 2;
        } else if (!cli_gpu_option(&a)) {
            fprintf(stderr, "error: unknown option '%s'\n", o);
            return 2;
        }
    }
    if (a.error) return 2;
    if (!tokens || !outp) {
        fprintf(stderr, "error: --tokens and -o are required\n");
        return 2;
    }
    vx_token *ids;
    int32_t n;
    if (parse_ids(tokens, &ids, &n) != 0) return 2;
    if (n == 0) {
        fprintf(stderr, "error: no token ids given\n");
        free(ids);
        return 2;
    }
    vx_model *m = cli_load_model(path, false);
    if (!m) { free(ids); return 1; }
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = (uint32_t)n;
    cp.n_batch = decode ? 1 : (uint32_t)n;
    cp.n_threads = (int32_t)threads;
    cp.kv_type = kvt;
    cp.f32_matmul = f32mm;
    vx_context *c = NULL;
    char err[VX_ERRMSG_MAX];
    int rc = 1;
    FILE *f = NULL;
    vx_pos *pos = malloc((size_t)n * sizeof *pos);
    vx_seq_id *seq = calloc((size_t)n, sizeof *seq);
    int8_t *want = malloc((size_t)n);
    if (!pos || !seq || !want) goto done;
    if (vx_context_init(m, &cp, &c, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    f = fopen(outp, "wb");
    if (!f) {
        fprintf(stderr, "error: %s: %s\n", outp, strerror(errno));
        goto done;
    }
    for (int32_t i = 0; i < n; i++) { pos[i] = i; want[i] = 1; }
    const int32_t nv = vx_context_n_vocab(c);
    int32_t step = decode ? 1 : n;
    for (int32_t i0 = 0; i0 < n; i0 += step) {
        vx_batch b = {step, ids + i0, pos + i0, seq + i0, want + i0, NULL};
        if (vx_decode(c, &b) != VX_OK) {
            fprintf(stderr, "error: decode failed: %s\n", vx_context_errmsg(c));
            goto done;
        }
        for (int32_t j = 0; j < step; j++) {
            const float *lg = vx_get_logits_ith(c, j);
            if (fwrite(lg, sizeof(float), (size_t)nv, f) != (size_t)nv) {
                fprintf(stderr, "error: %s: write failed\n", outp);
                goto done;
            }
        }
    }
    rc = 0;
done:
    if (f && fclose(f) != 0 && rc == 0) {
        fprintf(stderr, "error: %s: write failed\n", outp);
        rc = 1;
    }
    free(pos); free(seq); free(want); free(ids);
    vx_context_free(c);
    vx_model_free(m);
    return rc;
}
