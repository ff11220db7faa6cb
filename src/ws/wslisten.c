/* wslisten: see wslisten.h. */
#include "wslisten.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "al_err.h"
#include "al_log.h"

#define WSL_EXPIRED_BATCH 256 /* deadlines handled per sweep */

static const char answer_per_ip[] = "HTTP/1.1 429 Too Many Requests\r\n"
                                    "Content-Type: text/plain\r\nContent-Length: 39\r\n"
                                    "Retry-After: 1\r\nConnection: close\r\n\r\n"
                                    "too many connections from your address\n";
static const char answer_full[] = "HTTP/1.1 503 Service Unavailable\r\n"
                                  "Content-Type: text/plain\r\nContent-Length: 34\r\n"
                                  "Retry-After: 1\r\nConnection: close\r\n\r\n"
                                  "the server has too many connections\n";

struct wsl {
    struct wsl_config cfg;
    int fd;
    uv_poll_t poll;
    uv_timer_t pause, sweep;
    int handles_open; /* closed handles still to be called back */
    int closing;
    struct clim *lim;
    struct al_lograte log_accept, log_per_ip, log_full, log_deadline;
};

__attribute__((format(printf, 3, 4))) static void wlog(const struct wsl *l, int level,
                                                       const char *fmt, ...)
{
    if (level > l->cfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    al_vlog(l->cfg.log_format, l->cfg.prog, l->cfg.instance, level, fmt, ap);
    va_end(ap);
}

static uint64_t now_ms(const struct wsl *l)
{
    return uv_now(l->cfg.loop);
}

static void on_readable(uv_poll_t *h, int status, int events);

static void on_pause_end(uv_timer_t *h)
{
    struct wsl *l = h->data;
    if (!l->closing)
        (void)uv_poll_start(&l->poll, UV_READABLE, on_readable);
}

/* accept() has no descriptor to give: stop polling the listener a while. */
static void out_of_fds(struct wsl *l, int err)
{
    (void)uv_poll_stop(&l->poll);
    (void)uv_timer_start(&l->pause, on_pause_end, WSL_PAUSE_MS, 0);
    unsigned long n = al_lograte_hit(&l->log_accept, now_ms(l), WSL_LOG_INTERVAL_MS);
    if (n)
        wlog(l, 0,
             "accept: %s (%lu times since the last line): pausing accepts for %d ms each time",
             strerror(err), n, WSL_PAUSE_MS);
}

static void refuse(struct wsl *l, int fd, const char *addr, enum clim_verdict v)
{
    const char *msg = v == CLIM_PER_IP ? answer_per_ip : answer_full;
    /* best effort: a fresh socket's send buffer is empty */
    (void)send(fd, msg, strlen(msg), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)close(fd);
    struct al_lograte *r = v == CLIM_PER_IP ? &l->log_per_ip : &l->log_full;
    unsigned long n = al_lograte_hit(r, now_ms(l), WSL_LOG_INTERVAL_MS);
    if (n)
        wlog(l, 1, "refused %lu connection%s since the last line (last from %s): %s", n,
             n == 1 ? "" : "s", addr, clim_verdict_text(v));
}

static void take(struct wsl *l, int fd, const struct sockaddr_in *sin)
{
    char addr[CLIM_ADDR_MAX] = "?";
    (void)inet_ntop(AF_INET, &sin->sin_addr, addr, sizeof addr);
    int slot;
    enum clim_verdict v = clim_admit(l->lim, addr, now_ms(l), &slot);
    if (v != CLIM_ADMITTED) {
        refuse(l, fd, addr, v);
        return;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    lws_sock_file_fd_type sock;
    memset(&sock, 0, sizeof sock);
    sock.sockfd = fd;
    int type = LWS_ADOPT_SOCKET | LWS_ADOPT_HTTP | (l->cfg.tls ? LWS_ADOPT_ALLOW_SSL : 0);
    struct lws *wsi =
        lws_adopt_descriptor_vhost(l->cfg.vhost, (lws_adoption_type)type, sock, NULL, NULL);
    if (!wsi) { /* lws closed the socket */
        clim_release_slot(l->lim, slot);
        wlog(l, 0, "cannot hand a connection from %s to libwebsockets", addr);
        return;
    }
    clim_bind(l->lim, slot, wsi);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    (void)events;
    struct wsl *l = h->data;
    if (status < 0 || l->closing)
        return;
    for (int i = 0; i < WSL_ACCEPT_BURST; i++) {
        struct sockaddr_in sin;
        socklen_t sl = sizeof sin;
        memset(&sin, 0, sizeof sin);
        int fd = accept4(l->fd, (struct sockaddr *)&sin, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            take(l, fd, &sin);
            continue;
        }
        int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK)
            return;
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
            out_of_fds(l, err);
            return;
        }
        /* ECONNABORTED, EINTR, EPROTO...: that one connection is gone */
    }
}

static void on_sweep(uv_timer_t *h)
{
    struct wsl *l = h->data;
    const void *keys[WSL_EXPIRED_BATCH];
    size_t n = clim_expired(l->lim, now_ms(l), keys, WSL_EXPIRED_BATCH);
    /* closed here and now: an async kill is a pending timeout that lws
     * replaces with its own at the next body chunk (a slow body would
     * live on); this runs outside any lws callback, so a sync close is
     * safe, and each key is a distinct wsi whose slot it frees */
    for (size_t i = 0; i < n; i++)
        lws_set_timeout((struct lws *)keys[i], PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC);
    for (size_t i = 0; i < n; i++) {
        unsigned long c = al_lograte_hit(&l->log_deadline, now_ms(l), WSL_LOG_INTERVAL_MS);
        if (c)
            wlog(l, 1,
                 "closed %lu connection%s since the last line: request not done within %llu ms", c,
                 c == 1 ? "" : "s", (unsigned long long)clim_limits_of(l->lim)->deadline_ms);
    }
}

/* max_total fits under RLIMIT_NOFILE, with room for everything else. */
static unsigned fit_rlimit(unsigned want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return want;
    rlim_t reserve = rl.rlim_cur / WSL_FD_RESERVE_DIV;
    if (reserve < WSL_FD_RESERVE_MIN)
        reserve = WSL_FD_RESERVE_MIN;
    rlim_t room = rl.rlim_cur > reserve + 1 ? rl.rlim_cur - reserve : 1;
    return (rlim_t)want > room ? (unsigned)room : want;
}

static int open_listener(const struct wsl_config *cfg, char *err, size_t cap)
{
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)cfg->port);
    if (cfg->host && cfg->host[0] && inet_pton(AF_INET, cfg->host, &sin.sin_addr) != 1) {
        al_errf(err, cap, "cannot listen on %s: not an IPv4 address", cfg->host);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        al_errf(err, cap, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(fd, WSL_BACKLOG) != 0) {
        al_errf(err, cap, "cannot listen on %s:%d: %s", cfg->host && cfg->host[0] ? cfg->host : "*",
                cfg->port, strerror(errno));
        (void)close(fd);
        return -1;
    }
    return fd;
}

int wsl_start(const struct wsl_config *cfg, struct wsl **out, char *err, size_t cap)
{
    *out = NULL;
    struct wsl *l = calloc(1, sizeof *l);
    if (!l)
        return AL_E_NOMEM;
    l->cfg = *cfg;
    unsigned fit = fit_rlimit(cfg->lim.max_total);
    if (fit < cfg->lim.max_total)
        wlog(l, 1, "at most %u connections (of %u asked): RLIMIT_NOFILE is the bound", fit,
             cfg->lim.max_total);
    l->cfg.lim.max_total = fit;
    if (l->cfg.lim.max_per_ip > fit)
        l->cfg.lim.max_per_ip = fit;
    int rc = clim_new(&l->cfg.lim, &l->lim);
    if (rc != AL_OK) {
        al_errf(err, cap, "connection limits: %s", al_strerror(rc));
        free(l);
        return rc;
    }
    l->fd = open_listener(cfg, err, cap);
    if (l->fd < 0) {
        clim_free(l->lim);
        free(l);
        return AL_E_IO;
    }
    (void)uv_poll_init(cfg->loop, &l->poll, l->fd);
    (void)uv_timer_init(cfg->loop, &l->pause);
    (void)uv_timer_init(cfg->loop, &l->sweep);
    l->poll.data = l->pause.data = l->sweep.data = l;
    l->handles_open = 3;
    (void)uv_poll_start(&l->poll, UV_READABLE, on_readable);
    (void)uv_timer_start(&l->sweep, on_sweep, WSL_SWEEP_MS, WSL_SWEEP_MS);
    *out = l;
    return AL_OK;
}

static void on_closed(uv_handle_t *h)
{
    struct wsl *l = h->data;
    if (--l->handles_open > 0)
        return;
    (void)close(l->fd);
    clim_free(l->lim);
    free(l);
}

void wsl_close(struct wsl *l)
{
    if (!l || l->closing)
        return;
    l->closing = 1;
    uv_close((uv_handle_t *)&l->poll, on_closed);
    uv_close((uv_handle_t *)&l->pause, on_closed);
    uv_close((uv_handle_t *)&l->sweep, on_closed);
}

void wsl_gone(struct wsl *l, struct lws *wsi)
{
    if (l)
        (void)clim_release(l->lim, wsi);
}

void wsl_deadline(struct wsl *l, struct lws *wsi, int on)
{
    if (!l)
        return;
    uint64_t d = clim_limits_of(l->lim)->deadline_ms;
    clim_set_deadline(l->lim, wsi, on && d ? now_ms(l) + d : 0);
}

const struct clim_limits *wsl_limits(const struct wsl *l)
{
    return clim_limits_of(l->lim);
}

int wsl_port(const struct wsl *l)
{
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    socklen_t len = sizeof sin;
    if (!l || getsockname(l->fd, (struct sockaddr *)&sin, &len) != 0 || sin.sin_family != AF_INET)
        return -1;
    return ntohs(sin.sin_port);
}
