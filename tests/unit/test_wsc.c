/*
 * Tests of the client WebSocket link (src/ws/wsc.c, wsc_upgrade.c) against
 * a server played by the test over a real TCP connection on 127.0.0.1: the
 * test reads the request and the frames the link wrote from its accepted
 * socket, and writes answers and frames byte for byte, as a hostile front
 * could.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "al_err.h"
#include "al_limits.h"
#include "frame.h"
#include "testutil.h"
#include "wsc.h"

#define IO_WAIT_MS 2000 /* the longest a test waits for bytes it expects */
#define MAX_MSGS 16

struct seen {
    int upgraded, failed;
    unsigned status;
    char why[256];
    int marked;
    int nmsg;
    size_t msg_len[MAX_MSGS];
    uint8_t *msg[MAX_MSGS];
    int refused;
    uint16_t refused_error;
    int closed, close_code;
    char close_reason[128];
};

static void ev_upgraded(void *ud)
{
    ((struct seen *)ud)->upgraded++;
}

static void ev_failed(void *ud, unsigned status, const char *why, int marked)
{
    struct seen *s = ud;
    s->failed++;
    s->marked = marked;
    s->status = status;
    (void)snprintf(s->why, sizeof s->why, "%s", why);
}

static void ev_message(void *ud, const uint8_t *msg, size_t len)
{
    struct seen *s = ud;
    assert_true(s->nmsg < MAX_MSGS);
    s->msg[s->nmsg] = malloc(len ? len : 1);
    assert_non_null(s->msg[s->nmsg]);
    memcpy(s->msg[s->nmsg], msg, len);
    s->msg_len[s->nmsg++] = len;
}

static void ev_refused(void *ud, uint16_t error, const char *why)
{
    struct seen *s = ud;
    (void)why;
    s->refused++;
    s->refused_error = error;
}

static void ev_closed(void *ud, int code, const char *reason)
{
    struct seen *s = ud;
    s->closed++;
    s->close_code = code;
    (void)snprintf(s->close_reason, sizeof s->close_reason, "%s", reason);
}

static const struct wsc_events events = {ev_upgraded, ev_failed, ev_message, ev_refused, ev_closed};

struct fx {
    int cfd, sfd; /* the link's socket, the server's */
    struct wsc *c;
    struct seen s;
    char key[WSCU_KEY_LEN + 1];
    char request[WSC_REQUEST_MAX];
    int fds_before;
};

/* ---- the wire ---- */

static void write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        assert_true(n > 0);
        p += n;
        len -= (size_t)n;
    }
}

/* Read exactly len bytes, or fail the test after IO_WAIT_MS. */
static void read_exact(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        struct pollfd pf = {fd, POLLIN, 0};
        assert_int_equal(poll(&pf, 1, IO_WAIT_MS), 1);
        ssize_t n = recv(fd, p, len, 0);
        assert_true(n > 0);
        p += n;
        len -= (size_t)n;
    }
}

/* Whatever the link has encoded, onto its socket. */
static void client_flush(struct fx *f)
{
    static uint8_t buf[AL_MAX_FRAME + 64];
    while (wsc_pending(f->c)) {
        size_t n = wsc_output(f->c, buf, sizeof buf);
        if (!n)
            break;
        write_all(f->cfd, buf, n);
    }
}

/* What arrived on the link's socket within ms, into the link. */
static void client_read(struct fx *f, int ms)
{
    static uint8_t buf[16384];
    for (;;) {
        struct pollfd pf = {f->cfd, POLLIN, 0};
        if (poll(&pf, 1, ms) != 1)
            return;
        ssize_t n = recv(f->cfd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0)
            return;
        (void)wsc_receive(f->c, buf, (size_t)n);
        ms = 50; /* the rest of a burst */
    }
}

/* One frame from the server's side: header, optional mask, payload. */
static size_t frame(uint8_t *out, int fin, int opcode, const uint8_t *mask, const void *payload,
                    size_t len)
{
    size_t h = 0;
    out[h++] = (uint8_t)((fin ? 0x80 : 0) | opcode);
    uint8_t m = mask ? 0x80 : 0;
    if (len < 126) {
        out[h++] = (uint8_t)(m | len);
    } else if (len < 65536) {
        out[h++] = m | 126;
        out[h++] = (uint8_t)(len >> 8);
        out[h++] = (uint8_t)len;
    } else {
        out[h++] = m | 127;
        for (int i = 7; i >= 0; i--)
            out[h++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    if (mask) {
        memcpy(out + h, mask, 4);
        h += 4;
    }
    for (size_t i = 0; i < len && payload; i++)
        out[h + i] = (uint8_t)(((const uint8_t *)payload)[i] ^ (mask ? mask[i % 4] : 0));
    return h + len;
}

static void srv_frame(struct fx *f, int fin, int opcode, const void *payload, size_t len)
{
    uint8_t *buf = malloc(len + 16);
    assert_non_null(buf);
    write_all(f->sfd, buf, frame(buf, fin, opcode, NULL, payload, len));
    free(buf);
}

struct rframe {
    int fin, opcode, masked;
    uint8_t mask[4];
    size_t len;
    uint8_t payload[AL_MAX_FRAME + 16];
};

/* One frame the link wrote, read on the server's side and unmasked. */
static void srv_read_frame(struct fx *f, struct rframe *r)
{
    uint8_t h[2];
    read_exact(f->sfd, h, 2);
    r->fin = h[0] >> 7;
    r->opcode = h[0] & 0xf;
    r->masked = h[1] >> 7;
    uint64_t len = h[1] & 0x7f;
    if (len == 126) {
        uint8_t e[2];
        read_exact(f->sfd, e, 2);
        len = (uint64_t)e[0] << 8 | e[1];
    } else if (len == 127) {
        uint8_t e[8];
        read_exact(f->sfd, e, 8);
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | e[i];
    }
    assert_true(len <= sizeof r->payload);
    if (r->masked)
        read_exact(f->sfd, r->mask, 4);
    read_exact(f->sfd, r->payload, (size_t)len);
    for (size_t i = 0; r->masked && i < len; i++)
        r->payload[i] ^= r->mask[i % 4];
    r->len = (size_t)len;
}

/* ---- the upgrade ---- */

/* The Accept for a key, computed here independently of wsc_upgrade.c. */
static void accept_for(const char *key, char out[WSCU_ACCEPT_LEN + 1])
{
    char in[128];
    int n = snprintf(in, sizeof in, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
    uint8_t md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)in, (size_t)n, md);
    EVP_EncodeBlock((unsigned char *)out, md, SHA_DIGEST_LENGTH);
}

/* The request the link wrote, read by the server up to its blank line;
 * the key it carries into f->key. */
static void srv_read_request(struct fx *f)
{
    client_flush(f);
    size_t n = 0;
    while (n < 4 || memcmp(f->request + n - 4, "\r\n\r\n", 4) != 0) {
        assert_true(n < sizeof f->request - 1);
        read_exact(f->sfd, f->request + n, 1);
        n++;
    }
    f->request[n] = 0;
    const char *k = strstr(f->request, "\r\nSec-WebSocket-Key: ");
    assert_non_null(k);
    k += strlen("\r\nSec-WebSocket-Key: ");
    assert_int_equal(strcspn(k, "\r"), WSCU_KEY_LEN);
    memcpy(f->key, k, WSCU_KEY_LEN);
    f->key[WSCU_KEY_LEN] = 0;
}

static void srv_answer(struct fx *f, const char *status, const char *accept, const char *proto,
                       const char *more)
{
    char a[4096];
    char acc[WSCU_ACCEPT_LEN + 1];
    accept_for(f->key, acc);
    int n = snprintf(a, sizeof a, "HTTP/1.1 %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n",
                     status);
    if (accept)
        n += snprintf(a + n, sizeof a - (size_t)n, "Sec-WebSocket-Accept: %s\r\n",
                      *accept ? accept : acc);
    if (proto)
        n += snprintf(a + n, sizeof a - (size_t)n, "Sec-WebSocket-Protocol: %s\r\n", proto);
    n += snprintf(a + n, sizeof a - (size_t)n, "%s\r\n", more ? more : "");
    write_all(f->sfd, a, (size_t)n);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->fds_before = tu_count_fds();
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(l, 1), 0);
    socklen_t sl = sizeof sa;
    assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
    f->cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(f->cfd, (struct sockaddr *)&sa, sizeof sa), 0);
    f->sfd = accept(l, NULL, NULL);
    assert_true(f->sfd >= 0);
    close(l);
    struct wscu_request r = {"127.0.0.1",    ntohs(sa.sin_port), "/v1/runners/connect?identifier=x",
                             AL_SUBPROTOCOL, "X-Test: yes\r\n",  "x-airlock-runner"};
    f->c = wsc_new(&r, &events, &f->s);
    assert_non_null(f->c);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    wsc_free(f->c);
    close(f->cfd);
    close(f->sfd);
    for (int i = 0; i < f->s.nmsg; i++)
        free(f->s.msg[i]);
    assert_int_equal(tu_count_fds(), f->fds_before);
    free(f);
    return 0;
}

/* A good 101, read by the link. */
static void upgrade(struct fx *f)
{
    srv_read_request(f);
    srv_answer(f, "101 Switching Protocols", "", AL_SUBPROTOCOL, NULL);
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.upgraded, 1);
    assert_int_equal(f->s.failed, 0);
    assert_true(wsc_is_open(f->c));
}

/* ---- tests ---- */

/* RFC 6455 §1.3's example key and Accept. */
static void test_accept_vector(void **state)
{
    (void)state;
    char out[WSCU_ACCEPT_LEN + 1];
    assert_int_equal(wscu_accept_of("dGhlIHNhbXBsZSBub25jZQ==", out), AL_OK);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

/* The request carries what an upgrade needs, our headers, a fresh key. */
static void test_request(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    const char *want[] = {"GET /v1/runners/connect?identifier=x HTTP/1.1\r\n",
                          "\r\nHost: 127.0.0.1:",
                          "\r\nUpgrade: websocket\r\n",
                          "\r\nConnection: Upgrade\r\n",
                          "\r\nSec-WebSocket-Version: 13\r\n",
                          "\r\nSec-WebSocket-Protocol: airlock.v1\r\n",
                          "\r\nX-Test: yes\r\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_non_null(strstr(f->request, want[i]));
    /* a second link's key differs */
    char buf[WSC_REQUEST_MAX], key2[WSCU_KEY_LEN + 1];
    size_t len;
    struct wscu_request r = {"h", 1, "/", "p", NULL, NULL};
    assert_int_equal(wscu_request(&r, buf, sizeof buf, &len, key2), AL_OK);
    assert_string_not_equal(key2, f->key);
    /* a header injection through a field is refused */
    struct wscu_request bad = {"h\r\nX-Evil: 1", 1, "/", "p", NULL, NULL};
    assert_int_equal(wscu_request(&bad, buf, sizeof buf, &len, key2), AL_E_INVAL);
    /* extra lines: a bare CR or LF, an empty line, a missing CRLF: refused */
    const char *bad_extra[] = {"A: 1\rB: 2\r\n", "A: 1\nB: 2\r\n", "A: 1\r\n\r\nGET / HTTP/1.1\r\n",
                               "A: 1", "\r\n"};
    for (size_t i = 0; i < sizeof bad_extra / sizeof bad_extra[0]; i++) {
        struct wscu_request e = {"h", 1, "/", "p", bad_extra[i], NULL};
        assert_int_equal(wscu_request(&e, buf, sizeof buf, &len, key2), AL_E_INVAL);
    }
    struct wscu_request good = {"h", 1, "/", "p", "A: 1\r\nB: 2\r\n", NULL};
    assert_int_equal(wscu_request(&good, buf, sizeof buf, &len, key2), AL_OK);
    assert_int_equal(wscu_request(&r, buf, 20, &len, key2), AL_E_TOOBIG);
}

/* The 101 and the first frame in one write: the frame is not lost. */
static void test_upgrade_then_frame_same_read(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    char a[512], acc[WSCU_ACCEPT_LEN + 1];
    accept_for(f->key, acc);
    int n = snprintf(a, sizeof a,
                     "HTTP/1.1 101 Switching Protocols\r\nupgrade: WebSocket\r\n"
                     "connection: keep-alive, Upgrade\r\nsec-websocket-accept: %s\r\n"
                     "sec-websocket-protocol: airlock.v1\r\n\r\n",
                     acc);
    n += (int)frame((uint8_t *)a + n, 1, 0x2, NULL, "hello", 5);
    write_all(f->sfd, a, (size_t)n);
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.upgraded, 1);
    assert_int_equal(f->s.nmsg, 1);
    assert_int_equal(f->s.msg_len[0], 5);
    assert_memory_equal(f->s.msg[0], "hello", 5);
}

/* Every frame the link sends is masked, each with its own key; the
 * payload unmasks to what was sent. */
static void test_masking_keys_differ(void **state)
{
    struct fx *f = *state;
    upgrade(f);
    static struct rframe r[4];
    uint8_t msg[300];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)i;
    for (int i = 0; i < 4; i++)
        assert_int_equal(wsc_send(f->c, msg, sizeof msg), AL_OK);
    client_flush(f);
    for (int i = 0; i < 4; i++) {
        srv_read_frame(f, &r[i]);
        assert_int_equal(r[i].opcode, 2);
        assert_int_equal(r[i].fin, 1);
        assert_int_equal(r[i].masked, 1);
        assert_int_equal(r[i].len, sizeof msg);
        assert_memory_equal(r[i].payload, msg, sizeof msg);
        for (int j = 0; j < i; j++)
            assert_memory_not_equal(r[i].mask, r[j].mask, 4);
    }
    /* a whole frame of the largest size goes in one piece */
    uint8_t *big = calloc(1, AL_MAX_FRAME);
    assert_non_null(big);
    assert_int_equal(wsc_send(f->c, big, AL_MAX_FRAME), AL_OK);
    assert_int_equal(wsc_send(f->c, big, AL_MAX_FRAME + 1), AL_E_TOOBIG);
    client_flush(f);
    srv_read_frame(f, &r[0]);
    assert_int_equal(r[0].len, AL_MAX_FRAME);
    assert_memory_equal(r[0].payload, big, AL_MAX_FRAME);
    free(big);
}

/* A message in fragments, a ping between them: one message, and the pong
 * carries the ping's payload. */
static void test_fragments_and_ping(void **state)
{
    struct fx *f = *state;
    upgrade(f);
    srv_frame(f, 0, 0x2, "abc", 3);
    srv_frame(f, 0, 0x0, "def", 3);
    srv_frame(f, 1, 0x9, "pp", 2);
    srv_frame(f, 1, 0x0, "gh", 2);
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.nmsg, 1);
    assert_int_equal(f->s.msg_len[0], 8);
    assert_memory_equal(f->s.msg[0], "abcdefgh", 8);
    client_flush(f);
    static struct rframe r;
    srv_read_frame(f, &r);
    assert_int_equal(r.opcode, 0xa);
    assert_int_equal(r.masked, 1);
    assert_int_equal(r.len, 2);
    assert_memory_equal(r.payload, "pp", 2);
    /* the largest message, in two fragments, is whole */
    uint8_t *big = malloc(AL_MAX_FRAME);
    assert_non_null(big);
    for (size_t i = 0; i < AL_MAX_FRAME; i++)
        big[i] = (uint8_t)(i * 7);
    srv_frame(f, 0, 0x2, big, 1000);
    srv_frame(f, 1, 0x0, big + 1000, AL_MAX_FRAME - 1000);
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.nmsg, 2);
    assert_int_equal(f->s.msg_len[1], AL_MAX_FRAME);
    assert_memory_equal(f->s.msg[1], big, AL_MAX_FRAME);
    assert_int_equal(f->s.refused, 0);
    free(big);
}

/* A text message is refused (FR_ERR_PROTOCOL), and what follows dropped. */
static void test_text_refused(void **state)
{
    struct fx *f = *state;
    upgrade(f);
    srv_frame(f, 1, 0x1, "hi", 2);
    srv_frame(f, 1, 0x2, "after", 5);
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.refused, 1);
    assert_int_equal(f->s.refused_error, FR_ERR_PROTOCOL);
    assert_int_equal(f->s.nmsg, 0);
    /* the caller's close goes out with its code and reason */
    assert_int_equal(wsc_close(f->c, 4400, "text messages are not allowed"), AL_OK);
    client_flush(f);
    assert_true(wsc_close_sent(f->c));
    static struct rframe r;
    srv_read_frame(f, &r);
    assert_int_equal(r.opcode, 0x8);
    assert_int_equal(r.len, 2 + strlen("text messages are not allowed"));
    assert_int_equal(r.payload[0] << 8 | r.payload[1], 4400);
    assert_memory_equal(r.payload + 2, "text messages are not allowed", r.len - 2);
    assert_int_equal(wsc_send(f->c, (const uint8_t *)"x", 1), AL_E_STATE);
}

/* A frame declaring more than AL_MAX_FRAME is refused at its first
 * payload bytes (wslay reports a frame's start with its first data), not
 * after AL_MAX_FRAME of them; so is a message whose fragments add up to
 * more. */
static void test_too_big_refused(void **state)
{
    struct fx *f = *state;
    upgrade(f);
    uint8_t h[16];
    size_t n = frame(h, 1, 0x2, NULL, NULL, AL_MAX_FRAME + 1);
    write_all(f->sfd, h, n - (AL_MAX_FRAME + 1)); /* the header */
    write_all(f->sfd, "0123456789", 10);          /* and 10 bytes of its payload */
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.refused, 1);
    assert_int_equal(f->s.refused_error, FR_ERR_TOO_BIG);
    assert_int_equal(f->s.nmsg, 0);
}

static void test_too_big_in_fragments(void **state)
{
    struct fx *f = *state;
    upgrade(f);
    uint8_t *big = calloc(1, AL_MAX_FRAME);
    assert_non_null(big);
    srv_frame(f, 0, 0x2, big, AL_MAX_FRAME);
    srv_frame(f, 1, 0x0, "x", 1);
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.refused, 1);
    assert_int_equal(f->s.refused_error, FR_ERR_TOO_BIG);
    assert_int_equal(f->s.nmsg, 0);
    free(big);
}

/* The server's close: its code and reason reported, the close answered. */
static void test_close_from_server(void **state)
{
    struct fx *f = *state;
    upgrade(f);
    uint8_t p[32] = {0x0f, 0xa5}; /* 4005 */
    memcpy(p + 2, "replaced", 8);
    srv_frame(f, 1, 0x8, p, 10);
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.closed, 1);
    assert_int_equal(f->s.close_code, 4005);
    assert_string_equal(f->s.close_reason, "replaced");
    assert_true(wsc_pending(f->c));
    client_flush(f);
    assert_true(wsc_close_sent(f->c));
    static struct rframe r;
    srv_read_frame(f, &r);
    assert_int_equal(r.opcode, 0x8);
    assert_int_equal(r.payload[0] << 8 | r.payload[1], 4005);
}

/* A masked frame from the server breaks RFC 6455 §5.1: close 1002, and
 * the frame is not delivered. */
static void test_masked_server_frame(void **state)
{
    struct fx *f = *state;
    upgrade(f);
    uint8_t buf[64];
    const uint8_t mask[4] = {1, 2, 3, 4};
    size_t n = frame(buf, 1, 0x2, mask, "secret", 6);
    write_all(f->sfd, buf, n);
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.nmsg, 0);
    client_flush(f);
    static struct rframe r;
    srv_read_frame(f, &r);
    assert_int_equal(r.opcode, 0x8);
    assert_int_equal(r.payload[0] << 8 | r.payload[1], 1002);
    /* and nothing more is read */
    srv_frame(f, 1, 0x2, "late", 4);
    client_read(f, 200);
    assert_int_equal(f->s.nmsg, 0);
}

/* ---- answers that must fail the upgrade ---- */

static void expect_failed(struct fx *f, unsigned status, const char *why_part)
{
    client_read(f, IO_WAIT_MS);
    assert_int_equal(f->s.upgraded, 0);
    assert_int_equal(f->s.failed, 1);
    assert_int_equal(f->s.status, status);
    if (!strstr(f->s.why, why_part))
        fail_msg("why: '%s', wanted '%s'", f->s.why, why_part);
    assert_false(wsc_is_open(f->c));
    assert_int_equal(wsc_send(f->c, (const uint8_t *)"x", 1), AL_E_STATE);
    /* more bytes change nothing */
    assert_int_equal(wsc_receive(f->c, (const uint8_t *)"HTTP/1.1 101\r\n\r\n", 16), AL_E_PROTO);
    assert_int_equal(f->s.failed, 1);
}

static void test_fail_status(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    write_all(f->sfd, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", 46);
    expect_failed(f, 403, "not 101");
    assert_int_equal(f->s.marked, 0);
}

/* The mark header's presence is reported (airlockd tells a runner's
 * refusal from a front's by it). */
static void test_fail_status_marked(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    const char *a = "HTTP/1.1 403 Forbidden\r\nX-Airlock-Runner: 1\r\nContent-Length: 0\r\n\r\n";
    write_all(f->sfd, a, strlen(a));
    expect_failed(f, 403, "not 101");
    assert_int_equal(f->s.marked, 1);
}

static void test_fail_wrong_accept(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    srv_answer(f, "101 Switching Protocols", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", AL_SUBPROTOCOL, NULL);
    expect_failed(f, 101, "Accept");
}

static void test_fail_no_accept(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    srv_answer(f, "101 Switching Protocols", NULL, AL_SUBPROTOCOL, NULL);
    expect_failed(f, 101, "Accept");
}

static void test_fail_two_accepts(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    char acc[WSCU_ACCEPT_LEN + 1], more[128];
    accept_for(f->key, acc);
    (void)snprintf(more, sizeof more, "Sec-WebSocket-Accept: %s\r\n", acc);
    srv_answer(f, "101 Switching Protocols", "", AL_SUBPROTOCOL, more);
    expect_failed(f, 101, "Accept");
}

static void test_fail_no_protocol(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    srv_answer(f, "101 Switching Protocols", "", NULL, NULL);
    expect_failed(f, 101, "Protocol");
}

static void test_fail_wrong_protocol(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    srv_answer(f, "101 Switching Protocols", "", "airlock.v2", NULL);
    expect_failed(f, 101, "Protocol");
}

/* An extension we did not ask for (compression would set RSV1). */
static void test_fail_extensions(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    srv_answer(f, "101 Switching Protocols", "", AL_SUBPROTOCOL,
               "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    expect_failed(f, 101, "extensions");
}

static void test_fail_not_http(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    write_all(f->sfd, "SSH-2.0-OpenSSH\r\n", 17);
    expect_failed(f, 0, "not an HTTP answer");
}

/* Headers beyond WSCU_HEADER_MAX fail the upgrade, at the bound: the link
 * keeps no more than that of an answer that never ends. */
static void test_fail_headers_too_long(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    write_all(f->sfd, "HTTP/1.1 101 Switching Protocols\r\n", 34);
    char line[101];
    memset(line, 'a', 97);
    memcpy(line + 97, ":b\r\n", 4);
    for (int i = 0; i < WSCU_HEADER_MAX / 100 + 1; i++)
        write_all(f->sfd, line, sizeof line);
    expect_failed(f, 101, "exceed the limit");
    /* one huge value of a header we check fails at its own bound */
}

static void test_fail_value_too_long(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    char big[WSCU_VALUE_MAX + 64];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    srv_answer(f, "101 Switching Protocols", "", big, NULL);
    expect_failed(f, 101, "too long");
}

/* A server that never answers: the link waits without an event (the
 * caller's deadline ends it: runner_conn.c's RUNNER_APP_HANDSHAKE_S, see
 * runner_dial.mjs); half an answer, byte by byte, changes nothing. */
static void test_silent_server(void **state)
{
    struct fx *f = *state;
    srv_read_request(f);
    client_read(f, 200);
    const char *half = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n";
    for (size_t i = 0; half[i]; i++)
        assert_int_equal(wsc_receive(f->c, (const uint8_t *)half + i, 1), AL_OK);
    assert_int_equal(f->s.upgraded + f->s.failed, 0);
    assert_int_equal(wsc_send(f->c, (const uint8_t *)"x", 1), AL_E_STATE);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_vector),
        T(test_request),
        T(test_upgrade_then_frame_same_read),
        T(test_masking_keys_differ),
        T(test_fragments_and_ping),
        T(test_text_refused),
        T(test_too_big_refused),
        T(test_too_big_in_fragments),
        T(test_close_from_server),
        T(test_masked_server_frame),
        T(test_fail_status),
        T(test_fail_status_marked),
        T(test_fail_wrong_accept),
        T(test_fail_no_accept),
        T(test_fail_two_accepts),
        T(test_fail_no_protocol),
        T(test_fail_wrong_protocol),
        T(test_fail_extensions),
        T(test_fail_not_http),
        T(test_fail_headers_too_long),
        T(test_fail_value_too_long),
        T(test_silent_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
