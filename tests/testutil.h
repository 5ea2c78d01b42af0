/* testutil.h - tiny test harness: CHECK macros, fixture paths, file helpers. */
#ifndef VX_TESTUTIL_H
#define VX_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>

#include "engine.h"

extern int vx_test_failures;
extern int vx_test_checks;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        vx_test_checks++;                                                              \
        if (!(cond)) {                                                                 \
            vx_test_failures++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
        }                                                                              \
    } while (0)

#define CHECKF(cond, ...)                                                              \
    do {                                                                               \
        vx_test_checks++;                                                              \
        if (!(cond)) {                                                                 \
            vx_test_failures++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

/* Directory of the shared fixtures: $VX_FIXTURES or ../shared/fixtures. */
const char *vx_test_fixtures(void);
/* Joins the fixtures directory and a relative path into a static buffer. */
const char *vx_test_fixture_path(const char *rel);
/* Reads a whole file (malloc'd, NUL-terminated); NULL on failure. */
char *vx_test_read_file(const char *path, size_t *size);
/* Whether to skip the emulated copy of a tier (VX_EMU, SIMDe over AVX2)
 * because the CPU runs the native one: only under AddressSanitizer, where
 * the emulation costs most of the suite's time and the native tier runs
 * the same source (says so once on stdout). native: the CPU has the tier. */
bool vx_test_skip_emulated(bool native, const char *what);
/* Whether this build runs under AddressSanitizer (to thin out the
 * slowest parameter grids there). */
bool vx_test_sanitized(void);
/* Writes a model with `$BUILD/vx synth --preset preset --type type -o path`
 * (BUILD default: build); true when it exited 0. */
bool vx_test_synth(const char *preset, const char *type, const char *path);
/* the same with more vx synth options ("--seed 7", "--std 0.5") */
bool vx_test_synth_opts(const char *preset, const char *type, const char *opts, const char *path);
/* Writes the fixture model rel (a path under the fixtures) to out with
 * token id's text replaced by text; false (and a message) on failure. */
bool vx_test_rename_token(const char *rel, int64_t id, const char *text, const char *out);
/* Prints the summary line and returns the process exit code. */
int vx_test_finish(const char *name);

/* An engine request's text (its events' bytes, up to 8 KiB), finish
 * reason and generated count, for vx_test_on_text; zero it and init mu
 * (vx_test_text_init) before the request. */
typedef struct vx_test_text {
    pthread_mutex_t mu;
    char text[8192];
    int len, n_gen;
    vx_finish finish;
    bool done;
} vx_test_text;

void vx_test_text_init(vx_test_text *r);
/* vx_event_fn collecting into a vx_test_text (user_data). */
bool vx_test_on_text(const vx_token_event *ev, void *ud);
/* Waits (up to a minute) for the request's final event. */
void vx_test_text_wait(vx_test_text *r);
/* Waits (up to a minute) for *done, read under mu. */
void vx_test_wait_done(pthread_mutex_t *mu, const bool *done);
/* A fixture file (path relative to the fixtures) of exactly n floats,
 * malloc'd; NULL if it is missing or of another size. */
float *vx_test_read_f32(const char *rel, size_t n);

/* Deterministic test data: xorshift64 on *state, a float uniform in
 * [-1, 1) with 53 random bits before rounding. */
static inline float vx_test_frand(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

#endif
