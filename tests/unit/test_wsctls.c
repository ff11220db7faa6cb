/*
 * Unit tests: wsctls (src/ws/wsctls.c), the client TLS of a wss:// dial,
 * against a real OpenSSL server in the same process: the two sides' bytes
 * are carried between them by hand (the client's memory BIOs, the
 * server's own). The server's certificate is made here (P-256, for
 * localhost and 127.0.0.1) and is the client's only CA, in a PEM file as
 * the CA file option takes it.
 */
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "al_err.h"
#include "wsctls.h"

#define PUMP_ROUNDS 20 /* a handshake takes two or three; a bound */

struct fix {
    EVP_PKEY *key;
    X509 *cert, *other; /* the server's; another self-signed one */
    char ca[64], other_ca[64];
    SSL_CTX *sctx;
    SSL *srv;
    BIO *srv_in, *srv_out; /* owned by srv */
    char got[256];         /* plaintext the client was handed */
    size_t got_len;
};

static X509 *make_cert(EVP_PKEY *key, const char *cn)
{
    X509 *x = X509_new();
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, n);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *e =
        X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
    assert_non_null(e);
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    return x;
}

static void write_pem(char *path, size_t cap, X509 *x)
{
    (void)snprintf(path, cap, "/tmp/test_wsctls.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    assert_true(PEM_write_X509(f, x) == 1);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof *f);
    f->key = EVP_EC_gen("P-256");
    f->cert = make_cert(f->key, "localhost");
    EVP_PKEY *k2 = EVP_EC_gen("P-256");
    f->other = make_cert(k2, "localhost");
    EVP_PKEY_free(k2);
    write_pem(f->ca, sizeof f->ca, f->cert);
    write_pem(f->other_ca, sizeof f->other_ca, f->other);
    f->sctx = SSL_CTX_new(TLS_server_method());
    assert_true(SSL_CTX_use_certificate(f->sctx, f->cert) == 1);
    assert_true(SSL_CTX_use_PrivateKey(f->sctx, f->key) == 1);
    f->srv = SSL_new(f->sctx);
    f->srv_in = BIO_new(BIO_s_mem());
    f->srv_out = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(f->srv_in, -1);
    SSL_set_bio(f->srv, f->srv_in, f->srv_out);
    SSL_set_accept_state(f->srv);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    SSL_free(f->srv);
    SSL_CTX_free(f->sctx);
    X509_free(f->cert);
    X509_free(f->other);
    EVP_PKEY_free(f->key);
    (void)unlink(f->ca);
    (void)unlink(f->other_ca);
    free(f);
    ERR_clear_error();
    return 0;
}

static int deliver(void *ud, const uint8_t *p, size_t n)
{
    struct fix *f = ud;
    assert_true(f->got_len + n <= sizeof f->got);
    memcpy(f->got + f->got_len, p, n);
    f->got_len += n;
    return 0;
}

/* Carry bytes both ways until neither side has any: the client's last
 * wsctls_receive result (0 when nothing reached it). */
static int pump(struct fix *f, struct wsctls *t)
{
    int rc = AL_OK;
    for (int i = 0; i < PUMP_ROUNDS; i++) {
        uint8_t buf[16384];
        int moved = 0;
        size_t n;
        while ((n = wsctls_output(t, buf, sizeof buf)) > 0) {
            assert_int_equal(BIO_write(f->srv_in, buf, (int)n), (int)n);
            moved = 1;
        }
        if (!SSL_is_init_finished(f->srv))
            (void)SSL_do_handshake(f->srv);
        int r;
        while ((r = BIO_read(f->srv_out, buf, sizeof buf)) > 0) {
            rc = wsctls_receive(t, buf, (size_t)r, deliver, f);
            moved = 1;
            if (rc != AL_OK)
                return rc;
        }
        if (!moved)
            break;
    }
    return rc;
}

static struct wsctls *dial(struct fix *f, const char *ca, int insecure, const char *host)
{
    char why[WSCTLS_WHY_MAX];
    SSL_CTX *ctx = wsctls_ctx_new(ca, insecure, why, sizeof why);
    assert_non_null(ctx);
    struct wsctls *t = wsctls_new(ctx, host);
    SSL_CTX_free(ctx); /* each SSL holds its own reference */
    assert_non_null(t);
    (void)f;
    return t;
}

static void test_handshake_data_and_sni(void **state)
{
    struct fix *f = *state;
    struct wsctls *t = dial(f, f->ca, 0, "localhost");
    assert_int_equal(wsctls_write(t, (const uint8_t *)"x", 1), AL_E_STATE); /* not yet */
    assert_int_equal(pump(f, t), AL_OK);
    assert_true(wsctls_established(t));
    assert_string_equal(SSL_get_servername(f->srv, TLSEXT_NAMETYPE_host_name), "localhost");
    assert_true(SSL_version(f->srv) >= TLS1_2_VERSION);
    assert_int_equal(wsctls_write(t, (const uint8_t *)"hello", 5), AL_OK);
    assert_int_equal(pump(f, t), AL_OK);
    char in[16] = "";
    assert_int_equal(SSL_read(f->srv, in, sizeof in), 5);
    assert_memory_equal(in, "hello", 5);
    assert_int_equal(SSL_write(f->srv, "world", 5), 5);
    assert_int_equal(pump(f, t), AL_OK);
    assert_int_equal(f->got_len, 5);
    assert_memory_equal(f->got, "world", 5);
    /* our close_notify reaches the server as the end of the stream */
    wsctls_shutdown(t);
    assert_true(wsctls_shutdown_sent(t));
    assert_int_equal(pump(f, t), AL_OK);
    assert_true(SSL_read(f->srv, in, sizeof in) <= 0);
    assert_int_equal(SSL_get_error(f->srv, 0), SSL_ERROR_ZERO_RETURN);
    assert_int_equal(wsctls_write(t, (const uint8_t *)"x", 1), AL_E_STATE); /* after it */
    wsctls_free(t);
}

static void test_address_literal_no_sni(void **state)
{
    struct fix *f = *state;
    struct wsctls *t = dial(f, f->ca, 0, "127.0.0.1");
    assert_int_equal(pump(f, t), AL_OK);
    assert_true(wsctls_established(t));
    assert_null(SSL_get_servername(f->srv, TLSEXT_NAMETYPE_host_name));
    wsctls_free(t);
}

static void test_wrong_name_refused(void **state)
{
    struct fix *f = *state;
    struct wsctls *t = dial(f, f->ca, 0, "other.example");
    assert_int_equal(pump(f, t), AL_E_PROTO);
    assert_false(wsctls_established(t));
    assert_non_null(strstr(wsctls_why(t), "hostname mismatch"));
    assert_int_equal(wsctls_receive(t, (const uint8_t *)"x", 1, deliver, f), AL_E_PROTO);
    assert_int_equal(f->got_len, 0);
    wsctls_free(t);
}

static void test_wrong_address_refused(void **state)
{
    struct fix *f = *state;
    struct wsctls *t = dial(f, f->ca, 0, "127.0.0.2");
    assert_int_equal(pump(f, t), AL_E_PROTO);
    assert_non_null(strstr(wsctls_why(t), "IP address mismatch"));
    wsctls_free(t);
}

static void test_untrusted_refused(void **state)
{
    struct fix *f = *state;
    struct wsctls *t = dial(f, f->other_ca, 0, "localhost");
    assert_int_equal(pump(f, t), AL_E_PROTO);
    assert_non_null(strstr(wsctls_why(t), "certificate is refused"));
    assert_null(strchr(wsctls_why(t), '\n'));
    wsctls_free(t);
}

static void test_insecure_skips_checks(void **state)
{
    struct fix *f = *state;
    struct wsctls *t = dial(f, NULL, 1, "other.example");
    assert_int_equal(pump(f, t), AL_OK);
    assert_true(wsctls_established(t));
    wsctls_free(t);
}

static void test_server_close_notify(void **state)
{
    struct fix *f = *state;
    struct wsctls *t = dial(f, f->ca, 0, "localhost");
    assert_int_equal(pump(f, t), AL_OK);
    assert_true(wsctls_established(t));
    (void)SSL_shutdown(f->srv);
    assert_int_equal(pump(f, t), AL_E_CLOSED);
    assert_non_null(strstr(wsctls_why(t), "close_notify"));
    wsctls_free(t);
}

static void test_garbage_refused(void **state)
{
    struct fix *f = *state;
    struct wsctls *t = dial(f, f->ca, 0, "localhost");
    static const char http[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(wsctls_receive(t, (const uint8_t *)http, sizeof http - 1, deliver, f),
                     AL_E_PROTO);
    assert_non_null(strstr(wsctls_why(t), "TLS handshake failed"));
    assert_int_equal(f->got_len, 0);
    wsctls_free(t);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    char why[WSCTLS_WHY_MAX];
    SSL_CTX *ctx = wsctls_ctx_new("/nonexistent/ca.pem", 0, why, sizeof why);
    assert_null(ctx);
    assert_non_null(strstr(why, "cannot load the CA file"));
    ctx = wsctls_ctx_new(NULL, 0, why, sizeof why);
    assert_non_null(ctx);
    assert_null(wsctls_new(ctx, ""));
    assert_null(wsctls_new(ctx, NULL));
    assert_null(wsctls_new(NULL, "localhost"));
    SSL_CTX_free(ctx);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_handshake_data_and_sni),
        T(test_address_literal_no_sni),
        T(test_wrong_name_refused),
        T(test_wrong_address_refused),
        T(test_untrusted_refused),
        T(test_insecure_skips_checks),
        T(test_server_close_notify),
        T(test_garbage_refused),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
