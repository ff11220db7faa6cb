/*
 * Unit tests for token (verification) and its JWKS loader.
 *
 * Fixture: two Ed25519 keys from fixed seeds (RFC 8032 test vectors 1 and
 * 2), published as kid "k1" and "k2" in one JWKS (rotation). Tokens are
 * built with tok_sign_jws from hand-written header and claims JSON, so a
 * hostile token can still carry a valid signature and each test sees the
 * rejection it is about. Time is fixed: NOW, leeway 30 s unless said.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_err.h"
#include "b64url.h"
#include "keys.h"
#include "testutil.h"
#include "tok_sign.h"
#include "token.h"

#define NOW 1800000000LL
#define AUD "sb-1"
#define HDR1 "{\"alg\":\"EdDSA\",\"typ\":\"JWT\",\"kid\":\"k1\"}"
#define HDR2 "{\"alg\":\"EdDSA\",\"typ\":\"JWT\",\"kid\":\"k2\"}"

enum { TOKBUF = 2 * TOK_MAX_TOKEN };

static const char seed1_hex[] = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
static const char seed2_hex[] = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";

struct fx {
    struct keys_signing *k1, *k2;
    struct tok_keyset *ks;
    char jwks[1024];
    char tok[TOKBUF];
    size_t len;
    char reason[TOK_REASON_MAX];
    struct tok_claims c;
};

static struct keys_signing *key_from_hex(const char *hex)
{
    uint8_t seed[KEYS_SEED_LEN];
    assert_int_equal(tu_hex_decode(hex, seed, sizeof seed), KEYS_SEED_LEN);
    struct keys_signing *k = NULL;
    assert_int_equal(keys_from_seed(seed, &k, NULL, 0), AL_OK);
    return k;
}

static void x_of(const struct keys_signing *k, char *out, size_t cap)
{
    uint8_t x[TOK_KEY_LEN];
    assert_int_equal(keys_public_raw(k, x), AL_OK);
    assert_int_equal(b64u_encode(x, sizeof x, out, cap, NULL), AL_OK);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->k1 = key_from_hex(seed1_hex);
    f->k2 = key_from_hex(seed2_hex);
    char x1[64], x2[64];
    x_of(f->k1, x1, sizeof x1);
    x_of(f->k2, x2, sizeof x2);
    /* RFC 8037 A.2: the public key of RFC 8032 test 1. */
    assert_string_equal(x1, "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo");
    int n = snprintf(f->jwks, sizeof f->jwks,
                     "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\",\"kid\":\"k1\"},"
                     "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\",\"kid\":\"k2\","
                     "\"use\":\"sig\",\"alg\":\"EdDSA\"}]}",
                     x1, x2);
    assert_true(n > 0 && (size_t)n < sizeof f->jwks);
    assert_int_equal(tok_keyset_from_json(f->jwks, strlen(f->jwks), &f->ks, NULL, 0), AL_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    tok_keyset_free(f->ks);
    keys_free(f->k1);
    keys_free(f->k2);
    free(f);
    return 0;
}

/* Standard claims with the given time fields, aud JSON and scope JSON. */
static const char *claims(char *buf, size_t cap, long long iat, long long nbf, long long exp,
                          const char *aud_json, const char *scope_json)
{
    int n = snprintf(buf, cap,
                     "{\"iss\":\"airlockd\",\"aud\":%s,\"sub\":\"user:alice\",\"scope\":%s,"
                     "\"iat\":%lld,\"nbf\":%lld,\"exp\":%lld,\"jti\":\"j-1\"}",
                     aud_json, scope_json, iat, nbf, exp);
    assert_true(n > 0 && (size_t)n < cap);
    return buf;
}

static const char *std_claims(char *buf, size_t cap)
{
    return claims(buf, cap, NOW, NOW, NOW + 300, "\"" AUD "\"", "\"runner:connect\"");
}

static void sign(struct fx *f, const struct keys_signing *k, const char *hdr, const char *cl)
{
    assert_int_equal(
        tok_sign_jws(k, hdr, strlen(hdr), cl, strlen(cl), f->tok, sizeof f->tok, &f->len), AL_OK);
}

static int verify_full(struct fx *f, int64_t now, int64_t leeway, const char *aud,
                       const char *scope)
{
    struct tok_verify_params p;
    tok_verify_params_init(&p, aud, scope, now);
    p.leeway = leeway;
    f->reason[0] = '\0';
    int rc = tok_verify(f->ks, f->tok, f->len, &p, &f->c, f->reason, sizeof f->reason);
    if (rc != AL_OK)
        assert_true(f->reason[0] != '\0'); /* every refusal says why */
    return rc;
}

static int verify(struct fx *f)
{
    return verify_full(f, NOW, TOK_LEEWAY_DEFAULT, AUD, "runner:connect");
}

/* Sign hdr/cl with k1 and return the verification result. */
static int check(struct fx *f, const char *hdr, const char *cl)
{
    sign(f, f->k1, hdr, cl);
    return verify(f);
}

/* Set the token text directly. */
static void set_tok(struct fx *f, const char *s)
{
    size_t n = strlen(s);
    assert_true(n < sizeof f->tok);
    memcpy(f->tok, s, n + 1);
    f->len = n;
}

/* ---- good tokens ------------------------------------------------------ */

static void test_good_token(void **state)
{
    struct fx *f = *state;
    char cl[512];
    assert_int_equal(check(f, HDR1, std_claims(cl, sizeof cl)), AL_OK);
    assert_string_equal(f->c.sub, "user:alice");
    assert_string_equal(f->c.iss, "airlockd");
    assert_string_equal(f->c.jti, "j-1");
    assert_string_equal(f->c.kid, "k1");
    assert_string_equal(f->c.scope, "runner:connect");
    assert_int_equal(f->c.exp, NOW + 300);
    assert_true(f->c.has_nbf && f->c.has_iat);
    assert_int_equal(f->c.nbf, NOW);
    /* A NULL claims pointer and a NULL reason are fine. */
    struct tok_verify_params p;
    tok_verify_params_init(&p, AUD, "runner:connect", NOW);
    assert_int_equal(tok_verify(f->ks, f->tok, f->len, &p, NULL, NULL, 0), AL_OK);
}

static void test_minimal_claims(void **state)
{
    struct fx *f = *state;
    /* Only exp, aud, scope, sub: nbf, iat, iss, jti are optional; no typ. */
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"k1\"}",
                           "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\","
                           "\"exp\":1800000100}"),
                     AL_OK);
    assert_false(f->c.has_nbf);
    assert_false(f->c.has_iat);
    assert_string_equal(f->c.iss, "");
    assert_string_equal(f->c.jti, "");
    /* typ is compared case-insensitively. */
    char cl[512];
    assert_int_equal(
        check(f, "{\"alg\":\"EdDSA\",\"typ\":\"jwt\",\"kid\":\"k1\"}", std_claims(cl, sizeof cl)),
        AL_OK);
}

static void test_minted_token_verifies(void **state)
{
    struct fx *f = *state;
    struct tok_sign_req req = {.aud = AUD,
                               .sub = "user:bob",
                               .scope = "terminal:read runner:connect",
                               .jti = "fixed",
                               .now = NOW,
                               .ttl = 60};
    char err[TOK_REASON_MAX];
    /* k1's kid as minted is its thumbprint, which this JWKS does not use:
     * republish k1 under its thumbprint to verify. */
    struct tok_keyset *ks = NULL;
    char *json = NULL;
    const struct keys_signing *arr[] = {f->k1};
    assert_int_equal(keys_jwks_json(arr, 1, &json, NULL, 0), AL_OK);
    assert_int_equal(tok_keyset_from_json(json, strlen(json), &ks, NULL, 0), AL_OK);
    free(json);
    assert_int_equal(tok_sign_mint(f->k1, &req, f->tok, sizeof f->tok, &f->len, err, sizeof err),
                     AL_OK);
    struct tok_verify_params p;
    tok_verify_params_init(&p, AUD, "terminal:read", NOW + 10);
    struct tok_claims c;
    assert_int_equal(tok_verify(ks, f->tok, f->len, &p, &c, err, sizeof err), AL_OK);
    assert_string_equal(c.sub, "user:bob");
    assert_string_equal(c.kid, keys_kid(f->k1));
    /* The fixture JWKS has no key of that kid. */
    assert_int_equal(verify(f), AL_E_KID);
    tok_keyset_free(ks);
}

static void test_rotation_two_keys(void **state)
{
    struct fx *f = *state;
    char cl[512];
    std_claims(cl, sizeof cl);
    assert_int_equal(tok_keyset_count(f->ks), 2);
    sign(f, f->k2, HDR2, cl);
    assert_int_equal(verify(f), AL_OK);
    assert_string_equal(f->c.kid, "k2");
    sign(f, f->k1, HDR1, cl);
    assert_int_equal(verify(f), AL_OK);
    /* The kid picks the key: k2's signature under kid k1 fails. */
    sign(f, f->k2, HDR1, cl);
    assert_int_equal(verify(f), AL_E_SIG);
    sign(f, f->k1, HDR2, cl);
    assert_int_equal(verify(f), AL_E_SIG);
}

/* ---- header ----------------------------------------------------------- */

static void test_alg_none(void **state)
{
    struct fx *f = *state;
    char cl[512], h64[128], c64[1024], tok[2048];
    std_claims(cl, sizeof cl);
    const char *hdr = "{\"alg\":\"none\",\"kid\":\"k1\"}";
    assert_int_equal(b64u_encode((const uint8_t *)hdr, strlen(hdr), h64, sizeof h64, NULL), AL_OK);
    assert_int_equal(b64u_encode((const uint8_t *)cl, strlen(cl), c64, sizeof c64, NULL), AL_OK);
    /* Unsecured JWS: empty signature. */
    snprintf(tok, sizeof tok, "%s.%s.", h64, c64);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_ALG);
    /* alg none with a signature made by a valid key still fails on alg. */
    assert_int_equal(check(f, hdr, cl), AL_E_ALG);
    assert_int_equal(check(f, "{\"alg\":\"None\",\"kid\":\"k1\"}", cl), AL_E_ALG);
}

static void test_alg_others(void **state)
{
    struct fx *f = *state;
    char cl[512];
    std_claims(cl, sizeof cl);
    static const char *const bad[] = {
        "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"k1\"}",
        "{\"alg\":\"RS256\",\"kid\":\"k1\"}",
        "{\"alg\":\"ES256\",\"kid\":\"k1\"}",
        "{\"alg\":\"Ed25519\",\"kid\":\"k1\"}",
        "{\"alg\":\"eddsa\",\"kid\":\"k1\"}",
        "{\"alg\":\"EdDSA \",\"kid\":\"k1\"}",
        "{\"alg\":\"EdDSA\\u0000\",\"kid\":\"k1\"}", /* NUL refused by jansson: FORMAT */
        "{\"alg\":[\"EdDSA\"],\"kid\":\"k1\"}",
        "{\"alg\":null,\"kid\":\"k1\"}",
        "{\"kid\":\"k1\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = check(f, bad[i], cl);
        if (i == 6)
            assert_int_equal(rc, AL_E_FORMAT);
        else
            assert_int_equal(rc, AL_E_ALG);
    }
}

static void test_hs256_key_confusion(void **state)
{
    struct fx *f = *state;
    /* The classic attack: an HMAC "signature" keyed with the public key. The
     * MAC value does not matter: alg is refused before any key is used. */
    char cl[512], h64[128], c64[1024], tok[2048];
    std_claims(cl, sizeof cl);
    const char *hdr = "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"k1\"}";
    assert_int_equal(b64u_encode((const uint8_t *)hdr, strlen(hdr), h64, sizeof h64, NULL), AL_OK);
    assert_int_equal(b64u_encode((const uint8_t *)cl, strlen(cl), c64, sizeof c64, NULL), AL_OK);
    snprintf(tok, sizeof tok, "%s.%s.%s", h64, c64, "dGhpcyBpcyBub3QgYSByZWFsIG1hYyBidXQgMzIgYnk");
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_ALG);
    assert_non_null(strstr(f->reason, "HS256"));
}

static void test_kid(void **state)
{
    struct fx *f = *state;
    char cl[512];
    std_claims(cl, sizeof cl);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\"}", cl), AL_E_KID);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"k3\"}", cl), AL_E_KID);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"K1\"}", cl), AL_E_KID);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"\"}", cl), AL_E_KID);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":1}", cl), AL_E_KID);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":null}", cl), AL_E_KID);
    /* A reason never carries raw control characters from the token. */
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"\\u001b[31mred\\n\"}", cl), AL_E_KID);
    for (const char *p = f->reason; *p; p++)
        assert_true(*p >= 0x20 && *p < 0x7f);
    assert_non_null(strstr(f->reason, "?[31mred?"));
}

static void test_header_other(void **state)
{
    struct fx *f = *state;
    char cl[512];
    std_claims(cl, sizeof cl);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"k1\",\"crit\":[\"exp\"]}", cl),
                     AL_E_FORMAT);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"k1\",\"typ\":\"JWE\"}", cl),
                     AL_E_FORMAT);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"k1\",\"typ\":7}", cl), AL_E_FORMAT);
    assert_int_equal(check(f, "[\"EdDSA\"]", cl), AL_E_FORMAT);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"k1\"", cl), AL_E_FORMAT);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"k1\"} x", cl), AL_E_FORMAT);
    /* An embedded key is ignored, never trusted: still verified with k1. */
    assert_int_equal(
        check(f,
              "{\"alg\":\"EdDSA\",\"kid\":\"k1\",\"jwk\":{\"kty\":\"OKP\","
              "\"crv\":\"Ed25519\",\"x\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}}",
              cl),
        AL_OK);
}

static void test_duplicate_json_keys(void **state)
{
    struct fx *f = *state;
    char cl[512];
    std_claims(cl, sizeof cl);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"alg\":\"none\",\"kid\":\"k1\"}", cl),
                     AL_E_FORMAT);
    assert_int_equal(check(f, "{\"alg\":\"none\",\"alg\":\"EdDSA\",\"kid\":\"k1\"}", cl),
                     AL_E_FORMAT);
    assert_int_equal(check(f, "{\"alg\":\"EdDSA\",\"kid\":\"k2\",\"kid\":\"k1\"}", cl),
                     AL_E_FORMAT);
    /* Claims: a duplicate aud could otherwise mean two different things to
     * two parsers. Validly signed, still refused. */
    assert_int_equal(check(f, HDR1,
                           "{\"aud\":\"other\",\"aud\":\"sb-1\",\"sub\":\"s\","
                           "\"scope\":\"runner:connect\",\"exp\":1800000100}"),
                     AL_E_FORMAT);
    assert_int_equal(check(f, HDR1,
                           "{\"aud\":\"sb-1\",\"sub\":\"s\",\"scope\":\"runner:connect\","
                           "\"exp\":1800000100,\"exp\":1900000000}"),
                     AL_E_FORMAT);
}

/* ---- signature and tampering ----------------------------------------- */

static void test_bad_signature(void **state)
{
    struct fx *f = *state;
    char cl[512];
    sign(f, f->k1, HDR1, std_claims(cl, sizeof cl));
    /* Flip one character in the middle of the signature (still canonical). */
    size_t i = f->len - 40;
    f->tok[i] = f->tok[i] == 'A' ? 'B' : 'A';
    assert_int_equal(verify(f), AL_E_SIG);
    /* All-zero signature. */
    sign(f, f->k1, HDR1, cl);
    memset(f->tok + f->len - TOK_SIG_B64_LEN, 'A', TOK_SIG_B64_LEN);
    assert_int_equal(verify(f), AL_E_SIG);
}

/* Replace segment idx (0 header, 1 claims) of f->tok by the encoding of s,
 * keeping the other segments and the signature. */
static void splice_seg(struct fx *f, int idx, const char *s)
{
    char enc[1024], out[TOKBUF];
    assert_int_equal(b64u_encode((const uint8_t *)s, strlen(s), enc, sizeof enc, NULL), AL_OK);
    char *d1 = strchr(f->tok, '.');
    char *d2 = strchr(d1 + 1, '.');
    int n;
    if (idx == 0)
        n = snprintf(out, sizeof out, "%s%s", enc, d1);
    else
        n = snprintf(out, sizeof out, "%.*s.%s%s", (int)(d1 - f->tok), f->tok, enc, d2);
    assert_true(n > 0 && (size_t)n < sizeof out);
    set_tok(f, out);
}

static void test_tampered_payload_and_header(void **state)
{
    struct fx *f = *state;
    char cl[512], evil[512];
    std_claims(cl, sizeof cl);
    /* Claims changed after signing: a longer lifetime, another scope. */
    sign(f, f->k1, HDR1, cl);
    splice_seg(
        f, 1,
        claims(evil, sizeof evil, NOW, NOW, NOW + 99999, "\"" AUD "\"", "\"runner:connect\""));
    assert_int_equal(verify(f), AL_E_SIG);
    sign(f, f->k1, HDR1, cl);
    splice_seg(f, 1,
               claims(evil, sizeof evil, NOW, NOW, NOW + 300, "\"" AUD "\"",
                      "\"runner:connect terminal:write\""));
    assert_int_equal(verify(f), AL_E_SIG);
    /* Header changed after signing (same alg and kid, one more member). */
    sign(f, f->k1, HDR1, cl);
    splice_seg(f, 0, "{\"alg\":\"EdDSA\",\"typ\":\"JWT\",\"kid\":\"k1\",\"x\":1}");
    assert_int_equal(verify(f), AL_E_SIG);
    /* Header switched to the other key. */
    sign(f, f->k1, HDR1, cl);
    splice_seg(f, 0, HDR2);
    assert_int_equal(verify(f), AL_E_SIG);
    /* One character of the claims segment flipped. */
    sign(f, f->k1, HDR1, cl);
    char *d1 = strchr(f->tok, '.');
    d1[5] = d1[5] == 'a' ? 'b' : 'a';
    int rc = verify(f);
    assert_true(rc == AL_E_SIG || rc == AL_E_FORMAT);
}

/* ---- encoding and sizes ---------------------------------------------- */

static void test_segments(void **state)
{
    struct fx *f = *state;
    char cl[512], good[TOK_MAX_TOKEN + 1], tok[TOKBUF];
    sign(f, f->k1, HDR1, std_claims(cl, sizeof cl));
    assert_true(f->len < sizeof good);
    memcpy(good, f->tok, f->len + 1);
    char *d1 = strchr(good, '.'), *d2 = strrchr(good, '.');

    /* 2 segments: header.claims */
    snprintf(tok, sizeof tok, "%.*s", (int)(d2 - good), good);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    /* 4 segments */
    snprintf(tok, sizeof tok, "%s.%s", good, d2 + 1);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    snprintf(tok, sizeof tok, "%s.", good);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    /* 1 segment, empty, only dots, empty header, empty claims. */
    snprintf(tok, sizeof tok, "%.*s", (int)(d1 - good), good);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    set_tok(f, "");
    assert_int_equal(verify(f), AL_E_FORMAT);
    set_tok(f, "..");
    assert_int_equal(verify(f), AL_E_FORMAT);
    snprintf(tok, sizeof tok, "%s", d1);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    snprintf(tok, sizeof tok, "%.*s.%s", (int)(d1 - good), good, d2);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    /* Signature 85 characters, and a short one. */
    snprintf(tok, sizeof tok, "%.*s", (int)strlen(good) - 1, good);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    /* A NUL inside the token (length given explicitly). */
    memcpy(f->tok, good, strlen(good) + 1);
    f->len = strlen(good);
    f->tok[3] = '\0';
    assert_int_equal(verify(f), AL_E_FORMAT);
    /* Whitespace around or inside. */
    snprintf(tok, sizeof tok, " %s", good);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    snprintf(tok, sizeof tok, "%s", good);
    tok[d1 - good + 5] = '\n';
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    /* A trailing newline makes the signature segment 87 characters. */
    snprintf(tok, sizeof tok, "%s\n", good);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_TOOBIG);
}

static void test_padding(void **state)
{
    struct fx *f = *state;
    char cl[512], good[TOK_MAX_TOKEN + 1], tok[TOKBUF];
    sign(f, f->k1, HDR1, std_claims(cl, sizeof cl));
    assert_true(f->len < sizeof good);
    memcpy(good, f->tok, f->len + 1);
    char *d1 = strchr(good, '.'), *d2 = strrchr(good, '.');
    size_t hlen = (size_t)(d1 - good), clen = (size_t)(d2 - d1 - 1);
    /* Pad the header and the claims as standard base64 would. */
    const char *hp = hlen % 4 == 2 ? "==" : hlen % 4 == 3 ? "=" : "====";
    snprintf(tok, sizeof tok, "%.*s%s%s", (int)hlen, good, hp, d1);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    const char *cp = clen % 4 == 2 ? "==" : clen % 4 == 3 ? "=" : "====";
    snprintf(tok, sizeof tok, "%.*s%s%s", (int)(d2 - good), good, cp, d2);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    /* The signature (86 characters) padded to 88 exceeds its size. */
    snprintf(tok, sizeof tok, "%s==", good);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_TOOBIG);
    /* '=' in place of the last signature character. */
    snprintf(tok, sizeof tok, "%.*s=", (int)strlen(good) - 1, good);
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
    /* Standard base64 characters instead of url ones. */
    snprintf(tok, sizeof tok, "%s", good);
    tok[strlen(tok) - 10] = '+';
    set_tok(f, tok);
    assert_int_equal(verify(f), AL_E_FORMAT);
}

static char b64_char(unsigned v)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    return a[v & 63];
}

static unsigned b64_val(char c)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *p = strchr(a, c);
    assert_non_null(p);
    return (unsigned)(p - a);
}

static void test_noncanonical_trailing_bits(void **state)
{
    struct fx *f = *state;
    char cl[512];
    sign(f, f->k1, HDR1, std_claims(cl, sizeof cl));
    /* Signature: 86 characters carry 516 bits for 512; the last 4 must be 0.
     * A lenient decoder maps the altered text to the same bytes, which would
     * make the token malleable. */
    char *last = &f->tok[f->len - 1];
    unsigned v = b64_val(*last);
    assert_int_equal(v & 0x0f, 0);
    *last = b64_char(v | 0x01);
    assert_int_equal(verify(f), AL_E_FORMAT);
    *last = b64_char(v | 0x08);
    assert_int_equal(verify(f), AL_E_FORMAT);

    /* Header: make its encoded length leave spare bits, then set them. */
    const char *hdr = "{\"alg\":\"EdDSA\",\"kid\":\"k1\"}"; /* 26 bytes: 35 chars, 2 spare bits */
    assert_int_equal(B64U_ENC_LEN(strlen(hdr)) % 4, 3);
    sign(f, f->k1, hdr, cl);
    assert_int_equal(verify(f), AL_OK);
    char *d1 = strchr(f->tok, '.');
    unsigned hv = b64_val(d1[-1]);
    assert_int_equal(hv & 0x03, 0);
    d1[-1] = b64_char(hv | 0x01);
    assert_int_equal(verify(f), AL_E_FORMAT);
}

static void test_sizes(void **state)
{
    struct fx *f = *state;
    char big[TOKBUF];
    /* Whole token over the limit: refused before anything is parsed. */
    memset(big, 'A', TOK_MAX_TOKEN + 1);
    big[TOK_MAX_TOKEN + 1] = '\0';
    big[10] = '.';
    big[20] = '.';
    set_tok(f, big);
    assert_int_equal(verify(f), AL_E_TOOBIG);

    /* Header segment exactly at its limit passes; one byte more is refused. */
    char hdr[TOK_MAX_HEADER_B64];
    const char *hpre = "{\"alg\":\"EdDSA\",\"kid\":\"k1\",\"p\":\"";
    const int hlimit = TOK_MAX_HEADER_B64 / 4 * 3; /* 512 chars = 384 bytes */
    int hfill = hlimit - (int)strlen(hpre) - 2;
    char cl[512];
    std_claims(cl, sizeof cl);
    int n = snprintf(hdr, sizeof hdr, "%s%0*d\"}", hpre, hfill, 0);
    assert_int_equal(n, hlimit);
    sign(f, f->k1, hdr, cl);
    assert_int_equal(strchr(f->tok, '.') - f->tok, TOK_MAX_HEADER_B64);
    assert_int_equal(verify(f), AL_OK);
    n = snprintf(hdr, sizeof hdr, "%s%0*d\"}", hpre, hfill + 1, 0);
    assert_int_equal(n, hlimit + 1);
    sign(f, f->k1, hdr, cl);
    assert_int_equal(verify(f), AL_E_TOOBIG);

    /* Claims at exactly the limit pass; one byte more is refused. */
    const int limit_bytes = TOK_MAX_CLAIMS_B64 / 4 * 3; /* 3072 chars = 2304 bytes */
    char bigcl[TOK_MAX_CLAIMS_B64];
    const char *pre = "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\","
                      "\"exp\":1800000100,\"pad\":\"";
    int fill = limit_bytes - (int)strlen(pre) - 2;
    n = snprintf(bigcl, sizeof bigcl, "%s%0*d\"}", pre, fill, 0);
    assert_int_equal(n, limit_bytes);
    sign(f, f->k1, HDR1, bigcl);
    assert_int_equal(verify(f), AL_OK);
    n = snprintf(bigcl, sizeof bigcl, "%s%0*d\"}", pre, fill + 1, 0);
    assert_int_equal(n, limit_bytes + 1);
    sign(f, f->k1, HDR1, bigcl);
    assert_int_equal(verify(f), AL_E_TOOBIG);

    /* Over-long string claims. */
    char cl2[1024], sub[TOK_MAX_CLAIM_STR + 2];
    memset(sub, 'u', sizeof sub - 1);
    sub[sizeof sub - 1] = '\0';
    snprintf(cl2, sizeof cl2,
             "{\"sub\":\"%s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":1800000100}",
             sub);
    sign(f, f->k1, HDR1, cl2);
    assert_int_equal(verify(f), AL_E_TOOBIG);
    sub[TOK_MAX_CLAIM_STR] = '\0'; /* exactly the limit */
    snprintf(cl2, sizeof cl2,
             "{\"sub\":\"%s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":1800000100}",
             sub);
    sign(f, f->k1, HDR1, cl2);
    assert_int_equal(verify(f), AL_OK);
    assert_int_equal(strlen(f->c.sub), TOK_MAX_CLAIM_STR);
}

/* ---- time ------------------------------------------------------------- */

static int at_exp(struct fx *f, long long exp, int64_t leeway)
{
    char cl[512];
    sign(f, f->k1, HDR1,
         claims(cl, sizeof cl, NOW - 600, NOW - 600, exp, "\"" AUD "\"", "\"runner:connect\""));
    return verify_full(f, NOW, leeway, AUD, "runner:connect");
}

static int at_nbf(struct fx *f, long long nbf, int64_t leeway)
{
    char cl[512];
    sign(f, f->k1, HDR1,
         claims(cl, sizeof cl, NOW, nbf, NOW + 600, "\"" AUD "\"", "\"runner:connect\""));
    return verify_full(f, NOW, leeway, AUD, "runner:connect");
}

static void test_expiry_edges(void **state)
{
    struct fx *f = *state;
    /* Expired when exp <= now - leeway (RFC 7519 and npm jose agree). */
    assert_int_equal(at_exp(f, NOW - 31, 30), AL_E_EXPIRED);
    assert_int_equal(at_exp(f, NOW - 30, 30), AL_E_EXPIRED);
    assert_int_equal(at_exp(f, NOW - 29, 30), AL_OK);
    assert_int_equal(at_exp(f, NOW, 0), AL_E_EXPIRED);
    assert_int_equal(at_exp(f, NOW + 1, 0), AL_OK);
    assert_int_equal(at_exp(f, NOW - 300, TOK_LEEWAY_MAX), AL_E_EXPIRED);
    assert_int_equal(at_exp(f, NOW - 299, TOK_LEEWAY_MAX), AL_OK);
    assert_int_equal(at_exp(f, 0, 30), AL_E_EXPIRED);
    assert_int_equal(at_exp(f, TOK_TIME_MAX, 30), AL_OK);
}

static void test_not_before_edges(void **state)
{
    struct fx *f = *state;
    /* Not yet valid when nbf > now + leeway. */
    assert_int_equal(at_nbf(f, NOW + 30, 30), AL_OK);
    assert_int_equal(at_nbf(f, NOW + 31, 30), AL_E_NOTYET);
    assert_int_equal(at_nbf(f, NOW, 0), AL_OK);
    assert_int_equal(at_nbf(f, NOW + 1, 0), AL_E_NOTYET);
    assert_int_equal(at_nbf(f, NOW + 3600, 30), AL_E_NOTYET);
    /* iat in the future beyond the leeway: not yet valid either. */
    char cl[512];
    sign(f, f->k1, HDR1,
         claims(cl, sizeof cl, NOW + 31, NOW, NOW + 600, "\"" AUD "\"", "\"runner:connect\""));
    assert_int_equal(verify(f), AL_E_NOTYET);
    sign(f, f->k1, HDR1,
         claims(cl, sizeof cl, NOW + 30, NOW, NOW + 600, "\"" AUD "\"", "\"runner:connect\""));
    assert_int_equal(verify(f), AL_OK);
}

static void test_time_claim_types(void **state)
{
    struct fx *f = *state;
    static const char *const bad[] = {
        "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\"}",
        "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":\"1800000100\"}",
        "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":1800000100.5}",
        "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":null}",
        "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":-1}",
        "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":253402300800}",
        "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":1800000100,"
        "\"nbf\":true}",
        "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":1800000100,"
        "\"iat\":\"now\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(check(f, HDR1, bad[i]), AL_E_CLAIM);
    /* An integer beyond int64 is refused by the JSON parser itself. */
    assert_int_equal(check(f, HDR1,
                           "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\","
                           "\"exp\":99999999999999999999999}"),
                     AL_E_FORMAT);
}

/* ---- audience, scope, subject ---------------------------------------- */

static int with_aud(struct fx *f, const char *aud_json)
{
    char cl[1024];
    return check(f, HDR1,
                 claims(cl, sizeof cl, NOW, NOW, NOW + 60, aud_json, "\"runner:connect\""));
}

static void test_audience(void **state)
{
    struct fx *f = *state;
    assert_int_equal(with_aud(f, "\"sb-1\""), AL_OK);
    assert_int_equal(with_aud(f, "\"sb-2\""), AL_E_AUD);
    assert_int_equal(with_aud(f, "\"sb-1 \""), AL_E_AUD);
    assert_int_equal(with_aud(f, "\"SB-1\""), AL_E_AUD);
    assert_int_equal(with_aud(f, "\"\""), AL_E_AUD);
    /* Arrays: accepted only when an entry is exactly this verifier. */
    assert_int_equal(with_aud(f, "[\"sb-1\"]"), AL_OK);
    assert_int_equal(with_aud(f, "[\"x\",\"sb-1\"]"), AL_OK);
    assert_int_equal(with_aud(f, "[\"x\",\"y\"]"), AL_E_AUD);
    assert_int_equal(with_aud(f, "[]"), AL_E_CLAIM);
    assert_int_equal(with_aud(f, "[\"sb-1\",1]"), AL_E_CLAIM);
    assert_int_equal(with_aud(f, "[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"sb-1\"]"), AL_OK);
    assert_int_equal(with_aud(f, "[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"sb-1\"]"),
                     AL_E_CLAIM);
    assert_int_equal(with_aud(f, "1"), AL_E_CLAIM);
    assert_int_equal(with_aud(f, "{\"sb-1\":true}"), AL_E_CLAIM);
    assert_int_equal(
        check(f, HDR1, "{\"sub\":\"s\",\"scope\":\"runner:connect\",\"exp\":1800000100}"),
        AL_E_CLAIM);
    /* The verifier's identity decides, not the token. */
    assert_int_equal(with_aud(f, "\"sb-1\""), AL_OK);
    assert_int_equal(verify_full(f, NOW, 30, "sb-2", "runner:connect"), AL_E_AUD);
}

static int with_scope(struct fx *f, const char *scope_json, const char *want)
{
    char cl[2048];
    sign(f, f->k1, HDR1, claims(cl, sizeof cl, NOW, NOW, NOW + 60, "\"" AUD "\"", scope_json));
    return verify_full(f, NOW, 30, AUD, want);
}

static void test_scope(void **state)
{
    struct fx *f = *state;
    assert_int_equal(with_scope(f, "\"runner:connect\"", "runner:connect"), AL_OK);
    assert_int_equal(with_scope(f, "\"terminal:read runner:connect\"", "runner:connect"), AL_OK);
    assert_int_equal(with_scope(f, "\"runner:connect terminal:write\"", "terminal:write"), AL_OK);
    assert_int_equal(with_scope(f, "\"proxy:openai\"", "proxy:openai"), AL_OK);
    /* Partial words never match. */
    assert_int_equal(with_scope(f, "\"runner:connectx\"", "runner:connect"), AL_E_SCOPE);
    assert_int_equal(with_scope(f, "\"xrunner:connect\"", "runner:connect"), AL_E_SCOPE);
    assert_int_equal(with_scope(f, "\"runner:conn\"", "runner:connect"), AL_E_SCOPE);
    assert_int_equal(with_scope(f, "\"runner\"", "runner:connect"), AL_E_SCOPE);
    assert_int_equal(with_scope(f, "\"terminal:read\"", "terminal:write"), AL_E_SCOPE);
    assert_int_equal(with_scope(f, "\"proxy:openai\"", "proxy:anthropic"), AL_E_SCOPE);
    assert_int_equal(with_scope(f, "\"proxy:*\"", "proxy:openai"), AL_E_SCOPE);
    /* Malformed scope claims. */
    assert_int_equal(with_scope(f, "\"runner:connect  terminal:read\"", "runner:connect"),
                     AL_E_CLAIM);
    assert_int_equal(with_scope(f, "\" runner:connect\"", "runner:connect"), AL_E_CLAIM);
    assert_int_equal(with_scope(f, "\"runner:connect \"", "runner:connect"), AL_E_CLAIM);
    assert_int_equal(with_scope(f, "\"runner:connect\\tx\"", "runner:connect"), AL_E_CLAIM);
    assert_int_equal(with_scope(f, "\"\"", "runner:connect"), AL_E_CLAIM);
    assert_int_equal(with_scope(f, "[\"runner:connect\"]", "runner:connect"), AL_E_CLAIM);
    assert_int_equal(with_scope(f, "null", "runner:connect"), AL_E_CLAIM);
    assert_int_equal(check(f, HDR1, "{\"sub\":\"s\",\"aud\":\"sb-1\",\"exp\":1800000100}"),
                     AL_E_CLAIM);
}

static void test_scope_helpers(void **state)
{
    (void)state;
    assert_true(tok_scope_covers("a b c", "b"));
    assert_true(tok_scope_covers("a b c", "c"));
    assert_true(tok_scope_covers("a", "a"));
    assert_false(tok_scope_covers("ab", "a"));
    assert_false(tok_scope_covers("a bc", "b"));
    assert_false(tok_scope_covers("", "a"));
    assert_false(tok_scope_covers("a", ""));
    assert_true(tok_scope_valid("runner:connect"));
    assert_false(tok_scope_valid("runner connect"));
    assert_false(tok_scope_valid(""));
    assert_false(tok_scope_valid("a\"b"));
    assert_false(tok_scope_valid("a\\b"));
    assert_true(tok_scope_list_valid("a b"));
    assert_false(tok_scope_list_valid("a  b"));
    assert_false(tok_scope_list_valid(" a"));
    assert_false(tok_scope_list_valid("a "));
    assert_false(tok_scope_list_valid("\xc3\xa9"));
    char longs[TOK_MAX_SCOPE + 2];
    memset(longs, 'a', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    assert_false(tok_scope_list_valid(longs));
    longs[TOK_MAX_SCOPE] = '\0';
    assert_true(tok_scope_list_valid(longs));
}

static void test_subject_and_strings(void **state)
{
    struct fx *f = *state;
    assert_int_equal(
        check(f, HDR1, "{\"aud\":\"sb-1\",\"scope\":\"runner:connect\",\"exp\":1800000100}"),
        AL_E_CLAIM);
    assert_int_equal(check(f, HDR1,
                           "{\"sub\":\"\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\","
                           "\"exp\":1800000100}"),
                     AL_E_CLAIM);
    assert_int_equal(check(f, HDR1,
                           "{\"sub\":7,\"aud\":\"sb-1\",\"scope\":\"runner:connect\","
                           "\"exp\":1800000100}"),
                     AL_E_CLAIM);
    assert_int_equal(
        check(f, HDR1,
              "{\"sub\":\"s\",\"iss\":[],\"aud\":\"sb-1\",\"scope\":\"runner:connect\","
              "\"exp\":1800000100}"),
        AL_E_CLAIM);
    assert_int_equal(check(f, HDR1,
                           "{\"sub\":\"s\",\"jti\":1,\"aud\":\"sb-1\",\"scope\":\"runner:connect\","
                           "\"exp\":1800000100}"),
                     AL_E_CLAIM);
    /* Claims that are not an object, invalid UTF-8, trailing bytes. */
    assert_int_equal(check(f, HDR1, "[1,2]"), AL_E_FORMAT);
    assert_int_equal(check(f, HDR1, "\"x\""), AL_E_FORMAT);
    assert_int_equal(check(f, HDR1,
                           "{\"sub\":\"\xff\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\","
                           "\"exp\":1800000100}"),
                     AL_E_FORMAT);
    assert_int_equal(check(f, HDR1,
                           "{\"sub\":\"s\",\"aud\":\"sb-1\",\"scope\":\"runner:connect\","
                           "\"exp\":1800000100}{}"),
                     AL_E_FORMAT);
}

static void test_params(void **state)
{
    struct fx *f = *state;
    char cl[512];
    sign(f, f->k1, HDR1, std_claims(cl, sizeof cl));
    assert_int_equal(verify_full(f, NOW, TOK_LEEWAY_MAX + 1, AUD, "runner:connect"), AL_E_INVAL);
    assert_int_equal(verify_full(f, NOW, -1, AUD, "runner:connect"), AL_E_INVAL);
    assert_int_equal(verify_full(f, -1, 30, AUD, "runner:connect"), AL_E_INVAL);
    assert_int_equal(verify_full(f, NOW, 30, "", "runner:connect"), AL_E_INVAL);
    assert_int_equal(verify_full(f, NOW, 30, AUD, "runner:connect terminal:read"), AL_E_INVAL);
    assert_int_equal(verify_full(f, NOW, 30, AUD, ""), AL_E_INVAL);
    struct tok_verify_params p;
    tok_verify_params_init(&p, AUD, "runner:connect", NOW);
    assert_int_equal(p.leeway, TOK_LEEWAY_DEFAULT);
    assert_int_equal(tok_verify(NULL, f->tok, f->len, &p, NULL, NULL, 0), AL_E_INVAL);
    assert_int_equal(tok_verify(f->ks, NULL, 0, &p, NULL, NULL, 0), AL_E_INVAL);
    /* A one-byte reason buffer gets an empty string, never an overflow. */
    char tiny[1] = {'x'};
    p.audience = "other";
    assert_int_equal(tok_verify(f->ks, f->tok, f->len, &p, NULL, tiny, sizeof tiny), AL_E_AUD);
    assert_int_equal(tiny[0], '\0');
}

/* ---- JWKS ------------------------------------------------------------- */

static int jwks_rc(const char *json)
{
    struct tok_keyset *ks = NULL;
    char why[TOK_REASON_MAX];
    int rc = tok_keyset_from_json(json, strlen(json), &ks, why, sizeof why);
    if (rc == AL_OK)
        assert_non_null(ks);
    else
        assert_null(ks);
    tok_keyset_free(ks);
    return rc;
}

#define X1 "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
#define OKP(extra) "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" X1 "\"" extra "}"

static void test_jwks_parse(void **state)
{
    struct fx *f = *state;
    const char *kid = NULL;
    uint8_t x[TOK_KEY_LEN];
    assert_int_equal(tok_keyset_get(f->ks, 1, &kid, x), AL_OK);
    assert_string_equal(kid, "k2");
    assert_int_equal(tok_keyset_get(f->ks, 2, &kid, x), AL_E_INVAL);

    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":\"a\"") "]}"), AL_OK);
    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":\"a\"") "],\"other\":1}"), AL_OK);
    /* Wrong key types and curves. */
    assert_int_equal(jwks_rc("{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"" X1
                             "\",\"y\":\"" X1 "\",\"kid\":\"a\"}]}"),
                     AL_E_FORMAT);
    assert_int_equal(
        jwks_rc("{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"X25519\",\"x\":\"" X1 "\",\"kid\":\"a\"}]}"),
        AL_E_FORMAT);
    assert_int_equal(
        jwks_rc("{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed448\",\"x\":\"" X1 "\",\"kid\":\"a\"}]}"),
        AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\",\"kid\":\"a\"}]}"),
                     AL_E_FORMAT);
    /* x: wrong length, padding, not a string. */
    assert_int_equal(
        jwks_rc("{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\","
                "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHUQ\",\"kid\":\"a\"}]}"),
        AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" X1
                             "=\",\"kid\":\"a\"}]}"),
                     AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":1,"
                             "\"kid\":\"a\"}]}"),
                     AL_E_FORMAT);
    /* Private part, use and alg. */
    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":\"a\",\"d\":\"" X1 "\"") "]}"),
                     AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":\"a\",\"use\":\"enc\"") "]}"),
                     AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":\"a\",\"alg\":\"ES256\"") "]}"),
                     AL_E_FORMAT);
    /* kid: missing, empty, not a string, control character, too long, duplicate. */
    assert_int_equal(jwks_rc("{\"keys\":[" OKP("") "]}"), AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":\"\"") "]}"), AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":5") "]}"), AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":\"a\\nb\"") "]}"), AL_E_FORMAT);
    char longkid[512];
    snprintf(longkid, sizeof longkid, "{\"keys\":[" OKP(",\"kid\":\"%0*d\"") "]}", TOK_MAX_KID + 1,
             0);
    assert_int_equal(jwks_rc(longkid), AL_E_FORMAT);
    snprintf(longkid, sizeof longkid, "{\"keys\":[" OKP(",\"kid\":\"%0*d\"") "]}", TOK_MAX_KID, 0);
    assert_int_equal(jwks_rc(longkid), AL_OK);
    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":\"a\"") "," OKP(",\"kid\":\"a\"") "]}"),
                     AL_E_EXISTS);
    /* Structure. */
    assert_int_equal(jwks_rc("{\"keys\":[]}"), AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":{}}"), AL_E_FORMAT);
    assert_int_equal(jwks_rc("{}"), AL_E_FORMAT);
    assert_int_equal(jwks_rc("[]"), AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[1]}"), AL_E_FORMAT);
    assert_int_equal(jwks_rc("not json"), AL_E_FORMAT);
    assert_int_equal(jwks_rc(""), AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[" OKP(",\"kid\":\"a\",\"kid\":\"b\"") "]}"), AL_E_FORMAT);
    assert_int_equal(jwks_rc("{\"keys\":[],\"keys\":[" OKP(",\"kid\":\"a\"") "]}"), AL_E_FORMAT);
}

static void test_jwks_limits(void **state)
{
    (void)state;
    /* TOK_MAX_KEYS keys load; one more is refused. */
    char buf[8192];
    for (int want = TOK_MAX_KEYS; want <= TOK_MAX_KEYS + 1; want++) {
        size_t o = 0;
        o += (size_t)snprintf(buf + o, sizeof buf - o, "{\"keys\":[");
        for (int i = 0; i < want; i++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s" OKP(",\"kid\":\"k%d\""),
                                  i ? "," : "", i);
        o += (size_t)snprintf(buf + o, sizeof buf - o, "]}");
        assert_true(o < sizeof buf);
        assert_int_equal(jwks_rc(buf), want <= TOK_MAX_KEYS ? AL_OK : AL_E_TOOBIG);
    }
    /* A JWKS text over the byte limit is refused before parsing. */
    char *huge = malloc(TOK_MAX_JWKS_BYTES + 2);
    assert_non_null(huge);
    memset(huge, ' ', TOK_MAX_JWKS_BYTES + 1);
    huge[TOK_MAX_JWKS_BYTES + 1] = '\0';
    struct tok_keyset *ks = NULL;
    assert_int_equal(tok_keyset_from_json(huge, TOK_MAX_JWKS_BYTES + 1, &ks, NULL, 0), AL_E_TOOBIG);
    free(huge);
}

static void test_jwks_file(void **state)
{
    struct fx *f = *state;
    char dir[] = "/tmp/al-test-token-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], big[256];
    snprintf(path, sizeof path, "%s/jwks.json", dir);
    snprintf(big, sizeof big, "%s/big.json", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    assert_int_equal(fputs(f->jwks, fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);

    struct tok_keyset *ks = NULL;
    char why[TOK_REASON_MAX];
    assert_int_equal(tok_keyset_from_file(path, &ks, why, sizeof why), AL_OK);
    assert_int_equal(tok_keyset_count(ks), 2);
    tok_keyset_free(ks);

    /* Missing file, a directory, an oversized file. */
    char missing[256];
    snprintf(missing, sizeof missing, "%s/nope.json", dir);
    assert_int_equal(tok_keyset_from_file(missing, &ks, why, sizeof why), AL_E_NOENT);
    assert_non_null(strstr(why, "nope.json"));
    assert_int_equal(tok_keyset_from_file(dir, &ks, why, sizeof why), AL_E_IO);
    fp = fopen(big, "w");
    assert_non_null(fp);
    for (int i = 0; i <= TOK_MAX_JWKS_BYTES / 16; i++)
        assert_true(fputs("                ", fp) >= 0);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(tok_keyset_from_file(big, &ks, why, sizeof why), AL_E_TOOBIG);
    assert_null(ks);

    assert_int_equal(unlink(path), 0);
    assert_int_equal(unlink(big), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_token),
        cmocka_unit_test(test_minimal_claims),
        cmocka_unit_test(test_minted_token_verifies),
        cmocka_unit_test(test_rotation_two_keys),
        cmocka_unit_test(test_alg_none),
        cmocka_unit_test(test_alg_others),
        cmocka_unit_test(test_hs256_key_confusion),
        cmocka_unit_test(test_kid),
        cmocka_unit_test(test_header_other),
        cmocka_unit_test(test_duplicate_json_keys),
        cmocka_unit_test(test_bad_signature),
        cmocka_unit_test(test_tampered_payload_and_header),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_padding),
        cmocka_unit_test(test_noncanonical_trailing_bits),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_expiry_edges),
        cmocka_unit_test(test_not_before_edges),
        cmocka_unit_test(test_time_claim_types),
        cmocka_unit_test(test_audience),
        cmocka_unit_test(test_scope),
        cmocka_unit_test(test_scope_helpers),
        cmocka_unit_test(test_subject_and_strings),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_jwks_parse),
        cmocka_unit_test(test_jwks_limits),
        cmocka_unit_test(test_jwks_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
