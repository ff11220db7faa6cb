/*
 * cli_wsprobe: see cli_wsprobe.h.
 *
 * Data model: struct wsprobe holds the options, the report (a json_t,
 * owned here, printed at the end), the step under way and its timer; each
 * connection is a struct pconn owned by the wsprobe from cli_ws_open
 * until its on_closed, with a queue of the frames it is to send (each
 * malloc'd with room for LWS_PRE before it). Times are uv_hrtime()
 * nanoseconds, reported in milliseconds or seconds.
 */
#include "cli_wsprobe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "al_close.h"
#include "al_err.h"
#include "al_limits.h"
#include "cli_err.h"
#include "cli_net.h"
#include "cli_probe.h"
#include "frame.h"

#define NS_PER_MS 1000000.0
#define NS_PER_S 1000000000.0
#define NS_PER_US 1000u
#define WHY_MAX 512
#define TCP_TIMEOUT_MS 10000
#define STEP_TIMEOUT_MS 20000      /* a refusal, the session's start, its pings, its echoes */
#define THROUGHPUT_MIN_RATE 100000 /* bytes/s below which a transfer step times out */
#define OUTQ_MAX 8                 /* frames queued on one connection */
#define PRE_ROOM 256               /* room kept before a message for lws (cli_ws_pre) */
#define AGE_SLACK_MS 2000          /* past --idle-max/--age-max before we close ourselves */

/* ECHO sizes tried, in bytes of payload after the op (the last is the
 * largest a 65546-byte max_frame carries) */
static const size_t echo_sizes[] = {1024, 4096, 16384, 32768, AL_MAX_PAYLOAD - 1};
#define N_ECHO (sizeof echo_sizes / sizeof echo_sizes[0])

enum role { R_REFUSAL, R_MAIN, R_IDLE, R_AGED };
enum main_step { M_HELLO, M_HEADERS, M_PING, M_ECHO, M_UP, M_DOWN, M_DONE };
enum step { S_NOTOKEN, S_BADTOKEN, S_WRONG, S_MAIN, S_IDLE_AGE, S_DONE };

struct wsprobe;

struct pconn {
    struct wsprobe *p;
    struct cli_ws *ws;
    enum role role;
    uint64_t t_open, t_request, t_est, t_end;
    unsigned status;
    int opened, closed, hello, peer_code;
    char why[WHY_MAX];
    uint8_t *q[OUTQ_MAX];
    size_t qlen[OUTQ_MAX];
    unsigned qn;
    uint64_t sink_left; /* M_UP: SINK bytes still to send */
    int barrier;        /* M_UP: the ECHO after the SINKs is to be sent */
};

struct wsprobe {
    uv_loop_t *loop;
    struct cli_net *net;
    struct cli_config *cfg;
    const struct wsprobe_opts *o;
    json_t *r;
    int exit;
    char why[WHY_MAX];
    enum step step;
    uv_timer_t timer, idle_timer, age_timer, ping_timer;
    char path[CLI_URL_MAX];
    char bad_token[AL_MAX_TOKEN + 1];
    /* the main session */
    struct pconn *main;
    enum main_step ms;
    unsigned ping_i;
    double *rtts; /* ms, o->pings of them */
    unsigned echo_i;
    size_t max_echo; /* bytes of the largest frame echoed */
    uint64_t t_step, down_got;
    uint32_t host_max_frame;
    /* idle and aged sessions */
    struct pconn *idle, *aged;
    int idle_done, aged_done;
    double idle_lived_s, aged_lived_s;
};

static uint64_t now_ns(void)
{
    return uv_hrtime();
}

static void fail(struct wsprobe *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct wsprobe *p, int code, const char *fmt, ...)
{
    if (p->exit)
        return; /* the first reason is the one that counts */
    p->exit = code;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
}

static void next_step(struct wsprobe *p);

/* ---- connections ------------------------------------------------------- */

static int push(struct pconn *c, const struct fr_frame *f)
{
    if (c->qn >= OUTQ_MAX)
        return AL_E_LIMIT;
    uint8_t *b = malloc(cli_ws_pre() + AL_MAX_FRAME);
    if (!b)
        return AL_E_NOMEM;
    long n = fr_encode(f, b + cli_ws_pre(), AL_MAX_FRAME);
    if (n < 0) {
        free(b);
        return (int)n;
    }
    c->q[c->qn] = b;
    c->qlen[c->qn] = (size_t)n;
    c->qn++;
    cli_ws_want_write(c->ws);
    return AL_OK;
}

static void send_probe(struct pconn *c, uint8_t op, const uint8_t *bytes, size_t n, uint32_t count)
{
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_PROBE;
    f.u.probe.op = op;
    f.u.probe.bytes = (struct fr_bytes){bytes, n};
    f.u.probe.count = count;
    if (push(c, &f) != AL_OK)
        fail(c->p, CLI_EXIT_OTHER, "cannot queue a PROBE frame");
}

static void send_ping(struct pconn *c)
{
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_PING;
    f.u.ping.ts_us = now_ns() / NS_PER_US;
    (void)push(c, &f);
}

/* A pattern the echoes must bring back byte for byte. */
static uint8_t *pattern(size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; b && i < n; i++)
        b[i] = (uint8_t)(i * 7 + 3);
    return b;
}

static void on_writable(void *ud, struct cli_ws *ws)
{
    struct pconn *c = ud;
    (void)ws;
    while (c->qn) {
        int rc = cli_ws_send(c->ws, c->q[0] + cli_ws_pre(), c->qlen[0]);
        if (rc < 0)
            return;
        free(c->q[0]);
        memmove(c->q, c->q + 1, (c->qn - 1) * sizeof c->q[0]);
        memmove(c->qlen, c->qlen + 1, (c->qn - 1) * sizeof c->qlen[0]);
        c->qn--;
        if (rc == 0) {
            cli_ws_want_write(c->ws);
            return;
        }
    }
    /* M_UP: SINK frames as fast as the socket takes them, then the barrier */
    static uint8_t buf[PRE_ROOM + AL_MAX_FRAME]; /* cli_ws_pre() ≤ PRE_ROOM */
    if (cli_ws_pre() > PRE_ROOM)
        return;
    static const uint8_t zeros[AL_MAX_PAYLOAD];
    while (c->sink_left) {
        size_t n = c->sink_left < AL_MAX_PAYLOAD - 1 ? (size_t)c->sink_left : AL_MAX_PAYLOAD - 1;
        struct fr_frame f;
        memset(&f, 0, sizeof f);
        f.type = FR_PROBE;
        f.u.probe.op = FR_PROBE_SINK;
        f.u.probe.bytes = (struct fr_bytes){zeros, n};
        long len = fr_encode(&f, buf + cli_ws_pre(), AL_MAX_FRAME);
        if (len < 0)
            return;
        int rc = cli_ws_send(c->ws, buf + cli_ws_pre(), (size_t)len);
        if (rc < 0)
            return;
        c->sink_left -= n;
        if (rc == 0) {
            cli_ws_want_write(c->ws);
            return;
        }
    }
    if (c->barrier) {
        c->barrier = 0;
        send_probe(c, FR_PROBE_ECHO, (const uint8_t *)"up", 2, 0);
    }
}

static void on_request(void *ud, struct cli_ws *ws)
{
    struct pconn *c = ud;
    (void)ws;
    if (!c->t_request)
        c->t_request = now_ns();
}

static void on_open(void *ud, struct cli_ws *ws)
{
    struct pconn *c = ud;
    c->opened = 1;
    c->t_est = now_ns();
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_HELLO;
    f.u.hello.version_min = f.u.hello.version_max = AL_PROTO_VERSION;
    f.u.hello.role = FR_ROLE_CONTROLLER;
    f.u.hello.max_frame = AL_MAX_FRAME;
    f.u.hello.name = (struct fr_str){"airlock-probe", 13};
    (void)push(c, &f);
    struct wsprobe *p = c->p;
    if (c->role == R_MAIN) {
        char sp[128];
        (void)cli_ws_subprotocol(ws, sp, sizeof sp);
        (void)json_object_set_new(p->r, "upgrade_with_token", json_integer(101));
        (void)json_object_set_new(p->r, "subprotocol", sp[0] ? json_string(sp) : json_null());
    }
    if (c->role == R_REFUSAL) /* the path let it through: say so, and leave */
        cli_ws_close(ws, AL_CLOSE_NORMAL, "probe: refusal step");
}

static void free_queue(struct pconn *c)
{
    for (unsigned i = 0; i < c->qn; i++)
        free(c->q[i]);
    c->qn = 0;
}

static void main_frame(struct wsprobe *p, struct pconn *c, const struct fr_frame *f);

static void on_message(void *ud, struct cli_ws *ws, const uint8_t *msg, size_t len)
{
    struct pconn *c = ud;
    struct wsprobe *p = c->p;
    static struct fr_frame f;
    int rc = fr_decode(msg, len, &f);
    if (rc != AL_OK) {
        fail(p, CLI_EXIT_PROTO, "the runner sent a frame this client cannot decode: %s",
             al_strerror(rc));
        cli_ws_close(ws, AL_CLOSE_PROTOCOL, "malformed frame");
        return;
    }
    if (!c->hello) {
        if (f.type != FR_HELLO || f.u.hello.role != FR_ROLE_HOST) {
            fail(p, CLI_EXIT_PROTO, "the runner's first frame is not a host's HELLO");
            cli_ws_close(ws, AL_CLOSE_PROTOCOL, "no HELLO");
            return;
        }
        c->hello = 1;
        if (c->role == R_MAIN) {
            p->host_max_frame = f.u.hello.max_frame;
            main_frame(p, c, &f);
        }
        return;
    }
    if (f.type == FR_ERROR) {
        fail(p, CLI_EXIT_PROTO, "the runner refused the probe: ERROR %u: %.*s", f.u.error.code,
             (int)f.u.error.msg.len, f.u.error.msg.p);
        return;
    }
    if (c->role == R_MAIN)
        main_frame(p, c, &f);
}

/* "close 4000" or "reset" (no close frame). */
static const char *how_closed(const struct pconn *c, char *buf, size_t cap)
{
    if (c->peer_code)
        (void)snprintf(buf, cap, "close %d", c->peer_code);
    else
        (void)snprintf(buf, cap, "reset");
    return buf;
}

static void idle_age_check(struct wsprobe *p);

static void on_closed(void *ud, struct cli_ws *ws, int opened, unsigned status, const char *why)
{
    struct pconn *c = ud;
    struct wsprobe *p = c->p;
    (void)ws;
    c->closed = 1;
    c->ws = NULL;
    c->t_end = now_ns();
    c->status = status;
    (void)snprintf(c->why, sizeof c->why, "%s", why ? why : "");
    const char *cc = why ? strstr(why, "(close ") : NULL;
    long code = cc ? strtol(cc + 7, NULL, 10) : 0;
    c->peer_code = code > 0 && code < 5000 ? (int)code : 0; /* a close code, else none */
    free_queue(c);
    if (c->role == R_IDLE || c->role == R_AGED) {
        char how[32];
        double lived = c->t_est ? (double)(c->t_end - c->t_est) / NS_PER_S : 0;
        if (c->role == R_IDLE) {
            p->idle = NULL;
            if (!p->idle_done) {
                p->idle_done = 1;
                p->idle_lived_s = lived;
                (void)json_object_set_new(p->r, "idle_cut_s",
                                          opened ? json_real(lived) : json_null());
                (void)json_object_set_new(p->r, "idle_close",
                                          json_string(how_closed(c, how, sizeof how)));
            }
        } else {
            p->aged = NULL;
            if (!p->aged_done) {
                p->aged_done = 1;
                p->aged_lived_s = lived;
                (void)json_object_set_new(p->r, "max_age_s",
                                          opened ? json_real(lived) : json_null());
                (void)json_object_set_new(p->r, "age_close",
                                          json_string(how_closed(c, how, sizeof how)));
            }
        }
        free(c);
        idle_age_check(p);
        return;
    }
    if (c->role == R_MAIN) {
        p->main = NULL;
        if (p->ms != M_DONE) {
            if (!opened)
                (void)json_object_set_new(p->r, "upgrade_with_token",
                                          status ? json_integer(status) : json_null());
            if (!opened && status)
                fail(p, status == 403 || status == 401 ? CLI_EXIT_AUTH : CLI_EXIT_PROTO,
                     "the upgrade with the token was answered %u (expected 101)%s", status,
                     status == 403 ? ": is the token's scope runner:probe and its audience the "
                                     "runner's identifier?"
                                   : "");
            else if (!opened)
                fail(p, CLI_EXIT_DOWN, "cannot reach the runner: %s%s", why,
                     cli_net_hint(p->net, why));
            else
                fail(p, CLI_EXIT_DOWN, "the probe session ended early: %s", why);
        }
        free(c);
        next_step(p);
        return;
    }
    /* a refusal step: the status is its result */
    static const char *const keys[] = {[S_NOTOKEN] = "upgrade_without_token",
                                       [S_BADTOKEN] = "upgrade_with_bad_token",
                                       [S_WRONG] = "upgrade_with_wrong_audience"};
    const char *key = keys[p->step];
    unsigned st = opened ? 101 : status;
    (void)json_object_set_new(p->r, key, st ? json_integer(st) : json_null());
    if (p->step == S_NOTOKEN) {
        json_t *ph = json_object_get(p->r, "phases_ms");
        double tcp = json_number_value(json_object_get(ph, "tcp"));
        if (c->t_request) {
            double conn = (double)(c->t_request - c->t_open) / NS_PER_MS;
            (void)json_object_set_new(
                ph, "tls", p->cfg->tls ? json_real(conn > tcp ? conn - tcp : 0) : json_null());
            (void)json_object_set_new(
                ph, "upgrade",
                json_real((double)((c->t_est ? c->t_est : c->t_end) - c->t_request) / NS_PER_MS));
        }
        if (!st) {
            if (p->cfg->tls && why && (strstr(why, "SSL") || strstr(why, "ssl")))
                fail(p, CLI_EXIT_DOWN, "the TLS handshake failed: %s%s", why,
                     cli_net_hint(p->net, why));
            else if (c->t_request)
                fail(p, CLI_EXIT_DOWN,
                     "the server took the connection but never answered the upgrade (%s after "
                     "%.1f s)",
                     why, (double)(c->t_end - c->t_request) / NS_PER_S);
            else
                fail(p, CLI_EXIT_DOWN, "cannot reach the runner: %s%s", why,
                     cli_net_hint(p->net, why));
            free(c);
            p->step = S_MAIN; /* no more refusals: try the session, which fails the same way */
            p->ms = M_DONE;
            next_step(p);
            return;
        }
        if (st != 403 && st != 101 && st != 401)
            fail(p, CLI_EXIT_PROTO,
                 "the upgrade without a token was answered %u: is this a runner's WebSocket path?",
                 st);
    }
    free(c);
    next_step(p);
}

static struct pconn *open_conn(struct wsprobe *p, enum role role, const char *key)
{
    struct pconn *c = calloc(1, sizeof *c);
    if (!c) {
        fail(p, CLI_EXIT_OTHER, "out of memory");
        return NULL;
    }
    c->p = p;
    c->role = role;
    c->t_open = now_ns();
    cli_net_set_key(p->net, key);
    struct cli_ws_handler h = {.ud = c,
                               .on_open = on_open,
                               .on_message = on_message,
                               .on_writable = on_writable,
                               .on_closed = on_closed,
                               .on_request = on_request};
    int rc = cli_ws_open(p->net, p->path, &h, &c->ws);
    if (rc != AL_OK) {
        fail(p, CLI_EXIT_DOWN, "cannot start a connection to the runner: %s", al_strerror(rc));
        free(c);
        return NULL;
    }
    return c;
}

/* ---- the main session ----------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void arm(struct wsprobe *p, uint64_t ms);

static void main_next_echo(struct wsprobe *p, struct pconn *c)
{
    while (p->echo_i < N_ECHO && AL_FRAME_HEADER + 1 + echo_sizes[p->echo_i] > p->host_max_frame)
        p->echo_i++;
    if (p->echo_i >= N_ECHO) {
        (void)json_object_set_new(p->r, "max_message_bytes", json_integer((json_int_t)p->max_echo));
        p->ms = M_UP;
        p->t_step = now_ns();
        c->sink_left = p->o->bytes;
        c->barrier = 1;
        arm(p, STEP_TIMEOUT_MS + p->o->bytes * 1000 / THROUGHPUT_MIN_RATE);
        cli_ws_want_write(c->ws);
        return;
    }
    uint8_t *b = pattern(echo_sizes[p->echo_i]);
    if (!b) {
        fail(p, CLI_EXIT_OTHER, "out of memory");
        return;
    }
    send_probe(c, FR_PROBE_ECHO, b, echo_sizes[p->echo_i], 0);
    free(b);
}

static void main_frame(struct wsprobe *p, struct pconn *c, const struct fr_frame *f)
{
    switch (p->ms) {
    case M_HELLO:
        p->ms = M_HEADERS;
        send_probe(c, FR_PROBE_HEADERS, NULL, 0, 0);
        return;
    case M_HEADERS: {
        if (f->type != FR_PROBE_REPLY || f->u.probe.op != FR_PROBE_HEADERS)
            return;
        json_t *names = json_array(), *all = json_object();
        int auth = 0;
        for (unsigned i = 0; i < f->u.probe.nheaders; i++) {
            char n[AL_PROBE_MAX_HEADER_NAME + 1], v[AL_PROBE_MAX_HEADER_VALUE + 1];
            (void)snprintf(n, sizeof n, "%.*s", (int)f->u.probe.h[i].name.len,
                           f->u.probe.h[i].name.p);
            (void)snprintf(v, sizeof v, "%.*s", (int)f->u.probe.h[i].value.len,
                           f->u.probe.h[i].value.p);
            (void)json_array_append_new(names, json_string(n));
            (void)json_object_set_new(all, n, json_string(v));
            auth |= !strcmp(n, "authorization");
        }
        (void)json_object_set_new(p->r, "headers_seen", names);
        (void)json_object_set_new(p->r, "headers", all);
        /* our token went in Authorization: whether the platform's own would
         * have is not answered here */
        const char *th = p->cfg->token_header;
        int own = !th[0] || !strcasecmp(th, "authorization");
        (void)json_object_set_new(p->r, "authorization_forwarded",
                                  own ? json_null() : json_boolean(auth));
        p->ms = M_PING;
        p->ping_i = 0;
        arm(p, STEP_TIMEOUT_MS);
        send_ping(c);
        return;
    }
    case M_PING: {
        if (f->type != FR_PONG)
            return;
        uint64_t now_us = now_ns() / NS_PER_US;
        p->rtts[p->ping_i++] =
            now_us >= f->u.ping.ts_us ? (double)(now_us - f->u.ping.ts_us) / 1000.0 : 0;
        if (p->ping_i < p->o->pings) {
            send_ping(c);
            return;
        }
        qsort(p->rtts, p->o->pings, sizeof p->rtts[0], cmp_double);
        unsigned n = p->o->pings, i50 = (n - 1) / 2, i99 = (unsigned)((n - 1) * 99 / 100);
        (void)json_object_set_new(
            p->r, "rtt_ms",
            json_pack("{s:f, s:f, s:i}", "p50", p->rtts[i50], "p99", p->rtts[i99], "n", (int)n));
        p->ms = M_ECHO;
        p->echo_i = 0;
        arm(p, STEP_TIMEOUT_MS);
        main_next_echo(p, c);
        return;
    }
    case M_ECHO: {
        if (f->type != FR_PROBE_REPLY || f->u.probe.op != FR_PROBE_ECHO)
            return;
        size_t want = echo_sizes[p->echo_i];
        uint8_t *b = pattern(want);
        int same = b && f->u.probe.bytes.len == want && !memcmp(b, f->u.probe.bytes.p, want);
        free(b);
        if (!same) {
            fail(p, CLI_EXIT_PROTO, "an ECHO of %zu bytes came back altered", want);
            cli_ws_close(c->ws, AL_CLOSE_NORMAL, "probe done");
            return;
        }
        p->max_echo = AL_FRAME_HEADER + 1 + want;
        p->echo_i++;
        main_next_echo(p, c);
        return;
    }
    case M_UP: {
        if (f->type != FR_PROBE_REPLY || f->u.probe.op != FR_PROBE_ECHO)
            return;
        double s = (double)(now_ns() - p->t_step) / NS_PER_S;
        double up = s > 0 ? (double)p->o->bytes * 8 / s / 1e6 : 0;
        (void)json_object_set_new(p->r, "throughput_mbps",
                                  json_pack("{s:f, s:n}", "up", up, "down"));
        p->ms = M_DOWN;
        p->down_got = 0;
        p->t_step = now_ns();
        arm(p, STEP_TIMEOUT_MS + p->o->bytes * 1000 / THROUGHPUT_MIN_RATE);
        send_probe(c, FR_PROBE_SOURCE, NULL, 0, (uint32_t)p->o->bytes);
        return;
    }
    case M_DOWN: {
        if (f->type != FR_PROBE_REPLY || f->u.probe.op != FR_PROBE_SOURCE)
            return;
        p->down_got += f->u.probe.bytes.len;
        if (p->down_got < p->o->bytes)
            return;
        double s = (double)(now_ns() - p->t_step) / NS_PER_S;
        json_t *tp = json_object_get(p->r, "throughput_mbps");
        (void)json_object_set_new(tp, "down",
                                  json_real(s > 0 ? (double)p->down_got * 8 / s / 1e6 : 0));
        (void)json_object_set_new(tp, "bytes", json_integer((json_int_t)p->o->bytes));
        p->ms = M_DONE;
        cli_ws_close(c->ws, AL_CLOSE_NORMAL, "probe done");
        return;
    }
    case M_DONE:
        return;
    }
}

/* ---- idle and age ----------------------------------------------------------- */

static void idle_age_check(struct wsprobe *p)
{
    if (p->step != S_IDLE_AGE || !p->idle_done || !p->aged_done)
        return;
    /* pings kept a connection alive at least as long as silence did */
    if (p->o->idle_max_s && p->o->age_max_s)
        (void)json_object_set_new(p->r, "idle_with_pings_ok",
                                  json_boolean(p->aged_lived_s + 0.5 >= p->idle_lived_s));
    next_step(p);
}

static void idle_timeout(uv_timer_t *t)
{
    struct wsprobe *p = t->data;
    if (p->idle && !p->idle_done) {
        p->idle_done = 1;
        p->idle_lived_s = p->o->idle_max_s;
        (void)json_object_set_new(p->r, "idle_cut_s", json_null());
        (void)json_object_set_new(p->r, "idle_close", json_null());
        cli_ws_close(p->idle->ws, AL_CLOSE_NORMAL, "probe: idle-max");
    }
    idle_age_check(p);
}

static void age_timeout(uv_timer_t *t)
{
    struct wsprobe *p = t->data;
    if (p->aged && !p->aged_done) {
        p->aged_done = 1;
        p->aged_lived_s = p->o->age_max_s;
        (void)json_object_set_new(p->r, "max_age_s", json_null());
        (void)json_object_set_new(p->r, "age_close", json_null());
        cli_ws_close(p->aged->ws, AL_CLOSE_NORMAL, "probe: age-max");
    }
    (void)uv_timer_stop(&p->ping_timer);
    idle_age_check(p);
}

static void ping_tick(uv_timer_t *t)
{
    struct wsprobe *p = t->data;
    if (p->aged && p->aged->opened && p->aged->hello)
        send_ping(p->aged);
}

static void start_idle_age(struct wsprobe *p)
{
    p->idle_done = !p->o->idle_max_s;
    p->aged_done = !p->o->age_max_s;
    if (p->o->idle_max_s) {
        p->idle = open_conn(p, R_IDLE, p->o->token);
        if (!p->idle)
            p->idle_done = 1;
        else
            (void)uv_timer_start(&p->idle_timer, idle_timeout, p->o->idle_max_s * 1000ull, 0);
    }
    if (p->o->age_max_s) {
        p->aged = open_conn(p, R_AGED, p->o->token);
        if (!p->aged) {
            p->aged_done = 1;
        } else {
            (void)uv_timer_start(&p->age_timer, age_timeout, p->o->age_max_s * 1000ull, 0);
            (void)uv_timer_start(&p->ping_timer, ping_tick, p->o->ping_interval_ms,
                                 p->o->ping_interval_ms);
        }
    }
    /* a path that never lets them in: the refusal is theirs to report */
    arm(p,
        (uint64_t)(p->o->idle_max_s > p->o->age_max_s ? p->o->idle_max_s : p->o->age_max_s) * 1000 +
            STEP_TIMEOUT_MS + AGE_SLACK_MS);
    idle_age_check(p);
}

/* ---- steps -------------------------------------------------------------------- */

static void step_timeout(uv_timer_t *t)
{
    struct wsprobe *p = t->data;
    static const char *const names[] = {
        "the upgrade without a token",    "the upgrade with a bad token",
        "the upgrade with --wrong-token", "the probe session",
        "the idle and age measurement",   ""};
    fail(p, CLI_EXIT_DOWN, "%s did not finish within its time limit", names[p->step]);
    if (p->main)
        cli_ws_drop(p->main->ws);
    if (p->idle)
        cli_ws_drop(p->idle->ws);
    if (p->aged)
        cli_ws_drop(p->aged->ws);
    if (p->step == S_IDLE_AGE) {
        p->step = S_DONE;
        uv_stop(p->loop);
    }
    /* the refusal connections end by themselves (lws's own timeout) */
}

static void arm(struct wsprobe *p, uint64_t ms)
{
    (void)uv_timer_start(&p->timer, step_timeout, ms, 0);
}

static void next_step(struct wsprobe *p)
{
    for (;;) {
        if (p->step == S_DONE)
            return;
        p->step++;
        switch (p->step) {
        case S_BADTOKEN:
            if (!p->o->token)
                continue;
            arm(p, STEP_TIMEOUT_MS);
            if (open_conn(p, R_REFUSAL, p->bad_token))
                return;
            continue;
        case S_WRONG:
            if (!p->o->wrong_token)
                continue;
            arm(p, STEP_TIMEOUT_MS);
            if (open_conn(p, R_REFUSAL, p->o->wrong_token))
                return;
            continue;
        case S_MAIN:
            if (!p->o->token) {
                fail(p, CLI_EXIT_AUTH,
                     "no token: only the refusals were measured (give --token or --token-file "
                     "with a runner:probe token for the runner's identifier)");
                p->step = S_DONE;
                uv_stop(p->loop);
                return;
            }
            if (p->exit)
                continue; /* the path failed already */
            arm(p, STEP_TIMEOUT_MS);
            p->ms = M_HELLO;
            p->main = open_conn(p, R_MAIN, p->o->token);
            if (p->main)
                return;
            continue;
        case S_IDLE_AGE:
            if (p->exit || (!p->o->idle_max_s && !p->o->age_max_s))
                continue;
            start_idle_age(p);
            return;
        case S_DONE:
        default:
            p->step = S_DONE;
            uv_stop(p->loop);
            return;
        case S_NOTOKEN:
            return;
        }
    }
}

/* ---- the plain parts: DNS and TCP on their own ------------------------------- */

static void phases(struct wsprobe *p)
{
    json_t *ph = json_object();
    (void)json_object_set_new(p->r, "phases_ms", ph);
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET; /* as the connection itself (IPv4 only) */
    hints.ai_socktype = SOCK_STREAM;
    uint64_t t0 = now_ns();
    int g = getaddrinfo(p->cfg->host, NULL, &hints, &ai);
    (void)json_object_set_new(ph, "dns", json_real((double)(now_ns() - t0) / NS_PER_MS));
    if (g != 0 || !ai) {
        fail(p, CLI_EXIT_DOWN, "cannot resolve %s: %s", p->cfg->host, gai_strerror(g));
        return;
    }
    struct sockaddr_in sa;
    memcpy(&sa, ai->ai_addr, sizeof sa);
    freeaddrinfo(ai);
    sa.sin_port = htons((uint16_t)p->cfg->port);
    char addr[INET_ADDRSTRLEN] = "?";
    (void)inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof addr);
    (void)json_object_set_new(p->r, "address", json_string(addr));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail(p, CLI_EXIT_OTHER, "socket: %s", strerror(errno));
        return;
    }
    t0 = now_ns();
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd pf = {fd, POLLOUT, 0};
        int k;
        while ((k = poll(&pf, 1, TCP_TIMEOUT_MS)) < 0 && errno == EINTR)
            ;
        int err = 0;
        socklen_t el = sizeof err;
        if (k == 0)
            err = ETIMEDOUT;
        else if (k < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
            err = errno;
        rc = err ? -1 : 0;
        errno = err;
    }
    double ms = (double)(now_ns() - t0) / NS_PER_MS;
    int e = errno;
    (void)close(fd);
    if (rc != 0) {
        fail(p, CLI_EXIT_DOWN, "cannot connect to %s port %d: %s", addr, p->cfg->port, strerror(e));
        return;
    }
    (void)json_object_set_new(ph, "tcp", json_real(ms));
}

/* ---- the report ----------------------------------------------------------------- */

static const char *num_or(json_t *v, const char *fmt, char *buf, size_t cap)
{
    if (!json_is_number(v))
        return "-";
    (void)snprintf(buf, cap, fmt, json_number_value(v));
    return buf;
}

static void print_text(const struct wsprobe *p, FILE *out)
{
    json_t *r = p->r;
    char a[32], b[32], c[32], d[32];
    fprintf(out, "path        %s (%s port %d, %s)\n", p->o->url, p->cfg->host, p->cfg->port,
            p->cfg->tls ? (p->cfg->insecure ? "TLS, certificate not checked" : "TLS") : "no TLS");
    json_t *ph = json_object_get(r, "phases_ms");
    fprintf(out, "phases      dns %s ms, tcp %s ms, tls %s ms, upgrade %s ms\n",
            num_or(json_object_get(ph, "dns"), "%.2f", a, sizeof a),
            num_or(json_object_get(ph, "tcp"), "%.2f", b, sizeof b),
            num_or(json_object_get(ph, "tls"), "%.2f", c, sizeof c),
            num_or(json_object_get(ph, "upgrade"), "%.2f", d, sizeof d));
    fprintf(out,
            "upgrade     without a token %s, with a damaged token %s, with --wrong-token %s, "
            "with the token %s\n",
            num_or(json_object_get(r, "upgrade_without_token"), "%.0f", a, sizeof a),
            num_or(json_object_get(r, "upgrade_with_bad_token"), "%.0f", b, sizeof b),
            num_or(json_object_get(r, "upgrade_with_wrong_audience"), "%.0f", c, sizeof c),
            num_or(json_object_get(r, "upgrade_with_token"), "%.0f", d, sizeof d));
    const char *sp = json_string_value(json_object_get(r, "subprotocol"));
    if (json_object_get(r, "subprotocol"))
        fprintf(out, "subprotocol %s\n", sp ? sp : "none chosen by the server");
    json_t *rtt = json_object_get(r, "rtt_ms");
    if (rtt)
        fprintf(out, "rtt         p50 %s ms, p99 %s ms over %lld pings\n",
                num_or(json_object_get(rtt, "p50"), "%.3f", a, sizeof a),
                num_or(json_object_get(rtt, "p99"), "%.3f", b, sizeof b),
                (long long)json_integer_value(json_object_get(rtt, "n")));
    json_t *mm = json_object_get(r, "max_message_bytes");
    if (mm)
        fprintf(out, "messages    %lld bytes carried whole (the largest frame tried)\n",
                (long long)json_integer_value(mm));
    json_t *tp = json_object_get(r, "throughput_mbps");
    if (tp)
        fprintf(out, "throughput  up %s Mbit/s, down %s Mbit/s (%lld bytes each way)\n",
                num_or(json_object_get(tp, "up"), "%.1f", a, sizeof a),
                num_or(json_object_get(tp, "down"), "%.1f", b, sizeof b),
                (long long)json_integer_value(json_object_get(tp, "bytes")));
    if (json_object_get(r, "idle_cut_s")) {
        json_t *ic = json_object_get(r, "idle_cut_s");
        if (json_is_number(ic))
            fprintf(out, "idle        cut after %.1f s without traffic (%s)\n",
                    json_number_value(ic), json_string_value(json_object_get(r, "idle_close")));
        else
            fprintf(out, "idle        not cut within --idle-max %u s\n", p->o->idle_max_s);
    }
    json_t *ok = json_object_get(r, "idle_with_pings_ok");
    if (ok)
        fprintf(out, "pings       every %u ms %s\n", p->o->ping_interval_ms,
                json_is_true(ok) ? "kept a connection alive at least as long"
                                 : "did NOT keep it alive");
    if (json_object_get(r, "max_age_s")) {
        json_t *ma = json_object_get(r, "max_age_s");
        if (json_is_number(ma))
            fprintf(out, "max age     a pinged connection was cut at %.1f s (%s)\n",
                    json_number_value(ma), json_string_value(json_object_get(r, "age_close")));
        else
            fprintf(out, "max age     none within --age-max %u s\n", p->o->age_max_s);
    }
    json_t *hs = json_object_get(r, "headers");
    if (hs) {
        fprintf(out, "headers     the runner saw:\n");
        const char *k;
        json_t *v;
        json_object_foreach(hs, k, v)
        {
            fprintf(out, "  %-32s %s\n", k, json_string_value(v));
        }
    }
    json_t *af = json_object_get(r, "authorization_forwarded");
    if (json_is_true(af))
        fprintf(out, "WARNING     the path forwards the Authorization header into the sandbox: "
                     "whoever runs there sees the platform's token\n");
    else if (json_is_false(af))
        fprintf(out, "authorization  not forwarded into the sandbox\n");
    fprintf(out, "probe: %s\n", p->exit == CLI_EXIT_OK ? "ok" : "FAILED");
}

static void print_text_of(const void *p, FILE *out)
{
    print_text(p, out);
}

/* A damaged copy of the token: its signature's middle character changed. */
static void damage(const char *tok, char *out, size_t cap)
{
    (void)snprintf(out, cap, "%s", tok);
    char *sig = strrchr(out, '.');
    if (sig && strlen(sig) > 8) {
        char *c = sig + strlen(sig) / 2;
        *c = *c == 'A' ? 'B' : 'A';
    } else if (out[0]) {
        out[0] = out[0] == 'e' ? 'f' : 'e';
    }
}

int cli_wsprobe(uv_loop_t *loop, struct cli_config *cfg, const struct wsprobe_opts *o, FILE *out)
{
    struct wsprobe p;
    memset(&p, 0, sizeof p);
    p.loop = loop;
    p.cfg = cfg;
    p.o = o;
    char why[WHY_MAX];
    /* the URL: ws[s]://host[:port]/path?query, kept whole for the request */
    const char *u = o->url;
    int tls = !strncmp(u, "wss://", 6);
    if (!tls && strncmp(u, "ws://", 5) != 0)
        return cli_err_usage("probe: a WebSocket URL starts with ws:// or wss:// (got %s)", u);
    const char *host = u + (tls ? 6 : 5);
    size_t hl = strcspn(host, ":/?#");
    const char *rest = host + hl;
    int port = tls ? 443 : 80;
    if (*rest == ':') {
        char *end;
        long v = strtol(rest + 1, &end, 10);
        if (end == rest + 1 || v < 1 || v > 65535 || (*end && *end != '/' && *end != '?'))
            return cli_err_usage("probe: a bad port in %s", u);
        port = (int)v;
        rest = end;
    }
    if (hl == 0 || hl >= sizeof cfg->host || strchr(rest, '#'))
        return cli_err_usage("probe: a bad URL: %s", u);
    memcpy(cfg->host, host, hl);
    cfg->host[hl] = 0;
    cfg->port = port;
    cfg->tls = tls;
    cfg->prefix[0] = 0;
    cfg->key[0] = 0;
    (void)snprintf(cfg->url, sizeof cfg->url, "%s", u);
    (void)snprintf(p.path, sizeof p.path, "%s%s", *rest == '/' ? "" : "/", rest);
    if (o->token)
        damage(o->token, p.bad_token, sizeof p.bad_token);
    p.rtts = calloc(o->pings ? o->pings : 1, sizeof *p.rtts);
    p.r = json_pack("{s:s, s:s, s:i, s:b}", "url", u, "host", cfg->host, "port", port, "tls", tls);
    if (!p.rtts || !p.r) {
        free(p.rtts);
        json_decref(p.r);
        fprintf(stderr, "airlock: probe: out of memory\n");
        return CLI_EXIT_OTHER;
    }
    /* the members scripts rely on exist, null until measured */
    static const char *const members[] = {"upgrade_without_token",
                                          "upgrade_with_token",
                                          "subprotocol",
                                          "rtt_ms",
                                          "throughput_mbps",
                                          "max_message_bytes",
                                          "idle_cut_s",
                                          "idle_with_pings_ok",
                                          "max_age_s",
                                          "headers_seen",
                                          "authorization_forwarded",
                                          NULL};
    for (size_t i = 0; members[i]; i++)
        (void)json_object_set_new(p.r, members[i], json_null());
    if (cli_net_new(loop, cfg, &p.net, why, sizeof why) != AL_OK) {
        fprintf(stderr, "airlock: probe: %s\n", why);
        free(p.rtts);
        json_decref(p.r);
        return CLI_EXIT_OTHER;
    }
    uv_timer_t *timers[] = {&p.timer, &p.idle_timer, &p.age_timer, &p.ping_timer};
    for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++) {
        (void)uv_timer_init(loop, timers[i]);
        timers[i]->data = &p;
    }
    phases(&p);
    if (!p.exit) {
        p.step = S_NOTOKEN;
        arm(&p, STEP_TIMEOUT_MS);
        if (open_conn(&p, R_REFUSAL, ""))
            (void)uv_run(loop, UV_RUN_DEFAULT);
    }
    for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++)
        uv_close((uv_handle_t *)timers[i], NULL);
    /* what is still open is dropped, and never calls us again */
    struct pconn *open[] = {p.main, p.idle, p.aged};
    for (size_t i = 0; i < sizeof open / sizeof open[0]; i++)
        if (open[i]) {
            cli_ws_abandon(open[i]->ws);
            free_queue(open[i]);
            free(open[i]);
        }
    cli_net_free(p.net);
    (void)uv_run(loop, UV_RUN_NOWAIT);
    cli_probe_finish(p.r, p.exit, p.why, o->json, out, print_text_of, &p);
    json_decref(p.r);
    free(p.rtts);
    return p.exit;
}
