/*
 * Fuzz target: the credential proxy's request path, as an agent drives it:
 * bytes of one connection through proxyreq (src/control/proxyreq.c), each
 * head through proxypol's routing, allow-list and header rewriting
 * (src/control/proxypol.c) against a fixed configuration. The first byte
 * sets the size of the pieces the rest is fed in, so that every split of
 * a request is reached.
 * Oracle: no crash or leak; a refusal is one of the statuses of the
 * contract; a routed call's URL is its upstream's base URL followed by a
 * path of the upstream; no forwarded header is one the proxy drops, and
 * the only credential header forwarded is the one it adds.
 */
#include "../src/control/proxycfg.c" // NOLINT(bugprone-suspicious-include)
#include "../src/control/proxypol.c" // NOLINT(bugprone-suspicious-include)
#include "../src/control/proxyreq.c" // NOLINT(bugprone-suspicious-include)

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct proxycfg cfg;
static int cfg_ready;

static void cfg_init(void)
{
    const char *lines[][2] = {
        {"upstream.anthropic.url", "http://127.0.0.1:9"},
        {"upstream.anthropic.kind", "anthropic"},
        {"upstream.anthropic.header", "x-api-key"},
        {"upstream.anthropic.secret-file", "/k"},
        {"upstream.anthropic.paths", "/v1/"},
        {"upstream.git.url", "https://git.example/base"},
        {"upstream.git.kind", "git"},
        {"upstream.git.header", "basic"},
        {"upstream.git.secret-file", "/k"},
    };
    proxycfg_init(&cfg);
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (proxycfg_set(&cfg, lines[i][0], lines[i][1], NULL, 0) != AL_OK)
            abort();
    if (proxycfg_finish(&cfg, NULL, 0) != AL_OK)
        abort();
    cfg_ready = 1;
}

static int each_header(void *ud, const char *name, const char *value)
{
    int *auth = ud;
    (void)value;
    if (strcmp(name, "authorization") == 0 || strcmp(name, "x-api-key") == 0)
        (*auth)++;
    else if (proxypol_header_dropped(name))
        abort();
    return 0;
}

static int on_event(void *ud, enum proxyreq_ev ev, const struct proxyreq_head *h, const uint8_t *p,
                    size_t n)
{
    (void)ud;
    (void)p;
    (void)n;
    if (ev != PROXYREQ_HEAD)
        return 0;
    static struct proxypol_call c;
    char why[256];
    int st = proxypol_route(&cfg, h, &c, why, sizeof why);
    if (st == 0)
        st = proxypol_allowed(&c, h, why, sizeof why);
    if (st != 0) {
        if (st != 400 && st != 401 && st != 403 && st != 404 && st != 414 && st != 501)
            abort();
        return 0;
    }
    size_t ul = strlen(c.up->url);
    if (strncmp(c.url, c.up->url, ul) != 0 || strcmp(c.url + ul, c.path) != 0 || c.path[0] != '/')
        abort();
    int auth = 0;
    if (proxypol_headers(&c, h, "secret", each_header, &auth) != 0 || auth != 1)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!cfg_ready)
        cfg_init();
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] + 1;
    struct proxyreq *r;
    if (proxyreq_new(4096, on_event, NULL, &r) != AL_OK)
        return 0;
    size_t at = 1;
    for (int guard = 0; at < size && guard < 100000; guard++) {
        size_t n = size - at < step ? size - at : step, used = 0;
        int status = 0;
        int rc = proxyreq_feed(r, data + at, n, &used, &status, NULL, 0);
        if (used > n)
            abort();
        at += used;
        if (rc == AL_E_AGAIN) {
            if (used == 0 && status == 0) {
                /* paused after a request: the answer went out, read the next */
                proxyreq_next(r);
                size_t u2 = 0;
                int rc2 = proxyreq_feed(r, data + at, size - at < step ? size - at : step, &u2,
                                        &status, NULL, 0);
                at += u2;
                if (rc2 == AL_E_AGAIN && u2 == 0)
                    break; /* an upgrade: nothing after it is HTTP */
                if (rc2 != AL_OK && rc2 != AL_E_AGAIN)
                    break;
            } else {
                proxyreq_next(r);
            }
        } else if (rc != AL_OK) {
            if (status < 400 || status > 505)
                abort();
            break;
        }
    }
    proxyreq_free(r);
    return 0;
}
