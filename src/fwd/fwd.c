/*
 * fwd: see fwd.h.
 *
 * One connection, two directions, each the same small machine:
 *
 *   direction 0: the agent's TCP socket --> the runner's unix socket
 *   direction 1: the runner's unix socket --> the agent's TCP socket
 *
 *   reading --bytes--> writing (reading stopped) --written--> reading
 *      |                                   |
 *      '--EOF--> (once nothing is being written) shutdown of the other
 *                side's sending half --done--> shut
 *
 * Both directions shut: the connection is closed. Any error on either
 * side (a reset, a failed write or shutdown, a unix socket that cannot be
 * connected): the connection is closed at once, both sides, and the agent
 * sees its call cut. Direction 1 shut first (the runner ended the answer):
 * the agent has FWD_CLOSE_MS to close its side.
 */
#include "fwd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "al_err.h"

union fwd_stream {
    uv_handle_t h;
    uv_stream_t s;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
};

struct fwd_dir {
    uv_write_t wreq;
    uv_shutdown_t sreq;
    int busy; /* a write of buf is in flight */
    int eof;  /* its source said EOF */
    int shut; /* its destination's sending half is shut down */
    char buf[FWD_BUF];
};

struct fwd_conn {
    struct fwd *f;
    struct fwd_conn *prev, *next;
    union fwd_stream tcp;  /* the agent's */
    union fwd_stream unix; /* the runner's */
    uv_connect_t creq;
    int closing;
    int handles; /* open handles; freed at 0 */
    uint64_t close_at;
    struct fwd_dir d[2];
};

struct fwd {
    uv_loop_t *loop;
    uv_tcp_t lsn;
    uv_timer_t tick;
    int handles; /* the two above, open; freed at 0 once fwd_free ran */
    int freed;
    char path[FWD_PATH_MAX];
    struct fwd_conn *conns;
    unsigned nconns;
};

static uv_stream_t *src_of(struct fwd_conn *c, int i)
{
    return i == 0 ? &c->tcp.s : &c->unix.s;
}

static uv_stream_t *dst_of(struct fwd_conn *c, int i)
{
    return i == 0 ? &c->unix.s : &c->tcp.s;
}

static void conn_closed(uv_handle_t *h)
{
    struct fwd_conn *c = h->data;
    if (--c->handles == 0)
        free(c);
}

static void conn_close(struct fwd_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    struct fwd *f = c->f;
    if (c->prev)
        c->prev->next = c->next;
    else
        f->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    f->nconns--;
    c->f = NULL;
    uv_close(&c->tcp.h, conn_closed);
    uv_close(&c->unix.h, conn_closed);
}

static void start_read(struct fwd_conn *c, int i);

static void on_shut(uv_shutdown_t *req, int status)
{
    struct fwd_conn *c = req->data;
    int i = req == &c->d[0].sreq ? 0 : 1;
    c->d[i].shut = 1;
    if (c->closing)
        return;
    if (status < 0 || (c->d[0].shut && c->d[1].shut))
        conn_close(c);
}

static void do_shutdown(struct fwd_conn *c, int i)
{
    c->d[i].sreq.data = c;
    if (uv_shutdown(&c->d[i].sreq, dst_of(c, i), on_shut) != 0) {
        conn_close(c);
        return;
    }
    if (i == 1) /* the answer's end: the agent's side is not waited for long */
        c->close_at = uv_now(c->f->loop) + FWD_CLOSE_MS;
}

static void on_write(uv_write_t *req, int status)
{
    struct fwd_conn *c = req->data;
    int i = req == &c->d[0].wreq ? 0 : 1;
    c->d[i].busy = 0;
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->d[i].eof)
        do_shutdown(c, i);
    else
        start_read(c, i);
}

static int dir_of(struct fwd_conn *c, const uv_handle_t *h)
{
    return h == &c->tcp.h ? 0 : 1;
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
    (void)want;
    struct fwd_conn *c = h->data;
    struct fwd_dir *d = &c->d[dir_of(c, h)];
    buf->base = d->buf;
    buf->len = sizeof d->buf;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct fwd_conn *c = s->data;
    int i = dir_of(c, (uv_handle_t *)s);
    struct fwd_dir *d = &c->d[i];
    if (n == 0 || c->closing)
        return;
    (void)uv_read_stop(s); /* one write in flight per direction */
    if (n == UV_EOF) {
        d->eof = 1;
        do_shutdown(c, i);
        return;
    }
    if (n < 0) {
        conn_close(c);
        return;
    }
    uv_buf_t b = uv_buf_init(buf->base, (unsigned)n);
    d->busy = 1;
    d->wreq.data = c;
    if (uv_write(&d->wreq, dst_of(c, i), &b, 1, on_write) != 0) {
        d->busy = 0;
        conn_close(c);
    }
}

static void start_read(struct fwd_conn *c, int i)
{
    if (c->closing || c->d[i].busy || c->d[i].eof)
        return;
    if (uv_read_start(src_of(c, i), on_alloc, on_read) != 0)
        conn_close(c);
}

static void on_connect(uv_connect_t *req, int status)
{
    struct fwd_conn *c = req->data;
    if (c->closing)
        return;
    if (status < 0) { /* no runner socket: the agent's call is cut at once */
        conn_close(c);
        return;
    }
    start_read(c, 0);
    start_read(c, 1);
}

static void refused_closed(uv_handle_t *h)
{
    free(h);
}

static void on_conn(uv_stream_t *lsn, int status)
{
    struct fwd *f = lsn->data;
    if (status < 0 || f->freed)
        return;
    if (f->nconns >= FWD_MAX_CONNS) {
        uv_tcp_t *t = malloc(sizeof *t);
        if (!t)
            return;
        if (uv_tcp_init(f->loop, t) != 0) {
            free(t);
            return;
        }
        (void)uv_accept(lsn, (uv_stream_t *)t);
        uv_close((uv_handle_t *)t, refused_closed);
        return;
    }
    struct fwd_conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->f = f;
    if (uv_tcp_init(f->loop, &c->tcp.tcp) != 0) {
        free(c);
        return;
    }
    c->tcp.h.data = c;
    c->handles = 1;
    if (uv_pipe_init(f->loop, &c->unix.pipe, 0) != 0) {
        c->closing = 1;
        uv_close(&c->tcp.h, conn_closed);
        return;
    }
    c->unix.h.data = c;
    c->handles = 2;
    c->next = f->conns;
    if (f->conns)
        f->conns->prev = c;
    f->conns = c;
    f->nconns++;
    if (uv_accept(lsn, &c->tcp.s) != 0) {
        conn_close(c);
        return;
    }
    (void)uv_tcp_nodelay(&c->tcp.tcp, 1);
    c->creq.data = c;
    uv_pipe_connect(&c->creq, &c->unix.pipe, f->path, on_connect);
}

static void on_tick(uv_timer_t *t)
{
    struct fwd *f = t->data;
    uint64_t now = uv_now(f->loop);
    struct fwd_conn *next;
    for (struct fwd_conn *c = f->conns; c; c = next) {
        next = c->next;
        if (c->close_at && now >= c->close_at)
            conn_close(c);
    }
}

int fwd_listen(int port, int *fd, char *err, size_t cap)
{
    *fd = -1;
    if (port < 0 || port > 65535) {
        al_errf(err, cap, "port %d: not 0..65535", port);
        return AL_E_INVAL;
    }
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return al_errf_errno(err, cap, errno, "socket");
    int one = 1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, FWD_BACKLOG) != 0) {
        int e = errno;
        (void)close(s);
        return al_errf_errno(err, cap, e, "listening on %s:%d", FWD_HOST, port);
    }
    *fd = s;
    return AL_OK;
}

static void fwd_closed(uv_handle_t *h)
{
    struct fwd *f = h->data;
    if (--f->handles == 0)
        free(f);
}

int fwd_new(uv_loop_t *loop, const struct fwd_config *cfg, struct fwd **out, char *err, size_t cap)
{
    *out = NULL;
    if (!cfg->socket || cfg->socket[0] != '/' || strlen(cfg->socket) >= FWD_PATH_MAX) {
        al_errf(err, cap, "the proxy socket must be an absolute path of less than %d bytes",
                FWD_PATH_MAX);
        if (cfg->listen_fd >= 0)
            (void)close(cfg->listen_fd);
        return AL_E_INVAL;
    }
    struct fwd *f = calloc(1, sizeof *f);
    if (!f) {
        if (cfg->listen_fd >= 0)
            (void)close(cfg->listen_fd);
        return AL_E_NOMEM;
    }
    f->loop = loop;
    (void)memcpy(f->path, cfg->socket, strlen(cfg->socket) + 1);
    int rc = uv_tcp_init(loop, &f->lsn);
    if (rc != 0) {
        (void)close(cfg->listen_fd);
        free(f);
        al_errf(err, cap, "uv_tcp_init: %s", uv_strerror(rc));
        return AL_E_IO;
    }
    f->lsn.data = f;
    f->handles = 1;
    rc = uv_tcp_open(&f->lsn, cfg->listen_fd);
    if (rc != 0)
        (void)close(cfg->listen_fd);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&f->lsn, FWD_BACKLOG, on_conn);
    if (rc == 0 && (rc = uv_timer_init(loop, &f->tick)) == 0) {
        f->tick.data = f;
        f->handles = 2;
        rc = uv_timer_start(&f->tick, on_tick, FWD_TICK_MS, FWD_TICK_MS);
    }
    if (rc != 0) {
        al_errf(err, cap, "listening: %s", uv_strerror(rc));
        fwd_free(f);
        return AL_E_IO;
    }
    *out = f;
    return AL_OK;
}

void fwd_free(struct fwd *f)
{
    if (!f || f->freed)
        return;
    f->freed = 1;
    while (f->conns)
        conn_close(f->conns);
    uv_close((uv_handle_t *)&f->lsn, fwd_closed);
    if (f->handles == 2)
        uv_close((uv_handle_t *)&f->tick, fwd_closed);
}

unsigned fwd_conns(const struct fwd *f)
{
    return f ? f->nconns : 0;
}
