/*
 * Fuzz target: what a server sends a wss:// dial (src/ws/wsctls.c: our
 * glue around OpenSSL's client over memory BIOs), as whatever answers at
 * a runner's --connect address or a static sandbox's url may send it. The
 * first byte sets the size of the pieces the rest is fed in, so that every
 * split of a flight is reached. The context trusts no CA at all (an empty
 * store), so no input can be accepted as a server.
 * Oracle: no crash or leak; the handshake never completes and no
 * plaintext is ever handed up; a failure has a one-line reason and stays
 * a failure; what we would send back stays bounded.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "wsctls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_MAX 65536 /* bytes of one read of what we would send */

static int deliver(void *ud, const uint8_t *plain, size_t len)
{
    (void)ud;
    (void)plain;
    (void)len;
    abort(); /* nothing is trusted: no plaintext can come */
}

static SSL_CTX *context(void)
{
    static SSL_CTX *ctx;
    if (!ctx) {
        char why[WSCTLS_WHY_MAX];
        ctx = wsctls_ctx_new(NULL, 0, why, sizeof why);
        if (!ctx)
            abort();
        SSL_CTX_set_cert_store(ctx, X509_STORE_new()); /* no CA at all */
    }
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)data[0] * 7 + 1;
    data++;
    size--;
    struct wsctls *t = wsctls_new(context(), (size & 1) ? "localhost" : "127.0.0.1");
    if (!t)
        abort();
    static uint8_t out[OUT_MAX];
    size_t off = 0;
    int failed = 0;
    while (off < size) {
        size_t n = size - off < piece ? size - off : piece;
        while (wsctls_pending(t))
            (void)wsctls_output(t, out, sizeof out);
        int rc = wsctls_receive(t, data + off, n, deliver, NULL);
        off += n;
        if (wsctls_established(t))
            abort();
        if (rc != AL_OK) {
            if (!wsctls_why(t)[0] || strchr(wsctls_why(t), '\n'))
                abort();
            failed = 1;
            break;
        }
    }
    if (failed && wsctls_receive(t, data, size, deliver, NULL) == AL_OK)
        abort(); /* a failure stays one */
    if (wsctls_write(t, (const uint8_t *)"x", 1) != AL_E_STATE)
        abort(); /* nothing is written before the handshake */
    wsctls_free(t);
    return 0;
}
