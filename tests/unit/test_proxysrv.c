/*
 * Unit tests for proxysrv: the proxy's own listener on a test loop, with
 * agents played by a thread of blocking sockets on 127.0.0.1 and the
 * scripted upstream (httpsrv.c): its addresses, a request through it with
 * the real key swapped in, a stream that reaches the agent as it comes,
 * the connection limit (one over it gets 503), the head deadline (a
 * connection that sends no whole head is closed), an agent that goes
 * away mid-stream (its call is cancelled, its connection freed), and an
 * upload refused with 413 at its head while the agent keeps sending: the
 * rest is drained, so the agent's writes do not fail and it reads the
 * answer and a clean end, up to PROXYSRV_DRAIN_MAX bytes (then it is cut).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "httpsrv.h"
#include "proxysrv.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct fixture {
    uv_loop_t loop;
    struct httpsrv srv;
    struct proxy *p;
    struct proxysrv *s;
    char dir[64], keyfile[128];
    char cred[PROXY_CRED_LEN + 1], hash[PROXY_HASH_HEX + 1];
    int records, last_status;
};

static int lookup(void *ud, const char *hash, const char *upstream, char *terminal, size_t cap)
{
    struct fixture *f = ud;
    (void)upstream;
    if (strcmp(hash, f->hash) != 0)
        return AL_E_NOENT;
    snprintf(terminal, cap, "t-1");
    return AL_OK;
}

static void record(void *ud, const struct proxyconn_record *r)
{
    struct fixture *f = ud;
    f->records++;
    f->last_status = r->status;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    uv_loop_init(&f->loop);
    httpsrv_start(&f->srv, &f->loop);
    snprintf(f->dir, sizeof f->dir, "/tmp/airlock-psrv-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->keyfile, sizeof f->keyfile, "%s/key", f->dir);
    int fd = open(f->keyfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "sk-real\n", 8), 8);
    close(fd);
    struct proxycfg cfg;
    proxycfg_init(&cfg);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->srv.port);
    const char *const lines[][2] = {
        {"upstream.up.url", url},
        {"upstream.up.header", "x-api-key"},
        {"upstream.up.secret-file", f->keyfile},
        {"upstream.up.concurrent", "1024"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        assert_int_equal(proxycfg_set(&cfg, lines[i][0], lines[i][1], NULL, 0), AL_OK);
    assert_int_equal(proxycfg_finish(&cfg, NULL, 0), AL_OK);
    struct proxy_store st = {.lookup = lookup, .record = record, .ud = f};
    assert_int_equal(proxy_new(&cfg, &f->loop, &st, &f->p, NULL, 0), AL_OK);
    assert_int_equal(proxy_mint(f->cred, f->hash), AL_OK);
    char why[256];
    assert_int_equal(proxysrv_new(&f->loop, f->p, "127.0.0.1:0", &f->s, why, sizeof why), AL_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    proxysrv_free(f->s);
    proxy_free(f->p);
    httpsrv_stop(&f->srv);
    assert_int_equal(httpsrv_loop_end(&f->loop), 0);
    unlink(f->keyfile);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* ---- agents: a thread with blocking sockets ---- */

struct agent {
    int port;
    const char *send; /* sent at once (may be NULL) */
    int nconns;       /* connect this many and hold them (limit test) */
    int fds[PROXYSRV_MAX_CONNS + 1];
    int hangup_after_first; /* close after the first body bytes */
    char out[65536];
    size_t out_len;
    int64_t first_ms, end_ms; /* since the start: first bytes, EOF */
    int done;                 /* set last (read by the loop's thread) */
};

static int64_t mono_ms(void)
{
    return (int64_t)(uv_hrtime() / 1000000u);
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        return -1;
    return fd;
}

static void *agent_run(void *arg)
{
    struct agent *g = arg;
    int64_t t0 = mono_ms();
    g->first_ms = g->end_ms = -1;
    for (int i = 0; i < g->nconns; i++)
        g->fds[i] = dial(g->port);
    int fd = dial(g->port);
    if (fd >= 0 && g->send)
        (void)!write(fd, g->send, strlen(g->send));
    while (fd >= 0) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 20000) <= 0)
            break;
        ssize_t n = read(fd, g->out + g->out_len, sizeof g->out - 1 - g->out_len);
        if (n <= 0)
            break;
        if (g->first_ms < 0)
            g->first_ms = mono_ms() - t0;
        g->out_len += (size_t)n;
        g->out[g->out_len] = '\0';
        if (g->hangup_after_first && strstr(g->out, "data: "))
            break;
    }
    g->end_ms = mono_ms() - t0;
    if (fd >= 0)
        close(fd);
    __atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* An upload: the head g->send, then g->body_bytes in 64 KiB writes (the
 * first few paced, so that the answer and the close come first), its side
 * shut, then read to the end. Sets written (bytes of body sent before a
 * write failed, or all) and write_failed, read_reset. */
struct upload {
    struct agent a;
    size_t body_bytes, written;
    int write_failed, read_reset;
};

static void *upload_run(void *arg)
{
    struct upload *u = arg;
    struct agent *g = &u->a;
    int fd = dial(g->port);
    static char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    if (fd >= 0 && write(fd, g->send, strlen(g->send)) < 0)
        u->write_failed = 1;
    for (int i = 0; fd >= 0 && !u->write_failed && u->written < u->body_bytes; i++) {
        if (i < 4)
            usleep(50000);
        size_t n =
            u->body_bytes - u->written < sizeof chunk ? u->body_bytes - u->written : sizeof chunk;
        ssize_t k = send(fd, chunk, n, MSG_NOSIGNAL);
        if (k <= 0)
            u->write_failed = 1;
        else
            u->written += (size_t)k;
    }
    if (fd >= 0)
        (void)shutdown(fd, SHUT_WR);
    while (fd >= 0) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 10000) <= 0)
            break;
        ssize_t n = read(fd, g->out + g->out_len, sizeof g->out - 1 - g->out_len);
        if (n < 0)
            u->read_reset = 1;
        if (n <= 0)
            break;
        g->out_len += (size_t)n;
        g->out[g->out_len] = '\0';
    }
    if (fd >= 0)
        close(fd);
    __atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void agent_go(struct fixture *f, struct agent *g, pthread_t *th)
{
    g->port = proxysrv_port(f->s);
    assert_int_equal(pthread_create(th, NULL, agent_run, g), 0);
    httpsrv_run_until(&f->loop, &g->done, 25000);
    assert_int_equal(pthread_join(*th, NULL), 0);
    assert_true(g->done);
}

/* Run the loop until no connection is left (at most ms). */
static void run_until_empty(struct fixture *f, unsigned ms)
{
    for (unsigned waited = 0; proxysrv_conns(f->s) && waited < ms; waited += 50) {
        int never = 0;
        httpsrv_run_until(&f->loop, &never, 50);
    }
    assert_int_equal(proxysrv_conns(f->s), 0);
}

/* ---- tests ---- */

static void test_addresses(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    static const char *const good[] = {"127.0.0.1:0", "0.0.0.0:65535", "[::1]:8090", "[::]:1"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_int_equal(proxysrv_parse_addr(good[i], &ss), AL_OK);
    static const char *const bad[] = {
        "",
        "127.0.0.1",
        ":80",
        "127.1:80",
        "localhost:80",
        "[::1:80",
        "::1:80",
        "1.2.3.4:",
        "1.2.3.4:65536",
        "1.2.3.4:-1",
        "1.2.3.4:8x",
        "[]:80",
        "1.2.3.4:99999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(proxysrv_parse_addr(bad[i], &ss), AL_E_INVAL);
    assert_int_equal(proxysrv_parse_addr(NULL, &ss), AL_E_INVAL);
}

static void test_base_and_bad_listen(void **state)
{
    struct fixture *f = *state;
    char base[PROXYSRV_BASE_MAX], want[PROXYSRV_BASE_MAX], why[256];
    proxysrv_base(f->s, base, sizeof base);
    snprintf(want, sizeof want, "http://127.0.0.1:%d/v1/proxy", proxysrv_port(f->s));
    assert_string_equal(base, want);
    struct proxysrv *s2;
    assert_int_equal(proxysrv_new(&f->loop, f->p, "0.0.0.0:0", &s2, why, sizeof why), AL_OK);
    proxysrv_base(s2, base, sizeof base);
    snprintf(want, sizeof want, "http://127.0.0.1:%d/v1/proxy", proxysrv_port(s2));
    assert_string_equal(base, want); /* a wildcard: agents here use loopback */
    proxysrv_free(s2);
    /* the port is taken: a clear reason, nothing to close */
    char taken[64];
    snprintf(taken, sizeof taken, "127.0.0.1:%d", proxysrv_port(f->s));
    assert_int_equal(proxysrv_new(&f->loop, f->p, taken, &s2, why, sizeof why), AL_E_IO);
    assert_non_null(strstr(why, "cannot listen on"));
    assert_int_equal(proxysrv_new(&f->loop, f->p, "nowhere", &s2, why, sizeof why), AL_E_INVAL);
    assert_non_null(strstr(why, "ADDR:PORT"));
}

static void test_request_through(void **state)
{
    struct fixture *f = *state;
    char req[512];
    snprintf(req, sizeof req,
             "POST /v1/proxy/up/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Content-Length: 5\r\nConnection: close\r\n\r\nhello",
             f->cred);
    struct agent g = {.send = req};
    pthread_t th;
    agent_go(f, &g, &th);
    assert_non_null(strstr(g.out, "HTTP/1.1 201 "));
    assert_non_null(strstr(g.out, "\r\n\r\nhello"));
    assert_non_null(strstr(f->srv.heads, "x-api-key: sk-real\r\n"));
    assert_null(strstr(f->srv.heads, f->cred));
    assert_int_equal(f->records, 1);
    assert_int_equal(f->last_status, 201);
    run_until_empty(f, 2000);

    /* a bad credential: 401 with its JSON, then closed */
    struct agent g2 = {.send = "GET /v1/proxy/up/echo HTTP/1.1\r\nHost: x\r\nAuthorization: "
                               "Bearer alp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n\r\n"};
    agent_go(f, &g2, &th);
    assert_non_null(strstr(g2.out, "HTTP/1.1 401 "));
    assert_non_null(strstr(g2.out, "\"type\":\"airlock_proxy\""));
    run_until_empty(f, 2000);
}

static void test_stream_as_it_comes(void **state)
{
    struct fixture *f = *state;
    char req[512];
    snprintf(req, sizeof req,
             "GET /v1/proxy/up/stream HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nConnection: "
             "close\r\n\r\n",
             f->cred);
    struct agent g = {.send = req};
    pthread_t th;
    agent_go(f, &g, &th);
    assert_non_null(strstr(g.out, "Transfer-Encoding: chunked"));
    assert_non_null(strstr(g.out, "data: {\"n\":3}"));
    /* the first bytes long before the end: three events 400 ms apart */
    assert_true(g.first_ms >= 0 && g.end_ms - g.first_ms >= 800);
    run_until_empty(f, 2000);
}

static void test_agent_goes_away(void **state)
{
    struct fixture *f = *state;
    char req[512];
    snprintf(req, sizeof req,
             "GET /v1/proxy/up/forever HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\n\r\n", f->cred);
    struct agent g = {.send = req, .hangup_after_first = 1};
    pthread_t th;
    agent_go(f, &g, &th);
    assert_non_null(strstr(g.out, "data: "));
    run_until_empty(f, 3000); /* its connection freed, its call cancelled */
    int two = 0;
    for (unsigned w = 0; w < 3000 && !two; w += 50) {
        int never = 0;
        httpsrv_run_until(&f->loop, &never, 50);
        two = f->srv.eof_seen >= 1;
    }
    assert_true(two); /* the upstream saw its client go */
    assert_int_equal(f->records, 1);
    assert_int_equal(f->last_status, 0); /* cut */
}

static void upload_go(struct fixture *f, struct upload *u)
{
    pthread_t th;
    u->a.port = proxysrv_port(f->s);
    assert_int_equal(pthread_create(&th, NULL, upload_run, u), 0);
    httpsrv_run_until(&f->loop, &u->a.done, 25000);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(u->a.done);
}

static void test_refused_upload_drained(void **state)
{
    struct fixture *f = *state;
    char req[512];
    snprintf(req, sizeof req,
             "POST /v1/proxy/up/ec HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\n"
             "Content-Length: 64000000\r\n\r\n",
             f->cred);
    /* within the drain: every write goes through, the answer and a clean end */
    struct upload *u = calloc(1, sizeof *u);
    assert_non_null(u);
    u->a.send = req;
    u->body_bytes = PROXYSRV_DRAIN_MAX / 2;
    upload_go(f, u);
    assert_false(u->write_failed);
    assert_int_equal(u->written, u->body_bytes);
    assert_false(u->read_reset);
    assert_non_null(strstr(u->a.out, "HTTP/1.1 413 Content Too Large\r\n"));
    assert_non_null(strstr(u->a.out, "max-body"));
    run_until_empty(f, 3000);
    /* past it: cut, and the connection goes */
    memset(u, 0, sizeof *u);
    u->a.send = req;
    u->body_bytes = 4 * (size_t)PROXYSRV_DRAIN_MAX;
    upload_go(f, u);
    assert_true(u->write_failed);
    assert_true(u->written < 4 * (size_t)PROXYSRV_DRAIN_MAX);
    run_until_empty(f, 3000);
    assert_int_equal(f->srv.requests, 0); /* nothing of it went upstream */
    free(u);
}

static void test_connection_limit(void **state)
{
    struct fixture *f = *state;
    struct agent *g = calloc(1, sizeof *g);
    assert_non_null(g);
    g->nconns = PROXYSRV_MAX_CONNS; /* held open without a byte; one more reads */
    pthread_t th;
    agent_go(f, g, &th);
    assert_non_null(strstr(g->out, "HTTP/1.1 503 Service Unavailable\r\n"));
    assert_non_null(strstr(g->out, "too many connections"));
    char *body = strstr(g->out, "\r\n\r\n");
    assert_non_null(body);
    assert_non_null(strstr(g->out, "Content-Length: 80\r\n"));
    assert_int_equal(strlen(body + 4), 80); /* as it says */
    for (int i = 0; i < g->nconns; i++)
        assert_true(g->fds[i] >= 0);
    for (int i = 0; i < g->nconns; i++)
        close(g->fds[i]);
    run_until_empty(f, 5000);
    free(g);
}

static void test_head_deadline(void **state)
{
    struct fixture *f = *state;
    proxysrv_set_head_timeout(f->s, 600);
    struct agent g = {.send = "GET /v1/proxy/up/ec"}; /* and nothing more */
    pthread_t th;
    agent_go(f, &g, &th);
    assert_int_equal(g.out_len, 0); /* closed without an answer */
    assert_true(g.end_ms >= 500 && g.end_ms < 600 + 2 * PROXYSRV_TICK_MS + 1000);
    run_until_empty(f, 2000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addresses),
        cmocka_unit_test_setup_teardown(test_base_and_bad_listen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_as_it_comes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_goes_away, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_upload_drained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_deadline, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
