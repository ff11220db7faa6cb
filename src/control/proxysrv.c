/*
 * proxysrv: the credential proxy's own listener (proxysrv.h). The glue
 * between libuv's TCP handles and proxyconn: reads go into
 * proxyconn_input (reading stops while it holds bytes it could not take,
 * and starts again on input_ready), what proxyconn sends goes to the
 * socket at once, and what the socket does not take is queued with
 * uv_write; proxyconn is told the transport is full as soon as anything is
 * queued (the agent's socket buffer is full: the upstream is paused) and
 * writable again once the queue is written. So at most about one upstream
 * chunk waits here per connection: the kernel's socket buffer is the
 * buffer. And its close shuts the socket down after what was queued.
 *
 * A connection's life: accepted (counted against PROXYSRV_MAX_CONNS; one
 * too many gets a 503 and is closed), served, closing (a shutdown after
 * the queued writes, then draining: what the agent still sends is read
 * and dropped until it closes its side or PROXYSRV_DRAIN_MAX bytes, all
 * bounded by PROXYSRV_CLOSE_TIMEOUT_MS), closed (its
 * proxyconn freed when closing starts is not possible, since proxyconn
 * may still be inside the call that closed it: it is freed in the close
 * callback, or at once by proxysrv_free). One timer per listener checks
 * the head deadline and the closing deadline of every connection.
 */
#include "proxysrv.h"

#include "al_err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Answered to a connection over PROXYSRV_MAX_CONNS, as proxyconn answers
 * its own refusals. */
static const char busy_body[] =
    "{\"error\":{\"type\":\"airlock_proxy\",\"status\":503,\"message\":\"too many "
    "connections\"}}";
enum { BUSY_ANSWER_MAX = 256 };

struct sconn {
    struct proxysrv *s;
    struct sconn *prev, *next;
    uv_tcp_t h;
    uv_shutdown_t shut;
    struct proxyconn *pc;
    uint8_t in[PROXYSRV_READ_MAX]; /* read, not yet taken by proxyconn */
    size_t in_off, in_len;
    int reading;
    int eof;             /* the agent closed its side (or its socket failed) */
    int in_feed;         /* inside feed(): input_ready only asks for another round */
    int again;           /* input_ready came during feed() */
    size_t wq;           /* bytes queued in uv_write */
    size_t drained;      /* bytes read and dropped after the shutdown */
    int full;            /* send said 1: proxyconn waits for proxyconn_writable */
    int closing;         /* shutdown or close started: nothing more is sent */
    int closed;          /* uv_close called */
    uint64_t idle_since; /* ms (loop time) the connection has had no request in flight; 0: one is */
    uint64_t closing_at; /* ms closing began */
};

struct wreq {
    uv_write_t req;
    struct sconn *c;
    size_t n;
    char data[];
};

struct proxysrv {
    uv_loop_t *loop;
    struct proxy *p;
    uv_tcp_t listener;
    uv_timer_t timer;
    struct sconn *conns;
    unsigned nconns;
    int port;
    char host[PROXYSRV_ADDR_MAX]; /* as agents reach it, for proxysrv_base */
    int ipv6;
    int open_handles; /* the listener, the timer and the connections not yet closed */
    unsigned head_timeout_ms;
    int freeing;
};

static void srv_maybe_free(struct proxysrv *s)
{
    if (s->freeing && s->open_handles == 0)
        free(s);
}

/* ---- closing --------------------------------------------------------------- */

static void on_conn_closed(uv_handle_t *h)
{
    struct sconn *c = h->data;
    struct proxysrv *s = c->s;
    proxyconn_free(c->pc); /* NULL when proxysrv_free freed it already */
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    free(c);
    s->open_handles--;
    srv_maybe_free(s);
}

static void conn_close_now(struct sconn *c)
{
    if (c->closed)
        return;
    c->closed = 1;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->h, on_conn_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);

/* After the shutdown: drop what the agent still sends, until it closes its
 * side, fails, or has sent PROXYSRV_DRAIN_MAX bytes more. */
static void on_drain(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    struct sconn *c = st->data;
    if (nread == 0)
        return;
    if (nread < 0 || (c->drained += (size_t)nread) > PROXYSRV_DRAIN_MAX)
        conn_close_now(c);
}

/* Our answer is all out (FIN sent): close at once if the agent closed its
 * side already, else drain first (on_tick ends a drain that lasts). */
static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct sconn *c = req->data;
    if (status == 0 && !c->eof && !c->closed &&
        uv_read_start((uv_stream_t *)&c->h, on_alloc, on_drain) == 0) {
        c->reading = 1;
        return;
    }
    conn_close_now(c);
}

/* Close after what was queued (graceful), or at once. */
static void conn_close(struct sconn *c, int graceful)
{
    if (c->closed || (c->closing && graceful))
        return; /* a drain that runs goes on */
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->h);
        c->reading = 0;
    }
    if (!c->closing) {
        c->closing = 1;
        c->closing_at = uv_now(c->s->loop);
        c->shut.data = c;
        if (graceful && uv_shutdown(&c->shut, (uv_stream_t *)&c->h, on_shutdown) == 0)
            return;
    }
    conn_close_now(c);
}

/* ---- writing ----------------------------------------------------------------- */

static void on_write(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct sconn *c = w->c;
    c->wq -= w->n;
    free(w);
    if (status < 0) {
        /* the agent is gone: its call is cancelled */
        c->eof = 1;
        if (c->pc && !c->closing)
            proxyconn_input_end(c->pc);
        conn_close(c, 0);
        return;
    }
    if (c->full && c->wq == 0 && !c->closing && c->pc) {
        c->full = 0;
        proxyconn_writable(c->pc);
    }
}

/* Bytes go to the socket at once when nothing is queued before them and
 * it takes them (uv_try_write); only what it does not take is copied into
 * a write request. Copying every chunk into a fresh 64 KiB allocation cost
 * more than the rest of the proxy together: glibc gave the heap's top back
 * to the kernel at each free (brk, then a TLB flush on every CPU) and the
 * next chunk faulted its pages in again (bench_proxy: 12 core-s per GB).
 * Pausing the upstream as soon as anything waits (t_send) keeps this rare
 * and small: queueing up to 256 KiB first made airlockd's throughput half
 * a plain relay's on a busy machine, pausing at once about 0.85 of it. */
static int queue_write(struct sconn *c, const void *p, size_t n)
{
    if (c->wq == 0) {
        uv_buf_t direct = uv_buf_init((char *)p, (unsigned)n); /* only read */
        int k = uv_try_write((uv_stream_t *)&c->h, &direct, 1);
        if (k > 0) {
            p = (const uint8_t *)p + k;
            n -= (size_t)k;
        } else if (k != UV_EAGAIN && k != UV_ENOSYS) {
            return AL_E_IO;
        }
        if (n == 0)
            return AL_OK;
    }
    struct wreq *w = malloc(sizeof *w + n);
    if (!w)
        return AL_E_NOMEM;
    memcpy(w->data, p, n);
    w->c = c;
    w->n = n;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    if (uv_write(&w->req, (uv_stream_t *)&c->h, &b, 1, on_write) != 0) {
        free(w);
        return AL_E_IO;
    }
    c->wq += n;
    return AL_OK;
}

static int t_send(void *ud, const uint8_t *p, size_t n)
{
    struct sconn *c = ud;
    if (c->closing)
        return -1;
    if (n && queue_write(c, p, n) != AL_OK) {
        conn_close(c, 0);
        return -1;
    }
    if (c->wq > 0) { /* the socket is full: pause until it takes the rest */
        c->full = 1;
        return 1;
    }
    return 0;
}

static void t_close(void *ud)
{
    conn_close(ud, 1);
}

/* ---- reading ----------------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    struct sconn *c = h->data;
    /* reading runs only while in[] is empty */
    *buf = uv_buf_init((char *)c->in, sizeof c->in);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void read_start(struct sconn *c)
{
    if (c->reading || c->closing || c->eof)
        return;
    if (uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read) == 0)
        c->reading = 1;
    else
        conn_close(c, 0);
}

/* Hand proxyconn what was read; read on once it has taken it all. */
static void feed(struct sconn *c)
{
    if (c->in_feed) {
        c->again = 1;
        return;
    }
    c->in_feed = 1;
    do {
        c->again = 0;
        while (c->in_len && !c->closing) {
            size_t k = proxyconn_input(c->pc, c->in + c->in_off, c->in_len);
            c->in_off += k;
            c->in_len -= k;
            if (k == 0)
                break;
        }
    } while (c->again && c->in_len && !c->closing);
    c->in_feed = 0;
    if (c->closing)
        return;
    if (c->in_len) { /* proxyconn is full: input_ready will call again */
        if (c->reading) {
            uv_read_stop((uv_stream_t *)&c->h);
            c->reading = 0;
        }
        return;
    }
    c->in_off = 0;
    if (c->eof)
        proxyconn_input_end(c->pc); /* closes the connection */
    else
        read_start(c);
}

static void t_input_ready(void *ud)
{
    struct sconn *c = ud;
    if (c->in_len)
        feed(c);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    struct sconn *c = st->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        if (c->reading) {
            uv_read_stop(st);
            c->reading = 0;
        }
        c->eof = 1;
        if (nread != UV_EOF) { /* reset: nothing more can be sent either */
            proxyconn_input_end(c->pc);
            conn_close(c, 0);
            return;
        }
        if (!c->in_len)
            proxyconn_input_end(c->pc);
        return;
    }
    c->in_off = 0;
    c->in_len = (size_t)nread;
    feed(c);
}

static const struct proxyconn_ops conn_ops = {t_send, t_close, t_input_ready};

/* ---- accepting ------------------------------------------------------------- */

static void on_busy_written(uv_write_t *req, int status)
{
    (void)status;
    struct wreq *w = (struct wreq *)req;
    struct sconn *c = w->c;
    c->wq -= w->n;
    free(w);
    conn_close(c, 1);
}

/* The peer's address without its port ("" when it cannot be had): the
 * source of the connection's calls in the audit. */
static void peer_address(const uv_tcp_t *h, char *out, size_t cap)
{
    struct sockaddr_storage sa;
    int len = (int)sizeof sa;
    out[0] = '\0';
    if (uv_tcp_getpeername(h, (struct sockaddr *)&sa, &len) != 0)
        return;
    if (sa.ss_family == AF_INET)
        (void)uv_ip4_name((const struct sockaddr_in *)&sa, out, cap);
    else if (sa.ss_family == AF_INET6)
        (void)uv_ip6_name((const struct sockaddr_in6 *)&sa, out, cap);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct proxysrv *s = server->data;
    if (status < 0 || s->freeing)
        return;
    struct sconn *c = calloc(1, sizeof *c);
    if (!c)
        return; /* the connection waits in the backlog; the next one retries */
    c->s = s;
    if (uv_tcp_init(s->loop, &c->h) != 0) {
        free(c);
        return;
    }
    c->h.data = c;
    s->open_handles++;
    s->nconns++;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    c->idle_since = uv_now(s->loop);
    if (uv_accept(server, (uv_stream_t *)&c->h) != 0) {
        conn_close_now(c);
        return;
    }
    (void)uv_tcp_nodelay(&c->h, 1);
    if (s->nconns > PROXYSRV_MAX_CONNS) {
        struct wreq *w = malloc(sizeof *w + BUSY_ANSWER_MAX);
        int n = w ? snprintf(w->data, BUSY_ANSWER_MAX,
                             "HTTP/1.1 503 Service Unavailable\r\n"
                             "Content-Type: application/json\r\n"
                             "Content-Length: %zu\r\n"
                             "Retry-After: 1\r\n"
                             "Connection: close\r\n"
                             "\r\n%s",
                             sizeof busy_body - 1, busy_body)
                  : -1;
        if (n < 0 || n >= BUSY_ANSWER_MAX) {
            free(w);
            conn_close_now(c);
            return;
        }
        w->c = c;
        w->n = (size_t)n;
        c->closing = 1; /* nothing else goes out; the deadline still applies */
        c->closing_at = uv_now(s->loop);
        uv_buf_t b = uv_buf_init(w->data, (unsigned)w->n);
        if (uv_write(&w->req, (uv_stream_t *)&c->h, &b, 1, on_busy_written) != 0) {
            free(w);
            conn_close_now(c);
            return;
        }
        c->wq += w->n;
        return;
    }
    if (proxy_conn(s->p, &conn_ops, c, &c->pc) != AL_OK) {
        conn_close_now(c);
        return;
    }
    char peer[PROXYCONN_SOURCE_MAX + 1] = "";
    peer_address(&c->h, peer, sizeof peer);
    proxyconn_set_source(c->pc, peer);
    read_start(c);
}

static void on_tick(uv_timer_t *t)
{
    struct proxysrv *s = t->data;
    uint64_t now = uv_now(s->loop);
    for (struct sconn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->closed)
            continue;
        if (c->closing) {
            if (now - c->closing_at >= PROXYSRV_CLOSE_TIMEOUT_MS)
                conn_close_now(c);
            continue;
        }
        if (c->pc && proxyconn_busy(c->pc)) {
            c->idle_since = 0;
            continue;
        }
        if (!c->idle_since)
            c->idle_since = now;
        else if (now - c->idle_since >= s->head_timeout_ms) {
            proxyconn_input_end(c->pc); /* nothing in flight: it just closes */
            conn_close(c, 1);
        }
    }
}

/* ---- the listener ------------------------------------------------------------- */

int proxysrv_parse_addr(const char *addr, struct sockaddr_storage *ss)
{
    if (!addr || !ss || strnlen(addr, PROXYSRV_ADDR_MAX) >= PROXYSRV_ADDR_MAX)
        return AL_E_INVAL;
    const char *colon = strrchr(addr, ':');
    if (!colon || !colon[1])
        return AL_E_INVAL;
    char host[PROXYSRV_ADDR_MAX];
    size_t hl = (size_t)(colon - addr);
    int v6 = addr[0] == '[';
    if (v6) {
        if (hl < 3 || addr[hl - 1] != ']')
            return AL_E_INVAL;
        memcpy(host, addr + 1, hl - 2);
        host[hl - 2] = '\0';
    } else {
        memcpy(host, addr, hl);
        host[hl] = '\0';
    }
    unsigned long port = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9' || port > 65535)
            return AL_E_INVAL;
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port > 65535 || colon[1] == '\0')
        return AL_E_INVAL;
    memset(ss, 0, sizeof *ss);
    int rc = v6 ? uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss)
                : uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss);
    /* uv_ip4_addr takes shortened forms ("127.1"): insist on the plain one */
    if (rc == 0 && !v6) {
        struct in_addr a;
        if (inet_pton(AF_INET, host, &a) != 1)
            rc = -1;
    }
    return rc == 0 ? AL_OK : AL_E_INVAL;
}

/* A listening socket of the address, made before any uv handle so that a
 * failure leaves nothing to close; its bound address into *bound. */
static int listen_fd(const struct sockaddr_storage *ss, struct sockaddr_storage *bound, int *out,
                     char *why, size_t cap, const char *addr)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    socklen_t len =
        ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    socklen_t blen = sizeof *bound;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)ss, len) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)bound, &blen) != 0) {
        int e = errno;
        if (fd >= 0)
            (void)close(fd);
        al_errf(why, cap, "the proxy cannot listen on %s: %s", addr, strerror(e));
        return AL_E_IO;
    }
    *out = fd;
    return AL_OK;
}

int proxysrv_new(uv_loop_t *loop, struct proxy *p, const char *addr, struct proxysrv **out,
                 char *why, size_t cap)
{
    struct sockaddr_storage ss, bound;
    if (!loop || !p || !out || proxysrv_parse_addr(addr, &ss) != AL_OK) {
        al_errf(why, cap, "--proxy-listen: expected ADDR:PORT (an IPv4 address or [IPv6])");
        return AL_E_INVAL;
    }
    int fd = -1;
    memset(&bound, 0, sizeof bound);
    int rc = listen_fd(&ss, &bound, &fd, why, cap, addr);
    if (rc != AL_OK)
        return rc;
    struct proxysrv *s = calloc(1, sizeof *s);
    if (!s) {
        (void)close(fd);
        return AL_E_NOMEM;
    }
    s->loop = loop;
    s->p = p;
    s->head_timeout_ms = PROXYSRV_HEAD_TIMEOUT_MS;
    s->ipv6 = ss.ss_family == AF_INET6;
    /* uv_tcp_init and uv_timer_init cannot fail on a live loop; uv_tcp_open
     * of a fresh socket neither */
    (void)uv_tcp_init(loop, &s->listener);
    (void)uv_timer_init(loop, &s->timer);
    s->listener.data = s;
    s->timer.data = s;
    s->open_handles = 2;
    int e = uv_tcp_open(&s->listener, fd);
    if (e != 0)
        (void)close(fd); /* not the handle's */
    else
        e = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, on_connection);
    if (e != 0) {
        al_errf(why, cap, "the proxy cannot listen on %s: %s", addr, uv_strerror(e));
        proxysrv_free(s); /* closes the socket with the handle */
        return AL_E_IO;
    }
    (void)uv_timer_start(&s->timer, on_tick, PROXYSRV_TICK_MS, PROXYSRV_TICK_MS);
    char host[INET6_ADDRSTRLEN];
    if (s->ipv6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&bound;
        s->port = ntohs(a->sin6_port);
        if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
            (void)snprintf(host, sizeof host, "::1");
        else
            (void)inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        (void)snprintf(s->host, sizeof s->host, "[%s]", host);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&bound;
        s->port = ntohs(a->sin_port);
        if (a->sin_addr.s_addr == htonl(INADDR_ANY))
            (void)snprintf(host, sizeof host, "127.0.0.1");
        else
            (void)inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        (void)snprintf(s->host, sizeof s->host, "%s", host);
    }
    *out = s;
    return AL_OK;
}

static void on_srv_handle_closed(uv_handle_t *h)
{
    struct proxysrv *s = h->data;
    s->open_handles--;
    srv_maybe_free(s);
}

void proxysrv_free(struct proxysrv *s)
{
    if (!s)
        return;
    s->freeing = 1;
    for (struct sconn *c = s->conns; c; c = c->next) {
        /* at once: the proxy may be freed next, and its calls with it */
        struct proxyconn *pc = c->pc;
        c->pc = NULL;
        c->closing = 1;
        proxyconn_free(pc);
        conn_close_now(c);
    }
    uv_close((uv_handle_t *)&s->listener, on_srv_handle_closed);
    uv_close((uv_handle_t *)&s->timer, on_srv_handle_closed);
}

int proxysrv_port(const struct proxysrv *s)
{
    return s->port;
}

void proxysrv_base(const struct proxysrv *s, char *out, size_t cap)
{
    (void)snprintf(out, cap, "http://%s:%d/v1/proxy", s->host, s->port);
}

void proxysrv_set_head_timeout(struct proxysrv *s, unsigned ms)
{
    s->head_timeout_ms = ms;
}

unsigned proxysrv_conns(const struct proxysrv *s)
{
    return s->nconns;
}
