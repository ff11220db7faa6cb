/*
 * proxypol: the credential proxy's rules, as tables where they are tables
 * (the headers never forwarded, the ways an agent's credential is sent),
 * and as one function per check otherwise.
 *
 * Paths are compared as sent, never decoded: a path that would decode to
 * something else than it reads ("%2e%2e", "%2f", "%5c", "%00") is refused
 * outright, as are "." and ".." segments, empty segments, backslashes and
 * control characters, so that the prefix an upstream allows is the prefix
 * the upstream sees.
 */
#include "proxypol.h"

#include "al_err.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Headers that are never forwarded upstream: hop-by-hop headers (RFC 9110
 * 7.6.1), what libcurl sets itself, and every way to carry a credential. */
static const char *const dropped[] = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "expect",
    "authorization",
    "x-api-key",
    "cookie",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
};

int proxypol_header_dropped(const char *name)
{
    for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
        if (strcmp(dropped[i], name) == 0)
            return 1;
    return 0;
}

/* A credential of ours: [A-Za-z0-9_-], 1..PROXYPOL_CRED_MAX bytes. */
static int cred_ok(const char *s, size_t n)
{
    if (n == 0 || n > PROXYPOL_CRED_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_'))
            return 0;
    }
    return 1;
}

/* The credential carried by one header, or 0 when the header carries none.
 * -1: it carries something that is not one of ours. */
static int cred_of(const struct proxyreq_hdr *hd, char *out, size_t cap)
{
    const char *v = hd->value;
    const char *c = NULL;
    size_t n = 0;
    char basic[3 * PROXYPOL_CRED_MAX];
    if (strcmp(hd->name, "x-api-key") == 0) {
        c = v;
        n = strlen(v);
    } else if (strcmp(hd->name, "authorization") == 0) {
        if (strncasecmp(v, "Bearer ", 7) == 0) {
            c = v + 7;
            n = strlen(c);
        } else if (strncasecmp(v, "Basic ", 6) == 0) {
            const char *b = v + 6;
            size_t bl = strlen(b);
            if (bl == 0 || bl % 4 != 0 || bl / 4 * 3 >= sizeof basic)
                return -1;
            /* base64's padding: at most two '=', at the end only (an agent's
             * header: "eD====…" once made the decoded length negative) */
            size_t pad = 0;
            while (pad < bl && b[bl - 1 - pad] == '=')
                pad++;
            if (pad > 2 || memchr(b, '=', bl - pad))
                return -1;
            int dl = EVP_DecodeBlock((unsigned char *)basic, (const unsigned char *)b, (int)bl);
            if (dl < (int)pad)
                return -1;
            dl -= (int)pad; /* EVP_DecodeBlock counts padding as zeros */
            basic[dl] = '\0';
            const char *colon = memchr(basic, ':', (size_t)dl);
            if (!colon)
                return -1;
            c = colon + 1;
            n = (size_t)dl - (size_t)(colon + 1 - basic);
        } else {
            return -1;
        }
    } else {
        return 0;
    }
    if (!cred_ok(c, n) || n >= cap)
        return -1;
    memcpy(out, c, n);
    out[n] = '\0';
    return 1;
}

/* Bytes a path or query may hold: visible ASCII but '#' and '\\'. */
static int char_ok(unsigned char ch)
{
    return ch > ' ' && ch < 0x7f && ch != '#' && ch != '\\';
}

/* Escapes an upstream may decode into a path separator or a dot: '.',
 * '/', '\\', NUL, '%' itself, and the lead bytes of overlong UTF-8 forms of
 * them (%c0%ae is '.' to a decoder that does not check; %c0 and %c1 lead
 * no valid UTF-8 at all, %e0%80-%e0%9f and %f0%80-%f0%8f only overlong
 * ones). Prefixes, compared without case. */
static const char *const bad_escapes[] = {"%2e", "%2f", "%5c",   "%00",   "%25",
                                          "%c0", "%c1", "%e0%8", "%e0%9", "%f0%8"};

static int path_ok(const char *p, size_t n, const char **why)
{
    for (size_t i = 0; i < n; i++) {
        if (!char_ok((unsigned char)p[i])) {
            *why = "the path holds a space, a control character, '#', '\\' or a non-ASCII byte";
            return 0;
        }
        for (size_t k = 0; p[i] == '%' && k < sizeof bad_escapes / sizeof bad_escapes[0]; k++) {
            size_t bl = strlen(bad_escapes[k]);
            if (n - i >= bl && strncasecmp(p + i, bad_escapes[k], bl) == 0) {
                *why = "the path holds an encoded '.', '/', '\\', '%', NUL or an overlong UTF-8 "
                       "byte";
                return 0;
            }
        }
    }
    /* segments: none empty (but a final '/'), none "." or "..", nor one
     * of these with parameters (";x": some servers drop them, and "..;"
     * is ".." there) */
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && p[j] != '/')
            j++;
        const char *seg = p + i + 1;
        size_t len = j - i - 1; /* after the '/' */
        const char *semi = memchr(seg, ';', len);
        if (semi && semi > seg)
            len = (size_t)(semi - seg);
        if ((len == 0 && j < n) || (len == 1 && seg[0] == '.') ||
            (len == 2 && seg[0] == '.' && seg[1] == '.')) {
            *why = "the path holds an empty, '.' or '..' segment";
            return 0;
        }
        i = j;
    }
    return 1;
}

int proxypol_route(const struct proxycfg *cfg, const struct proxyreq_head *h,
                   struct proxypol_call *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    const char *t = h->target;
    if (!proxycfg_method_bit(h->method)) {
        al_errf(why, cap, "method %s is never proxied", h->method);
        return strcmp(h->method, "CONNECT") == 0 ? 400 : 501;
    }
    if (h->upgrade) {
        /* 426, not 501: a client that prefers a WebSocket (Codex on
         * /v1/responses) takes 426 as "use plain HTTP" and falls back at
         * once, where it retries a 501 five times first. */
        al_errf(why, cap, "protocol upgrades (WebSocket) are not proxied: use HTTPS");
        return PROXYPOL_UPGRADE_REFUSED;
    }
    if (!t || t[0] != '/') {
        al_errf(why, cap, "only origin-form targets (\"/v1/proxy/NAME/...\") are accepted");
        return 400;
    }
    size_t plen = strlen(PROXYPOL_PREFIX);
    if (strncmp(t, PROXYPOL_PREFIX, plen) != 0) {
        al_errf(why, cap, "not a proxy path: targets start with %s", PROXYPOL_PREFIX);
        return 404;
    }
    const char *name = t + plen;
    size_t nlen = strcspn(name, "/?");
    char nm[PROXY_NAME_MAX + 1];
    if (nlen == 0 || nlen > PROXY_NAME_MAX) {
        al_errf(why, cap, "no such upstream");
        return 404;
    }
    memcpy(nm, name, nlen);
    nm[nlen] = '\0';
    const struct proxy_upstream *up = proxycfg_find(cfg, nm);
    if (!up) {
        al_errf(why, cap, "no such upstream");
        return 404;
    }
    const char *rest = name + nlen;
    char path[PROXYPOL_PATH_MAX + 2];
    size_t rl = strlen(rest);
    if (rl + 1 > PROXYPOL_PATH_MAX) {
        al_errf(why, cap, "the path is longer than %d bytes", PROXYPOL_PATH_MAX);
        return 414;
    }
    if (rest[0] != '/') { /* "/v1/proxy/NAME" or "/v1/proxy/NAME?q" */
        path[0] = '/';
        memcpy(path + 1, rest, rl + 1);
        rl++;
    } else {
        memcpy(path, rest, rl + 1);
    }
    size_t pathlen = strcspn(path, "?");
    const char *bad = NULL;
    if (!path_ok(path, pathlen, &bad)) {
        al_errf(why, cap, "%s", bad);
        return 400;
    }
    for (size_t i = pathlen; i < rl; i++) {
        if (!char_ok((unsigned char)path[i]) && path[i] != '\\') {
            al_errf(why, cap, "the query holds a space, a control character or '#'");
            return 400;
        }
    }
    for (unsigned i = 0; i < h->nhdr; i++) {
        for (const unsigned char *v = (const unsigned char *)h->hdr[i].value; *v; v++) {
            if ((*v < ' ' && *v != '\t') || *v == 0x7f) {
                al_errf(why, cap, "header %s holds a control character", h->hdr[i].name);
                return 400;
            }
        }
    }
    /* the credential: every header that carries one must carry the same */
    for (unsigned i = 0; i < h->nhdr; i++) {
        char c[PROXYPOL_CRED_MAX + 1];
        int k = cred_of(&h->hdr[i], c, sizeof c);
        if (k < 0) {
            al_errf(why, cap, "header %s does not carry an Airlock proxy credential",
                    h->hdr[i].name);
            return 401;
        }
        if (k == 1 && out->credential[0] && strcmp(out->credential, c) != 0) {
            al_errf(why, cap, "two different credentials in one request");
            return 401;
        }
        if (k == 1)
            memcpy(out->credential, c, strlen(c) + 1);
    }
    if (!out->credential[0]) {
        al_errf(why, cap, "no credential (Authorization: Bearer, x-api-key or Basic)");
        return 401;
    }
    out->up = up;
    memcpy(out->path, path, rl + 1);
    int w = snprintf(out->url, sizeof out->url, "%s%s", up->url, path);
    if (w < 0 || (size_t)w >= sizeof out->url) {
        al_errf(why, cap, "the URL is too long");
        return 414;
    }
    return 0;
}

int proxypol_allowed(const struct proxypol_call *c, const struct proxyreq_head *h, char *why,
                     size_t cap)
{
    const struct proxy_upstream *up = c->up;
    if (!(up->methods & proxycfg_method_bit(h->method))) {
        al_errf(why, cap, "upstream %s does not allow %s", up->name, h->method);
        return 403;
    }
    size_t pathlen = strcspn(c->path, "?");
    for (unsigned i = 0; i < up->nprefixes; i++) {
        size_t n = strlen(up->prefixes[i]);
        if (pathlen >= n && strncmp(c->path, up->prefixes[i], n) == 0)
            return 0;
    }
    al_errf(why, cap, "upstream %s does not allow this path", up->name);
    return 403;
}

/* Whether the Connection header's list names `name`. */
static int named_by_connection(const struct proxyreq_head *h, const char *name)
{
    size_t n = strlen(name);
    for (unsigned i = 0; i < h->nhdr; i++) {
        if (strcmp(h->hdr[i].name, "connection") != 0)
            continue;
        for (const char *p = h->hdr[i].value; *p;) {
            while (*p == ' ' || *p == ',' || *p == '\t')
                p++;
            size_t l = strcspn(p, " ,\t");
            if (l == n && strncasecmp(p, name, n) == 0)
                return 1;
            p += l;
        }
    }
    return 0;
}

enum { AUTH_VALUE_MAX = 8 + 4 * ((PROXY_USER_MAX + 1 + PROXY_SECRET_MAX + 2) / 3) + 1 };

int proxypol_headers(const struct proxypol_call *c, const struct proxyreq_head *h,
                     const char *secret, proxypol_header_fn *fn, void *ud)
{
    for (unsigned i = 0; i < h->nhdr; i++) {
        const char *nm = h->hdr[i].name;
        if (proxypol_header_dropped(nm) || named_by_connection(h, nm))
            continue;
        int rc = fn(ud, nm, h->hdr[i].value);
        if (rc != 0)
            return rc;
    }
    char v[AUTH_VALUE_MAX];
    size_t sl = strlen(secret);
    switch (c->up->header) {
    case PROXY_HEADER_XAPIKEY: {
        if (sl + 1 > sizeof v)
            return AL_E_TOOBIG;
        memcpy(v, secret, sl + 1);
        int rc = fn(ud, "x-api-key", v);
        OPENSSL_cleanse(v, sizeof v);
        return rc;
    }
    case PROXY_HEADER_BEARER: {
        int w = snprintf(v, sizeof v, "Bearer %s", secret);
        if (w < 0 || (size_t)w >= sizeof v)
            return AL_E_TOOBIG;
        int rc = fn(ud, "authorization", v);
        OPENSSL_cleanse(v, sizeof v);
        return rc;
    }
    case PROXY_HEADER_BASIC: {
        char plain[PROXY_USER_MAX + 1 + PROXY_SECRET_MAX + 1];
        int pl = snprintf(plain, sizeof plain, "%s:%s", c->up->basic_user, secret);
        if (pl < 0 || (size_t)pl >= sizeof plain)
            return AL_E_TOOBIG;
        int w = snprintf(v, sizeof v, "Basic ");
        /* EVP_EncodeBlock writes the base64 text and its NUL */
        EVP_EncodeBlock((unsigned char *)v + w, (const unsigned char *)plain, pl);
        OPENSSL_cleanse(plain, sizeof plain);
        int rc = fn(ud, "authorization", v);
        OPENSSL_cleanse(v, sizeof v);
        return rc;
    }
    }
    return AL_E_INVAL;
}
