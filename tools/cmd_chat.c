/*
 * cmd_chat.c - `vx chat`: an interactive conversation. Each turn renders
 * the whole conversation with the model's chat template, tokenizes it, and
 * evaluates only what is not already in the KV cache (the longest common
 * token prefix is kept), so earlier turns are never recomputed.
 *
 * Ctrl-C (SIGINT), as in llama-cli: during a reply it stops the reply,
 * which stays in the conversation as far as it got; while the prompt is
 * evaluated it drops that message; at the prompt it ends the session.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat.h"
#include "cli.h"
#include "harmony.h"

#define MAX_MSGS 1024

/* Set by SIGINT; the chat loop checks it between tokens and batches. */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* A reply on its way to the screen and into the conversation. */
typedef struct reply_out {
    bool dim;        /* stdout is a terminal: the analysis shows there, dim */
    bool in_thought; /* the analysis was shown last (its style or line still open) */
    vx_harmony_stream hs;
    vx_sbuf reply;   /* what joins the conversation */
} reply_out;

static void reply_thought_end(reply_out *o) {
    if (o->dim) fputs("\033[0m\n", stdout);
    else fputc('\n', stderr);
    o->in_thought = false;
}

/* What the harmony parser released by its last call: the analysis apart
 * (dim, or on stderr), the answer on stdout and into the conversation. */
static bool reply_show(reply_out *o) {
    const vx_harmony_stream *h = &o->hs;
    if (h->reasoning.len) {
        if (!o->in_thought && o->dim) fputs("\033[2m", stdout);
        o->in_thought = true;
        fwrite(h->reasoning.p, 1, h->reasoning.len, o->dim ? stdout : stderr);
    }
    if (h->content.len) {
        if (o->in_thought) reply_thought_end(o);
        fwrite(h->content.p, 1, h->content.len, stdout);
        if (!vx_sbuf_add(&o->reply, h->content.p, h->content.len)) return false;
    }
    fflush(stdout);
    return true;
}

static bool reply_piece(reply_out *o, bool harmony, const char *p, size_t n) {
    if (harmony) return vx_harmony_stream_feed(&o->hs, p, n) && reply_show(o);
    fwrite(p, 1, n, stdout);
    fflush(stdout);
    return vx_sbuf_add(&o->reply, p, n);
}

static void chat_usage(void) {
    printf("usage: vx chat -m MODEL.gguf [options]\n"
           "\n"
           "Reads one user message per line from standard input (Ctrl-D or /exit ends;\n"
           "Ctrl-C stops a reply, or at the prompt ends).\n"
           "  -m, --model PATH        GGUF file or Hugging Face model directory (default: $VX_MODEL)\n"
           "  -sys, --system TEXT     system prompt (also --system-prompt)\n"
           "  --chat-template NAME    override the model's template: chatml, llama3, llama2,\n"
           "                          mistral, phi3, gemma (or a file with Jinja source)\n"
           "  -n, --n-predict N       max tokens per reply (default -1: until end of turn)\n"
           "  -c, --ctx-size N        context size (default 4096)\n"
           "  -t, --threads N         threads\n"
           "  -ngl N                  accepted for llama.cpp's command lines, ignored (CPU only)\n"
           "  --temp, --top-k, --top-p, --min-p, --repeat-penalty, -s/--seed as in vx run\n");
}


int vx_cmd_chat(int argc, char **argv) {
    const char *path = getenv("VX_MODEL"), *system = NULL, *tmpl_name = NULL;
    long n_predict = -1, n_ctx = 4096, threads = 0;
    vx_sampler_params sp = vx_sampler_default_params();
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            chat_usage();
            return 0;
        } else if (!strcmp(o, "-m") || !strcmp(o, "--model")) path = cli_value(&a);
        else if (!strcmp(o, "--system") || !strcmp(o, "-sys") || !strcmp(o, "--system-prompt"))
            system = cli_value(&a);
        else if (!strcmp(o, "--chat-template")) tmpl_name = cli_value(&a);
        else if (!strcmp(o, "-n") || !strcmp(o, "--n-predict")) cli_int(&a, -1, 1 << 24, &n_predict);
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) cli_int(&a, 0, 1 << 24, &n_ctx);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) cli_int(&a, 0, 512, &threads);
        else if (cli_sampling_option(&a, &sp) || cli_gpu_option(&a) || cli_llama_option(&a)) continue;
        else {
            fprintf(stderr, "error: unknown option '%s' (see vx chat --help)\n", o);
            return 2;
        }
    }
    if (a.error) return 2;
    if (!cli_model_given(path)) return 2;
    int rc = 1;
    vx_model *m = cli_load_model(path, false);
    vx_context *c = NULL;
    vx_sampler *smp = NULL;
    vx_chat_template *tmpl = NULL;
    char *src = NULL, *rendered = NULL, *line = NULL, *piece = NULL;
    reply_out ro;
    memset(&ro, 0, sizeof ro);
    int32_t piece_cap = 0;
    size_t line_cap = 0;
    struct sigaction old_sa; /* SIGINT's handler before ours (sig_set) */
    bool sig_set = false;
    vx_token *cached = NULL, *toks = NULL;
    vx_pos *pos = NULL;
    vx_seq_id *seq = NULL;
    vx_chat_message *msgs = calloc(MAX_MSGS, sizeof *msgs);
    char **owned = calloc(MAX_MSGS, sizeof *owned);
    size_t n_msgs = 0;
    char err[VX_ERRMSG_MAX];
    if (!m || !msgs || !owned || !cli_generative(m)) goto done;
    const vx_vocab *v = vx_model_get_vocab(m);
    if (!(src = cli_chat_template_source(m, tmpl_name))) goto done;
    if (vx_chat_template_parse(src, &tmpl, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: the chat template cannot be parsed: %s\n(use --chat-template NAME)\n", err);
        goto done;
    }
    vx_context_params cp = vx_context_default_params();
    if (n_ctx == 0 || n_ctx > vx_model_n_ctx_train(m)) n_ctx = vx_model_n_ctx_train(m);
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)(n_ctx < 512 ? n_ctx : 512);
    cp.n_threads = (int32_t)threads;
    if (vx_context_init(m, &cp, &c, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    if (vx_sampler_init(&sp, vx_context_n_vocab(c), &smp) != VX_OK) goto done;
    cached = malloc((size_t)n_ctx * sizeof *cached);
    pos = malloc((size_t)cp.n_batch * sizeof *pos);
    seq = calloc((size_t)cp.n_batch, sizeof *seq);
    if (!cached || !pos || !seq) goto done;
    int32_t n_cached = 0;
    const vx_token bos = vx_vocab_bos(v), eos = vx_vocab_eos(v);
    const char *bos_s = bos >= 0 ? vx_vocab_text(v, bos) : "";
    const char *eos_s = eos >= 0 ? vx_vocab_text(v, eos) : "";
    if (system) {
        msgs[n_msgs].role = "system";
        msgs[n_msgs++].content = system;
    }
    const bool tty = isatty(0);
    /* gpt-oss (harmony): the reply is several messages; its analysis shows
     * apart from the answer (dim on a terminal, else on stderr) and only the
     * answer joins the conversation (the template refuses harmony markers
     * in a message's content) */
    const bool harmony = vx_harmony_detect(src);
    ro.dim = isatty(1);
    /* no SA_RESTART: a Ctrl-C at the prompt ends the read (EINTR) */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sig_set = sigaction(SIGINT, &sa, &old_sa) == 0;
    if (sig_set && old_sa.sa_handler == SIG_IGN) /* started ignoring it (nohup, a background job): keep to that */
        sigaction(SIGINT, &old_sa, NULL), sig_set = false;
    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        interrupted = 0;
        errno = 0;
        const ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) {
            if (tty) printf("\n"); /* leave the shell's prompt on a line of its own */
            break;
        }
        size_t len = (size_t)got;
        if (memchr(line, 0, len)) len = strlen(line); /* an embedded NUL ends the message */
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (len == 0) continue;
        if (n_msgs + 2 > MAX_MSGS) {
            fprintf(stderr, "error: conversation too long\n");
            break;
        }
        owned[n_msgs] = strdup(line);
        msgs[n_msgs].role = "user";
        msgs[n_msgs].content = owned[n_msgs];
        n_msgs++;
        free(rendered);
        rendered = NULL;
        if (vx_chat_template_render(tmpl, msgs, n_msgs, true, bos_s, eos_s, &rendered, err, sizeof err) != VX_OK) {
            fprintf(stderr, "error: chat template: %s\n", err);
            goto done;
        }
        /* The template writes the BOS text itself when it wants it; the
         * tokenizer adds the BOS token, so drop the text (as llama.cpp does). */
        const char *text = rendered;
        if (bos_s[0] && !strncmp(text, bos_s, strlen(bos_s))) text += strlen(bos_s);
        int32_t tl = (int32_t)strlen(text);
        free(toks);
        const int32_t nt = cli_tokenize(v, text, tl, true, true, 0, &toks);
        if (!toks) goto done;
        if (nt >= n_ctx) {
            fprintf(stderr, "error: the conversation (%d tokens) no longer fits the context (%ld); that message "
                            "is dropped\n",
                    nt, n_ctx);
            n_msgs--; /* the session goes on without it */
            free(owned[n_msgs]);
            owned[n_msgs] = NULL;
            continue;
        }
        /* keep the common prefix in the cache, evaluate the rest */
        int32_t keep = 0;
        while (keep < n_cached && keep < nt && cached[keep] == toks[keep]) keep++;
        if (keep == nt) keep--; /* always evaluate at least one token for fresh logits */
        vx_kv_seq_rm(c, 0, keep, -1);
        n_cached = keep;
        int32_t last = 0;
        for (int32_t i0 = keep; i0 < nt && !interrupted; i0 += (int32_t)cp.n_batch) {
            int32_t nb = nt - i0 < (int32_t)cp.n_batch ? nt - i0 : (int32_t)cp.n_batch;
            for (int32_t j = 0; j < nb; j++) pos[j] = i0 + j;
            vx_batch b = {nb, toks + i0, pos, seq, NULL, NULL};
            if (vx_decode(c, &b) != VX_OK) {
                fprintf(stderr, "error: %s\n", vx_context_errmsg(c));
                goto done;
            }
            last = nb - 1;
        }
        if (interrupted) { /* the message is dropped, with what of it was evaluated */
            vx_kv_seq_rm(c, 0, keep, -1);
            n_msgs--;
            free(owned[n_msgs]);
            owned[n_msgs] = NULL;
            fprintf(stderr, "[interrupted]\n");
            continue;
        }
        memcpy(cached, toks, (size_t)nt * sizeof *toks);
        n_cached = nt;
        vx_sbuf_free(&ro.reply);
        ro.in_thought = false;
        vx_harmony_stream_free(&ro.hs);
        if (harmony) vx_harmony_stream_init(&ro.hs, true, 0);
        for (long g = 0; (n_predict < 0 || g < n_predict) && !interrupted; g++) {
            vx_token t = vx_sampler_sample(smp, vx_get_logits_ith(c, last));
            if (t < 0) {
                fprintf(stderr, "\nerror: no token can be sampled (every logit is -inf or NaN)\n");
                break;
            }
            vx_sampler_accept(smp, t);
            if (vx_vocab_is_eog(v, t)) break;
            const int32_t pl = cli_piece(v, t, false, &piece, &piece_cap);
            if (pl > 0 && !reply_piece(&ro, harmony, piece, (size_t)pl)) goto done;
            if (n_cached >= n_ctx) {
                fprintf(stderr, "\n[context full]\n");
                break;
            }
            vx_pos p = n_cached;
            vx_batch b = {1, &t, &p, seq, NULL, NULL};
            if (vx_decode(c, &b) != VX_OK) {
                fprintf(stderr, "\nerror: %s\n", vx_context_errmsg(c));
                goto done;
            }
            cached[n_cached++] = t;
            last = 0;
        }
        if (harmony && (!vx_harmony_stream_finish(&ro.hs) || !reply_show(&ro))) goto done;
        if (ro.in_thought) reply_thought_end(&ro);
        printf("\n");
        if (interrupted) fprintf(stderr, "[interrupted]\n");
        owned[n_msgs] = ro.reply.p ? vx_sbuf_take(&ro.reply) : strdup("");
        if (!owned[n_msgs]) goto done;
        msgs[n_msgs].role = "assistant";
        msgs[n_msgs].content = owned[n_msgs];
        n_msgs++;
    }
    rc = 0;
done:
    if (sig_set) sigaction(SIGINT, &old_sa, NULL);
    if (owned)
        for (size_t i = 0; i < MAX_MSGS; i++) free(owned[i]);
    free(owned);
    free(msgs);
    vx_sbuf_free(&ro.reply);
    vx_harmony_stream_free(&ro.hs);
    free(line);
    free(piece);
    free(rendered);
    free(src);
    free(toks);
    free(cached);
    free(pos);
    free(seq);
    vx_chat_template_free(tmpl);
    vx_sampler_free(smp);
    vx_context_free(c);
    vx_model_free(m);
    return rc;
}
