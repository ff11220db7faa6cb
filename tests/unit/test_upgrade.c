/*
 * Tests of the runner's upgrade decision (src/runner/upgrade.c): every
 * status of the matrix, in the order of the checks, with real tokens
 * minted by the control plane's signing code and a real key set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "al_err.h"
#include "keys.h"
#include "tok_sign.h"
#include "token.h"
#include "bearer.h"
#include "subproto.h"
#include "upgrade.h"

#define NOW 1800000000

struct fix {
    struct keys_signing *key;
    struct tok_keyset *ks;
};

static int setup(void **state)
{
    static struct fix f;
    char why[256];
    uint8_t seed[KEYS_SEED_LEN];
    memset(seed, 7, sizeof seed);
    assert_int_equal(keys_from_seed(seed, &f.key, why, sizeof why), 0);
    char *jwks = NULL;
    const struct keys_signing *one[] = {f.key};
    assert_int_equal(keys_jwks_json(one, 1, &jwks, why, sizeof why), 0);
    assert_int_equal(tok_keyset_from_json(jwks, strlen(jwks), &f.ks, why, sizeof why), 0);
    free(jwks);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    keys_free(f->key);
    tok_keyset_free(f->ks);
    return 0;
}

static void mint(struct fix *f, const char *aud, const char *scope, int64_t now, char *out,
                 size_t cap)
{
    struct tok_sign_req req;
    memset(&req, 0, sizeof req);
    req.iss = "airlockd";
    req.aud = aud;
    req.sub = "tester";
    req.scope = scope;
    req.now = now;
    req.ttl = 300;
    size_t n;
    char why[256];
    char tok[TOK_MAX_TOKEN + 1];
    assert_int_equal(tok_sign_mint(f->key, &req, tok, sizeof tok, &n, why, sizeof why), 0);
    assert_true(snprintf(out, cap, "Bearer %s", tok) < (int)cap);
}

static int decide_sp(struct fix *f, const char *path, int upgrade, const char *id, const char *api,
                     const char *auth, const char *subprotocols, struct upgrade_result *res)
{
    struct upgrade_config cfg = {"sbx-1", f->ks, NOW, 0};
    struct upgrade_request req = {path, upgrade, id, api, auth, subprotocols};
    upgrade_decide(&cfg, &req, res);
    return res->status;
}

static int decide(struct fix *f, const char *path, int upgrade, const char *id, const char *api,
                  const char *auth, struct upgrade_result *res)
{
    return decide_sp(f, path, upgrade, id, api, auth, NULL, res);
}

static void test_matrix(void **state)
{
    struct fix *f = *state;
    struct upgrade_result r;
    char good[5000], aud2[5000], scope2[5000], old[5000];
    mint(f, "sbx-1", "runner:connect", NOW, good, sizeof good);
    mint(f, "sbx-2", "runner:connect", NOW, aud2, sizeof aud2);
    mint(f, "sbx-1", "terminal:write", NOW, scope2, sizeof scope2);
    mint(f, "sbx-1", "runner:connect", NOW - 1000, old, sizeof old);
    const char *api = UPGRADE_API_VERSION;

    assert_int_equal(decide(f, "/", 1, "sbx-1", api, good, &r), 101);
    assert_string_equal(r.claims.sub, "tester");
    assert_int_equal(r.claims.exp, NOW + 300);

    assert_int_equal(decide(f, "/healthz", 0, NULL, NULL, NULL, &r), 200);
    assert_int_equal(decide(f, "/readyz", 0, NULL, NULL, NULL, &r), 200);
    assert_string_equal(r.body, "ready\n");
    assert_int_equal(decide(f, "/readyz", 1, "sbx-1", api, good, &r),
                     404); /* not an upgrade path */
    assert_int_equal(decide(f, "/", 0, "sbx-1", api, good, &r), 404);
    assert_int_equal(decide(f, "/x", 1, "sbx-1", api, good, &r), 404);
    assert_int_equal(decide(f, "/", 1, "sbx-1", NULL, good, &r), 400);
    assert_int_equal(decide(f, "/", 1, "sbx-1", "2023-01-01", good, &r), 400);
    /* a wrong identifier is answered as a bad token (no identifier
     * oracle), and only after the token was checked */
    assert_int_equal(decide(f, "/", 1, "sbx-2", api, good, &r), 403);
    assert_string_equal(r.body, "Forbidden\n");
    assert_non_null(strstr(r.log, "identifier"));
    assert_int_equal(decide(f, "/", 1, NULL, api, good, &r), 403);
    assert_string_equal(r.body, "Forbidden\n");
    assert_int_equal(decide(f, "/", 1, "sbx-2", api, aud2, &r), 403);
    assert_string_equal(r.body, "Forbidden\n");
    assert_non_null(strstr(r.log, "wrong audience"));
    assert_int_equal(decide(f, "/", 1, "sbx-2", api, NULL, &r), 403);
    assert_string_equal(r.body, "Unauthenticated\n");
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, NULL, &r), 403);
    assert_string_equal(r.body, "Unauthenticated\n");
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, "Basic abc", &r), 403);
    assert_string_equal(r.body, "Unauthenticated\n");
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, "Bearer ", &r), 403);

    /* refused tokens: the client sees "Forbidden", the log the reason */
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, aud2, &r), 403);
    assert_string_equal(r.body, "Forbidden\n");
    assert_non_null(strstr(r.log, "wrong audience"));
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, scope2, &r), 403);
    assert_non_null(strstr(r.log, "scope"));
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, old, &r), 403);
    assert_non_null(strstr(r.log, "expired"));
    /* the subprotocol: none offered, or airlock.v1 among the offers */
    assert_int_equal(decide_sp(f, "/", 1, "sbx-1", api, good, "airlock.v1", &r), 101);
    assert_int_equal(decide_sp(f, "/", 1, "sbx-1", api, good, "x, airlock.v1", &r), 101);
    assert_int_equal(decide_sp(f, "/", 1, "sbx-1", api, good, "", &r), 101);
    /* an offer without it: 400 before the token, and the log says why */
    assert_int_equal(decide_sp(f, "/", 1, "sbx-1", api, good, "chat", &r), 400);
    assert_string_equal(r.body, "Bad Request\n");
    assert_non_null(strstr(r.log, "subprotocol"));
    assert_int_equal(decide_sp(f, "/", 1, "sbx-1", api, NULL, "airlock.v2", &r), 400);
    assert_int_equal(decide_sp(f, "/x", 1, "sbx-1", api, good, "chat", &r), 404);

    char *sig = strrchr(good, '.') + 10; /* tamper with the signature */
    *sig = *sig == 'A' ? 'B' : 'A';
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, good, &r), 403);
    assert_non_null(strstr(r.log, "signature"));
}

/* A token of scope runner:probe opens a probe session (protocol.md §13);
 * one covering runner:connect too opens a controller's; neither scope:
 * refused, the log giving the controller's reason. */
static void test_probe_scope(void **state)
{
    struct fix *f = *state;
    struct upgrade_result r;
    char probe[5000], both[5000], probe2[5000], conn[5000];
    mint(f, "sbx-1", "runner:probe", NOW, probe, sizeof probe);
    mint(f, "sbx-1", "runner:probe runner:connect", NOW, both, sizeof both);
    mint(f, "sbx-2", "runner:probe", NOW, probe2, sizeof probe2);
    mint(f, "sbx-1", "runner:connect", NOW, conn, sizeof conn);
    const char *api = UPGRADE_API_VERSION;
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, probe, &r), 101);
    assert_int_equal(r.probe, 1);
    assert_non_null(strstr(r.log, "probe token ok"));
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, both, &r), 101);
    assert_int_equal(r.probe, 0);
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, conn, &r), 101);
    assert_int_equal(r.probe, 0);
    /* another sandbox's probe token, or the right one at another identifier */
    assert_int_equal(decide(f, "/", 1, "sbx-1", api, probe2, &r), 403);
    assert_int_equal(r.probe, 0);
    assert_non_null(strstr(r.log, "wrong audience"));
    assert_int_equal(decide(f, "/", 1, "sbx-2", api, probe, &r), 403);
    assert_int_equal(r.probe, 0);
    assert_string_equal(r.body, "Forbidden\n");
}

/* An identifier still to learn (--identifier-from request): the
 * request's, when a token valid for it comes with it; the checks before
 * the token are unchanged. */
static void test_identifier_from_request(void **state)
{
    struct fix *f = *state;
    struct upgrade_result r;
    char a[5000], b[5000];
    mint(f, "sess-a", "runner:connect", NOW, a, sizeof a);
    mint(f, "sess-b", "runner:probe", NOW, b, sizeof b);
    const char *api = UPGRADE_API_VERSION;
    struct upgrade_config cfg = {"", f->ks, NOW, 0};
    struct upgrade_request req = {"/", 1, "sess-a", api, a, NULL};
    upgrade_decide(&cfg, &req, &r);
    assert_int_equal(r.status, 101);
    assert_int_equal(r.probe, 0);
    req.identifier = "sess-b"; /* a's token at b */
    upgrade_decide(&cfg, &req, &r);
    assert_int_equal(r.status, 403);
    assert_string_equal(r.body, "Forbidden\n");
    req.auth = b; /* b's probe token at b: a probe session, nothing learnt */
    upgrade_decide(&cfg, &req, &r);
    assert_int_equal(r.status, 101);
    assert_int_equal(r.probe, 1);
    req.identifier = NULL;
    upgrade_decide(&cfg, &req, &r);
    assert_int_equal(r.status, 403);
    assert_non_null(strstr(r.log, "missing identifier"));
    req.identifier = "sess a/../x";
    upgrade_decide(&cfg, &req, &r);
    assert_int_equal(r.status, 403);
    req.identifier = "sess-a";
    req.auth = NULL; /* no token: Unauthenticated, as always */
    upgrade_decide(&cfg, &req, &r);
    assert_string_equal(r.body, "Unauthenticated\n");
    assert_true(upgrade_identifier_ok("a"));
    assert_true(upgrade_identifier_ok("Sess_1.x-2"));
    assert_false(upgrade_identifier_ok(""));
    assert_false(upgrade_identifier_ok(NULL));
    assert_false(upgrade_identifier_ok("a b"));
    static char longid[UPGRADE_IDENTIFIER_MAX + 2];
    memset(longid, 'a', sizeof longid - 1);
    assert_false(upgrade_identifier_ok(longid));
}

static void test_subproto(void **state)
{
    (void)state;
    assert_true(subproto_acceptable(NULL));
    assert_true(subproto_acceptable(""));
    assert_true(subproto_acceptable(" , "));
    assert_true(subproto_acceptable("airlock.v1"));
    assert_true(subproto_acceptable("airlock.v1, airlock-csrf.abc"));
    assert_true(subproto_acceptable("foo,airlock.v1"));
    assert_true(subproto_acceptable(" airlock.v1 "));
    assert_false(subproto_acceptable("chat"));
    assert_false(subproto_acceptable("http"));
    assert_false(subproto_acceptable("airlock.v1x"));
    assert_false(subproto_acceptable("xairlock.v1"));
    assert_false(subproto_acceptable("Airlock.V1"));
    assert_false(subproto_acceptable("airlock.v2, airlock-csrf.abc"));
    assert_false(subproto_acceptable("?"));
}

static void test_bearer(void **state)
{
    (void)state;
    assert_string_equal(bearer_token("Bearer abc"), "abc");
    assert_string_equal(bearer_token("bearer   abc"), "abc");
    assert_null(bearer_token("Bearer"));
    assert_null(bearer_token("Bearer   "));
    assert_null(bearer_token("Token abc"));
    assert_null(bearer_token(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_probe_scope),
        cmocka_unit_test(test_identifier_from_request),
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_subproto),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
