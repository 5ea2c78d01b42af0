/*
 * dist.c - pipeline parallelism over MPI: the group's handle, the
 * commands of process 0 and the loop of the others (dist.h).
 *
 * A command is a header (operation, object id, three integers, payload
 * length) and, when it has one, a payload, sent by process 0 to each other
 * process in turn; loads and context inits are answered with a status and
 * a message. Ids index the tables of models and contexts each process
 * keeps; process 0 hands out the lowest free one.
 */
#include "dist.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "model.h"

/* Launchers' variables that say a process was started as one of several. */
static int32_t launcher_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return (int32_t)atoi(v);
    }
    return getenv("PMIX_RANK") ? 2 : 0; /* PMIx without a size: assume a group */
}

vx_status vx_dist_split(const vx_dist *d, int32_t n_layer, const float *split, int32_t *first, char *err,
                        size_t err_size) {
    const int32_t R = vx_dist_size(d);
    if (n_layer < R)
        return vx_seterr(err, err_size, VX_EINVAL, "%d layers cannot be shared by %d processes (one layer "
                         "each at least)", n_layer, R);
    double total = 0;
    for (int32_t r = 0; split && r < R; r++) {
        if (!(split[r] > 0.0f) || split[r] > 1e6f)
            return vx_seterr(err, err_size, VX_EINVAL, "layer split %d: %g (shares must be positive)", r,
                             (double)split[r]);
        total += split[r];
    }
    /* the boundaries round the cumulative shares; even shares give the
     * remainder to the last processes */
    first[0] = 0;
    double acc = 0;
    for (int32_t r = 0; r < R; r++) {
        acc += split ? split[r] : 1.0;
        const double want = acc / (split ? total : (double)R) * n_layer;
        int32_t e = split ? (int32_t)(want + 0.5) : (int32_t)want;
        if (r == R - 1) e = n_layer;
        /* at least one layer each, and room for the ones after */
        if (e < first[r] + 1) e = first[r] + 1;
        if (e > n_layer - (R - 1 - r)) e = n_layer - (R - 1 - r);
        first[r + 1] = e;
    }
    return VX_OK;
}

#ifdef VX_HAVE_MPI
#include <mpi.h>

enum { OP_QUIT = 1, OP_LOAD, OP_MODEL_FREE, OP_CTX_INIT, OP_CTX_FREE, OP_DECODE, OP_KV_RM, OP_KV_FORK, OP_KV_REUSE };
enum { TAG_CMD = 1, TAG_PAYLOAD, TAG_REPLY, TAG_PIPE_ST, TAG_PIPE_X };

typedef struct cmd {
    int32_t op, id, a, b, c, pad;
    int64_t len; /* payload bytes */
} cmd;

typedef struct reply {
    int32_t status;
    char msg[VX_ERRMSG_MAX];
} reply;

/* A table of ids: process 0 marks the ones in use, the others keep their
 * objects there. */
typedef struct table {
    void **obj;
    uint8_t *used;
    int32_t cap;
} table;

struct vx_dist {
    int32_t rank, size;
    pthread_mutex_t lock;
    table models, ctxs;
};

int32_t vx_dist_rank(const vx_dist *d) { return d ? d->rank : 0; }
int32_t vx_dist_size(const vx_dist *d) { return d ? d->size : 1; }
bool vx_dist_multi(const vx_dist *d) { return d && d->size > 1; }

/* Waits for a request: spins for 200 us, then sleeps in 50 us steps. */
static void wait_req(MPI_Request *rq, MPI_Status *status) {
    int done = 0;
    const int64_t t0 = vx_time_ns();
    for (;;) {
        MPI_Test(rq, &done, status ? status : MPI_STATUS_IGNORE);
        if (done) return;
        if (vx_time_ns() - t0 > 200000) {
            const struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

static void recv_wait(void *buf, int count, MPI_Datatype type, int from, int tag) {
    MPI_Request rq;
    MPI_Irecv(buf, count, type, from, tag, MPI_COMM_WORLD, &rq);
    wait_req(&rq, NULL);
}

vx_status vx_dist_init(int *argc, char ***argv, vx_dist **out, char *err, size_t err_size) {
    if (!out) return VX_EINVAL;
    *out = NULL;
    if (launcher_size() <= 0) return VX_OK; /* not under a launcher: one process */
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return vx_seterr(err, err_size, VX_EIO, "MPI_Init_thread failed");
    if (inited) MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED) {
        if (!inited) MPI_Finalize();
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "this MPI library gives thread level %d; vx needs MPI_THREAD_SERIALIZED", provided);
    }
    vx_dist *d = calloc(1, sizeof *d);
    if (!d) {
        if (!inited) MPI_Finalize();
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    pthread_mutex_init(&d->lock, NULL);
    *out = d;
    return VX_OK;
}

static void table_free(table *t) {
    free(t->obj);
    free(t->used);
    memset(t, 0, sizeof *t);
}

void vx_dist_free(vx_dist *d) {
    if (!d) return;
    if (d->rank == 0) {
        const cmd c = {.op = OP_QUIT};
        for (int r = 1; r < d->size; r++) MPI_Send(&c, sizeof c, MPI_BYTE, r, TAG_CMD, MPI_COMM_WORLD);
    }
    table_free(&d->models);
    table_free(&d->ctxs);
    pthread_mutex_destroy(&d->lock);
    free(d);
    MPI_Finalize();
}

void vx_dist_lock(vx_dist *d) { pthread_mutex_lock(&d->lock); }
void vx_dist_unlock(vx_dist *d) { pthread_mutex_unlock(&d->lock); }

/* Slot id of a table, grown as needed: -1 out of memory. */
static int32_t table_grow(table *t, int32_t id) {
    if (id < t->cap) return id;
    const int32_t cap = t->cap ? t->cap * 2 > id ? t->cap * 2 : id + 1 : 8 > id ? 8 : id + 1;
    void **o = realloc(t->obj, (size_t)cap * sizeof *o);
    if (o) t->obj = o;
    uint8_t *u = o ? realloc(t->used, (size_t)cap) : NULL;
    if (!u) return -1;
    t->used = u;
    for (int32_t i = t->cap; i < cap; i++) t->obj[i] = NULL, t->used[i] = 0;
    t->cap = cap;
    return id;
}

/* Process 0: the lowest free id, marked used (-1: out of memory). */
static int32_t table_take(table *t) {
    int32_t id = 0;
    while (id < t->cap && t->used[id]) id++;
    if (table_grow(t, id) < 0) return -1;
    t->used[id] = 1;
    return id;
}

/* Sends a command (and its payload) to every other process. */
static void send_cmd(vx_dist *d, cmd c, const void *payload) {
    for (int r = 1; r < d->size; r++) {
        MPI_Send(&c, sizeof c, MPI_BYTE, r, TAG_CMD, MPI_COMM_WORLD);
        if (c.len > 0) MPI_Send(payload, (int)c.len, MPI_BYTE, r, TAG_PAYLOAD, MPI_COMM_WORLD);
    }
}

/* The other processes' replies: the first failure, with its message. */
static vx_status gather_replies(vx_dist *d, const char *what, char *err, size_t err_size) {
    vx_status st = VX_OK;
    reply rep;
    for (int r = 1; r < d->size; r++) {
        recv_wait(&rep, sizeof rep, MPI_BYTE, r, TAG_REPLY);
        rep.msg[sizeof rep.msg - 1] = 0;
        if (rep.status != VX_OK && st == VX_OK)
            st = vx_seterr(err, err_size, (vx_status)rep.status, "process %d: %s: %s", r, what, rep.msg);
    }
    return st;
}

/* A load's payload: the flags, the shares, the path. */
typedef struct load_msg {
    uint8_t use_mmap, check_tensors, repack, pad;
    int32_t n_first;
} load_msg;

vx_status vx_dist_model_load(vx_dist *d, const char *path, const vx_model_params *p, const int32_t *first,
                             int32_t *id, char *err, size_t err_size) {
    const size_t plen = strlen(path) + 1, nf = (size_t)d->size + 1;
    const size_t len = sizeof(load_msg) + nf * sizeof(int32_t) + plen;
    uint8_t *buf = malloc(len);
    if (!buf) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    const load_msg m = {p->use_mmap, p->check_tensors, p->repack, 0, (int32_t)nf};
    memcpy(buf, &m, sizeof m);
    memcpy(buf + sizeof m, first, nf * sizeof(int32_t));
    memcpy(buf + sizeof m + nf * sizeof(int32_t), path, plen);
    vx_dist_lock(d);
    vx_status st = VX_OK;
    *id = table_take(&d->models);
    if (*id < 0) {
        st = vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    } else {
        send_cmd(d, (cmd){.op = OP_LOAD, .id = *id, .len = (int64_t)len}, buf);
        st = gather_replies(d, "cannot load the model", err, err_size);
        if (st) { /* the ones that loaded it free it again */
            send_cmd(d, (cmd){.op = OP_MODEL_FREE, .id = *id}, NULL);
            d->models.used[*id] = 0;
        }
    }
    vx_dist_unlock(d);
    free(buf);
    return st;
}

/* The others free object id of table t (op); its id is free again. */
static void free_obj(vx_dist *d, table *t, int32_t op, int32_t id) {
    vx_dist_lock(d);
    send_cmd(d, (cmd){.op = op, .id = id}, NULL);
    if (id >= 0 && id < t->cap) t->used[id] = 0;
    vx_dist_unlock(d);
}

void vx_dist_model_free(vx_dist *d, int32_t id) { free_obj(d, &d->models, OP_MODEL_FREE, id); }

vx_status vx_dist_ctx_init(vx_dist *d, int32_t model_id, const vx_context_params *p, int32_t *id, char *err,
                           size_t err_size) {
    vx_dist_lock(d);
    vx_status st = VX_OK;
    *id = table_take(&d->ctxs);
    if (*id < 0) {
        st = vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    } else {
        send_cmd(d, (cmd){.op = OP_CTX_INIT, .id = *id, .a = model_id, .len = sizeof *p}, p);
        st = gather_replies(d, "cannot create the context", err, err_size);
        if (st) {
            send_cmd(d, (cmd){.op = OP_CTX_FREE, .id = *id}, NULL);
            d->ctxs.used[*id] = 0;
        }
    }
    vx_dist_unlock(d);
    return st;
}

void vx_dist_ctx_free(vx_dist *d, int32_t id) { free_obj(d, &d->ctxs, OP_CTX_FREE, id); }

void vx_dist_kv_rm(vx_dist *d, int32_t ctx, vx_seq_id seq, vx_pos p0, vx_pos p1) {
    vx_dist_lock(d);
    send_cmd(d, (cmd){.op = OP_KV_RM, .id = ctx, .a = seq, .b = p0, .c = p1}, NULL);
    vx_dist_unlock(d);
}

void vx_dist_kv_fork(vx_dist *d, int32_t ctx, vx_seq_id src, vx_seq_id dst) {
    vx_dist_lock(d);
    send_cmd(d, (cmd){.op = OP_KV_FORK, .id = ctx, .a = src, .b = dst}, NULL);
    vx_dist_unlock(d);
}

void vx_dist_kv_reuse(vx_dist *d, int32_t ctx, vx_seq_id seq, const vx_token *tokens, int32_t n) {
    vx_dist_lock(d);
    send_cmd(d, (cmd){.op = OP_KV_REUSE, .id = ctx, .a = seq, .len = (int64_t)n * (int64_t)sizeof *tokens},
             tokens);
    vx_dist_unlock(d);
}

void vx_dist_decode(vx_dist *d, int32_t ctx, const vx_batch *b) {
    /* the caller holds the lock until its pipeline is through */
    const size_t n = (size_t)b->n_tokens;
    for (int r = 1; r < d->size; r++) {
        const cmd c = {.op = OP_DECODE, .id = ctx, .a = b->n_tokens, .len = (int64_t)(3 * n * sizeof(int32_t))};
        MPI_Send(&c, sizeof c, MPI_BYTE, r, TAG_CMD, MPI_COMM_WORLD);
        MPI_Send(b->token, (int)n, MPI_INT32_T, r, TAG_PAYLOAD, MPI_COMM_WORLD);
        MPI_Send(b->pos, (int)n, MPI_INT32_T, r, TAG_PAYLOAD, MPI_COMM_WORLD);
        MPI_Send(b->seq_id, (int)n, MPI_INT32_T, r, TAG_PAYLOAD, MPI_COMM_WORLD);
    }
}

void vx_dist_send(vx_dist *d, int32_t to, vx_status st, const float *x, size_t n) {
    const int32_t s = st;
    MPI_Send(&s, 1, MPI_INT32_T, to, TAG_PIPE_ST, MPI_COMM_WORLD);
    /* in pieces of at most 2^30 floats: MPI counts are ints */
    for (size_t o = 0; st == VX_OK && o < n; o += (size_t)1 << 30) {
        const size_t k = n - o < (size_t)1 << 30 ? n - o : (size_t)1 << 30;
        MPI_Send(x + o, (int)k, MPI_FLOAT, to, TAG_PIPE_X, MPI_COMM_WORLD);
    }
}

vx_status vx_dist_recv(vx_dist *d, int32_t from, float *x, size_t n) {
    int32_t s = 0;
    recv_wait(&s, 1, MPI_INT32_T, from, TAG_PIPE_ST);
    for (size_t o = 0; s == VX_OK && o < n; o += (size_t)1 << 30) {
        const size_t k = n - o < (size_t)1 << 30 ? n - o : (size_t)1 << 30;
        recv_wait(x + o, (int)k, MPI_FLOAT, from, TAG_PIPE_X);
    }
    return (vx_status)s;
}

/* ---- the other processes */

static void send_reply(vx_status st, const char *msg) {
    reply rep = {.status = st};
    snprintf(rep.msg, sizeof rep.msg, "%s", st ? msg : "");
    MPI_Send(&rep, sizeof rep, MPI_BYTE, 0, TAG_REPLY, MPI_COMM_WORLD);
}

static void *table_get(const table *t, int32_t id) { return id >= 0 && id < t->cap ? t->obj[id] : NULL; }

static vx_status serve_load(vx_dist *d, const cmd *c, const uint8_t *pl, char *err, size_t err_size) {
    load_msg m;
    if (c->len < (int64_t)sizeof m) return vx_seterr(err, err_size, VX_EINTERNAL, "short load command");
    memcpy(&m, pl, sizeof m);
    const size_t fo = sizeof m + (size_t)m.n_first * sizeof(int32_t);
    if (m.n_first != d->size + 1 || (int64_t)fo >= c->len || pl[c->len - 1] != 0)
        return vx_seterr(err, err_size, VX_EINTERNAL, "malformed load command");
    int32_t first[2];
    memcpy(first, pl + sizeof m + (size_t)d->rank * sizeof(int32_t), sizeof first);
    vx_model_params p = vx_model_default_params();
    p.use_mmap = m.use_mmap, p.check_tensors = m.check_tensors, p.repack = m.repack;
    p.dist = d;
    if (table_grow(&d->models, c->id) < 0) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    vx_model *model = NULL;
    const vx_status st = vx_model_load_share(pl ? (const char *)pl + fo : "", &p, first[0], first[1], &model,
                                             err, err_size);
    if (st == VX_OK) d->models.obj[c->id] = model;
    return st;
}

static vx_status serve_ctx_init(vx_dist *d, const cmd *c, const uint8_t *pl, char *err, size_t err_size) {
    vx_context_params p;
    const vx_model *m = table_get(&d->models, c->a);
    if (c->len != (int64_t)sizeof p || !m)
        return vx_seterr(err, err_size, VX_EINTERNAL, "malformed context command (model %d)", c->a);
    memcpy(&p, pl, sizeof p);
    if (table_grow(&d->ctxs, c->id) < 0) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    vx_context *ctx = NULL;
    const vx_status st = vx_context_init(m, &p, &ctx, err, err_size);
    if (st == VX_OK) d->ctxs.obj[c->id] = ctx;
    return st;
}

vx_status vx_dist_serve(vx_dist *d) {
    if (!d || d->rank == 0) return VX_EINVAL;
    uint8_t *pl = NULL;
    size_t pl_cap = 0;
    char err[VX_ERRMSG_MAX];
    for (;;) {
        cmd c;
        recv_wait(&c, sizeof c, MPI_BYTE, 0, TAG_CMD);
        if (c.op == OP_QUIT) break;
        if (c.op == OP_DECODE) { /* three arrays of a ints */
            const size_t n = (size_t)c.a;
            if (pl_cap < 3 * n * sizeof(int32_t)) {
                uint8_t *np = realloc(pl, 3 * n * sizeof(int32_t));
                if (!np) break; /* cannot follow the group any more */
                pl = np, pl_cap = 3 * n * sizeof(int32_t);
            }
            int32_t *a = (int32_t *)(void *)pl;
            for (int k = 0; k < 3; k++) recv_wait(a + k * n, (int)n, MPI_INT32_T, 0, TAG_PAYLOAD);
            vx_context *ctx = table_get(&d->ctxs, c.id);
            const vx_batch b = {c.a, a, a + n, a + 2 * n, NULL, NULL};
            if (ctx) vx_decode(ctx, &b); /* failures pass down the pipeline */
            continue;
        }
        if (c.len > 0) {
            if ((size_t)c.len > pl_cap) {
                uint8_t *np = realloc(pl, (size_t)c.len);
                if (!np) break;
                pl = np, pl_cap = (size_t)c.len;
            }
            recv_wait(pl, (int)c.len, MPI_BYTE, 0, TAG_PAYLOAD);
        }
        vx_context *ctx = table_get(&d->ctxs, c.id);
        switch (c.op) {
        case OP_LOAD: {
            const vx_status st = serve_load(d, &c, pl, err, sizeof err);
            send_reply(st, err);
            break;
        }
        case OP_MODEL_FREE:
            vx_model_free(table_get(&d->models, c.id));
            if (c.id >= 0 && c.id < d->models.cap) d->models.obj[c.id] = NULL;
            break;
        case OP_CTX_INIT: {
            const vx_status st = serve_ctx_init(d, &c, pl, err, sizeof err);
            send_reply(st, err);
            break;
        }
        case OP_CTX_FREE:
            vx_context_free(ctx);
            if (c.id >= 0 && c.id < d->ctxs.cap) d->ctxs.obj[c.id] = NULL;
            break;
        case OP_KV_RM:
            if (ctx) vx_kv_seq_rm(ctx, c.a, c.b, c.c);
            break;
        case OP_KV_FORK:
            if (ctx) vx_kv_seq_fork(ctx, c.a, c.b);
            break;
        case OP_KV_REUSE:
            if (ctx) vx_kv_seq_reuse_prefix(ctx, c.a, (const vx_token *)(void *)pl, (int32_t)(c.len / 4));
            break;
        default:
            fprintf(stderr, "vx: process %d: unknown command %d\n", d->rank, c.op);
            break;
        }
    }
    /* what process 0 left behind */
    for (int32_t i = 0; i < d->ctxs.cap; i++) vx_context_free(d->ctxs.obj[i]), d->ctxs.obj[i] = NULL;
    for (int32_t i = 0; i < d->models.cap; i++) vx_model_free(d->models.obj[i]), d->models.obj[i] = NULL;
    free(pl);
    return VX_OK;
}

#else /* built without MPI */

struct vx_dist {
    int32_t unused;
};

int32_t vx_dist_rank(const vx_dist *d) { return 0; }
int32_t vx_dist_size(const vx_dist *d) { return 1; }
bool vx_dist_multi(const vx_dist *d) { return false; }

vx_status vx_dist_init(int *argc, char ***argv, vx_dist **out, char *err, size_t err_size) {
    if (!out) return VX_EINVAL;
    *out = NULL;
    if (launcher_size() > 1)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "started as one of %d processes, but this vx was built without MPI (install "
                         "libopenmpi-dev and rebuild)", launcher_size());
    return VX_OK;
}

vx_status vx_dist_serve(vx_dist *d) { return VX_EINVAL; }
void vx_dist_free(vx_dist *d) {}
void vx_dist_lock(vx_dist *d) {}
void vx_dist_unlock(vx_dist *d) {}
vx_status vx_dist_model_load(vx_dist *d, const char *path, const vx_model_params *p, const int32_t *first,
                             int32_t *id, char *err, size_t err_size) {
    return vx_seterr(err, err_size, VX_EUNSUPPORTED, "built without MPI");
}
void vx_dist_model_free(vx_dist *d, int32_t id) {}
vx_status vx_dist_ctx_init(vx_dist *d, int32_t model_id, const vx_context_params *p, int32_t *id, char *err,
                           size_t err_size) {
    return vx_seterr(err, err_size, VX_EUNSUPPORTED, "built without MPI");
}
void vx_dist_ctx_free(vx_dist *d, int32_t id) {}
void vx_dist_kv_rm(vx_dist *d, int32_t ctx, vx_seq_id seq, vx_pos p0, vx_pos p1) {}
void vx_dist_kv_fork(vx_dist *d, int32_t ctx, vx_seq_id src, vx_seq_id dst) {}
void vx_dist_kv_reuse(vx_dist *d, int32_t ctx, vx_seq_id seq, const vx_token *tokens, int32_t n) {}
void vx_dist_decode(vx_dist *d, int32_t ctx, const vx_batch *b) {}
void vx_dist_send(vx_dist *d, int32_t to, vx_status st, const float *x, size_t n) {}
vx_status vx_dist_recv(vx_dist *d, int32_t from, float *x, size_t n) { return VX_EUNSUPPORTED; }

#endif
