/* testutil.c - see testutil.h */
#include "testutil.h"

#include "gguf.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int vx_test_failures = 0;
int vx_test_checks = 0;

const char *vx_test_fixtures(void) {
    const char *e = getenv("VX_FIXTURES");
    return e && *e ? e : "../shared/fixtures";
}

const char *vx_test_fixture_path(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", vx_test_fixtures(), rel);
    return buf;
}

char *vx_test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0) { fclose(f); return NULL; }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf) { fclose(f); return NULL; }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); fclose(f); return NULL; }
    fclose(f);
    buf[n] = 0;
    if (size) *size = (size_t)n;
    return buf;
}

int vx_test_finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, vx_test_checks, vx_test_failures);
    return vx_test_failures == 0 ? 0 : 1;
}

bool vx_test_synth_opts(const char *preset, const char *type, const char *opts, const char *path) {
    const char *b = getenv("BUILD");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/vx synth --preset %s --type %s %s -o %s > /dev/null 2>&1", b && *b ? b : "build",
             preset, type, opts ? opts : "", path);
    return system(cmd) == 0;
}

bool vx_test_synth(const char *preset, const char *type, const char *path) {
    return vx_test_synth_opts(preset, type, "", path);
}

bool vx_test_sanitized(void) {
#if defined(__SANITIZE_ADDRESS__)
    return true;
#else
    return false;
#endif
}

bool vx_test_skip_emulated(bool native, const char *what) {
#if defined(__SANITIZE_ADDRESS__)
    if (native) {
        printf("%s: emulated copy not run under the sanitizers (the CPU runs the native tier)\n", what);
        return true;
    }
#else
    (void)what;
#endif
    return false;
}

void vx_test_text_init(vx_test_text *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
}

bool vx_test_on_text(const vx_token_event *ev, void *ud) {
    vx_test_text *r = ud;
    pthread_mutex_lock(&r->mu);
    if (ev->text_len > 0 && r->len + ev->text_len <= (int)sizeof r->text) {
        memcpy(r->text + r->len, ev->text, (size_t)ev->text_len);
        r->len += ev->text_len;
    }
    if (ev->finish != VX_FINISH_NONE) r->done = true, r->finish = ev->finish, r->n_gen = ev->n_gen;
    pthread_mutex_unlock(&r->mu);
    return true;
}

void vx_test_wait_done(pthread_mutex_t *mu, const bool *done) {
    for (int spins = 0; spins < 60000; spins++) {
        pthread_mutex_lock(mu);
        const bool d = *done;
        pthread_mutex_unlock(mu);
        if (d) return;
        usleep(1000);
    }
}

void vx_test_text_wait(vx_test_text *r) { vx_test_wait_done(&r->mu, &r->done); }

float *vx_test_read_f32(const char *rel, size_t n) {
    size_t sz = 0;
    char *buf = vx_test_read_file(vx_test_fixture_path(rel), &sz);
    if (!buf || sz != n * sizeof(float)) {
        free(buf);
        return NULL;
    }
    return (float *)(void *)buf;
}

bool vx_test_rename_token(const char *rel, int64_t id, const char *text, const char *out) {
    char err[VX_ERRMSG_MAX] = "";
    vx_gguf *g = NULL;
    vx_gguf_writer *w = vx_gguf_writer_init();
    vx_gguf_type et;
    uint64_t nt = 0;
    const vx_gguf_kv *kv = NULL;
    const char **strs = NULL;
    bool ok = vx_gguf_open(vx_test_fixture_path(rel), &g, err, sizeof err) == VX_OK && w &&
              vx_gguf_copy_kv(w, g) == VX_OK && vx_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &nt, &kv) == 1 &&
              et == VX_GGUF_STRING && id >= 0 && (uint64_t)id < nt && (strs = malloc(nt * sizeof *strs)) != NULL;
    for (uint64_t i = 0; ok && i < nt; i++) strs[i] = i == (uint64_t)id ? text : kv->v.arr.strs[i].s;
    ok = ok && vx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", strs, nt) == VX_OK;
    for (int64_t i = 0; ok && i < vx_gguf_n_tensors(g); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
        ok = vx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, true) == VX_OK;
    }
    ok = ok && vx_gguf_write_file(w, out, err, sizeof err) == VX_OK;
    if (!ok) fprintf(stderr, "%s with token %lld renamed: %s\n", rel, (long long)id, err);
    free(strs);
    vx_gguf_writer_free(w);
    vx_gguf_close(g);
    return ok;
}
