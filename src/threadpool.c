/* threadpool.c - see threadpool.h. */
#include "threadpool.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

#define SPIN_BEFORE_SLEEP 200000 /* ~50-100 us of polling before a worker sleeps */

struct vx_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;     /* bumped for each task */
    atomic_int pending;  /* workers still running the current task */
    atomic_int stop;
    vx_task_fn fn;
    void *arg;
    /* sense-reversing barrier */
    atomic_int bar_count;
    atomic_uint bar_phase;
    struct worker { vx_pool *pool; int ith; } *workers;
};

static inline void cpu_relax(void) { _mm_pause(); }

static void *worker_main(void *p) {
    struct worker *w = p;
    vx_pool *pool = w->pool;
    unsigned seen = 0; /* gen at creation: a task posted before this thread ran is not missed */
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&pool->gen, memory_order_acquire)) == seen &&
               !atomic_load(&pool->stop)) {
            if (++spins < SPIN_BEFORE_SLEEP) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&pool->mu);
            while (atomic_load(&pool->gen) == seen && !atomic_load(&pool->stop))
                pthread_cond_wait(&pool->cv, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load(&pool->stop)) break;
        seen = g;
        pool->fn(pool->arg, w->ith, pool->n);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_release);
    }
    return NULL;
}

int vx_n_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

vx_status vx_pool_init(int n_threads, vx_pool **out) {
    *out = NULL;
    if (n_threads <= 0) n_threads = vx_n_cpus();
    if (n_threads > 512) return VX_EINVAL;
    vx_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return VX_ENOMEM;
    pool->n = n_threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
    pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
    pool->workers = calloc((size_t)n_threads, sizeof *pool->workers);
    if (!pool->threads || !pool->workers) {
        vx_pool_free(pool);
        return VX_ENOMEM;
    }
    for (int i = 1; i < n_threads; i++) {
        pool->workers[i].pool = pool;
        pool->workers[i].ith = i;
        if (pthread_create(&pool->threads[i], NULL, worker_main, &pool->workers[i]) != 0) {
            pool->n = i; /* free joins only the started ones */
            vx_pool_free(pool);
            return VX_ENOMEM;
        }
    }
    *out = pool;
    return VX_OK;
}

void vx_pool_free(vx_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 1; i < pool->n; i++)
        if (pool->threads) pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
    free(pool->threads);
    free(pool->workers);
    free(pool);
}

int vx_pool_n_threads(const vx_pool *pool) { return pool->n; }

void vx_pool_run(vx_pool *pool, vx_task_fn fn, void *arg) {
    if (pool->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store(&pool->pending, pool->n - 1);
    atomic_store(&pool->bar_count, 0);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0, pool->n);
    int spins = 0;
    while (atomic_load_explicit(&pool->pending, memory_order_acquire) > 0) {
        if (++spins > 1000) sched_yield();
        else cpu_relax();
    }
}

void vx_pool_barrier(vx_pool *pool) {
    if (pool->n == 1) return;
    unsigned phase = atomic_load_explicit(&pool->bar_phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&pool->bar_count, 1, memory_order_acq_rel) == pool->n - 1) {
        atomic_store_explicit(&pool->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&pool->bar_phase, 1, memory_order_release);
        return;
    }
    int spins = 0;
    while (atomic_load_explicit(&pool->bar_phase, memory_order_acquire) == phase) {
        if (++spins > 2000) sched_yield();
        else cpu_relax();
    }
}
