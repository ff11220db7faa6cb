/*
 * proxyup: libcurl's multi interface driven by a libuv loop.
 *
 * The shape is curl's own "multi_socket" pattern: libcurl tells us which
 * sockets to watch (sock_cb) and when to wake it (timer_cb); the loop
 * watches them with one uv_poll_t per socket and one uv_timer_t, and hands
 * every event back with curl_multi_socket_action. Finished transfers are
 * collected after each action (reap). A second timer ticks while some call
 * still waits for its response head, for the response timeout.
 *
 * libcurl takes a socket out of the watch list each time a transfer is
 * paused (CURL_POLL_REMOVE) and puts it back when it resumes, which a
 * proxied answer does once per credit grant: a removed socket's poll
 * handle is stopped and kept (at most IDLE_SOCKS of them), and taken again
 * when the same descriptor comes back, rather than closed and made anew
 * (uv_poll_init_socket costs two epoll_ctl and a handle per grant). A kept
 * handle is stopped, so libuv watches nothing for its descriptor, which
 * may meanwhile be closed and reused: it is matched by number only.
 *
 * libcurl forbids removing an easy handle from inside one of its own
 * callbacks; a call cancelled there is only marked, its callbacks refuse
 * to run, and it is removed once the action returns.
 */
#include "proxyup.h"

#include "al_err.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    HEAD_TICK_MS = 250,     /* how often waiting heads are checked */
    UP_BUFFER = 64 * 1024,  /* libcurl's receive buffer */
    MAX_HEADER_LINES = 128, /* request header lines handed to libcurl */
    IDLE_SOCKS = 16,        /* stopped poll handles kept for reuse */
};

struct sock {
    uv_poll_t poll;
    curl_socket_t fd;
    struct proxyup *u;
    struct sock *next_idle; /* in proxyup.idle while stopped */
};

struct proxyup_call {
    struct proxyup *u;
    CURL *easy;
    struct curl_slist *hdrs;
    struct proxyup_cb cb;
    void *ud;
    uint64_t head_deadline_ms;  /* 0: the head is in */
    int status;                 /* the final (>= 200) status, 0 before */
    int cancelled;              /* no callback runs any more */
    int timed_out;              /* our response timeout fired */
    int down_paused, up_paused; /* libcurl's pause state is one mask for both */
    int send_cut;               /* a final answer >= 300 came while the upload was paused */
    struct proxyup_call *next, *prev;
    char err[CURL_ERROR_SIZE];
};

struct proxyup {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;     /* libcurl's */
    uv_timer_t head_tick; /* response timeouts */
    struct proxyup_call *calls;
    unsigned n;
    int in_action; /* inside curl_multi_socket_action */
    int closing;
    int open_handles;  /* uv handles not yet closed */
    struct sock *idle; /* stopped poll handles, newest first */
    unsigned n_idle;
};

static void call_remove(struct proxyup_call *c)
{
    struct proxyup *u = c->u;
    curl_multi_remove_handle(u->multi, c->easy);
    curl_easy_cleanup(c->easy);
    curl_slist_free_all(c->hdrs);
    if (c->prev)
        c->prev->next = c->next;
    else
        u->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    u->n--;
    free(c);
}

static enum proxyup_result result_of(const struct proxyup_call *c, CURLcode rc)
{
    if (c->timed_out)
        return PROXYUP_TIMEOUT;
    switch (rc) {
    case CURLE_OK:
        return PROXYUP_OK;
    case CURLE_OPERATION_TIMEDOUT:
        return PROXYUP_TIMEOUT;
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_WRITE_ERROR:
    case CURLE_READ_ERROR:
        return PROXYUP_ABORTED;
    default:
        return c->status ? PROXYUP_BROKEN : PROXYUP_REFUSED;
    }
}

/* Collect finished transfers and cancelled calls. */
static void reap(struct proxyup *u)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(u->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct proxyup_call *c = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        if (!c)
            continue;
        CURLcode rc = msg->data.result;
        if (!c->cancelled) {
            c->cancelled = 1;
            enum proxyup_result r = result_of(c, rc);
            const char *why = c->timed_out ? "the upstream did not answer in time"
                              : c->err[0]  ? c->err
                                           : curl_easy_strerror(rc);
            c->cb.on_done(c->ud, r, r == PROXYUP_OK ? "" : why);
        }
        call_remove(c);
    }
    for (struct proxyup_call *c = u->calls, *nx; c; c = nx) {
        nx = c->next;
        if (c->cancelled)
            call_remove(c);
    }
}

/* libcurl stops sending a request body once a final answer of 300 or more
 * has come before its end (its "HTTP error before end of send": a server
 * refusing an upload), but an upload we paused keeps its pause bit, and a
 * transfer with a paused direction never ends: the answer would be all in
 * and the call never done. So such an upload is let go, outside libcurl's
 * callbacks; should libcurl still want to send (it keeps sending when the
 * upstream asked to close), the read callback just pauses it again. */
static void release_cut(struct proxyup *u)
{
    for (struct proxyup_call *c = u->calls; c; c = c->next) {
        if (!c->send_cut || c->cancelled)
            continue;
        c->send_cut = 0;
        if (c->up_paused) {
            c->up_paused = 0;
            curl_easy_pause(c->easy, c->down_paused ? CURLPAUSE_RECV : CURLPAUSE_CONT);
        }
    }
}

static void action(struct proxyup *u, curl_socket_t fd, int ev)
{
    int running;
    u->in_action++;
    curl_multi_socket_action(u->multi, fd, ev, &running);
    release_cut(u);
    u->in_action--;
    if (!u->in_action)
        reap(u);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct sock *s = h->data;
    int ev = 0;
    if (status < 0)
        ev = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        ev |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        ev |= CURL_CSELECT_OUT;
    action(s->u, s->fd, ev);
}

static void handle_closed(uv_handle_t *h)
{
    struct sock *s = h->data;
    struct proxyup *u = s->u;
    free(s);
    if (--u->open_handles == 0 && u->closing)
        free(u);
}

static int sock_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)e;
    struct proxyup *u = userp;
    struct sock *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            uv_poll_stop(&s->poll);
            curl_multi_assign(u->multi, fd, NULL);
            if (u->n_idle < IDLE_SOCKS && !u->closing) {
                s->next_idle = u->idle;
                u->idle = s;
                u->n_idle++;
            } else {
                uv_close((uv_handle_t *)&s->poll, handle_closed);
            }
        }
        return 0;
    }
    for (struct sock **pp = &u->idle; !s && *pp; pp = &(*pp)->next_idle) {
        if ((*pp)->fd == fd) {
            s = *pp;
            *pp = s->next_idle;
            s->next_idle = NULL;
            u->n_idle--;
            curl_multi_assign(u->multi, fd, s);
            break;
        }
    }
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return -1;
        s->fd = fd;
        s->u = u;
        if (uv_poll_init_socket(u->loop, &s->poll, fd) != 0) {
            free(s);
            return -1;
        }
        s->poll.data = s;
        u->open_handles++;
        curl_multi_assign(u->multi, fd, s);
    }
    int ev = ((what & CURL_POLL_IN) ? UV_READABLE : 0) | ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
    uv_poll_start(&s->poll, ev, on_poll);
    return 0;
}

static void on_timer(uv_timer_t *t)
{
    action(t->data, CURL_SOCKET_TIMEOUT, 0);
}

static int timer_cb(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    struct proxyup *u = userp;
    if (timeout_ms < 0)
        uv_timer_stop(&u->timer);
    else
        uv_timer_start(&u->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static void on_head_tick(uv_timer_t *t)
{
    struct proxyup *u = t->data;
    uint64_t now = uv_now(u->loop);
    int waiting = 0;
    for (struct proxyup_call *c = u->calls; c; c = c->next) {
        if (c->cancelled || !c->head_deadline_ms)
            continue;
        if (now >= c->head_deadline_ms) {
            c->timed_out = 1;
            c->head_deadline_ms = 0;
            c->cancelled = 1;
            c->cb.on_done(c->ud, PROXYUP_TIMEOUT, "the upstream did not answer in time");
        } else {
            waiting = 1;
        }
    }
    reap(u);
    if (!waiting)
        uv_timer_stop(&u->head_tick);
}

static void timer_closed(uv_handle_t *h)
{
    struct proxyup *u = h->data;
    if (--u->open_handles == 0 && u->closing)
        free(u);
}

int proxyup_new(uv_loop_t *loop, struct proxyup **out)
{
    static int global_done; /* curl_global_init is once per process by design */
    if (!global_done) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return AL_E_CRYPTO;
        global_done = 1;
    }
    struct proxyup *u = calloc(1, sizeof *u);
    if (!u)
        return AL_E_NOMEM;
    u->loop = loop;
    u->multi = curl_multi_init();
    if (!u->multi) {
        free(u);
        return AL_E_NOMEM;
    }
    uv_timer_init(loop, &u->timer);
    uv_timer_init(loop, &u->head_tick);
    u->timer.data = u;
    u->head_tick.data = u;
    u->open_handles = 2;
    curl_multi_setopt(u->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
    curl_multi_setopt(u->multi, CURLMOPT_SOCKETDATA, u);
    curl_multi_setopt(u->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(u->multi, CURLMOPT_TIMERDATA, u);
    *out = u;
    return AL_OK;
}

void proxyup_free(struct proxyup *u)
{
    if (!u)
        return;
    for (struct proxyup_call *c = u->calls, *nx; c; c = nx) {
        nx = c->next;
        c->cancelled = 1;
        call_remove(c);
    }
    /* removing the handles closed their sockets (sock_cb REMOVE) */
    curl_multi_cleanup(u->multi);
    u->closing = 1;
    while (u->idle) {
        struct sock *s = u->idle;
        u->idle = s->next_idle;
        uv_close((uv_handle_t *)&s->poll, handle_closed);
    }
    u->n_idle = 0;
    uv_close((uv_handle_t *)&u->timer, timer_closed);
    uv_close((uv_handle_t *)&u->head_tick, timer_closed);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct proxyup_call *c = ud;
    size_t len = size * n;
    if (c->cancelled)
        return 0;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        long st = 0;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &st);
        if (st >= 200) {
            c->status = (int)st;
            c->head_deadline_ms = 0;
            c->cb.on_status(c->ud, (int)st);
        }
        return len;
    }
    if (c->status == 0)
        return len; /* a 1xx head's lines */
    if (len <= 2 && (len == 0 || p[0] == '\r' || p[0] == '\n')) {
        if (c->status >= 300 && c->up_paused)
            c->send_cut = 1; /* release_cut */
        c->cb.on_head_done(c->ud);
        return len;
    }
    size_t e = len;
    while (e > 0 && (p[e - 1] == '\r' || p[e - 1] == '\n'))
        e--;
    const char *colon = memchr(p, ':', e);
    if (!colon || p[0] == ' ' || p[0] == '\t') {
        /* a line folded onto the one before (obs-fold), or no header at
         * all: handed on with an empty name, which the head's checks
         * refuse (proxyconn.c) */
        c->cb.on_header(c->ud, p, 0, "", 0);
        return len;
    }
    size_t nl = (size_t)(colon - p);
    const char *v = colon + 1;
    while (v < p + e && (*v == ' ' || *v == '\t'))
        v++;
    c->cb.on_header(c->ud, p, nl, v, (size_t)(p + e - v));
    return len;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
    struct proxyup_call *c = ud;
    if (c->cancelled)
        return 0;
    size_t k = c->cb.on_body(c->ud, p, size * n);
    if (k != PROXYUP_PAUSE)
        return k;
    c->down_paused = 1;
    return CURL_WRITEFUNC_PAUSE;
}

static size_t on_read(char *buf, size_t size, size_t n, void *ud)
{
    struct proxyup_call *c = ud;
    if (c->cancelled)
        return CURL_READFUNC_ABORT;
    size_t k = c->cb.read_body(c->ud, buf, size * n);
    if (k != PROXYUP_PAUSE)
        return k;
    c->up_paused = 1;
    return CURL_READFUNC_PAUSE;
}

int proxyup_start(struct proxyup *u, const struct proxyup_spec *s, const struct proxyup_cb *cb,
                  void *ud, struct proxyup_call **out, char *why, size_t cap)
{
    if (!u || !s || !cb || !out || u->closing)
        return AL_E_INVAL;
    struct proxyup_call *c = calloc(1, sizeof *c);
    if (!c)
        return AL_E_NOMEM;
    c->u = u;
    c->cb = *cb;
    c->ud = ud;
    c->easy = curl_easy_init();
    if (!c->easy) {
        free(c);
        return AL_E_NOMEM;
    }
    unsigned nh = 0;
    for (; s->headers && s->headers[nh]; nh++) {
        struct curl_slist *l =
            nh < MAX_HEADER_LINES ? curl_slist_append(c->hdrs, s->headers[nh]) : NULL;
        if (!l) {
            curl_slist_free_all(c->hdrs);
            curl_easy_cleanup(c->easy);
            free(c);
            al_errf(why, cap, "cannot build the upstream request's headers");
            return nh < MAX_HEADER_LINES ? AL_E_NOMEM : AL_E_TOOBIG;
        }
        c->hdrs = l;
    }
    /* libcurl's own additions that the agent did not ask for */
    /* a body is sent only where libcurl sends one: never for HEAD (the
     * parser refuses one, proxyreq.c), so never framed for it either */
    int is_head = strcmp(s->method, "HEAD") == 0, send_body = s->has_body && !is_head;
    int typed = 0; /* libcurl types a body the agent did not as a form */
    for (unsigned i = 0; i < nh; i++)
        typed |= strncasecmp(s->headers[i], "content-type:", 13) == 0;
    const char *extra[] = {
        "Expect:", "Accept:", send_body && s->body_len < 0 ? "Transfer-Encoding: chunked" : NULL,
        send_body && !typed ? "Content-Type:" : NULL};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        if (!extra[i])
            continue;
        struct curl_slist *l = curl_slist_append(c->hdrs, extra[i]);
        if (!l) {
            curl_slist_free_all(c->hdrs);
            curl_easy_cleanup(c->easy);
            free(c);
            return AL_E_NOMEM;
        }
        c->hdrs = l;
    }
    CURL *e = c->easy;
    curl_easy_setopt(e, CURLOPT_URL, s->url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->hdrs);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->err);
    curl_easy_setopt(e, CURLOPT_PRIVATE, c);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)UP_BUFFER);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)s->connect_timeout_ms);
    if (s->ca_file && s->ca_file[0])
        curl_easy_setopt(e, CURLOPT_CAINFO, s->ca_file);
    if (is_head) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (send_body) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(e, CURLOPT_READDATA, c);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->body_len);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, s->method);
    } else if (strcmp(s->method, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, s->method);
    }
    c->head_deadline_ms = uv_now(u->loop) + (uint64_t)s->response_timeout_s * 1000u;
    if (curl_multi_add_handle(u->multi, e) != CURLM_OK) {
        curl_slist_free_all(c->hdrs);
        curl_easy_cleanup(e);
        free(c);
        al_errf(why, cap, "cannot start the upstream request");
        return AL_E_NOMEM;
    }
    c->next = u->calls;
    if (u->calls)
        u->calls->prev = c;
    u->calls = c;
    u->n++;
    if (!uv_is_active((uv_handle_t *)&u->head_tick))
        uv_timer_start(&u->head_tick, on_head_tick, HEAD_TICK_MS, HEAD_TICK_MS);
    *out = c;
    return AL_OK;
}

/* Set libcurl's pause mask from both flags. Unpausing may deliver held
 * data at once, through our callbacks: it counts as an action. */
static void repause(struct proxyup_call *c)
{
    struct proxyup *u = c->u;
    int mask = (c->down_paused ? CURLPAUSE_RECV : 0) | (c->up_paused ? CURLPAUSE_SEND : 0);
    u->in_action++;
    curl_easy_pause(c->easy, mask);
    release_cut(u);
    u->in_action--;
    if (!u->in_action)
        reap(u);
}

void proxyup_resume_down(struct proxyup_call *c)
{
    if (c && !c->cancelled && c->down_paused) {
        c->down_paused = 0;
        repause(c);
    }
}

void proxyup_resume_up(struct proxyup_call *c)
{
    if (c && !c->cancelled && c->up_paused) {
        c->up_paused = 0;
        repause(c);
    }
}

void proxyup_cancel(struct proxyup_call *c)
{
    if (!c)
        return;
    c->cancelled = 1;
    if (!c->u->in_action)
        call_remove(c);
}

unsigned proxyup_active(const struct proxyup *u)
{
    return u ? u->n : 0;
}
