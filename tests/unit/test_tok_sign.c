/*
 * Unit tests for the control plane's keys (key files, thumbprints, JWKS,
 * keygen and rotation of a data directory) and tok_sign (minting).
 *
 * Known answers come from RFC 8037 appendix A: the Ed25519 key of RFC 8032
 * test 1, its RFC 7638 thumbprint and the JWS it signs. File tests run in
 * a fresh mkdtemp directory under umask 022, removed afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
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

static const char rfc_seed_hex[] =
    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
#define RFC_X "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
#define RFC_KID "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
#define RFC_JWS                                                                                    \
    "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-"        \
    "09PGcvMg"                                                                                     \
    "3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"

struct fx {
    char dir[64];
    char path[KEYS_PATH_MAX];
};

static struct keys_signing *rfc_key(void)
{
    uint8_t seed[KEYS_SEED_LEN];
    assert_int_equal(tu_hex_decode(rfc_seed_hex, seed, sizeof seed), KEYS_SEED_LEN);
    struct keys_signing *k = NULL;
    assert_int_equal(keys_from_seed(seed, &k, NULL, 0), AL_OK);
    return k;
}

/* Remove dir and the files (and one level of subdirectories) in it. */
static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[KEYS_PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(p);
        else
            (void)unlink(p);
    }
    closedir(d);
    (void)rmdir(dir);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    umask(022);
    snprintf(f->dir, sizeof f->dir, "/tmp/al-test-keys-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    rm_tree(f->dir);
    free(f);
    return 0;
}

static const char *in_dir(struct fx *f, const char *name)
{
    assert_int_equal(keys_path(f->dir, name, f->path, sizeof f->path), AL_OK);
    return f->path;
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    assert_int_equal(close(fd), 0);
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

/* ---- known answers ---------------------------------------------------- */

static void test_rfc8037_thumbprint_and_signature(void **state)
{
    (void)state;
    struct keys_signing *k = rfc_key();
    uint8_t x[TOK_KEY_LEN];
    char xs[64];
    assert_int_equal(keys_public_raw(k, x), AL_OK);
    assert_int_equal(b64u_encode(x, sizeof x, xs, sizeof xs, NULL), AL_OK);
    assert_string_equal(xs, RFC_X);
    /* RFC 8037 A.3: the JWK thumbprint is the kid. */
    assert_string_equal(keys_kid(k), RFC_KID);
    char kid[KEYS_KID_LEN + 1];
    assert_int_equal(keys_thumbprint(x, kid, sizeof kid), AL_OK);
    assert_string_equal(kid, RFC_KID);
    assert_int_equal(keys_thumbprint(x, kid, KEYS_KID_LEN), AL_E_INVAL);
    /* RFC 8037 A.4: Ed25519 is deterministic, so the JWS is exact. */
    char out[256];
    size_t len = 0;
    const char *hdr = "{\"alg\":\"EdDSA\"}", *payload = "Example of Ed25519 signing";
    assert_int_equal(
        tok_sign_jws(k, hdr, strlen(hdr), payload, strlen(payload), out, sizeof out, &len), AL_OK);
    assert_string_equal(out, RFC_JWS);
    assert_int_equal(len, strlen(RFC_JWS));
    /* Too small an output buffer. */
    assert_int_equal(
        tok_sign_jws(k, hdr, strlen(hdr), payload, strlen(payload), out, strlen(RFC_JWS), &len),
        AL_E_TOOBIG);
    keys_free(k);
}

/* ---- minting ---------------------------------------------------------- */

static struct tok_keyset *keyset_of(const struct keys_signing *k)
{
    char *json = NULL;
    const struct keys_signing *arr[] = {k};
    assert_int_equal(keys_jwks_json(arr, 1, &json, NULL, 0), AL_OK);
    struct tok_keyset *ks = NULL;
    assert_int_equal(tok_keyset_from_json(json, strlen(json), &ks, NULL, 0), AL_OK);
    free(json);
    return ks;
}

/* Decode segment idx (0 header, 1 claims) of tok into out as text. */
static void segment_text(const char *tok, int idx, char *out, size_t cap)
{
    const char *s = tok;
    for (int i = 0; i < idx; i++)
        s = strchr(s, '.') + 1;
    const char *e = strchr(s, '.');
    size_t n = 0;
    assert_int_equal(b64u_decode(s, (size_t)(e - s), (uint8_t *)out, cap - 1, &n), AL_OK);
    out[n] = '\0';
}

static void test_mint_exact_and_verify(void **state)
{
    (void)state;
    struct keys_signing *k = rfc_key();
    struct tok_sign_req req = {.aud = "sb-1",
                               .sub = "user:alice",
                               .scope = "runner:connect",
                               .jti = "fixed-jti",
                               .now = NOW,
                               .ttl = 120};
    char tok[TOK_MAX_TOKEN + 1], why[TOK_REASON_MAX], text[1024];
    size_t len = 0;
    assert_int_equal(tok_sign_mint(k, &req, tok, sizeof tok, &len, why, sizeof why), AL_OK);
    assert_int_equal(len, strlen(tok));
    segment_text(tok, 0, text, sizeof text);
    assert_string_equal(text, "{\"alg\":\"EdDSA\",\"typ\":\"JWT\",\"kid\":\"" RFC_KID "\"}");
    segment_text(tok, 1, text, sizeof text);
    assert_string_equal(text, "{\"iss\":\"airlockd\",\"aud\":\"sb-1\",\"sub\":\"user:alice\","
                              "\"scope\":\"runner:connect\",\"iat\":1800000000,"
                              "\"nbf\":1800000000,\"exp\":1800000120,\"jti\":\"fixed-jti\"}");

    struct tok_keyset *ks = keyset_of(k);
    struct tok_verify_params p;
    tok_verify_params_init(&p, "sb-1", "runner:connect", NOW + 60);
    struct tok_claims c;
    assert_int_equal(tok_verify(ks, tok, len, &p, &c, why, sizeof why), AL_OK);
    assert_string_equal(c.sub, "user:alice");
    assert_string_equal(c.iss, TOK_SIGN_ISS_DEFAULT);
    assert_string_equal(c.jti, "fixed-jti");
    assert_int_equal(c.exp, NOW + 120);
    /* Expires at exp (plus the leeway). */
    p.now = NOW + 120 + TOK_LEEWAY_DEFAULT;
    assert_int_equal(tok_verify(ks, tok, len, &p, &c, why, sizeof why), AL_E_EXPIRED);
    tok_keyset_free(ks);
    keys_free(k);
}

static void test_mint_random_jti(void **state)
{
    (void)state;
    struct keys_signing *k = rfc_key();
    struct tok_sign_req req = {
        .aud = "sb-1", .sub = "u", .scope = "terminal:read", .iss = "cp-7", .now = NOW, .ttl = 60};
    char t1[TOK_MAX_TOKEN + 1], t2[TOK_MAX_TOKEN + 1];
    size_t l1 = 0, l2 = 0;
    assert_int_equal(tok_sign_mint(k, &req, t1, sizeof t1, &l1, NULL, 0), AL_OK);
    assert_int_equal(tok_sign_mint(k, &req, t2, sizeof t2, &l2, NULL, 0), AL_OK);
    assert_string_not_equal(t1, t2); /* only the jti differs */
    struct tok_keyset *ks = keyset_of(k);
    struct tok_verify_params p;
    tok_verify_params_init(&p, "sb-1", "terminal:read", NOW);
    struct tok_claims c1, c2;
    assert_int_equal(tok_verify(ks, t1, l1, &p, &c1, NULL, 0), AL_OK);
    assert_int_equal(tok_verify(ks, t2, l2, &p, &c2, NULL, 0), AL_OK);
    assert_string_equal(c1.iss, "cp-7");
    /* 128 bits in base64url: 22 characters. */
    assert_int_equal(strlen(c1.jti), B64U_ENC_LEN(TOK_SIGN_JTI_BYTES));
    assert_int_equal(strlen(c1.jti), 22);
    assert_string_not_equal(c1.jti, c2.jti);
    tok_keyset_free(ks);
    keys_free(k);
}

static void test_mint_refusals(void **state)
{
    (void)state;
    struct keys_signing *k = rfc_key();
    char tok[TOK_MAX_TOKEN + 1], why[TOK_REASON_MAX];
    size_t len = 0;
    struct tok_sign_req base = {
        .aud = "sb-1", .sub = "u", .scope = "runner:connect", .now = NOW, .ttl = 60};
    struct tok_sign_req r;
    char longs[TOK_MAX_CLAIM_STR + 2];
    memset(longs, 'a', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';

#define REFUSE(field, value, code)                                                                 \
    do {                                                                                           \
        r = base;                                                                                  \
        r.field = value;                                                                           \
        why[0] = '\0';                                                                             \
        assert_int_equal(tok_sign_mint(k, &r, tok, sizeof tok, &len, why, sizeof why), code);      \
        assert_true(why[0] != '\0');                                                               \
        assert_int_equal(len, 0);                                                                  \
        assert_string_equal(tok, "");                                                              \
    } while (0)

    REFUSE(ttl, 0, AL_E_INVAL);
    REFUSE(ttl, -5, AL_E_INVAL);
    REFUSE(ttl, TOK_SIGN_TTL_MAX + 1, AL_E_INVAL);
    REFUSE(now, -1, AL_E_INVAL);
    REFUSE(now, TOK_TIME_MAX, AL_E_INVAL);
    REFUSE(aud, NULL, AL_E_INVAL);
    REFUSE(aud, "", AL_E_INVAL);
    REFUSE(aud, longs, AL_E_INVAL);
    REFUSE(sub, NULL, AL_E_INVAL);
    REFUSE(iss, "", AL_E_INVAL);
    REFUSE(jti, "", AL_E_INVAL);
    REFUSE(scope, NULL, AL_E_INVAL);
    REFUSE(scope, "", AL_E_INVAL);
    REFUSE(scope, "runner:connect  terminal:read", AL_E_INVAL);
    REFUSE(scope, "a\"b", AL_E_INVAL);
    REFUSE(sub, "\xff\xfe", AL_E_INVAL); /* not UTF-8 */
    /* Control characters escape to 6 bytes each in JSON: the claims would
     * outgrow what verifiers accept. */
    char ctl[TOK_MAX_CLAIM_STR + 1];
    memset(ctl, '\x01', sizeof ctl - 1);
    ctl[sizeof ctl - 1] = '\0';
    r = base;
    r.sub = ctl;
    r.iss = ctl;
    r.aud = ctl;
    assert_int_equal(tok_sign_mint(k, &r, tok, sizeof tok, &len, why, sizeof why), AL_E_TOOBIG);
#undef REFUSE

    /* Edges that pass: ttl 1 and max, 255-byte strings. */
    r = base;
    r.ttl = TOK_SIGN_TTL_MAX;
    assert_int_equal(tok_sign_mint(k, &r, tok, sizeof tok, &len, why, sizeof why), AL_OK);
    r.ttl = 1;
    longs[TOK_MAX_CLAIM_STR] = '\0';
    r.sub = longs;
    assert_int_equal(tok_sign_mint(k, &r, tok, sizeof tok, &len, why, sizeof why), AL_OK);
    /* Output buffer too small. */
    assert_int_equal(tok_sign_mint(k, &base, tok, 100, &len, why, sizeof why), AL_E_TOOBIG);
    keys_free(k);
}

/* ---- key files -------------------------------------------------------- */

static void test_private_key_file(void **state)
{
    struct fx *f = *state;
    struct keys_signing *k = NULL, *back = NULL;
    char why[TOK_REASON_MAX + KEYS_PATH_MAX];
    assert_int_equal(keys_generate(&k, why, sizeof why), AL_OK);
    assert_int_equal(strlen(keys_kid(k)), KEYS_KID_LEN);
    const char *path = in_dir(f, "k.pem");
    assert_int_equal(keys_write_private(k, path, why, sizeof why), AL_OK);
    assert_int_equal(mode_of(path), 0600);
    /* PKCS#8 PEM. */
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[64] = "";
    assert_non_null(fgets(line, sizeof line, fp));
    assert_string_equal(line, "-----BEGIN PRIVATE KEY-----\n");
    fclose(fp);
    /* Never overwritten. */
    assert_int_equal(keys_write_private(k, path, why, sizeof why), AL_E_EXISTS);
    assert_non_null(strstr(why, "already exists"));
    /* Loads back to the same key. */
    assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_OK);
    assert_string_equal(keys_kid(back), keys_kid(k));
    keys_free(back);
    back = NULL;

    /* A symlink planted at the path is not followed. */
    const char *target = in_dir(f, "target");
    char tcopy[KEYS_PATH_MAX];
    snprintf(tcopy, sizeof tcopy, "%s", target);
    const char *link_path = in_dir(f, "link.pem");
    assert_int_equal(symlink(tcopy, link_path), 0);
    assert_int_equal(keys_write_private(k, link_path, why, sizeof why), AL_E_EXISTS);
    assert_int_equal(access(tcopy, F_OK), -1);
    keys_free(k);
}

static void test_private_key_perms(void **state)
{
    struct fx *f = *state;
    struct keys_signing *k = NULL, *back = NULL;
    char why[TOK_REASON_MAX + KEYS_PATH_MAX];
    assert_int_equal(keys_generate(&k, why, sizeof why), AL_OK);
    char path[KEYS_PATH_MAX];
    snprintf(path, sizeof path, "%s", in_dir(f, "p.pem"));
    assert_int_equal(keys_write_private(k, path, why, sizeof why), AL_OK);
    static const mode_t bad[] = {0644, 0640, 0604, 0660, 0602, 0620, 0700 | 0004};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(chmod(path, bad[i]), 0);
        assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_E_PERM);
        assert_null(back);
        assert_non_null(strstr(why, "group or others"));
        assert_non_null(strstr(why, path));
    }
    static const mode_t good[] = {0600, 0400, 0700};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_int_equal(chmod(path, good[i]), 0);
        assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_OK);
        keys_free(back);
        back = NULL;
    }
    keys_free(k);
}

static void test_private_key_bad_files(void **state)
{
    struct fx *f = *state;
    struct keys_signing *back = NULL;
    char why[TOK_REASON_MAX + KEYS_PATH_MAX];
    char path[KEYS_PATH_MAX];

    snprintf(path, sizeof path, "%s", in_dir(f, "missing.pem"));
    assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_E_NOENT);
    assert_non_null(strstr(why, "missing.pem"));

    snprintf(path, sizeof path, "%s", in_dir(f, "garbage.pem"));
    write_text(path, "this is not a key\n", 0600);
    assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_E_FORMAT);

    snprintf(path, sizeof path, "%s", in_dir(f, "empty.pem"));
    write_text(path, "", 0600);
    assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_E_FORMAT);

    /* A public key only. */
    snprintf(path, sizeof path, "%s", in_dir(f, "pub.pem"));
    write_text(path,
               "-----BEGIN PUBLIC KEY-----\n"
               "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
               "-----END PUBLIC KEY-----\n",
               0600);
    assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_E_FORMAT);

    /* Truncated PEM. */
    snprintf(path, sizeof path, "%s", in_dir(f, "trunc.pem"));
    write_text(path, "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v\n", 0600);
    assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_E_FORMAT);

    /* Another algorithm (P-256). */
    EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    assert_non_null(ec);
    snprintf(path, sizeof path, "%s", in_dir(f, "ec.pem"));
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    assert_int_equal(PEM_write_PrivateKey(fp, ec, NULL, NULL, 0, NULL, NULL), 1);
    fclose(fp);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_E_FORMAT);
    assert_non_null(strstr(why, "Ed25519"));

    /* Encrypted with a passphrase: refused, and never prompts. */
    EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    assert_non_null(ed);
    snprintf(path, sizeof path, "%s", in_dir(f, "enc.pem"));
    fp = fopen(path, "w");
    assert_non_null(fp);
    assert_int_equal(
        PEM_write_PrivateKey(fp, ed, EVP_aes_256_cbc(), (const unsigned char *)"pw", 2, NULL, NULL),
        1);
    fclose(fp);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_E_FORMAT);
    EVP_PKEY_free(ed);
    EVP_PKEY_free(ec);

    /* Oversized file, and a directory. */
    snprintf(path, sizeof path, "%s", in_dir(f, "big.pem"));
    char *big = malloc(KEYS_MAX_PEM_BYTES + 2);
    assert_non_null(big);
    memset(big, 'A', KEYS_MAX_PEM_BYTES + 1);
    big[KEYS_MAX_PEM_BYTES + 1] = '\0';
    write_text(path, big, 0600);
    free(big);
    assert_int_equal(keys_load_private(path, &back, why, sizeof why), AL_E_TOOBIG);
    assert_int_equal(keys_load_private(f->dir, &back, why, sizeof why), AL_E_IO);
    assert_null(back);
}

static void test_jwks_json(void **state)
{
    (void)state;
    struct keys_signing *a = rfc_key(), *b = NULL;
    assert_int_equal(keys_generate(&b, NULL, 0), AL_OK);
    const struct keys_signing *arr[] = {a, b};
    char *json = NULL;
    assert_int_equal(keys_jwks_json(arr, 2, &json, NULL, 0), AL_OK);
    assert_non_null(strstr(json, "\"x\": \"" RFC_X "\""));
    assert_non_null(strstr(json, "\"kid\": \"" RFC_KID "\""));
    assert_non_null(strstr(json, "\"alg\": \"EdDSA\""));
    assert_null(strstr(json, "\"d\""));
    struct tok_keyset *ks = NULL;
    assert_int_equal(tok_keyset_from_json(json, strlen(json), &ks, NULL, 0), AL_OK);
    assert_int_equal(tok_keyset_count(ks), 2);
    const char *kid = NULL;
    assert_int_equal(tok_keyset_get(ks, 1, &kid, NULL), AL_OK);
    assert_string_equal(kid, keys_kid(b));
    tok_keyset_free(ks);
    free(json);
    assert_int_equal(keys_jwks_json(arr, 0, &json, NULL, 0), AL_E_INVAL);
    keys_free(a);
    keys_free(b);
}

/* ---- data directory --------------------------------------------------- */

static struct tok_keyset *load_jwks(const char *dir)
{
    char path[KEYS_PATH_MAX];
    assert_int_equal(keys_path(dir, KEYS_JWKS_FILE, path, sizeof path), AL_OK);
    struct tok_keyset *ks = NULL;
    char why[TOK_REASON_MAX + KEYS_PATH_MAX];
    assert_int_equal(tok_keyset_from_file(path, &ks, why, sizeof why), AL_OK);
    return ks;
}

static struct keys_signing *load_key(const char *dir)
{
    char path[KEYS_PATH_MAX];
    assert_int_equal(keys_path(dir, KEYS_PRIVATE_FILE, path, sizeof path), AL_OK);
    struct keys_signing *k = NULL;
    assert_int_equal(keys_load_private(path, &k, NULL, 0), AL_OK);
    return k;
}

static void mint(const struct keys_signing *k, char *tok, size_t cap, size_t *len)
{
    struct tok_sign_req req = {
        .aud = "sb-1", .sub = "u", .scope = "runner:connect", .now = NOW, .ttl = 300};
    assert_int_equal(tok_sign_mint(k, &req, tok, cap, len, NULL, 0), AL_OK);
}

static int verify_with(const struct tok_keyset *ks, const char *tok, size_t len)
{
    struct tok_verify_params p;
    tok_verify_params_init(&p, "sb-1", "runner:connect", NOW);
    return tok_verify(ks, tok, len, &p, NULL, NULL, 0);
}

static void test_init_dir_and_refuse_overwrite(void **state)
{
    struct fx *f = *state;
    char dir[512], key[1024], jwks[1024];
    snprintf(dir, sizeof dir, "%s/data", f->dir);
    snprintf(key, sizeof key, "%s/" KEYS_PRIVATE_FILE, dir);
    snprintf(jwks, sizeof jwks, "%s/" KEYS_JWKS_FILE, dir);
    struct keys_init_result res;
    char why[TOK_REASON_MAX + KEYS_PATH_MAX];
    assert_int_equal(keys_init_dir(dir, false, &res, why, sizeof why), AL_OK);
    assert_int_equal(mode_of(dir), 0700);
    assert_int_equal(mode_of(key), 0600);
    assert_int_equal(mode_of(jwks), 0644);
    assert_int_equal(res.jwks_keys, 1);
    struct keys_signing *k = load_key(dir);
    assert_string_equal(keys_kid(k), res.kid);
    struct tok_keyset *ks = load_jwks(dir);
    const char *kid = NULL;
    assert_int_equal(tok_keyset_count(ks), 1);
    assert_int_equal(tok_keyset_get(ks, 0, &kid, NULL), AL_OK);
    assert_string_equal(kid, res.kid);
    char tok[TOK_MAX_TOKEN + 1];
    size_t len = 0;
    mint(k, tok, sizeof tok, &len);
    assert_int_equal(verify_with(ks, tok, len), AL_OK);
    tok_keyset_free(ks);

    /* Second keygen refuses and changes nothing. */
    struct keys_init_result res2;
    assert_int_equal(keys_init_dir(dir, false, &res2, why, sizeof why), AL_E_EXISTS);
    assert_non_null(strstr(why, "already exists"));
    assert_non_null(strstr(why, "--rotate"));
    struct keys_signing *again = load_key(dir);
    assert_string_equal(keys_kid(again), keys_kid(k));
    keys_free(again);
    /* No temporary file left behind. */
    char tmp[KEYS_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.new", key);
    assert_int_equal(access(tmp, F_OK), -1);
    snprintf(tmp, sizeof tmp, "%s.new", jwks);
    assert_int_equal(access(tmp, F_OK), -1);
    keys_free(k);

    /* A parent that does not exist, a path that is a file. */
    char bad[KEYS_PATH_MAX];
    snprintf(bad, sizeof bad, "%s/no/such", f->dir);
    assert_int_equal(keys_init_dir(bad, false, &res2, why, sizeof why), AL_E_NOENT);
    assert_int_equal(keys_init_dir(key, false, &res2, why, sizeof why), AL_E_IO);
    assert_non_null(strstr(why, "not a directory"));
}

static void test_rotate(void **state)
{
    struct fx *f = *state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/rot", f->dir);
    struct keys_init_result r1, r2, r3;
    char why[TOK_REASON_MAX + KEYS_PATH_MAX];
    /* --rotate on an empty directory is a plain keygen. */
    assert_int_equal(keys_init_dir(dir, true, &r1, why, sizeof why), AL_OK);
    assert_int_equal(r1.jwks_keys, 1);
    struct keys_signing *k1 = load_key(dir);
    char t1[TOK_MAX_TOKEN + 1];
    size_t l1 = 0;
    mint(k1, t1, sizeof t1, &l1);

    assert_int_equal(keys_init_dir(dir, true, &r2, why, sizeof why), AL_OK);
    assert_int_equal(r2.jwks_keys, 2);
    assert_string_not_equal(r1.kid, r2.kid);
    struct keys_signing *k2 = load_key(dir);
    assert_string_equal(keys_kid(k2), r2.kid);
    char t2[TOK_MAX_TOKEN + 1];
    size_t l2 = 0;
    mint(k2, t2, sizeof t2, &l2);

    /* Both the old token and the new one verify; the new key is first. */
    struct tok_keyset *ks = load_jwks(dir);
    const char *kid = NULL;
    assert_int_equal(tok_keyset_get(ks, 0, &kid, NULL), AL_OK);
    assert_string_equal(kid, r2.kid);
    assert_int_equal(tok_keyset_get(ks, 1, &kid, NULL), AL_OK);
    assert_string_equal(kid, r1.kid);
    assert_int_equal(verify_with(ks, t1, l1), AL_OK);
    assert_int_equal(verify_with(ks, t2, l2), AL_OK);
    tok_keyset_free(ks);

    assert_int_equal(keys_init_dir(dir, true, &r3, why, sizeof why), AL_OK);
    assert_int_equal(r3.jwks_keys, 3);
    /* Bounded: after many rotations the oldest keys drop out. */
    for (int i = 0; i < TOK_MAX_KEYS + 2; i++)
        assert_int_equal(keys_init_dir(dir, true, &r3, why, sizeof why), AL_OK);
    assert_int_equal(r3.jwks_keys, TOK_MAX_KEYS);
    ks = load_jwks(dir);
    assert_int_equal(tok_keyset_count(ks), TOK_MAX_KEYS);
    assert_int_equal(verify_with(ks, t1, l1), AL_E_KID);
    tok_keyset_free(ks);

    /* Rotation refuses to read an unsafe current key. */
    char key[1024];
    snprintf(key, sizeof key, "%s/" KEYS_PRIVATE_FILE, dir);
    assert_int_equal(chmod(key, 0644), 0);
    assert_int_equal(keys_init_dir(dir, true, &r3, why, sizeof why), AL_E_PERM);
    keys_free(k1);
    keys_free(k2);
}

static void test_rotate_keeps_key_missing_from_jwks(void **state)
{
    struct fx *f = *state;
    char dir[512], jwks[1024];
    snprintf(dir, sizeof dir, "%s/lost", f->dir);
    snprintf(jwks, sizeof jwks, "%s/" KEYS_JWKS_FILE, dir);
    struct keys_init_result r1, r2;
    assert_int_equal(keys_init_dir(dir, false, &r1, NULL, 0), AL_OK);
    /* jwks.json lost: rotation republishes the old key from its private half. */
    assert_int_equal(unlink(jwks), 0);
    assert_int_equal(keys_init_dir(dir, true, &r2, NULL, 0), AL_OK);
    assert_int_equal(r2.jwks_keys, 2);
    /* A corrupt jwks.json stops rotation with a clear reason. */
    write_text(jwks, "{\"keys\":[", 0644);
    char why[TOK_REASON_MAX + KEYS_PATH_MAX];
    assert_int_equal(keys_init_dir(dir, true, &r2, why, sizeof why), AL_E_FORMAT);
    assert_non_null(strstr(why, KEYS_JWKS_FILE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc8037_thumbprint_and_signature),
        cmocka_unit_test(test_mint_exact_and_verify),
        cmocka_unit_test(test_mint_random_jti),
        cmocka_unit_test(test_mint_refusals),
        cmocka_unit_test_setup_teardown(test_private_key_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_private_key_perms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_private_key_bad_files, setup, teardown),
        cmocka_unit_test(test_jwks_json),
        cmocka_unit_test_setup_teardown(test_init_dir_and_refuse_overwrite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotate_keeps_key_missing_from_jwks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
