/*
 * cli_replay: see cli_replay.h.
 *
 * Data model: struct play holds the reader, the next event (read ahead,
 * its bytes copied because the reader reuses its buffer), the virtual
 * clock (recording time after idle limiting, microseconds) and the wall
 * clock time the replay started (uv_now, milliseconds). One timer fires
 * at each event's due time.
 */
#include "cli_replay.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_err.h"
#include "castread.h"
#include "cli_app.h"
#include "cli_err.h"

#define US_PER_MS 1000.0
#define US_PER_S 1000000.0
#define WHY_MAX 512
#define CLEAR_SCREEN "\033[H\033[2J"
#define RESET_ON_STOP "\033[0m\033[?25h\r\n"

struct play {
    uv_loop_t *loop;
    struct castread *r;
    struct cli_replay_opts o;
    int64_t idle_limit_us;
    int64_t last_us, virt_us; /* recording time of the last event; limited clock */
    uint64_t start_ms;
    uv_timer_t timer;
    char *pending; /* the output event waiting for its time */
    size_t pending_len;
    uv_signal_t sigs[3];
    int result;
    char *why;
    size_t cap;
};

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void stop(struct play *p, int result)
{
    p->result = result;
    (void)uv_timer_stop(&p->timer);
    uv_stop(p->loop);
}

static void on_timer(uv_timer_t *h);

/* Play every event that is due, then arm the timer for the next one. */
static void advance(struct play *p)
{
    for (;;) {
        struct castread_event ev;
        int rc = castread_next(p->r, &ev);
        if (rc == 0) {
            stop(p, CLI_EXIT_OK);
            return;
        }
        if (rc < 0) {
            al_errf(p->why, p->cap, "bad recording: %s", castread_error(p->r));
            stop(p, CLI_EXIT_PROTO);
            return;
        }
        int64_t d = ev.time_us - p->last_us;
        if (d < 0)
            d = 0;
        if (p->idle_limit_us > 0 && d > p->idle_limit_us)
            d = p->idle_limit_us;
        p->last_us = ev.time_us;
        p->virt_us += d;
        if (ev.kind != CASTREAD_EV_OUTPUT || ev.len == 0)
            continue;
        uv_update_time(p->loop);
        double due_ms = (double)p->virt_us / US_PER_MS / p->o.speed;
        double now_ms = (double)(uv_now(p->loop) - p->start_ms);
        if (due_ms > now_ms + 1) { /* later: keep a copy, the reader reuses its buffer */
            p->pending = malloc(ev.len);
            if (!p->pending) {
                al_errf(p->why, p->cap, "out of memory");
                stop(p, CLI_EXIT_OTHER);
                return;
            }
            memcpy(p->pending, ev.data, ev.len);
            p->pending_len = ev.len;
            (void)uv_timer_start(&p->timer, on_timer, (uint64_t)(due_ms - now_ms), 0);
            return;
        }
        if (write_all(STDOUT_FILENO, ev.data, ev.len) != 0) {
            al_errf(p->why, p->cap, "cannot write to the terminal: %s", strerror(errno));
            stop(p, CLI_EXIT_OTHER);
            return;
        }
    }
}

static void on_timer(uv_timer_t *h)
{
    struct play *p = h->data;
    int rc = write_all(STDOUT_FILENO, p->pending, p->pending_len);
    free(p->pending);
    p->pending = NULL;
    if (rc != 0) {
        al_errf(p->why, p->cap, "cannot write to the terminal: %s", strerror(errno));
        stop(p, CLI_EXIT_OTHER);
        return;
    }
    advance(p);
}

static void on_signal(uv_signal_t *h, int signo)
{
    struct play *p = h->data;
    if (isatty(STDOUT_FILENO))
        (void)write_all(STDOUT_FILENO, RESET_ON_STOP, sizeof RESET_ON_STOP - 1);
    al_errf(p->why, p->cap, "replay interrupted");
    stop(p, CLI_EXIT_SIGNAL_BASE + signo);
}

static void on_start(uv_timer_t *h)
{
    advance(h->data);
}

int cli_replay(uv_loop_t *loop, struct castread *r, const struct cli_replay_opts *o, char *why,
               size_t cap)
{
    struct play p;
    memset(&p, 0, sizeof p);
    p.loop = loop;
    p.r = r;
    p.o = *o;
    p.why = why;
    p.cap = cap;
    p.result = CLI_EXIT_OK;
    if (why && cap)
        why[0] = 0;
    if (!(p.o.speed > 0) || p.o.speed > CLI_REPLAY_MAX_SPEED)
        p.o.speed = 1;
    const struct castread_info *info = castread_info(r);
    p.idle_limit_us = o->idle_limit_us > 0 ? o->idle_limit_us : info->idle_time_limit_us;
    static const int signos[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof signos / sizeof signos[0]; i++) {
        (void)uv_signal_init(loop, &p.sigs[i]);
        p.sigs[i].data = &p;
        (void)uv_signal_start(&p.sigs[i], on_signal, signos[i]);
    }
    (void)uv_timer_init(loop, &p.timer);
    p.timer.data = &p;
    if (isatty(STDOUT_FILENO))
        (void)write_all(STDOUT_FILENO, CLEAR_SCREEN, sizeof CLEAR_SCREEN - 1);
    uv_update_time(loop);
    p.start_ms = uv_now(loop);
    (void)uv_timer_start(&p.timer, on_start, 0, 0);
    (void)uv_run(loop, UV_RUN_DEFAULT);
    free(p.pending);
    for (size_t i = 0; i < sizeof signos / sizeof signos[0]; i++)
        uv_close((uv_handle_t *)&p.sigs[i], NULL);
    uv_close((uv_handle_t *)&p.timer, NULL);
    for (int i = 0; i < 10 && uv_run(loop, UV_RUN_NOWAIT); i++)
        ;
    return p.result;
}

/* ---- the replay command ------------------------------------------------------ */

static int parse_seconds(const char *v, double max, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d > 0) || d > max)
        return -1;
    *out = d;
    return 0;
}

int cli_replay_cmd(struct cli_app *a, int argc, char **argv)
{
    struct cli_replay_opts o = {1.0, 0};
    const char *src = NULL;
    for (int i = 0; i < argc; i++) {
        double d;
        if (!strcmp(argv[i], "--speed") && i + 1 < argc) {
            if (parse_seconds(argv[++i], CLI_REPLAY_MAX_SPEED, &d) != 0)
                return cli_err_usage("--speed wants a factor above 0 (2 = twice as fast), not '%s'",
                                     argv[i]);
            o.speed = d;
        } else if (!strcmp(argv[i], "--idle-limit") && i + 1 < argc) {
            if (parse_seconds(argv[++i], CASTREAD_MAX_INTERVAL_S, &d) != 0)
                return cli_err_usage("--idle-limit wants seconds above 0, not '%s'", argv[i]);
            o.idle_limit_us = (int64_t)(d * US_PER_S);
        } else if (argv[i][0] != '-' && !src) {
            src = argv[i];
        } else {
            return cli_err_usage("replay: unexpected argument %s", argv[i]);
        }
    }
    if (!src)
        return cli_err_usage("replay: give a recording file or a terminal id%s", "");
    char why[WHY_MAX];
    struct castread *r = NULL;
    struct cli_http_result res;
    memset(&res, 0, sizeof res);
    struct stat st;
    if (stat(src, &st) == 0 || strchr(src, '/') || !cli_app_id_ok(src)) {
        if (castread_open(src, &r, why, sizeof why) != AL_OK) {
            fprintf(stderr, "airlock: %s: %s\n", src, why);
            return errno == ENOENT || stat(src, &st) != 0 ? CLI_EXIT_NOTFOUND : CLI_EXIT_PROTO;
        }
    } else {
        char path[256];
        (void)snprintf(path, sizeof path, "/v1/terminals/%s/recording", src);
        int rc = cli_app_call(a, "downloading the recording", "GET", path, NULL,
                              CLI_HTTP_MAX_RECORDING, &res, NULL);
        if (rc != CLI_EXIT_OK) {
            free(res.body);
            return rc;
        }
        if (castread_open_mem(res.body ? res.body : "", res.len, &r, why, sizeof why) != AL_OK) {
            fprintf(stderr, "airlock: the recording of %s is not readable: %s\n", src, why);
            free(res.body);
            return CLI_EXIT_PROTO;
        }
    }
    if (!a->loop_ok) {
        if (uv_loop_init(&a->loop) != 0) {
            castread_close(r);
            free(res.body);
            return CLI_EXIT_OTHER;
        }
        a->loop_ok = 1;
    }
    int rc = cli_replay(&a->loop, r, &o, why, sizeof why);
    if (why[0])
        fprintf(stderr, "airlock: %s\n", why);
    castread_close(r);
    free(res.body);
    return rc;
}
