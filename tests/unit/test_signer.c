/*
 * Unit tests for signer: the strict request and answer decoders, the table
 * of allowed token shapes (every row, and requests just outside it), a
 * real socketpair round trip with a forked signer_serve (raw requests,
 * hostile ones included), and the whole client path: signer_start execs
 * this very program as "signer" (see main), which then behaves as
 * `airlockd signer` does, or, with TS_SIGNER_MODE set, as a broken signer
 * (mute after HELLO, garbage after HELLO) to exercise the timeout and the
 * restart. Key files live in a fresh mkdtemp directory, removed afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_log.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "keys.h"
#include "signer.h"
#include "testutil.h"
#include "token.h"

#define TS_MODE_ENV "TS_SIGNER_MODE"
#define RFC_KID "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
static const char rfc_seed_hex[] =
    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

enum { TS_SLACK_MS = 1500 }; /* scheduling slack on a loaded 2-core machine */

static struct keys_signing *rfc_key(void)
{
    uint8_t seed[KEYS_SEED_LEN];
    assert_int_equal(tu_hex_decode(rfc_seed_hex, seed, sizeof seed), KEYS_SEED_LEN);
    struct keys_signing *k = NULL;
    assert_int_equal(keys_from_seed(seed, &k, NULL, 0), AL_OK);
    return k;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct signer_req mint_req(unsigned shape, const char *aud, const char *sub, uint32_t ttl)
{
    struct signer_req q;
    memset(&q, 0, sizeof q);
    q.op = SIGNER_OP_MINT;
    q.id = 7;
    q.shape = (uint8_t)shape;
    q.ttl = ttl;
    snprintf(q.aud, sizeof q.aud, "%s", aud);
    snprintf(q.sub, sizeof q.sub, "%s", sub);
    return q;
}

/* ---- the request decoder ---------------------------------------------------- */

static void test_req_roundtrip(void **state)
{
    (void)state;
    uint8_t buf[SIGNER_REQ_MAX];
    size_t len;
    struct signer_req q = mint_req(SIGNER_SHAPE_ENROLL, "box-1", "ada", 600), p;
    assert_int_equal(signer_req_encode(&q, buf, sizeof buf, &len), AL_OK);
    assert_int_equal(len, 6 + 1 + 4 + 1 + 5 + 1 + 3);
    static const uint8_t want[] = {1, 2,   0,   0,   0,   7,   2, 0,   0,   2,  0x58,
                                   5, 'b', 'o', 'x', '-', '1', 3, 'a', 'd', 'a'};
    assert_memory_equal(buf, want, sizeof want);
    char why[128];
    assert_int_equal(signer_req_parse(buf, len, &p, why, sizeof why), AL_OK);
    assert_int_equal(p.op, SIGNER_OP_MINT);
    assert_int_equal(p.id, 7);
    assert_int_equal(p.shape, SIGNER_SHAPE_ENROLL);
    assert_int_equal(p.ttl, 600);
    assert_string_equal(p.aud, "box-1");
    assert_string_equal(p.sub, "ada");

    struct signer_req h = {.op = SIGNER_OP_HELLO, .id = 0xa1b2c3d4u};
    assert_int_equal(signer_req_encode(&h, buf, sizeof buf, &len), AL_OK);
    assert_int_equal(len, 6);
    assert_int_equal(signer_req_parse(buf, len, &p, why, sizeof why), AL_OK);
    assert_int_equal(p.op, SIGNER_OP_HELLO);
    assert_int_equal(p.id, 0xa1b2c3d4u);

    /* the longest strings fit SIGNER_REQ_MAX exactly; one more does not encode */
    memset(q.aud, 'a', SIGNER_STR_MAX);
    q.aud[SIGNER_STR_MAX] = 0;
    memset(q.sub, 'b', SIGNER_STR_MAX);
    q.sub[SIGNER_STR_MAX] = 0;
    assert_int_equal(signer_req_encode(&q, buf, sizeof buf, &len), AL_OK);
    assert_int_equal(len, SIGNER_REQ_MAX);
    assert_int_equal(signer_req_parse(buf, len, &p, why, sizeof why), AL_OK);
    assert_int_equal(signer_req_encode(&q, buf, sizeof buf - 1, &len), AL_E_TOOBIG);
}

/* Each malformed request is refused with its code, and a reason. */
static void test_req_parse_strict(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        uint8_t bytes[32];
        size_t len;
        int rc;
    } cases[] = {
        {"empty", {0}, 0, AL_E_FORMAT},
        {"short header", {1, 1, 0, 0, 0}, 5, AL_E_FORMAT},
        {"version 2", {2, 1, 0, 0, 0, 1}, 6, AL_E_VERSION},
        {"version 0", {0, 1, 0, 0, 0, 1}, 6, AL_E_VERSION},
        {"op 0", {1, 0, 0, 0, 0, 1}, 6, AL_E_TYPE},
        {"op 3", {1, 3, 0, 0, 0, 1}, 6, AL_E_TYPE},
        {"hello with a trailing byte", {1, 1, 0, 0, 0, 1, 0}, 7, AL_E_FORMAT},
        {"mint without body", {1, 2, 0, 0, 0, 1}, 6, AL_E_FORMAT},
        {"mint, aud longer than the message",
         {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 9, 'a'},
         13,
         AL_E_FORMAT},
        {"mint, empty aud", {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 0, 1, 'a'}, 14, AL_E_FORMAT},
        {"mint, empty sub", {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 1, 'a', 0}, 14, AL_E_FORMAT},
        {"mint, no sub", {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 1, 'a'}, 13, AL_E_FORMAT},
        {"mint, NUL in aud",
         {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 2, 'a', 0, 1, 'b'},
         16,
         AL_E_FORMAT},
        {"mint, space in sub",
         {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 1, 'a', 2, ' ', 'b'},
         16,
         AL_E_FORMAT},
        {"mint, newline in aud",
         {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 2, 'a', '\n', 1, 'b'},
         16,
         AL_E_FORMAT},
        {"mint, UTF-8 in aud",
         {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 2, 0xc3, 0xa9, 1, 'b'},
         16,
         AL_E_FORMAT},
        {"mint, trailing byte",
         {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 1, 'a', 1, 'b', 'x'},
         16,
         AL_E_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct signer_req q;
        char why[128] = "";
        int rc = signer_req_parse(cases[i].bytes, cases[i].len, &q, why, sizeof why);
        if (rc != cases[i].rc)
            fail_msg("%s: %d, want %d", cases[i].what, rc, cases[i].rc);
        assert_true(why[0] != '\0');
    }
    /* the well-formed neighbour of the last cases parses */
    static const uint8_t good[] = {1, 2, 0, 0, 0, 1, 1, 0, 0, 0, 60, 1, 'a', 1, 'b'};
    struct signer_req q;
    assert_int_equal(signer_req_parse(good, sizeof good, &q, NULL, 0), AL_OK);
    /* more than SIGNER_REQ_MAX bytes: refused before anything is read */
    uint8_t big[SIGNER_REQ_MAX + 1];
    memset(big, 1, sizeof big);
    assert_int_equal(signer_req_parse(big, sizeof big, &q, NULL, 0), AL_E_TOOBIG);
}

/* ---- the table of shapes ------------------------------------------------------ */

static void test_shape_table(void **state)
{
    (void)state;
    static const struct {
        unsigned shape;
        const char *aud, *sub;
        uint32_t ttl;
        int rc;
    } cases[] = {
        /* every row accepts what airlockd asks for, up to its bound */
        {SIGNER_SHAPE_RUNNER, "box", SIGNER_RUNNER_SUB, 600, AL_OK},
        {SIGNER_SHAPE_RUNNER, "box", SIGNER_RUNNER_SUB, 1, AL_OK},
        {SIGNER_SHAPE_ENROLL, "rev-1", "ada", 3600, AL_OK},
        {SIGNER_SHAPE_HOP, "r-0123456789abcdef01234567", "ada", 60, AL_OK},
        {SIGNER_SHAPE_HOP, "r-0123456789abcdef01234567", "ada", SIGNER_HOP_TTL_MAX + 1, AL_E_PERM},
        {SIGNER_SHAPE_HOP, "r-0123456789abcdef01234567", "Ada", 60, AL_E_PERM},
        {SIGNER_SHAPE_FWD, "r-0123456789abcdef01234567", "ada", 30, AL_OK},
        {SIGNER_SHAPE_FWD, "r-0123456789abcdef01234567", "ada", SIGNER_HOP_TTL_MAX + 1, AL_E_PERM},
        {SIGNER_SHAPE_FWD, "r-0123456789abcdef01234567", "../x", 30, AL_E_PERM},
        /* just outside: lifetime */
        {SIGNER_SHAPE_RUNNER, "box", SIGNER_RUNNER_SUB, SIGNER_RUNNER_TTL_MAX + 1, AL_E_PERM},
        {SIGNER_SHAPE_ENROLL, "rev-1", "ada", SIGNER_ENROLL_TTL_MAX + 1, AL_E_PERM},
        {SIGNER_SHAPE_ENROLL, "rev-1", "ada", 0, AL_E_PERM},
        {SIGNER_SHAPE_RUNNER, "box", SIGNER_RUNNER_SUB, UINT32_MAX, AL_E_PERM},
        /* just outside: who it speaks for, who it is for */
        {SIGNER_SHAPE_RUNNER, "box", "ada", 600, AL_E_PERM},
        {SIGNER_SHAPE_ENROLL, "box", "Ada", 600, AL_E_PERM},
        /* web sessions are not signed: the shape that once was is gone */
        {3, "airlockd-session", "ada", 600, AL_E_PERM},
        {SIGNER_SHAPE_ENROLL, "Box", "ada", 600, AL_E_PERM},
        {SIGNER_SHAPE_ENROLL, "../etc", "ada", 600, AL_E_PERM},
        {SIGNER_SHAPE_ENROLL, "-box", "ada", 600, AL_E_PERM},
        {SIGNER_SHAPE_ENROLL, "a*", "ada", 600, AL_E_PERM},
        {SIGNER_SHAPE_ENROLL,
         "a23456789012345678901234567890123456789012345678901234567890123456789", "ada", 600,
         AL_E_PERM},
        /* no such row */
        {0, "box", SIGNER_RUNNER_SUB, 60, AL_E_PERM},
        {6, "box", SIGNER_RUNNER_SUB, 60, AL_E_PERM},
        {255, "box", SIGNER_RUNNER_SUB, 60, AL_E_PERM},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct signer_req q = mint_req(cases[i].shape, cases[i].aud, cases[i].sub, cases[i].ttl);
        char why[128] = "";
        int rc = signer_shape_check(&q, why, sizeof why);
        if (rc != cases[i].rc)
            fail_msg("case %zu (%s %s %s %u): %d, want %d", i, signer_shape_name(cases[i].shape),
                     cases[i].aud, cases[i].sub, (unsigned)cases[i].ttl, rc, cases[i].rc);
        assert_true(rc == AL_OK || why[0] != '\0');
    }
    struct signer_req h = {.op = SIGNER_OP_HELLO};
    assert_int_equal(signer_shape_check(&h, NULL, 0), AL_E_PERM);
    assert_string_equal(signer_shape_name(SIGNER_SHAPE_ENROLL), "enroll");
    assert_string_equal(signer_shape_name(9), "?");
}

/* ---- the answer decoder ---------------------------------------------------- */

static void test_resp_roundtrip_and_strict(void **state)
{
    (void)state;
    static struct signer_resp a, b;
    memset(&a, 0, sizeof a);
    a.op = SIGNER_OP_MINT;
    a.id = 9;
    snprintf(a.kid, sizeof a.kid, "%s", RFC_KID);
    snprintf(a.jti, sizeof a.jti, "jti-1");
    a.exp = 1800000600;
    snprintf(a.token, sizeof a.token, "aaa.bbb.ccc");
    a.token_len = strlen(a.token);
    uint8_t buf[SIGNER_RESP_MAX + 1];
    size_t len;
    assert_int_equal(signer_resp_encode(&a, buf, sizeof buf, &len), AL_OK);
    assert_int_equal(signer_resp_parse(buf, len, &b, NULL, 0), AL_OK);
    assert_int_equal(b.status, AL_OK);
    assert_int_equal(b.id, 9);
    assert_string_equal(b.kid, RFC_KID);
    assert_string_equal(b.jti, "jti-1");
    assert_int_equal(b.exp, 1800000600);
    assert_string_equal(b.token, "aaa.bbb.ccc");
    assert_int_equal(b.token_len, 11);
    /* every truncation and one extra byte are refused */
    for (size_t n = 0; n < len; n++)
        assert_int_not_equal(signer_resp_parse(buf, n, &b, NULL, 0), AL_OK);
    buf[len] = 0;
    assert_int_equal(signer_resp_parse(buf, len + 1, &b, NULL, 0), AL_E_FORMAT);
    /* a kid of the wrong length */
    snprintf(a.kid, sizeof a.kid, "short");
    assert_int_equal(signer_resp_encode(&a, buf, sizeof buf, &len), AL_OK);
    assert_int_equal(signer_resp_parse(buf, len, &b, NULL, 0), AL_E_FORMAT);

    /* an error answer */
    memset(&a, 0, sizeof a);
    a.op = SIGNER_OP_MINT;
    a.id = 3;
    a.status = AL_E_PERM;
    snprintf(a.reason, sizeof a.reason, "runner: ttl must be 1 to 600 seconds");
    assert_int_equal(signer_resp_encode(&a, buf, sizeof buf, &len), AL_OK);
    assert_int_equal(signer_resp_parse(buf, len, &b, NULL, 0), AL_OK);
    assert_int_equal(b.status, AL_E_PERM);
    assert_string_equal(b.reason, a.reason);
    /* a status byte out of range */
    buf[6] = 200;
    assert_int_equal(signer_resp_parse(buf, len, &b, NULL, 0), AL_E_FORMAT);
    a.status = 5;
    assert_int_equal(signer_resp_encode(&a, buf, sizeof buf, &len), AL_E_INVAL);
}

/* ---- a real socketpair, a forked signer_serve ------------------------------- */

struct peer {
    int fd;
    pid_t pid;
};

static struct peer fork_signer(const struct keys_signing *k)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        int rc = signer_serve(sv[1], k, "no key here", 0, AL_LOG_TEXT);
        _exit(rc == AL_OK ? 0 : 3);
    }
    close(sv[1]);
    return (struct peer){sv[0], pid};
}

static void end_signer(struct peer *p)
{
    close(p->fd);
    int st = -1;
    assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* EOF: a clean exit */
}

/* Send raw bytes, read one answer. */
static void ask_raw(int fd, const uint8_t *req, size_t len, struct signer_resp *a)
{
    assert_int_equal(send(fd, req, len, 0), (ssize_t)len);
    uint8_t buf[SIGNER_RESP_MAX + 1];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    assert_true(n > 0);
    assert_int_equal(signer_resp_parse(buf, (size_t)n, a, NULL, 0), AL_OK);
}

static void ask(int fd, const struct signer_req *q, struct signer_resp *a)
{
    uint8_t buf[SIGNER_REQ_MAX];
    size_t len;
    assert_int_equal(signer_req_encode(q, buf, sizeof buf, &len), AL_OK);
    ask_raw(fd, buf, len, a);
    assert_int_equal(a->id, q->id);
}

static void test_socketpair_roundtrip(void **state)
{
    (void)state;
    struct keys_signing *k = rfc_key();
    struct peer p = fork_signer(k);
    static struct signer_resp a;

    struct signer_req h = {.op = SIGNER_OP_HELLO, .id = 1};
    ask(p.fd, &h, &a);
    assert_int_equal(a.status, AL_OK);
    assert_string_equal(a.kid, RFC_KID);

    /* a token of the runner shape, verified as a runner would */
    struct signer_req q = mint_req(SIGNER_SHAPE_RUNNER, "box", SIGNER_RUNNER_SUB, 600);
    int64_t before = (int64_t)time(NULL);
    ask(p.fd, &q, &a);
    assert_int_equal(a.status, AL_OK);
    assert_string_equal(a.kid, RFC_KID);
    assert_true(a.exp >= before + 600 && a.exp <= (int64_t)time(NULL) + 600);
    const struct keys_signing *ks[] = {k};
    char *jwks = NULL;
    assert_int_equal(keys_jwks_json(ks, 1, &jwks, NULL, 0), AL_OK);
    struct tok_keyset *set = NULL;
    assert_int_equal(tok_keyset_from_json(jwks, strlen(jwks), &set, NULL, 0), AL_OK);
    free(jwks);
    struct tok_verify_params vp;
    tok_verify_params_init(&vp, "box", SIGNER_RUNNER_SCOPE, (int64_t)time(NULL));
    struct tok_claims cl;
    char why[TOK_REASON_MAX];
    assert_int_equal(tok_verify(set, a.token, a.token_len, &vp, &cl, why, sizeof why), AL_OK);
    assert_string_equal(cl.sub, SIGNER_RUNNER_SUB);
    assert_string_equal(cl.scope, SIGNER_RUNNER_SCOPE);
    assert_string_equal(cl.jti, a.jti);
    assert_string_equal(cl.iss, "airlockd");
    assert_int_equal(cl.exp, a.exp);
    assert_int_equal(cl.exp - cl.iat, 600);
    /* the scope is the row's: the token opens nothing else */
    tok_verify_params_init(&vp, "box", "session", (int64_t)time(NULL));
    assert_int_equal(tok_verify(set, a.token, a.token_len, &vp, NULL, NULL, 0), AL_E_SCOPE);

    /* an enrollment token */
    q = mint_req(SIGNER_SHAPE_ENROLL, "rev-1", "ada", 3600);
    ask(p.fd, &q, &a);
    assert_int_equal(a.status, AL_OK);
    tok_verify_params_init(&vp, "rev-1", SIGNER_RUNNER_SCOPE, (int64_t)time(NULL));
    assert_int_equal(tok_verify(set, a.token, a.token_len, &vp, &cl, NULL, 0), AL_OK);
    assert_string_equal(cl.sub, "ada");

    /* a forwarding token opens the owner's API, not an attach, and back */
    q = mint_req(SIGNER_SHAPE_FWD, "r-1", "ada", 30);
    ask(p.fd, &q, &a);
    assert_int_equal(a.status, AL_OK);
    tok_verify_params_init(&vp, "r-1", SIGNER_FWD_SCOPE, (int64_t)time(NULL));
    assert_int_equal(tok_verify(set, a.token, a.token_len, &vp, &cl, NULL, 0), AL_OK);
    tok_verify_params_init(&vp, "r-1", SIGNER_HOP_SCOPE, (int64_t)time(NULL));
    assert_int_equal(tok_verify(set, a.token, a.token_len, &vp, NULL, NULL, 0), AL_E_SCOPE);
    q = mint_req(SIGNER_SHAPE_HOP, "r-1", "ada", 30);
    ask(p.fd, &q, &a);
    assert_int_equal(a.status, AL_OK);
    tok_verify_params_init(&vp, "r-1", SIGNER_FWD_SCOPE, (int64_t)time(NULL));
    assert_int_equal(tok_verify(set, a.token, a.token_len, &vp, NULL, NULL, 0), AL_E_SCOPE);
    tok_keyset_free(set);

    /* requests outside the table are refused, with the row's reason */
    q = mint_req(SIGNER_SHAPE_RUNNER, "box", "mallory", 600);
    ask(p.fd, &q, &a);
    assert_int_equal(a.status, AL_E_PERM);
    assert_non_null(strstr(a.reason, "sub must be airlockd"));
    assert_int_equal(a.token_len, 0);
    q = mint_req(SIGNER_SHAPE_ENROLL, "box", "ada", 86400);
    ask(p.fd, &q, &a);
    assert_int_equal(a.status, AL_E_PERM);
    assert_non_null(strstr(a.reason, "ttl"));
    q = mint_req(77, "box", "ada", 60);
    ask(p.fd, &q, &a);
    assert_int_equal(a.status, AL_E_PERM);

    /* malformed and oversized requests get an error, and it keeps serving */
    static const uint8_t junk[] = {1, 2, 0, 0, 0, 5, 1, 0, 0};
    ask_raw(p.fd, junk, sizeof junk, &a);
    assert_int_equal(a.status, AL_E_FORMAT);
    assert_int_equal(a.id, 5);
    static const uint8_t v9[] = {9, 1, 0, 0, 0, 6};
    ask_raw(p.fd, v9, sizeof v9, &a);
    assert_int_equal(a.status, AL_E_VERSION);
    assert_int_equal(a.op, 0); /* an unknown op is not echoed */
    static const uint8_t op3[] = {1, 3, 0, 0, 0, 8};
    ask_raw(p.fd, op3, sizeof op3, &a);
    assert_int_equal(a.status, AL_E_TYPE);
    assert_int_equal(a.op, 0);
    assert_int_equal(a.id, 8);
    uint8_t big[SIGNER_REQ_MAX * 4];
    memset(big, 1, sizeof big);
    ask_raw(p.fd, big, sizeof big, &a);
    assert_int_equal(a.status, AL_E_TOOBIG);
    h.id = 2;
    ask(p.fd, &h, &a);
    assert_int_equal(a.status, AL_OK);
    assert_string_equal(a.kid, RFC_KID);

    end_signer(&p);
    keys_free(k);
}

/* Without a key every request is answered with the reason. */
static void test_serve_without_key(void **state)
{
    (void)state;
    struct peer p = fork_signer(NULL);
    static struct signer_resp a;
    struct signer_req h = {.op = SIGNER_OP_HELLO, .id = 1};
    ask(p.fd, &h, &a);
    assert_int_not_equal(a.status, AL_OK);
    assert_string_equal(a.reason, "no key here");
    end_signer(&p);
}

/* ---- the client: signer_start execs this program ----------------------------- */

struct fx {
    char dir[64];
};

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[KEYS_PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        (void)unlink(p);
    }
    closedir(d);
    (void)rmdir(dir);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/al-test-signer-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    unsetenv(TS_MODE_ENV);
    rm_tree(f->dir);
    free(f);
    return 0;
}

static struct signer *start(const char *dir)
{
    struct signer_config c = {NULL, dir, 0, AL_LOG_TEXT};
    struct signer *s = NULL;
    char err[512];
    int rc = signer_start(&c, &s, err, sizeof err);
    if (rc != AL_OK)
        fail_msg("signer_start: %s", err);
    return s;
}

static bool alive(pid_t pid)
{
    return kill(pid, 0) == 0;
}

static void test_client_mint_restart_stop(void **state)
{
    struct fx *f = *state;
    struct signer *s = start(f->dir); /* creates the key on first start */
    pid_t pid = signer_pid(s);
    assert_true(pid > 0 && pid != getpid());
    assert_int_equal(strlen(signer_kid(s)), KEYS_KID_LEN);
    char kid[KEYS_KID_LEN + 1];
    snprintf(kid, sizeof kid, "%s", signer_kid(s));

    static struct signer_resp a;
    char why[512];
    struct signer_mint m = {SIGNER_SHAPE_ENROLL, "rev", "ada", 60};
    assert_int_equal(signer_mint(s, &m, &a, why, sizeof why), AL_OK);
    assert_string_equal(a.kid, kid);
    assert_true(a.token_len > 100);
    /* outside the table, through the client: refused, no restart */
    struct signer_mint bad = {SIGNER_SHAPE_RUNNER, "rev", "ada", 60};
    assert_int_equal(signer_mint(s, &bad, &a, why, sizeof why), AL_E_PERM);
    assert_non_null(strstr(why, "signer refused"));
    assert_int_equal(signer_pid(s), pid);

    /* the signer dies: the next request restarts it and succeeds */
    usleep((SIGNER_RESTART_MIN_MS + 100) * 1000);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(signer_mint(s, &m, &a, why, sizeof why), AL_OK);
    pid_t pid2 = signer_pid(s);
    assert_true(pid2 > 0 && pid2 != pid);
    assert_false(alive(pid)); /* reaped */
    assert_string_equal(a.kid, kid);

    /* dies again at once: no restart storm, an error without a hang */
    assert_int_equal(kill(pid2, SIGKILL), 0);
    uint64_t t0 = now_ms();
    int rc = signer_mint(s, &m, &a, why, sizeof why);
    assert_true(rc == AL_E_CLOSED || rc == AL_E_IO);
    assert_non_null(strstr(why, "restarting at most once"));
    assert_true(now_ms() - t0 < TS_SLACK_MS);
    usleep((SIGNER_RESTART_MIN_MS + 100) * 1000);
    assert_int_equal(signer_mint(s, &m, &a, why, sizeof why), AL_OK);

    pid_t pid3 = signer_pid(s);
    signer_stop(s);
    assert_false(alive(pid3));
    char path[KEYS_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", f->dir, KEYS_PRIVATE_FILE);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
}

static void test_client_refuses_readable_key(void **state)
{
    struct fx *f = *state;
    signer_stop(start(f->dir));
    char path[KEYS_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", f->dir, KEYS_PRIVATE_FILE);
    assert_int_equal(chmod(path, 0644), 0);
    struct signer_config c = {NULL, f->dir, 0, AL_LOG_TEXT};
    struct signer *s = NULL;
    char err[512] = "";
    assert_int_not_equal(signer_start(&c, &s, err, sizeof err), AL_OK);
    assert_null(s);
    assert_non_null(strstr(err, "signing key"));
    assert_non_null(strstr(err, "644"));
}

/* A rotated key on disk: the restarted signer would serve another kid. */
static void test_client_pins_kid(void **state)
{
    struct fx *f = *state;
    struct signer *s = start(f->dir);
    struct keys_init_result res;
    assert_int_equal(keys_init_dir(f->dir, true, &res, NULL, 0), AL_OK);
    assert_string_not_equal(res.kid, signer_kid(s));
    usleep((SIGNER_RESTART_MIN_MS + 100) * 1000);
    assert_int_equal(kill(signer_pid(s), SIGKILL), 0);
    static struct signer_resp a;
    char why[512];
    struct signer_mint m = {SIGNER_SHAPE_RUNNER, "box", SIGNER_RUNNER_SUB, 60};
    assert_int_equal(signer_mint(s, &m, &a, why, sizeof why), AL_E_KID);
    assert_non_null(strstr(why, "restart airlockd"));
    signer_stop(s);
    /* a fresh start serves the new key */
    s = start(f->dir);
    assert_string_equal(signer_kid(s), res.kid);
    signer_stop(s);
}

/* A signer that answers HELLO, then nothing: the request times out. */
static void test_client_timeout(void **state)
{
    struct fx *f = *state;
    setenv(TS_MODE_ENV, "mute", 1);
    struct signer *s = start(f->dir);
    pid_t pid = signer_pid(s);
    static struct signer_resp a;
    char why[512];
    struct signer_mint m = {SIGNER_SHAPE_RUNNER, "box", SIGNER_RUNNER_SUB, 60};
    uint64_t t0 = now_ms();
    assert_int_equal(signer_mint(s, &m, &a, why, sizeof why), AL_E_TIMEOUT);
    uint64_t took = now_ms() - t0;
    assert_true(took >= SIGNER_TIMEOUT_MS);
    assert_true(took < 2 * SIGNER_TIMEOUT_MS + TS_SLACK_MS); /* one retry at most */
    assert_non_null(strstr(why, "did not answer"));
    assert_false(alive(pid)); /* killed and reaped */
    signer_stop(s);
}

/* A signer that answers nonsense: refused, the child replaced. */
static void test_client_garbage(void **state)
{
    struct fx *f = *state;
    setenv(TS_MODE_ENV, "garbage", 1);
    struct signer *s = start(f->dir);
    pid_t pid = signer_pid(s);
    static struct signer_resp a;
    char why[512];
    struct signer_mint m = {SIGNER_SHAPE_RUNNER, "box", SIGNER_RUNNER_SUB, 60};
    assert_int_equal(signer_mint(s, &m, &a, why, sizeof why), AL_E_PROTO);
    assert_non_null(strstr(why, "answer"));
    assert_false(alive(pid));
    signer_stop(s);
}

/* ---- this program as the signer ----------------------------------------------- */

/* TS_SIGNER_MODE: "mute" or "garbage" after a good HELLO. */
static int broken_signer(int fd, const char *mode)
{
    uint8_t in[SIGNER_REQ_MAX + 1], out[SIGNER_RESP_MAX];
    for (;;) {
        ssize_t n = recv(fd, in, sizeof in, 0);
        if (n <= 0)
            return 0;
        struct signer_req q;
        if (signer_req_parse(in, (size_t)n, &q, NULL, 0) == AL_OK && q.op == SIGNER_OP_HELLO) {
            static struct signer_resp a;
            memset(&a, 0, sizeof a);
            a.op = q.op;
            a.id = q.id;
            snprintf(a.kid, sizeof a.kid, "%s", RFC_KID);
            size_t len;
            if (signer_resp_encode(&a, out, sizeof out, &len) != AL_OK ||
                send(fd, out, len, MSG_NOSIGNAL) != (ssize_t)len)
                return 1;
        } else if (strcmp(mode, "garbage") == 0) {
            static const uint8_t junk[] = {1, 2, 0, 0};
            if (send(fd, junk, sizeof junk, MSG_NOSIGNAL) != (ssize_t)sizeof junk)
                return 1;
        }
    }
}

int main(int argc, char **argv)
{
    /* exec'd by signer_start: "signer --fd 3 --data DIR --log-level N
     * --log-format text" */
    if (argc == 10 && strcmp(argv[1], "signer") == 0) {
        const char *mode = getenv(TS_MODE_ENV);
        if (mode)
            return broken_signer(SIGNER_CHILD_FD, mode);
        return signer_main(SIGNER_CHILD_FD, argv[5], 0, AL_LOG_TEXT);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_req_roundtrip),
        cmocka_unit_test(test_req_parse_strict),
        cmocka_unit_test(test_shape_table),
        cmocka_unit_test(test_resp_roundtrip_and_strict),
        cmocka_unit_test(test_socketpair_roundtrip),
        cmocka_unit_test(test_serve_without_key),
        cmocka_unit_test_setup_teardown(test_client_mint_restart_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_refuses_readable_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_pins_kid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_garbage, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
