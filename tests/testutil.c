/* testutil.c - see testutil.h */
#include "testutil.h"

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

bool vx_test_synth(const char *preset, const char *type, const char *path) {
    const char *b = getenv("BUILD");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/vx synth --preset %s --type %s -o %s > /dev/null 2>&1", b && *b ? b : "build", preset,
             type, path);
    return system(cmd) == 0;
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
