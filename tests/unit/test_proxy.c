/*
 * Unit tests for proxy: credentials minted in their documented shape and
 * only their hash looked up; the gate's answers (401 for an unknown or
 * foreign credential, 503 when the store fails, 429 with a wait for each
 * limit, 502 when no secret can be had); secrets from a file and from a
 * command, a command that fails, prints nothing or outlives its time;
 * every reason free of the secret; the metrics of each call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "proxy.h"
#include "secret.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fixture {
    uv_loop_t loop;
    char dir[64], keyfile[128];
    char good_hash[PROXY_HASH_HEX + 1];
    int store_fails, lookups;
    int any_terminal; /* every credential is good: its own terminal, t-<its hash> */
    char last_hash[PROXY_HASH_HEX + 1];
};

static int lookup(void *ud, const char *hash, const char *upstream, char *terminal, size_t cap)
{
    struct fixture *f = ud;
    f->lookups++;
    snprintf(f->last_hash, sizeof f->last_hash, "%s", hash);
    if (f->store_fails)
        return AL_E_IO;
    if (f->any_terminal) {
        snprintf(terminal, cap, "t-%.16s", hash);
        return AL_OK;
    }
    if (strcmp(hash, f->good_hash) != 0 || strcmp(upstream, "other") == 0)
        return AL_E_NOENT;
    snprintf(terminal, cap, "t-1");
    return AL_OK;
}

/* t-1 lives in sandbox sb-1 */
static int sandbox_of(void *ud, const char *terminal, char *sandbox, size_t cap)
{
    struct fixture *f = ud;
    if (f->store_fails)
        return AL_E_IO;
    if (strcmp(terminal, "t-1") != 0)
        return AL_E_NOENT;
    snprintf(sandbox, cap, "sb-1");
    return AL_OK;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    uv_loop_init(&f->loop);
    snprintf(f->dir, sizeof f->dir, "/tmp/airlock-proxy-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->keyfile, sizeof f->keyfile, "%s/key", f->dir);
    int fd = open(f->keyfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "sk-file-secret\n", 15), 15);
    close(fd);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    unlink(f->keyfile);
    rmdir(f->dir);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    uv_loop_close(&f->loop);
    free(f);
    return 0;
}

static struct proxy *make(struct fixture *f, const char *const (*lines)[2], size_t n)
{
    struct proxycfg cfg;
    proxycfg_init(&cfg);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(proxycfg_set(&cfg, lines[i][0], lines[i][1], NULL, 0), AL_OK);
    assert_int_equal(proxycfg_finish(&cfg, NULL, 0), AL_OK);
    struct proxy_store st = {.lookup = lookup, .sandbox_of = sandbox_of, .ud = f};
    struct proxy *p;
    assert_int_equal(proxy_new(&cfg, &f->loop, &st, &p, NULL, 0), AL_OK);
    return p;
}

static void test_mint_and_hash(void **state)
{
    (void)state;
    char a[PROXY_CRED_LEN + 1], b[PROXY_CRED_LEN + 1], ha[PROXY_HASH_HEX + 1],
        hb[PROXY_HASH_HEX + 1];
    assert_int_equal(proxy_mint(a, ha), AL_OK);
    assert_int_equal(proxy_mint(b, hb), AL_OK);
    assert_int_equal(strlen(a), PROXY_CRED_LEN);
    assert_int_equal(strncmp(a, "alp_", 4), 0);
    assert_int_equal(
        strspn(a + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
        PROXY_CRED_LEN - 4);
    assert_string_not_equal(a, b);
    assert_string_not_equal(ha, hb);
    char h2[PROXY_HASH_HEX + 1];
    proxy_hash(a, h2);
    assert_string_equal(ha, h2);
    /* SHA-256("abc") */
    proxy_hash("abc", h2);
    assert_string_equal(h2, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* The gate of proxy p for upstream u and credential c, its outputs into the
 * caller's term, secret, retry and why. */
#define BEGIN(u, c)                                                                                \
    proxy_gate_begin(p, (u), (c), term, sizeof term, secret, sizeof secret, &retry, why, sizeof why)

static void test_gate_answers(void **state)
{
    struct fixture *f = *state;
    char cred[PROXY_CRED_LEN + 1];
    assert_int_equal(proxy_mint(cred, f->good_hash), AL_OK);
    const char *const lines[][2] = {
        {"upstream.up.url", "http://127.0.0.1:1"},
        {"upstream.up.secret-file", f->keyfile},
        {"upstream.up.concurrent", "2"},
        {"upstream.up.requests-per-minute", "20"}, /* a burst of 2 */
        {"upstream.up.max-bytes", "1000"},
        {"upstream.other.url", "http://127.0.0.1:1"},
        {"upstream.other.secret-file", f->keyfile},
        {"upstream.nokey.url", "http://127.0.0.1:1"},
        {"upstream.nokey.secret-file", "/nonexistent/key"},
    };
    struct proxy *p = make(f, lines, sizeof lines / sizeof lines[0]);
    const struct proxy_upstream *up = proxycfg_find(proxy_config(p), "up");
    char term[64], secret[PROXY_SECRET_MAX + 1], why[256];
    unsigned retry = 0;
    /* unknown and foreign credentials: 401; the store saw only a hash */
    assert_int_equal(BEGIN(up, "alp_unknown"), 401);
    assert_null(strstr(why, "alp_"));
    assert_int_equal(strlen(f->last_hash), PROXY_HASH_HEX);
    assert_int_equal(BEGIN(proxycfg_find(proxy_config(p), "other"), cred), 401);
    f->store_fails = 1;
    assert_int_equal(BEGIN(up, cred), 503);
    f->store_fails = 0;
    /* good: the terminal and the secret */
    assert_int_equal(BEGIN(up, cred), 0);
    assert_string_equal(term, "t-1");
    assert_string_equal(secret, "sk-file-secret");
    assert_int_equal(BEGIN(up, cred), 0);
    /* two at once is the bound */
    assert_int_equal(BEGIN(up, cred), 429);
    assert_int_equal(retry, 1);
    assert_non_null(strstr(why, "2 requests at once"));
    proxy_gate_end(p, "t-1", "up", 100);
    proxy_gate_end(p, "t-1", "up", 100);
    /* the rate: a burst of 3 was taken by the three calls above */
    assert_int_equal(BEGIN(up, cred), 429);
    assert_non_null(strstr(why, "20 requests a minute"));
    assert_true(retry >= 1 && retry <= 3);
    assert_null(strstr(why, "sk-file"));
    /* no secret to be had: 502, naming the upstream, not the path's content */
    const struct proxy_upstream *nokey = proxycfg_find(proxy_config(p), "nokey");
    f->good_hash[0] = f->good_hash[0]; /* same credential opens nokey in this store */
    assert_int_equal(BEGIN(nokey, cred), 502);
    assert_non_null(strstr(why, "/nonexistent/key"));
    proxy_free(p);
}

/* The path through a runner: a sandbox's channel spends only the
 * credentials of its own terminals; another sandbox's is refused as an
 * unknown one, before any of its terminal's limits is counted. */
static void test_gate_scoped_to_sandbox(void **state)
{
    struct fixture *f = *state;
    char cred[PROXY_CRED_LEN + 1];
    assert_int_equal(proxy_mint(cred, f->good_hash), AL_OK);
    const char *const lines[][2] = {
        {"upstream.up.url", "http://127.0.0.1:1"},
        {"upstream.up.secret-file", f->keyfile},
        {"upstream.up.requests-per-minute", "10"}, /* a burst of 1 */
    };
    struct proxy *p = make(f, lines, 3);
    const struct proxy_upstream *up = proxycfg_find(proxy_config(p), "up");
    char term[64], secret[PROXY_SECRET_MAX + 1], why[256];
    unsigned retry = 0;
#define BEGIN_IN(sb)                                                                               \
    proxy_gate_begin_in(p, (sb), up, cred, term, sizeof term, secret, sizeof secret, &retry, why,  \
                        sizeof why)
    for (int i = 0; i < 5; i++) { /* the attacker's tries take nothing of t-1's rate */
        assert_int_equal(BEGIN_IN("sb-2"), 401);
        assert_string_equal(term, "");
        assert_non_null(strstr(why, "unknown, revoked or foreign credential"));
        assert_null(strstr(why, "sb-1"));
    }
    f->store_fails = 1;
    assert_int_equal(BEGIN_IN("sb-1"), 503);
    f->store_fails = 0;
    assert_int_equal(BEGIN_IN("sb-1"), 0);
    assert_string_equal(term, "t-1");
    proxy_gate_end(p, "t-1", "up", 0);
    /* a scope is a sandbox, never empty */
    struct proxy_scope sc = {.p = p};
    struct proxyconn *pc = NULL;
    struct proxyconn_ops ops = {0};
    assert_int_equal(proxy_conn_in(&sc, &ops, NULL, &pc), AL_E_INVAL);
    proxy_free(p);
#undef BEGIN_IN
}

static void test_bytes_bound(void **state)
{
    struct fixture *f = *state;
    char cred[PROXY_CRED_LEN + 1];
    assert_int_equal(proxy_mint(cred, f->good_hash), AL_OK);
    const char *const lines[][2] = {
        {"upstream.up.url", "http://127.0.0.1:1"},
        {"upstream.up.secret-file", f->keyfile},
        {"upstream.up.max-bytes", "1000"},
    };
    struct proxy *p = make(f, lines, 3);
    const struct proxy_upstream *up = proxycfg_find(proxy_config(p), "up");
    char term[64], secret[PROXY_SECRET_MAX + 1], why[256];
    unsigned retry = 0;
    assert_int_equal(BEGIN(up, cred), 0);
    proxy_gate_end(p, "t-1", "up", 1000);
    assert_int_equal(BEGIN(up, cred), 429);
    assert_non_null(strstr(why, "1000 bytes"));
    /* revoked and forgotten: its limits go with it */
    proxy_forget_terminal(p, "t-1");
    assert_int_equal(BEGIN(up, cred), 0);
    proxy_free(p);
}

/* The limit table never fills for good: an entry whose terminal ends
 * while a call is in flight goes when that call ends, and a full table
 * gives up its idle entry used the longest ago (a replica never hears of
 * the end of a terminal whose sandbox another replica owns). Entries of
 * calls in flight are never given up. */
static void test_limit_table_bounded(void **state)
{
    struct fixture *f = *state;
    f->any_terminal = 1;
    const char *const lines[][2] = {
        {"upstream.up.url", "http://127.0.0.1:1"},
        {"upstream.up.secret-file", f->keyfile},
    };
    struct proxy *p = make(f, lines, 2);
    const struct proxy_upstream *up = proxycfg_find(proxy_config(p), "up");
    char term[64], secret[PROXY_SECRET_MAX + 1], why[256], hash[PROXY_HASH_HEX + 1];
    char cred[PROXY_CRED_LEN + 1];
    unsigned retry = 0;
    /* ended while its call was in flight, more terminals than the table holds */
    for (int i = 0; i < PROXY_MAX_QUOTAS + 100; i++) {
        assert_int_equal(proxy_mint(cred, hash), AL_OK);
        int st = BEGIN(up, cred);
        if (st != 0)
            fail_msg("terminal %d: %d %s", i, st, why);
        proxy_forget_terminal(p, term);
        proxy_gate_end(p, term, "up", 10);
    }
    /* never ended here at all: the oldest idle entries make room */
    for (int i = 0; i < PROXY_MAX_QUOTAS + 100; i++) {
        assert_int_equal(proxy_mint(cred, hash), AL_OK);
        int st = BEGIN(up, cred);
        if (st != 0)
            fail_msg("terminal %d: %d %s", i, st, why);
        proxy_gate_end(p, term, "up", 10);
    }
    /* calls in flight hold their entries: a full table of them refuses */
    int refused = 0;
    for (int i = 0; i < PROXY_MAX_QUOTAS + 1; i++) {
        assert_int_equal(proxy_mint(cred, hash), AL_OK);
        int st = BEGIN(up, cred);
        if (st != 0) {
            assert_int_equal(st, 429);
            assert_non_null(strstr(why, "too many terminals"));
            refused++;
        }
    }
    assert_int_equal(refused, 1);
    proxy_free(p);
}

/* A terminal forgotten while its call is in flight, whose credential is
 * still good (it spends the budget of one that lives on): its counts stay
 * while its call runs, and a new call keeps the entry. */
static void test_forgotten_entry_kept_by_a_new_call(void **state)
{
    struct fixture *f = *state;
    char cred[PROXY_CRED_LEN + 1];
    assert_int_equal(proxy_mint(cred, f->good_hash), AL_OK);
    const char *const lines[][2] = {
        {"upstream.up.url", "http://127.0.0.1:1"},
        {"upstream.up.secret-file", f->keyfile},
        {"upstream.up.max-bytes", "1000"},
    };
    struct proxy *p = make(f, lines, 3);
    const struct proxy_upstream *up = proxycfg_find(proxy_config(p), "up");
    char term[64], secret[PROXY_SECRET_MAX + 1], why[256];
    unsigned retry = 0;
    assert_int_equal(BEGIN(up, cred), 0);
    proxy_forget_terminal(p, "t-1"); /* in flight: kept */
    assert_int_equal(BEGIN(up, cred), 0);
    proxy_gate_end(p, "t-1", "up", 600);
    proxy_gate_end(p, "t-1", "up", 600); /* the second call kept the entry: 1200 counted */
    assert_int_equal(BEGIN(up, cred), 429);
    proxy_free(p);
}

static void test_secret_commands(void **state)
{
    struct fixture *f = *state;
    char cred[PROXY_CRED_LEN + 1];
    assert_int_equal(proxy_mint(cred, f->good_hash), AL_OK);
    const char *const lines[][2] = {
        {"upstream.ok.url", "http://127.0.0.1:1"},
        {"upstream.ok.secret-command", "printf 'ghp_from_command\\nsecond line\\n'"},
    };
    struct proxy *p = make(f, lines, 2);
    char why[256] = "";
    assert_int_equal(proxy_check_secrets(p, why, sizeof why), AL_OK);
    char term[64], secret[PROXY_SECRET_MAX + 1];
    unsigned retry = 0;
    assert_int_equal(proxy_gate_begin(p, proxycfg_find(proxy_config(p), "ok"), cred, term,
                                      sizeof term, secret, sizeof secret, &retry, why, sizeof why),
                     0);
    assert_string_equal(secret, "ghp_from_command");
    proxy_free(p);

    const struct {
        const char *cmd;
        const char *why;
    } bad[] = {
        {"echo sk-leaked-on-failure; exit 3", "secret-command failed"},
        {"true", "printed nothing"},
        {"exec >&-; sleep 30", "did not finish in time"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *const l2[][2] = {
            {"upstream.bad.url", "http://127.0.0.1:1"},
            {"upstream.bad.secret-command", bad[i].cmd},
        };
        p = make(f, l2, 2);
        uint64_t t0 = uv_hrtime();
        assert_int_not_equal(proxy_check_secrets(p, why, sizeof why), AL_OK);
        assert_true((uv_hrtime() - t0) / 1000000u < SECRET_COMMAND_TIMEOUT_MS + 1000);
        if (!strstr(why, bad[i].why))
            fprintf(stderr, "%s: %s\n", bad[i].cmd, why);
        assert_non_null(strstr(why, bad[i].why));
        assert_non_null(strstr(why, "upstream bad"));
        assert_null(strstr(why, "sk-leaked"));
        proxy_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mint_and_hash),
        cmocka_unit_test_setup_teardown(test_gate_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bytes_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limit_table_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forgotten_entry_kept_by_a_new_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_scoped_to_sandbox, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_commands, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
