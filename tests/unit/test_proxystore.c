/*
 * Unit tests for proxystore: the proxy's store over a real SQLite
 * database: a live credential opens its upstreams for its terminal only,
 * a revoked one and one of an ended terminal open nothing, and each call
 * becomes one audit row holding no credential, its path cut to
 * PROXYSTORE_PATH_SHOWN bytes; airlockd's store (proxystore_of) gates on
 * the terminal's liveness and tells a terminal's sandbox, and with an
 * audit hook hands each call's row to it (airlockd queues it: auditq.h)
 * instead of writing it on the call's path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "proxystore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fx {
    char dir[64];
    struct db *db;
    struct proxy_store st;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    (void)snprintf(f->dir, sizeof f->dir, "/tmp/al-pstore.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    char url[128], err[DB_MSG_MAX];
    (void)snprintf(url, sizeof url, "sqlite:%s/airlock.db", f->dir);
    assert_int_equal(db_open(url, &f->db, err, sizeof err), AL_OK);
    proxystore_of_db(f->db, &f->st);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    assert_int_equal(db_close(f->db), AL_OK);
    char p[128];
    static const char *const files[] = {"airlock.db", "airlock.db-wal", "airlock.db-shm"};
    for (size_t i = 0; i < 3; i++) {
        (void)snprintf(p, sizeof p, "%s/%s", f->dir, files[i]);
        (void)unlink(p);
    }
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    return 0;
}

static void add_term(struct fx *f, uint32_t ch, char *id)
{
    const struct db_terminal_spec s = {
        .sandbox_id = "sb", .channel = ch, .argv_json = "[\"sh\"]", .cols = 80, .rows = 24};
    assert_int_equal(db_terminal_add(f->db, &s, id, DB_NAME_MAX + 1), AL_OK);
}

static void test_lookup(void **state)
{
    struct fx *f = *state;
    char a[DB_NAME_MAX + 1], b[DB_NAME_MAX + 1], got[DB_NAME_MAX + 1];
    assert_int_equal(db_sandbox_add(f->db, "sb", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, 1, a);
    add_term(f, 2, b);
    char ca[PROXY_CRED_LEN + 1], ha[PROXY_HASH_HEX + 1], cb[PROXY_CRED_LEN + 1],
        hb[PROXY_HASH_HEX + 1], h[PROXY_HASH_HEX + 1];
    assert_int_equal(proxy_mint(ca, ha), AL_OK);
    assert_int_equal(proxy_mint(cb, hb), AL_OK);
    static const char *const ups_a[] = {"anthropic"};
    static const char *const ups_b[] = {"github"};
    assert_int_equal(db_proxy_add(f->db, ha, a, ups_a, 1), AL_OK);
    assert_int_equal(db_proxy_add(f->db, hb, b, ups_b, 1), AL_OK);
    /* the gate hashes what the agent sent */
    proxy_hash(ca, h);
    assert_int_equal(f->st.lookup(f->st.ud, h, "anthropic", got, sizeof got), AL_OK);
    assert_string_equal(got, a);
    assert_int_equal(f->st.lookup(f->st.ud, h, "github", got, sizeof got), AL_E_NOENT);
    proxy_hash(cb, h);
    assert_int_equal(f->st.lookup(f->st.ud, h, "github", got, sizeof got), AL_OK);
    assert_string_equal(got, b);
    proxy_hash("alp_forged", h);
    assert_int_equal(f->st.lookup(f->st.ud, h, "github", got, sizeof got), AL_E_NOENT);
    /* revoked; ended */
    assert_int_equal(db_proxy_revoke_terminal(f->db, a), AL_OK);
    proxy_hash(ca, h);
    assert_int_equal(f->st.lookup(f->st.ud, h, "anthropic", got, sizeof got), AL_E_NOENT);
    assert_int_equal(db_terminal_set_exit(f->db, b, 0, 0), AL_OK);
    proxy_hash(cb, h);
    assert_int_equal(f->st.lookup(f->st.ud, h, "github", got, sizeof got), AL_E_NOENT);
}

static int live_flag(void *ud, const char *terminal)
{
    (void)terminal;
    return *(const int *)ud;
}

/* The store airlockd uses (proxystore_of): a valid credential opens its
 * upstream only while its terminal is confirmed to run (else AL_E_AGAIN),
 * and it tells a terminal's sandbox, as the gate of a runner's channel
 * needs (without it every call through a runner was 503). */
static void test_live_store(void **state)
{
    struct fx *f = *state;
    char a[DB_NAME_MAX + 1], got[DB_NAME_MAX + 1], sb[PROXY_SANDBOX_MAX + 1];
    assert_int_equal(db_sandbox_add(f->db, "sb", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, 1, a);
    char ca[PROXY_CRED_LEN + 1], ha[PROXY_HASH_HEX + 1], h[PROXY_HASH_HEX + 1];
    assert_int_equal(proxy_mint(ca, ha), AL_OK);
    static const char *const ups[] = {"anthropic"};
    assert_int_equal(db_proxy_add(f->db, ha, a, ups, 1), AL_OK);
    int live = 0;
    struct proxystore ps = {f->db, live_flag, &live, NULL, NULL, NULL};
    struct proxy_store st;
    proxystore_of(&ps, &st);
    proxy_hash(ca, h);
    assert_int_equal(st.lookup(st.ud, h, "anthropic", got, sizeof got), AL_E_AGAIN);
    live = 1;
    assert_int_equal(st.lookup(st.ud, h, "anthropic", got, sizeof got), AL_OK);
    assert_string_equal(got, a);
    assert_non_null(st.sandbox_of);
    assert_int_equal(st.sandbox_of(st.ud, a, sb, sizeof sb), AL_OK);
    assert_string_equal(sb, "sb");
    assert_int_equal(st.sandbox_of(st.ud, "t-none", sb, sizeof sb), AL_E_NOENT);
}

struct rows {
    unsigned n;
    struct db_audit last;
};

static int collect(void *ctx, const struct db_audit *a)
{
    struct rows *r = ctx;
    if (r->n++ == 0)
        r->last = *a;
    return 0;
}

static void test_record(void **state)
{
    struct fx *f = *state;
    char path[PROXYSTORE_PATH_SHOWN + 100];
    memset(path, 'p', sizeof path - 1);
    path[0] = '/';
    path[sizeof path - 1] = '\0';
    const struct proxyconn_record rec = {
        .terminal = "t-0123",
        .upstream = "anthropic",
        .method = "POST",
        .path = "/v1/messages",
        .status = 200,
        .bytes_up = 123,
        .bytes_down = 4567,
        .latency_ms = 89,
    };
    f->st.record(f->st.ud, &rec);
    struct proxyconn_record bad = rec;
    bad.terminal = "";
    bad.status = 401;
    bad.path = path;
    f->st.record(f->st.ud, &bad);
    struct rows r = {0};
    const struct db_audit_filter flt = {.action = "proxy_call", .limit = 10};
    assert_int_equal(db_audit_query(f->db, &flt, collect, &r), AL_OK);
    assert_int_equal(r.n, 2);
    /* newest first: the refused one */
    assert_string_equal(r.last.actor, "system");
    assert_string_equal(r.last.target, "");
    assert_non_null(strstr(r.last.detail, "\"status\":401"));
    assert_non_null(strstr(r.last.detail, "\"upstream\":\"anthropic\""));
    char *p = strstr(r.last.detail, "\"path\":\"/");
    assert_non_null(p);
    assert_int_equal(strcspn(p + 8, "\""), PROXYSTORE_PATH_SHOWN);
    assert_null(strstr(r.last.detail, "alp_"));
}

struct handed {
    unsigned n, refused; /* rows handed; refusals counted */
    char actor[DB_NAME_MAX + 1], action[DB_ACTION_MAX + 1], target[DB_TARGET_MAX + 1];
    char detail[DB_DETAIL_MAX + 1];
    char source[PROXYCONN_SOURCE_MAX + 1], why[64];
};

static void hand(void *ud, const char *actor, const char *action, const char *target,
                 const char *detail)
{
    struct handed *h = ud;
    h->n++;
    (void)snprintf(h->actor, sizeof h->actor, "%s", actor);
    (void)snprintf(h->action, sizeof h->action, "%s", action);
    (void)snprintf(h->target, sizeof h->target, "%s", target);
    (void)snprintf(h->detail, sizeof h->detail, "%s", detail ? detail : "");
}

/* The refusals' hook: the last one counted, in the same struct. */
static void counted(void *ud, const char *source, const char *action, const char *why,
                    const char *target)
{
    struct handed *h = ud;
    h->refused++;
    (void)snprintf(h->source, sizeof h->source, "%s", source);
    (void)snprintf(h->action, sizeof h->action, "%s", action);
    (void)snprintf(h->why, sizeof h->why, "%s", why);
    (void)snprintf(h->target, sizeof h->target, "%s", target);
}

/* airlockd's store with an audit hook (api_audit_later): each call's row
 * goes to the hook, to be written in a batch, and none is written on the
 * call's own path. */
static void test_record_handed(void **state)
{
    struct fx *f = *state;
    int live = 1;
    struct handed h = {0};
    struct proxystore ps = {f->db, live_flag, &live, hand, counted, &h};
    struct proxy_store st;
    proxystore_of(&ps, &st);
    const struct proxyconn_record rec = {
        .terminal = "t-0123",
        .upstream = "github",
        .method = "GET",
        .path = "/repos/x",
        .status = 200,
        .bytes_up = 1,
        .bytes_down = 2,
        .latency_ms = 3,
    };
    st.record(st.ud, &rec);
    assert_int_equal(h.n, 1);
    assert_string_equal(h.actor, "system");
    assert_string_equal(h.action, "proxy_call");
    assert_string_equal(h.target, "t-0123");
    assert_string_equal(h.detail, "{\"upstream\":\"github\",\"method\":\"GET\",\"path\":"
                                  "\"/repos/x\",\"status\":200,\"bytes_up\":1,\"bytes_down\":2,"
                                  "\"latency_ms\":3}");
    struct rows r = {0};
    const struct db_audit_filter flt = {.action = "proxy_call", .limit = 10};
    assert_int_equal(db_audit_query(f->db, &flt, collect, &r), AL_OK);
    assert_int_equal(r.n, 0);
    assert_int_equal(h.refused, 0);
}

/* A call with no valid credential (no terminal) is not a row of its own:
 * it goes to the refusals' hook (counted: api_audit_refused), with where
 * it came from, its status and its path; nothing is written or queued.
 * An agent that repeats bad calls would otherwise write a row each. */
static void test_refused_counted(void **state)
{
    struct fx *f = *state;
    int live = 1;
    struct handed h = {0};
    struct proxystore ps = {f->db, live_flag, &live, hand, counted, &h};
    struct proxy_store st;
    proxystore_of(&ps, &st);
    struct proxyconn_record rec = {
        .terminal = "",
        .source = "sandbox box",
        .upstream = "anthropic",
        .method = "POST",
        .path = "/v1/messages",
        .status = 401,
    };
    st.record(st.ud, &rec);
    assert_int_equal(h.refused, 1);
    assert_int_equal(h.n, 0);
    assert_string_equal(h.source, "sandbox box");
    assert_string_equal(h.action, "proxy_refused");
    assert_string_equal(h.why, "HTTP 401");
    assert_string_equal(h.target, "/v1/messages");
    rec.status = 0; /* cut before an answer */
    rec.terminal = NULL;
    rec.source = NULL;
    st.record(st.ud, &rec);
    assert_int_equal(h.refused, 2);
    assert_string_equal(h.why, "cut");
    assert_string_equal(h.source, "");
    struct rows r = {0};
    const struct db_audit_filter flt = {.limit = 10};
    assert_int_equal(db_audit_query(f->db, &flt, collect, &r), AL_OK);
    assert_int_equal(r.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lookup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_handed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_counted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
