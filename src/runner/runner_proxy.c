/*
 * runner_proxy: see runner_proxy.h.
 *
 * One connection's life:
 *
 *   accepted --ep_proxy_open--> OPEN: agent bytes --> channel stdout,
 *       |                             channel stdin (DATA) --> the socket
 *       |                         stdin EOF (the answer is complete)
 *       | no ready link, or           v
 *       | no proxy channel left    CLOSING: the channel closed; what is
 *       '-- canned 503 ---------->  queued is written, then our side shut
 *                                   down; the agent's bytes are read and
 *                                   dropped until its EOF (closing a socket
 *                                   with unread bytes resets it, and the
 *                                   answer could be lost), at most
 *                                   RUNNER_PROXY_CLOSE_MS
 *
 * A channel that ends otherwise (airlockd closed it or refused it, the link
 * dropped) closes the connection at once: the agent sees its call cut.
 * An agent that resets or errors closes the channel. The agent's EOF goes
 * on as EOF on the channel's stdout; airlockd takes it, during a call, as
 * the agent gone and cancels the call (docs/proxy.md: a close and a half
 * close look the same until a write fails, and a stream may be silent for
 * minutes), then closes the channel.
 *
 * Flow control: the agent's bytes are read only into the room the
 * channel's ring has (ep_writable), and reading stops when it is full until
 * EP_EV_WRITABLE; answer bytes are granted back to airlockd (ep_consume)
 * only once the socket has taken them, so a slow agent holds at most a
 * window of them here.
 */
#include "runner_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "al_err.h"
#include "endpoint.h"
#include "frame.h"

#define READ_MAX 65536

enum cstate {
    C_OPEN,    /* carried on channel ch (or about to get the canned answer) */
    C_CLOSING, /* answered: draining until the agent's EOF or the deadline */
    C_GONE,    /* uv_close called */
};

struct conn {
    struct runner_proxy *px;
    union {
        uv_handle_t h;
        uv_stream_t s;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } u;
    struct conn *prev, *next;
    uint32_t ch; /* 0: no channel (canned answer, or the channel ended) */
    enum cstate state;
    int reading;
    int agent_eof;     /* the agent closed its sending side */
    size_t writing;    /* bytes handed to uv_write and not written yet */
    int shut_started;  /* our sending side: shutdown asked */
    int shut_done;     /* ... and done */
    uint64_t close_at; /* C_CLOSING: closed for good then (loop ms) */
    uv_shutdown_t shut;
};

/* One write toward the agent; owns a copy of its bytes. */
struct wreq {
    uv_write_t req;
    struct conn *c;
    uint32_t ch; /* the channel its bytes came on (0: the canned answer) */
    size_t n;
    uint8_t data[];
};

struct runner_proxy {
    uv_loop_t *loop;
    struct runner_proxy_config cfg;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_timer_t tick;
    int have_tcp, have_pipe;
    int port;
    char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    struct conn *conns;
    unsigned nconns;
    int handles; /* open handles, its own and its connections' */
    int freeing;
    uint8_t readbuf[READ_MAX];
};

static void logf_(const struct runner_proxy *px, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void logf_(const struct runner_proxy *px, int level, const char *fmt, ...)
{
    if (!px->cfg.log)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    px->cfg.log(px->cfg.ud, level, line);
}

static void wake(struct runner_proxy *px)
{
    if (px->cfg.wake)
        px->cfg.wake(px->cfg.ud);
}

static void handle_gone(struct runner_proxy *px)
{
    if (--px->handles == 0 && px->freeing)
        free(px);
}

/* ---- connections ---------------------------------------------------------- */

static struct conn *conn_of(const struct runner_proxy *px, uint32_t ch)
{
    for (struct conn *c = px->conns; c; c = c->next)
        if (c->ch == ch && c->state != C_GONE)
            return c;
    return NULL;
}

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    struct runner_proxy *px = c->px;
    if (c->prev)
        c->prev->next = c->next;
    else
        px->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    px->nconns--;
    free(c);
    handle_gone(px);
}

/* Close the connection now; its channel, if any, is closed too. */
static void conn_close(struct conn *c)
{
    if (c->state == C_GONE)
        return;
    if (c->ch)
        (void)ep_close(c->px->cfg.ep, c->ch);
    c->ch = 0;
    c->state = C_GONE;
    uv_close(&c->u.h, on_conn_closed);
    wake(c->px);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;
    (void)status;
    c->shut_done = 1;
    if (c->state == C_CLOSING && c->agent_eof)
        conn_close(c);
}

/* Once every queued byte is written: shut our side down. */
static void maybe_shutdown(struct conn *c)
{
    if (c->state != C_CLOSING || c->shut_started || c->writing)
        return;
    c->shut_started = 1;
    c->shut.data = c;
    if (uv_shutdown(&c->shut, &c->u.s, on_shutdown) != 0)
        conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct conn *c = h->data;
    struct runner_proxy *px = c->px;
    size_t n = sizeof px->readbuf;
    (void)hint;
    if (c->state == C_OPEN && c->ch) {
        size_t room = ep_writable(px->cfg.ep, c->ch, FR_STDOUT);
        if (room < n)
            n = room;
    }
    buf->base = (char *)px->readbuf;
    buf->len = n;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    struct runner_proxy *px = c->px;
    if (c->state == C_GONE)
        return;
    if (nread == UV_ENOBUFS || nread == 0) {
        if (nread == UV_ENOBUFS) { /* the ring is full: EP_EV_WRITABLE resumes */
            (void)uv_read_stop(s);
            c->reading = 0;
        }
        return;
    }
    if (nread == UV_EOF) {
        c->agent_eof = 1;
        (void)uv_read_stop(s);
        c->reading = 0;
        if (c->state == C_CLOSING) {
            if (c->shut_done)
                conn_close(c);
        } else if (c->ch) {
            (void)ep_eof(px->cfg.ep, c->ch, FR_STDOUT); /* a half close */
            wake(px);
        }
        return;
    }
    if (nread < 0) {
        logf_(px, 2, "proxy connection: %s", uv_strerror((int)nread));
        conn_close(c);
        return;
    }
    if (c->state != C_OPEN || !c->ch)
        return; /* answered already: dropped */
    long took = ep_write(px->cfg.ep, c->ch, FR_STDOUT, (const uint8_t *)buf->base, (size_t)nread);
    if (took != nread) { /* on_alloc sized the read to the room: cannot happen */
        logf_(px, 0, "proxy channel %u: %zd bytes read, %ld taken", (unsigned)c->ch, nread, took);
        conn_close(c);
        return;
    }
    if (ep_writable(px->cfg.ep, c->ch, FR_STDOUT) == 0) {
        (void)uv_read_stop(s);
        c->reading = 0;
    }
    wake(px);
}

static void start_reading(struct conn *c)
{
    if (c->reading || c->agent_eof || c->state == C_GONE)
        return;
    if (c->state == C_OPEN && c->ch && ep_writable(c->px->cfg.ep, c->ch, FR_STDOUT) == 0)
        return;
    if (uv_read_start(&c->u.s, on_alloc, on_read) == 0)
        c->reading = 1;
}

static void on_written(uv_write_t *req, int status)
{
    struct wreq *w = req->data;
    struct conn *c = w->c;
    struct runner_proxy *px = c->px;
    c->writing -= w->n;
    if (status == 0 && w->ch && c->ch == w->ch) {
        (void)ep_consume(px->cfg.ep, w->ch, FR_STDIN, w->n); /* delivered: credit */
        wake(px);
    }
    free(w);
    if (status < 0 && c->state != C_GONE) {
        conn_close(c);
        return;
    }
    maybe_shutdown(c);
}

/* Bytes for the agent: to its socket at once when nothing is queued
 * before them (uv_try_write: no copy, the credit granted now), and what
 * it does not take copied for uv_write, credited once written. A copy per
 * 64 KiB message was a quarter of the runner's instructions on the proxy
 * channel (callgrind, docs/performance.md), as proxysrv.c's was airlockd's. */
static int conn_write(struct conn *c, uint32_t ch, const uint8_t *p, size_t n)
{
    struct runner_proxy *px = c->px;
    if (!c->writing && uv_stream_get_write_queue_size(&c->u.s) == 0) {
        uv_buf_t now = uv_buf_init((char *)p, (unsigned)n);
        int r = uv_try_write(&c->u.s, &now, 1);
        if (r < 0 && r != UV_EAGAIN)
            return AL_E_IO;
        if (r > 0) {
            if (ch && c->ch == ch) {
                (void)ep_consume(px->cfg.ep, ch, FR_STDIN, (size_t)r); /* delivered: credit */
                wake(px);
            }
            p += r;
            n -= (size_t)r;
        }
        if (!n)
            return AL_OK;
    }
    struct wreq *w = malloc(sizeof *w + n);
    if (!w)
        return AL_E_NOMEM;
    w->c = c;
    w->ch = ch;
    w->n = n;
    memcpy(w->data, p, n);
    w->req.data = w;
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)n);
    if (uv_write(&w->req, &c->u.s, &b, 1, on_written) != 0) {
        free(w);
        return AL_E_IO;
    }
    c->writing += n;
    return AL_OK;
}

/* The answer is all queued (or canned): close the channel, finish the
 * connection gracefully. */
static void conn_finish(struct conn *c)
{
    struct runner_proxy *px = c->px;
    if (c->state != C_OPEN)
        return;
    if (c->ch) {
        (void)ep_close(px->cfg.ep, c->ch);
        c->ch = 0;
        wake(px);
    }
    c->state = C_CLOSING;
    c->close_at = uv_now(px->loop) + RUNNER_PROXY_CLOSE_MS;
    start_reading(c); /* drain what the agent still sends */
    maybe_shutdown(c);
}

/* The only HTTP the runner writes: the proxy's 503, its JSON body. */
static void conn_canned_503(struct conn *c, const char *why)
{
    char body[256], resp[512];
    int bn = snprintf(body, sizeof body,
                      "{\"error\": {\"type\": \"airlock_proxy\", \"status\": 503, \"message\": "
                      "\"%s\"}}",
                      why);
    int rn = snprintf(resp, sizeof resp,
                      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                      "Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s",
                      bn, body);
    if (bn < 0 || rn < 0 || (size_t)rn >= sizeof resp ||
        conn_write(c, 0, (const uint8_t *)resp, (size_t)rn) != AL_OK) {
        conn_close(c);
        return;
    }
    conn_finish(c);
}

/* Only local peers: the listener is on loopback, and a peer that is not
 * (it cannot be) is closed. Unix sockets are local by nature. */
static int peer_local(const struct conn *c)
{
    if (c->u.h.type != UV_TCP)
        return 1;
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->u.tcp, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

static void on_connection(uv_stream_t *server, int status)
{
    struct runner_proxy *px = server->data;
    if (status < 0 || px->freeing)
        return;
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->px = px;
    int rc = server->type == UV_TCP ? uv_tcp_init(px->loop, &c->u.tcp)
                                    : uv_pipe_init(px->loop, &c->u.pipe, 0);
    if (rc != 0) {
        free(c);
        return;
    }
    c->u.h.data = c;
    c->next = px->conns;
    if (px->conns)
        px->conns->prev = c;
    px->conns = c;
    px->nconns++;
    px->handles++;
    if (uv_accept(server, &c->u.s) != 0 || !peer_local(c) || px->nconns > RUNNER_PROXY_MAX_CONNS) {
        conn_close(c);
        return;
    }
    if (c->u.h.type == UV_TCP)
        (void)uv_tcp_nodelay(&c->u.tcp, 1);
    long id = ep_proxy_open(px->cfg.ep);
    if (id == AL_E_STATE) {
        conn_canned_503(c, "the sandbox's link to airlockd is down; try again");
        return;
    }
    if (id < 0) {
        conn_canned_503(c, id == AL_E_LIMIT ? "too many proxy connections at once"
                                            : "cannot open a proxy channel");
        return;
    }
    c->ch = (uint32_t)id;
    logf_(px, 2, "proxy channel %u: opened", (unsigned)c->ch);
    start_reading(c);
    wake(px);
}

void runner_proxy_event(struct runner_proxy *px, const struct ep_event *ev)
{
    struct conn *c = conn_of(px, ev->channel);
    switch (ev->type) {
    case EP_EV_DATA:
        if (ev->stream != FR_STDIN)
            break;
        if (!c || c->state != C_OPEN || conn_write(c, c->ch, ev->data, ev->len) != AL_OK) {
            if (c)
                conn_close(c);
            else
                (void)ep_close(px->cfg.ep, ev->channel);
        }
        break;
    case EP_EV_EOF:
        if (c && ev->stream == FR_STDIN)
            conn_finish(c); /* the answer is complete */
        break;
    case EP_EV_CLOSED:
        /* airlockd ended it, refused it, or the link dropped: cut */
        if (c) {
            c->ch = 0;
            logf_(px, 2, "proxy channel %u: ended by the other side", (unsigned)ev->channel);
            conn_close(c);
        }
        break;
    case EP_EV_WRITABLE:
        if (c && ev->stream == FR_STDOUT)
            start_reading(c);
        break;
    case EP_EV_ERROR:
        logf_(px, 1, "proxy channel %u: airlockd says (%u) %.*s", (unsigned)ev->channel, ev->code,
              (int)ev->len, (const char *)ev->data);
        break;
    default:
        break;
    }
}

/* ---- the listeners ---------------------------------------------------------- */

static void on_tick(uv_timer_t *t)
{
    struct runner_proxy *px = t->data;
    uint64_t now = uv_now(px->loop);
    struct conn *c = px->conns;
    while (c) {
        struct conn *next = c->next;
        if (c->state == C_CLOSING && now >= c->close_at)
            conn_close(c);
        c = next;
    }
}

int runner_proxy_addr_ok(const char *addr)
{
    char host[RUNNER_PROXY_ADDR_MAX];
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (!colon || (size_t)(colon - addr) >= sizeof host || colon == addr)
        return 0;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || port > 65535 || colon[1] == '-' || colon[1] == '+')
        return 0;
    if (strcmp(host, "[::1]") == 0)
        return 1;
    struct in_addr a;
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static int listen_tcp(struct runner_proxy *px, const char *addr, char *why, size_t cap)
{
    char host[RUNNER_PROXY_ADDR_MAX];
    const char *colon = strrchr(addr, ':');
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    int port = (int)strtol(colon + 1, NULL, 10); /* checked by runner_proxy_addr_ok */
    struct sockaddr_storage ss;
    int rc = host[0] == '[' ? uv_ip6_addr("::1", port, (struct sockaddr_in6 *)&ss)
                            : uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
    if (rc == 0)
        rc = uv_tcp_init(px->loop, &px->tcp);
    if (rc != 0) {
        (void)snprintf(why, cap, "--proxy-listen %s: %s", addr, uv_strerror(rc));
        return AL_E_INVAL;
    }
    px->have_tcp = 1;
    px->handles++;
    px->tcp.data = px;
    rc = uv_tcp_bind(&px->tcp, (const struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&px->tcp, 128, on_connection);
    if (rc != 0) {
        (void)snprintf(why, cap, "--proxy-listen %s: %s", addr, uv_strerror(rc));
        return AL_E_IO;
    }
    struct sockaddr_storage bound;
    int len = sizeof bound;
    if (uv_tcp_getsockname(&px->tcp, (struct sockaddr *)&bound, &len) == 0)
        px->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                     : ((struct sockaddr_in *)&bound)->sin_port);
    char url[AL_MAX_PROXY_URL + 1];
    (void)snprintf(url, sizeof url, "http://%s:%d", host, px->port);
    if (ep_proxy_at(px->cfg.ep, url) != AL_OK) {
        (void)snprintf(why, cap, "--proxy-listen %s: cannot announce it", addr);
        return AL_E_INVAL;
    }
    logf_(px, 1, "credential proxy listener on %s", url);
    return AL_OK;
}

static int listen_unix(struct runner_proxy *px, const char *path, char *why, size_t cap)
{
    if (strlen(path) >= sizeof px->sock_path) {
        (void)snprintf(why, cap, "--proxy-socket: the path is too long");
        return AL_E_INVAL;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            (void)snprintf(why, cap, "--proxy-socket %s: exists and is not a socket", path);
            return AL_E_INVAL;
        }
        (void)unlink(path); /* an earlier run's */
    }
    int rc = uv_pipe_init(px->loop, &px->pipe, 0);
    if (rc != 0) {
        (void)snprintf(why, cap, "--proxy-socket %s: %s", path, uv_strerror(rc));
        return AL_E_IO;
    }
    px->have_pipe = 1;
    px->handles++;
    px->pipe.data = px;
    rc = uv_pipe_bind(&px->pipe, path);
    if (rc == 0) {
        (void)snprintf(px->sock_path, sizeof px->sock_path, "%s", path);
        /* agents may run as another user: the socket is theirs to connect
         * (read and write for all, nothing else, whatever the umask) */
        rc = chmod(path, 0666) == 0 ? 0 : uv_translate_sys_error(errno);
    }
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&px->pipe, 128, on_connection);
    if (rc != 0) {
        (void)snprintf(why, cap, "--proxy-socket %s: %s", path, uv_strerror(rc));
        return AL_E_IO;
    }
    logf_(px, 1, "credential proxy listener on unix:%s", path);
    return AL_OK;
}

static void on_own_closed(uv_handle_t *h)
{
    handle_gone(h->data);
}

int runner_proxy_new(uv_loop_t *loop, const struct runner_proxy_config *cfg,
                     struct runner_proxy **out, char *why, size_t cap)
{
    *out = NULL;
    if (!cfg->ep || (!cfg->listen && !cfg->socket))
        return AL_E_INVAL;
    if (cfg->listen && !runner_proxy_addr_ok(cfg->listen)) {
        (void)snprintf(why, cap,
                       "--proxy-listen %s: not ADDR:PORT with a loopback address (127.0.0.1, "
                       "[::1])",
                       cfg->listen);
        return AL_E_INVAL;
    }
    struct runner_proxy *px = calloc(1, sizeof *px);
    if (!px)
        return AL_E_NOMEM;
    px->loop = loop;
    px->cfg = *cfg;
    (void)uv_timer_init(loop, &px->tick);
    px->tick.data = px;
    px->handles++;
    (void)uv_timer_start(&px->tick, on_tick, RUNNER_PROXY_TICK_MS, RUNNER_PROXY_TICK_MS);
    int rc = AL_OK;
    if (cfg->listen)
        rc = listen_tcp(px, cfg->listen, why, cap);
    if (rc == AL_OK && cfg->socket)
        rc = listen_unix(px, cfg->socket, why, cap);
    if (rc != AL_OK) {
        runner_proxy_free(px);
        return rc;
    }
    *out = px;
    return AL_OK;
}

void runner_proxy_free(struct runner_proxy *px)
{
    if (!px || px->freeing)
        return;
    (void)ep_proxy_at(px->cfg.ep, NULL);
    px->freeing = 1;
    struct conn *c = px->conns;
    while (c) {
        struct conn *next = c->next;
        c->ch = 0; /* the endpoint goes with the runner */
        if (c->state != C_GONE) {
            c->state = C_GONE;
            uv_close(&c->u.h, on_conn_closed);
        }
        c = next;
    }
    uv_close((uv_handle_t *)&px->tick, on_own_closed);
    if (px->have_tcp)
        uv_close((uv_handle_t *)&px->tcp, on_own_closed);
    if (px->have_pipe)
        uv_close((uv_handle_t *)&px->pipe, on_own_closed);
    if (px->sock_path[0])
        (void)unlink(px->sock_path);
}

int runner_proxy_port(const struct runner_proxy *px)
{
    return px ? px->port : 0;
}

unsigned runner_proxy_conns(const struct runner_proxy *px)
{
    return px ? px->nconns : 0;
}
