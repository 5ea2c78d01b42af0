/*
 * test_e2e.c - runs the end-to-end suites of `vx serve` (tests/e2e, Node.js)
 * against $BUILD/vx (default build/vx), so that `make test` / `make check`
 * cover the server as clients see it, including under ASan (the suites check
 * the server exits 0 with no sanitizer report, which LSan turns into a leak
 * check):
 *   server.test.mjs   the API through the official `openai` client
 *   ollama.test.mjs   ollama's native API through the official `ollama` client
 *   encoder.test.mjs  embedding models (encoders) through both clients
 *   llamacpp.test.mjs llama-server's /completion, /infill and /props (fetch)
 *   hostile.test.mjs  malformed and hostile requests over raw sockets
 * Installs the pinned clients with `npm ci` when tests/e2e/node_modules
 * lacks them. The hostile suite needs no packages and runs regardless. Skips,
 * saying so on its last line, when node is not installed; without the
 * clients (offline) only the hostile suite runs. In the VX_FORCE_GENERIC pass
 * of `make check` the hostile suite is left out: it tests the HTTP layer,
 * which the kernels do not change, and the other two passes run it.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"

static int run(const char *cmd) {
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Outside CI a missing node/npm is a skip, said on the last line; in CI
 * (CI set, as .ci/run has it) the server suite must run, so it fails. */
static int skip(const char *why) {
    const char *ci = getenv("CI");
    if (ci && *ci && strcmp(ci, "0") != 0) {
        printf("test_e2e: cannot run the server suite in CI (%s)\n", why);
        return 1;
    }
    printf("test_e2e: skipped (%s)\n", why);
    return 0;
}

int main(void) {
    const char *build = getenv("BUILD");
    char vx_rel[PATH_MAX], vx[PATH_MAX], fixtures[PATH_MAX], cmd[4 * PATH_MAX];
    snprintf(vx_rel, sizeof vx_rel, "%s/vx", build && *build ? build : "build");
    if (!realpath(vx_rel, vx)) {
        fprintf(stderr, "test_e2e: %s not found (build it first)\n", vx_rel);
        CHECK(false);
        return vx_test_finish("test_e2e");
    }
    if (!realpath(vx_test_fixtures(), fixtures)) {
        fprintf(stderr, "test_e2e: fixtures not found at %s\n", vx_test_fixtures());
        CHECK(false);
        return vx_test_finish("test_e2e");
    }
    if (run("node --version > /dev/null 2>&1") != 0) return skip("node is not installed");
    struct stat sb;
    /* the pinned clients: openai, ollama */
    bool have_client = (stat("tests/e2e/node_modules/openai/package.json", &sb) == 0 &&
                        stat("tests/e2e/node_modules/ollama/package.json", &sb) == 0) ||
                       run("cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error > /dev/null 2>&1") == 0;
    const char *generic = getenv("VX_FORCE_GENERIC");
    bool hostile = !(generic && *generic && strcmp(generic, "0") != 0);
    if (!have_client && !hostile) return skip("npm ci failed: no network? run it in tests/e2e");
    snprintf(cmd, sizeof cmd,
             "cd tests/e2e && VX_BIN='%s' VX_FIXTURES='%s' node --test --test-concurrency=1%s%s 2>&1", vx,
             fixtures, have_client ? " server.test.mjs ollama.test.mjs encoder.test.mjs" : "", hostile ? " llamacpp.test.mjs hostile.test.mjs" : "");
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return vx_test_finish("test_e2e");
    char line[4096];
    int pass = -1, fail = -1;
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout); /* run_tests.sh keeps it in the log and shows it on failure */
        if (!strncmp(line, "# pass ", 7)) pass = atoi(line + 7);
        if (!strncmp(line, "# fail ", 7)) fail = atoi(line + 7);
    }
    int st = pclose(p);
    int rc = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    CHECKF(rc == 0 && fail == 0 && pass > 0, "node --test exit %d, %d passed, %d failed", rc, pass, fail);
    if (!have_client) {
        /* the hostile suite ran, the client suite could not: say so last */
        const char *ci = getenv("CI");
        const bool in_ci = ci && *ci && strcmp(ci, "0") != 0;
        CHECK(!in_ci);
        int r = vx_test_finish("test_e2e");
        printf("test_e2e: server.test.mjs %s (npm ci failed: no network? run it in tests/e2e)\n",
               in_ci ? "cannot run in CI" : "skipped");
        return r;
    }
    return vx_test_finish("test_e2e");
}
