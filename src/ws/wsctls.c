/*
 * wsctls: TLS over memory BIOs for a client link (see wsctls.h).
 *
 * OpenSSL's error queue is per thread and shared with libwebsockets (the
 * listener's TLS): every call here starts with it empty and leaves it
 * empty, so that one connection's error never shows up as another's.
 */
#include "wsctls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"

struct wsctls {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    int established;
    int shut;
    char why[WSCTLS_WHY_MAX];
};

/* The reason of the oldest error queued, or dflt; the queue emptied. */
static void queue_why(char *why, size_t cap, const char *prefix, const char *dflt)
{
    unsigned long e = ERR_get_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    (void)snprintf(why, cap, "%s%s", prefix, r ? r : dflt);
    ERR_clear_error();
}

SSL_CTX *wsctls_ctx_new(const char *ca_file, int insecure, char *why, size_t cap)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        queue_why(why, cap, "cannot make a TLS context: ", "out of memory");
        return NULL;
    }
    int ok = SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1;
    if (ok && !insecure)
        ok = ca_file ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) == 1
                     : SSL_CTX_set_default_verify_paths(ctx) == 1;
    if (!ok) {
        queue_why(why, cap, ca_file ? "cannot load the CA file: " : "cannot load the CA store: ",
                  "unknown error");
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    /* the link's writes are whole messages through a memory BIO */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
    return ctx;
}

/* The name the certificate must carry: an address literal as an address
 * (no SNI), else a DNS name (SNI sent). 0, or -1. */
static int set_peer(SSL *ssl, const char *host, int verify)
{
    unsigned char addr[sizeof(struct in6_addr)];
    int literal = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    if (!literal && SSL_set_tlsext_host_name(ssl, host) != 1)
        return -1;
    if (!verify)
        return 0;
    X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
    if (literal)
        return X509_VERIFY_PARAM_set1_ip_asc(vp, host) == 1 ? 0 : -1;
    X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return SSL_set1_host(ssl, host) == 1 ? 0 : -1;
}

struct wsctls *wsctls_new(SSL_CTX *ctx, const char *host)
{
    if (!ctx || !host || !host[0])
        return NULL;
    ERR_clear_error();
    struct wsctls *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ssl = SSL_new(ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    /* an empty read BIO says "retry", not end of file */
    BIO_set_mem_eof_return(t->rbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_connect_state(t->ssl);
    int verify = SSL_CTX_get_verify_mode(ctx) != SSL_VERIFY_NONE;
    if (set_peer(t->ssl, host, verify) != 0) {
        wsctls_free(t);
        ERR_clear_error();
        return NULL;
    }
    (void)SSL_do_handshake(t->ssl); /* the ClientHello, into the write BIO */
    ERR_clear_error();
    return t;
}

void wsctls_free(struct wsctls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl); /* and its BIOs */
    free(t);
}

/* A failed SSL call's reason into t->why; AL_E_PROTO, or AL_E_CLOSED at
 * the peer's close_notify. */
static int failed(struct wsctls *t, int ret)
{
    int e = SSL_get_error(t->ssl, ret);
    if (e == SSL_ERROR_ZERO_RETURN) {
        (void)snprintf(t->why, sizeof t->why, "the server closed TLS (close_notify)");
        ERR_clear_error();
        return AL_E_CLOSED;
    }
    if (!t->established) {
        long vr = SSL_get_verify_result(t->ssl);
        if (vr != X509_V_OK) {
            (void)snprintf(t->why, sizeof t->why, "TLS: the server's certificate is refused: %s",
                           X509_verify_cert_error_string(vr));
            ERR_clear_error();
            return AL_E_PROTO;
        }
    }
    queue_why(t->why, sizeof t->why,
              t->established ? "TLS: the connection failed: " : "TLS handshake failed: ",
              "the server broke the protocol");
    return AL_E_PROTO;
}

static int want_more(struct wsctls *t, int ret)
{
    int e = SSL_get_error(t->ssl, ret);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

int wsctls_receive(struct wsctls *t, const uint8_t *in, size_t len, wsctls_deliver deliver,
                   void *ud)
{
    if (t->why[0])
        return AL_E_PROTO;
    ERR_clear_error();
    if (len && BIO_write(t->rbio, in, (int)len) != (int)len) {
        ERR_clear_error();
        return AL_E_NOMEM;
    }
    if (!t->established) {
        int r = SSL_do_handshake(t->ssl);
        if (r != 1) {
            if (want_more(t, r)) {
                ERR_clear_error();
                return AL_OK;
            }
            return failed(t, r);
        }
        t->established = 1;
    }
    for (;;) {
        uint8_t buf[WSCTLS_READ_MAX];
        int n = SSL_read(t->ssl, buf, sizeof buf);
        if (n <= 0) {
            if (want_more(t, n)) {
                ERR_clear_error();
                return AL_OK;
            }
            return failed(t, n);
        }
        int rc = deliver(ud, buf, (size_t)n);
        if (rc)
            return rc;
    }
}

int wsctls_write(struct wsctls *t, const uint8_t *plain, size_t len)
{
    if (!t->established || t->shut || t->why[0])
        return AL_E_STATE;
    ERR_clear_error();
    size_t off = 0;
    while (off < len) { /* a memory BIO takes everything */
        size_t w = 0;
        if (SSL_write_ex(t->ssl, plain + off, len - off, &w) != 1 || !w) {
            (void)failed(t, 0);
            return AL_E_PROTO;
        }
        off += w;
    }
    return AL_OK;
}

void wsctls_shutdown(struct wsctls *t)
{
    if (t->shut || !t->established)
        return;
    t->shut = 1;
    ERR_clear_error();
    (void)SSL_shutdown(t->ssl); /* 0: ours queued, the peer's not awaited */
    ERR_clear_error();
}

size_t wsctls_output(struct wsctls *t, uint8_t *buf, size_t cap)
{
    int n = BIO_read(t->wbio, buf, cap > (size_t)INT32_MAX ? INT32_MAX : (int)cap);
    return n > 0 ? (size_t)n : 0;
}

int wsctls_pending(const struct wsctls *t)
{
    return BIO_ctrl_pending(t->wbio) > 0;
}

int wsctls_established(const struct wsctls *t)
{
    return t->established;
}

int wsctls_shutdown_sent(const struct wsctls *t)
{
    return t->shut;
}

const char *wsctls_why(const struct wsctls *t)
{
    return t->why;
}
