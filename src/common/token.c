/*
 * token: JWKS loading and JWS (EdDSA) verification. See token.h.
 *
 * Data model:
 *   struct tok_keyset holds up to TOK_MAX_KEYS entries, in JWKS order; each
 *   entry owns one OpenSSL public key (EVP_PKEY, Ed25519) built from the
 *   raw 32-byte "x" and a copy of its kid. The set owns every EVP_PKEY and
 *   frees them in tok_keyset_free. Nothing here ever sees a private key.
 *
 *   Verification works on stack buffers sized from the named limits: the
 *   decoded header (at most B64U_DEC_LEN(TOK_MAX_HEADER_B64) bytes), the
 *   decoded claims and the 64-byte signature. The two jansson trees are the
 *   only heap objects and are released on every path (one exit label).
 *
 * Untrusted strings (kid, alg, aud...) are copied into reasons only through
 * tok_quote, which keeps printable ASCII and truncates, so a reason is safe
 * to log.
 */
#include "token.h"

#include "al_err.h"
#include "al_limits.h"
#include "b64url.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    TOK_QUOTE_MAX = 48, /* characters of an untrusted string shown in a reason */
    TOK_HEADER_BUF = B64U_DEC_LEN(TOK_MAX_HEADER_B64),
    TOK_CLAIMS_BUF = B64U_DEC_LEN(TOK_MAX_CLAIMS_B64),
};

/* Any token we accept fits an in-band TOKEN frame of airlock.v1. */
_Static_assert(TOK_MAX_TOKEN <= AL_MAX_TOKEN, "token limit exceeds the protocol's");
_Static_assert(TOK_MAX_HEADER_B64 + 1 + TOK_MAX_CLAIMS_B64 + 1 + TOK_SIG_B64_LEN <= TOK_MAX_TOKEN,
               "segment limits must fit in the token limit");

struct tok_key {
    char kid[TOK_MAX_KID + 1];
    EVP_PKEY *pkey; /* owned */
};

struct tok_keyset {
    size_t n;
    struct tok_key keys[TOK_MAX_KEYS];
};

/* Copy an untrusted string for display: printable ASCII only, '?' for the
 * rest, at most TOK_QUOTE_MAX characters, "..." when cut. */
static void tok_quote(const char *s, char *dst, size_t cap)
{
    size_t o = 0;
    if (cap == 0)
        return;
    for (size_t i = 0; s && s[i] != '\0'; i++) {
        if (i >= TOK_QUOTE_MAX || o + 4 >= cap) {
            if (o + 4 <= cap) {
                memcpy(dst + o, "...", 3);
                o += 3;
            }
            break;
        }
        unsigned char c = (unsigned char)s[i];
        dst[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    dst[o] = '\0';
}

/* ---- scopes ----------------------------------------------------------- */

static bool tok_scope_char(unsigned char c)
{
    /* RFC 6749: %x21 / %x23-5B / %x5D-7E */
    return c >= 0x21 && c <= 0x7e && c != '"' && c != '\\';
}

bool tok_scope_valid(const char *scope)
{
    if (!scope || scope[0] == '\0')
        return false;
    size_t i = 0;
    for (; scope[i] != '\0'; i++) {
        if (!tok_scope_char((unsigned char)scope[i]) || i >= TOK_MAX_SCOPE)
            return false;
    }
    return true;
}

bool tok_scope_list_valid(const char *list)
{
    if (!list || list[0] == '\0')
        return false;
    bool prev_space = true; /* forbids a leading space */
    size_t i = 0;
    for (; list[i] != '\0'; i++) {
        if (i >= TOK_MAX_SCOPE)
            return false;
        unsigned char c = (unsigned char)list[i];
        if (c == ' ') {
            if (prev_space)
                return false; /* leading or double space */
            prev_space = true;
        } else if (tok_scope_char(c)) {
            prev_space = false;
        } else {
            return false;
        }
    }
    return !prev_space; /* no trailing space */
}

bool tok_scope_covers(const char *list, const char *want)
{
    if (!list || !want || want[0] == '\0')
        return false;
    size_t wlen = strlen(want);
    const char *p = list;
    while (*p != '\0') {
        const char *sp = strchr(p, ' ');
        size_t len = sp ? (size_t)(sp - p) : strlen(p);
        if (len == wlen && memcmp(p, want, wlen) == 0)
            return true;
        if (!sp)
            break;
        p = sp + 1;
    }
    return false;
}

/* ---- key set ---------------------------------------------------------- */

void tok_keyset_free(struct tok_keyset *ks)
{
    if (!ks)
        return;
    for (size_t i = 0; i < ks->n; i++)
        EVP_PKEY_free(ks->keys[i].pkey);
    free(ks);
}

size_t tok_keyset_count(const struct tok_keyset *ks)
{
    return ks ? ks->n : 0;
}

int tok_keyset_get(const struct tok_keyset *ks, size_t i, const char **kid, uint8_t x[TOK_KEY_LEN])
{
    if (!ks || i >= ks->n)
        return AL_E_INVAL;
    if (kid)
        *kid = ks->keys[i].kid;
    if (x) {
        size_t len = TOK_KEY_LEN;
        if (EVP_PKEY_get_raw_public_key(ks->keys[i].pkey, x, &len) != 1 || len != TOK_KEY_LEN) {
            ERR_clear_error();
            return AL_E_CRYPTO;
        }
    }
    return AL_OK;
}

static bool tok_kid_valid(const char *kid, size_t len)
{
    if (len == 0 || len > TOK_MAX_KID)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)kid[i];
        if (c < 0x21 || c > 0x7e)
            return false;
    }
    return true;
}

/* Optional string member: absent is fine, present must equal want. */
static bool tok_member_absent_or(json_t *obj, const char *name, const char *want)
{
    json_t *v = json_object_get(obj, name);
    if (!v)
        return true;
    return json_is_string(v) && strcmp(json_string_value(v), want) == 0;
}

static int tok_keyset_add(struct tok_keyset *ks, size_t idx, json_t *jwk, char *reason, size_t cap)
{
    char q[TOK_QUOTE_MAX + 4];
    if (!json_is_object(jwk)) {
        al_errf(reason, cap, "jwks: key %zu is not an object", idx);
        return AL_E_FORMAT;
    }
    json_t *kty = json_object_get(jwk, "kty");
    if (!json_is_string(kty) || strcmp(json_string_value(kty), "OKP") != 0) {
        tok_quote(json_is_string(kty) ? json_string_value(kty) : "(none)", q, sizeof q);
        al_errf(reason, cap, "jwks: key %zu has kty \"%s\"; only OKP is accepted", idx, q);
        return AL_E_FORMAT;
    }
    json_t *crv = json_object_get(jwk, "crv");
    if (!json_is_string(crv) || strcmp(json_string_value(crv), "Ed25519") != 0) {
        tok_quote(json_is_string(crv) ? json_string_value(crv) : "(none)", q, sizeof q);
        al_errf(reason, cap, "jwks: key %zu has crv \"%s\"; only Ed25519 is accepted", idx, q);
        return AL_E_FORMAT;
    }
    if (json_object_get(jwk, "d")) {
        al_errf(reason, cap,
                "jwks: key %zu holds a private part (\"d\"); a JWKS must hold public "
                "keys only",
                idx);
        return AL_E_FORMAT;
    }
    if (!tok_member_absent_or(jwk, "use", "sig")) {
        al_errf(reason, cap, "jwks: key %zu has \"use\" other than \"sig\"", idx);
        return AL_E_FORMAT;
    }
    if (!tok_member_absent_or(jwk, "alg", "EdDSA")) {
        al_errf(reason, cap, "jwks: key %zu has \"alg\" other than \"EdDSA\"", idx);
        return AL_E_FORMAT;
    }
    json_t *kid = json_object_get(jwk, "kid");
    if (!json_is_string(kid) || !tok_kid_valid(json_string_value(kid), json_string_length(kid))) {
        al_errf(reason, cap, "jwks: key %zu needs a kid of 1 to %d printable ASCII characters", idx,
                TOK_MAX_KID);
        return AL_E_FORMAT;
    }
    const char *kids = json_string_value(kid);
    size_t kidlen = json_string_length(kid);
    for (size_t i = 0; i < ks->n; i++) {
        if (strcmp(ks->keys[i].kid, kids) == 0) {
            tok_quote(kids, q, sizeof q);
            al_errf(reason, cap, "jwks: duplicate kid \"%s\"", q);
            return AL_E_EXISTS;
        }
    }
    json_t *x = json_object_get(jwk, "x");
    uint8_t raw[TOK_KEY_LEN];
    size_t rawlen = 0;
    if (!json_is_string(x) ||
        b64u_decode(json_string_value(x), json_string_length(x), raw, sizeof raw, &rawlen) !=
            AL_OK ||
        rawlen != TOK_KEY_LEN) {
        al_errf(reason, cap, "jwks: key %zu: \"x\" must be the strict base64url of %d bytes", idx,
                TOK_KEY_LEN);
        return AL_E_FORMAT;
    }
    EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, sizeof raw);
    if (!pkey) {
        ERR_clear_error();
        al_errf(reason, cap, "jwks: key %zu: OpenSSL refused the public key", idx);
        return AL_E_CRYPTO;
    }
    struct tok_key *k = &ks->keys[ks->n];
    memcpy(k->kid, kids, kidlen);
    k->kid[kidlen] = '\0';
    k->pkey = pkey;
    ks->n++;
    return AL_OK;
}

int tok_keyset_from_json(const char *json, size_t len, struct tok_keyset **out, char *reason,
                         size_t reason_cap)
{
    if (reason && reason_cap > 0)
        reason[0] = '\0';
    if (!out)
        return AL_E_INVAL;
    *out = NULL;
    if (!json)
        return AL_E_INVAL;
    if (len > TOK_MAX_JWKS_BYTES) {
        al_errf(reason, reason_cap, "jwks: %zu bytes, more than the limit of %d", len,
                TOK_MAX_JWKS_BYTES);
        return AL_E_TOOBIG;
    }
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        al_errf(reason, reason_cap, "jwks: invalid JSON at line %d column %d: %s", jerr.line,
                jerr.column, jerr.text);
        return AL_E_FORMAT;
    }
    int rc = AL_OK;
    struct tok_keyset *ks = NULL;
    json_t *keys = json_is_object(root) ? json_object_get(root, "keys") : NULL;
    if (!json_is_array(keys)) {
        al_errf(reason, reason_cap, "jwks: no \"keys\" array");
        rc = AL_E_FORMAT;
        goto done;
    }
    size_t n = json_array_size(keys);
    if (n == 0) {
        al_errf(reason, reason_cap, "jwks: \"keys\" is empty");
        rc = AL_E_FORMAT;
        goto done;
    }
    if (n > TOK_MAX_KEYS) {
        al_errf(reason, reason_cap, "jwks: %zu keys, more than the limit of %d", n, TOK_MAX_KEYS);
        rc = AL_E_TOOBIG;
        goto done;
    }
    ks = calloc(1, sizeof *ks);
    if (!ks) {
        rc = AL_E_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        rc = tok_keyset_add(ks, i, json_array_get(keys, i), reason, reason_cap);
        if (rc != AL_OK)
            goto done;
    }
    *out = ks;
    ks = NULL;
done:
    tok_keyset_free(ks);
    json_decref(root);
    return rc;
}

int tok_keyset_from_file(const char *path, struct tok_keyset **out, char *reason, size_t reason_cap)
{
    if (reason && reason_cap > 0)
        reason[0] = '\0';
    if (!out)
        return AL_E_INVAL;
    *out = NULL;
    if (!path)
        return AL_E_INVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        al_errf(reason, reason_cap, "jwks: cannot open %s: %s", path, strerror(e));
        return al_err_from_errno(e);
    }
    int rc = AL_OK;
    char *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        al_errf(reason, reason_cap, "jwks: %s is not a regular file", path);
        rc = AL_E_IO;
        goto done;
    }
    if (st.st_size > TOK_MAX_JWKS_BYTES) {
        al_errf(reason, reason_cap, "jwks: %s is %lld bytes, more than the limit of %d", path,
                (long long)st.st_size, TOK_MAX_JWKS_BYTES);
        rc = AL_E_TOOBIG;
        goto done;
    }
    /* Read up to one byte past the limit: the file may grow under us. */
    buf = malloc((size_t)TOK_MAX_JWKS_BYTES + 1);
    if (!buf) {
        rc = AL_E_NOMEM;
        goto done;
    }
    size_t len = 0;
    while (len < (size_t)TOK_MAX_JWKS_BYTES + 1) {
        ssize_t r = read(fd, buf + len, (size_t)TOK_MAX_JWKS_BYTES + 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            al_errf(reason, reason_cap, "jwks: cannot read %s: %s", path, strerror(errno));
            rc = AL_E_IO;
            goto done;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    if (len > TOK_MAX_JWKS_BYTES) {
        al_errf(reason, reason_cap, "jwks: %s is more than the limit of %d bytes", path,
                TOK_MAX_JWKS_BYTES);
        rc = AL_E_TOOBIG;
        goto done;
    }
    char inner[TOK_REASON_MAX];
    rc = tok_keyset_from_json(buf, len, out, inner, sizeof inner);
    if (rc != AL_OK)
        al_errf(reason, reason_cap, "%s: %s", path, inner);
done:
    free(buf);
    close(fd);
    return rc;
}

/* ---- verification ----------------------------------------------------- */

int64_t tok_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (int64_t)time(NULL);
    return (int64_t)ts.tv_sec;
}

void tok_verify_params_init(struct tok_verify_params *p, const char *audience, const char *scope,
                            int64_t now)
{
    if (!p)
        return;
    p->audience = audience;
    p->scope = scope;
    p->now = now;
    p->leeway = TOK_LEEWAY_DEFAULT;
}

static const struct tok_key *tok_find_key(const struct tok_keyset *ks, const char *kid)
{
    for (size_t i = 0; i < ks->n; i++)
        if (strcmp(ks->keys[i].kid, kid) == 0)
            return &ks->keys[i];
    return NULL;
}

/* Ed25519 over msg. AL_OK, AL_E_SIG, or AL_E_NOMEM/AL_E_CRYPTO. */
static int tok_check_sig(EVP_PKEY *pkey, const uint8_t *msg, size_t len,
                         const uint8_t sig[TOK_SIG_LEN])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        return AL_E_NOMEM;
    int rc = AL_E_SIG;
    /* Ed25519 is a one-shot scheme: no digest (NULL), then EVP_DigestVerify. */
    if (EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) != 1)
        rc = AL_E_CRYPTO;
    else if (EVP_DigestVerify(ctx, sig, TOK_SIG_LEN, msg, len) == 1)
        rc = AL_OK;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error(); /* a failed verify leaves entries on the thread's queue */
    return rc;
}

/* Decode segment [s, s+len) as strict base64url into buf. */
static int tok_decode_segment(const char *what, const char *s, size_t len, uint8_t *buf, size_t cap,
                              size_t *n, char *reason, size_t rcap)
{
    if (b64u_decode(s, len, buf, cap, n) != AL_OK) {
        al_errf(reason, rcap, "%s is not strict base64url", what);
        return AL_E_FORMAT;
    }
    return AL_OK;
}

/* Parse n decoded bytes as a JSON object, refusing duplicate names. */
static int tok_parse_json(const char *what, const uint8_t *buf, size_t n, json_t **out,
                          char *reason, size_t rcap)
{
    *out = NULL;
    json_error_t jerr;
    json_t *j = json_loadb((const char *)buf, n, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        al_errf(reason, rcap, "%s is not valid JSON: %s", what, jerr.text);
        return AL_E_FORMAT;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        al_errf(reason, rcap, "%s is not a JSON object", what);
        return AL_E_FORMAT;
    }
    *out = j;
    return AL_OK;
}

static int tok_check_header(const struct tok_keyset *ks, json_t *hdr, const struct tok_key **key,
                            char *reason, size_t cap)
{
    char q[TOK_QUOTE_MAX + 4];
    json_t *alg = json_object_get(hdr, "alg");
    if (!json_is_string(alg)) {
        al_errf(reason, cap, "header has no alg string");
        return AL_E_ALG;
    }
    if (strcmp(json_string_value(alg), "EdDSA") != 0) {
        tok_quote(json_string_value(alg), q, sizeof q);
        al_errf(reason, cap, "alg \"%s\" is not accepted; only EdDSA is", q);
        return AL_E_ALG;
    }
    if (json_object_get(hdr, "crit")) {
        al_errf(reason, cap, "header has crit; no extension is understood");
        return AL_E_FORMAT;
    }
    json_t *typ = json_object_get(hdr, "typ");
    if (typ && (!json_is_string(typ) || strcasecmp(json_string_value(typ), "JWT") != 0)) {
        al_errf(reason, cap, "header typ is not \"JWT\"");
        return AL_E_FORMAT;
    }
    json_t *kid = json_object_get(hdr, "kid");
    if (!json_is_string(kid)) {
        al_errf(reason, cap, "header has no kid string");
        return AL_E_KID;
    }
    /* Strings from jansson hold no NUL (JSON_ALLOW_NUL is not set). */
    const struct tok_key *k = NULL;
    if (json_string_length(kid) <= TOK_MAX_KID)
        k = tok_find_key(ks, json_string_value(kid));
    if (!k) {
        tok_quote(json_string_value(kid), q, sizeof q);
        al_errf(reason, cap, "kid \"%s\" is not in the key set", q);
        return AL_E_KID;
    }
    *key = k;
    return AL_OK;
}

/* Read an optional NumericDate; required ones are reported missing. */
static int tok_time_claim(json_t *cl, const char *name, bool required, int64_t *val, bool *present,
                          char *reason, size_t cap)
{
    json_t *v = json_object_get(cl, name);
    *present = v != NULL;
    *val = 0;
    if (!v) {
        if (required) {
            al_errf(reason, cap, "claim %s is missing", name);
            return AL_E_CLAIM;
        }
        return AL_OK;
    }
    if (!json_is_integer(v)) {
        al_errf(reason, cap, "claim %s is not an integer NumericDate", name);
        return AL_E_CLAIM;
    }
    json_int_t t = json_integer_value(v);
    if (t < 0 || t > TOK_TIME_MAX) {
        al_errf(reason, cap, "claim %s is out of range", name);
        return AL_E_CLAIM;
    }
    *val = (int64_t)t;
    return AL_OK;
}

/* Optional string claim copied into dst[TOK_MAX_CLAIM_STR + 1]. */
static int tok_string_claim(json_t *cl, const char *name, bool required, char *dst, char *reason,
                            size_t cap)
{
    json_t *v = json_object_get(cl, name);
    dst[0] = '\0';
    if (!v) {
        if (required) {
            al_errf(reason, cap, "claim %s is missing", name);
            return AL_E_CLAIM;
        }
        return AL_OK;
    }
    if (!json_is_string(v) || json_string_length(v) == 0) {
        al_errf(reason, cap, "claim %s is not a non-empty string", name);
        return AL_E_CLAIM;
    }
    size_t len = json_string_length(v);
    if (len > TOK_MAX_CLAIM_STR) {
        al_errf(reason, cap, "claim %s is longer than %d bytes", name, TOK_MAX_CLAIM_STR);
        return AL_E_TOOBIG;
    }
    memcpy(dst, json_string_value(v), len);
    dst[len] = '\0';
    return AL_OK;
}

static int tok_check_aud(json_t *cl, const char *audience, char *reason, size_t cap)
{
    char q[TOK_QUOTE_MAX + 4], w[TOK_QUOTE_MAX + 4];
    json_t *aud = json_object_get(cl, "aud");
    tok_quote(audience, w, sizeof w);
    if (!aud) {
        al_errf(reason, cap, "claim aud is missing");
        return AL_E_CLAIM;
    }
    if (json_is_string(aud)) {
        if (strcmp(json_string_value(aud), audience) == 0)
            return AL_OK;
        tok_quote(json_string_value(aud), q, sizeof q);
        al_errf(reason, cap, "aud \"%s\" is not this verifier (\"%s\")", q, w);
        return AL_E_AUD;
    }
    if (!json_is_array(aud)) {
        al_errf(reason, cap, "claim aud is neither a string nor an array");
        return AL_E_CLAIM;
    }
    size_t n = json_array_size(aud);
    if (n == 0 || n > TOK_MAX_AUD_ITEMS) {
        al_errf(reason, cap, "claim aud array must have 1 to %d entries", TOK_MAX_AUD_ITEMS);
        return AL_E_CLAIM;
    }
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(aud, i);
        if (!json_is_string(a)) {
            al_errf(reason, cap, "claim aud array holds a non-string");
            return AL_E_CLAIM;
        }
        if (strcmp(json_string_value(a), audience) == 0)
            found = true;
    }
    if (!found) {
        al_errf(reason, cap, "aud array does not name this verifier (\"%s\")", w);
        return AL_E_AUD;
    }
    return AL_OK;
}

static int tok_check_claims(json_t *cl, const struct tok_verify_params *p, struct tok_claims *c,
                            char *reason, size_t cap)
{
    int rc;
    bool has_exp;
    if ((rc = tok_time_claim(cl, "exp", true, &c->exp, &has_exp, reason, cap)) != AL_OK ||
        (rc = tok_time_claim(cl, "nbf", false, &c->nbf, &c->has_nbf, reason, cap)) != AL_OK ||
        (rc = tok_time_claim(cl, "iat", false, &c->iat, &c->has_iat, reason, cap)) != AL_OK)
        return rc;
    /* All values lie in [0, TOK_TIME_MAX] and leeway is small: no overflow.
     * Same edges as RFC 7519 and npm jose: expired when exp <= now - leeway,
     * not yet valid when nbf > now + leeway. */
    if (c->exp <= p->now - p->leeway) {
        al_errf(reason, cap, "expired at %lld, now %lld (leeway %llds)", (long long)c->exp,
                (long long)p->now, (long long)p->leeway);
        return AL_E_EXPIRED;
    }
    if (c->has_nbf && c->nbf > p->now + p->leeway) {
        al_errf(reason, cap, "not valid before %lld, now %lld (leeway %llds)", (long long)c->nbf,
                (long long)p->now, (long long)p->leeway);
        return AL_E_NOTYET;
    }
    if (c->has_iat && c->iat > p->now + p->leeway) {
        al_errf(reason, cap, "issued in the future (%lld), now %lld (leeway %llds)",
                (long long)c->iat, (long long)p->now, (long long)p->leeway);
        return AL_E_NOTYET;
    }
    if ((rc = tok_check_aud(cl, p->audience, reason, cap)) != AL_OK)
        return rc;

    json_t *scope = json_object_get(cl, "scope");
    if (!json_is_string(scope)) {
        al_errf(reason, cap, "claim scope is missing or not a string");
        return AL_E_CLAIM;
    }
    size_t slen = json_string_length(scope);
    if (slen > TOK_MAX_SCOPE) {
        al_errf(reason, cap, "claim scope is longer than %d bytes", TOK_MAX_SCOPE);
        return AL_E_TOOBIG;
    }
    if (!tok_scope_list_valid(json_string_value(scope))) {
        al_errf(reason, cap, "claim scope is not a space-separated list of scope tokens");
        return AL_E_CLAIM;
    }
    if (!tok_scope_covers(json_string_value(scope), p->scope)) {
        char q[TOK_QUOTE_MAX + 4], w[TOK_QUOTE_MAX + 4];
        tok_quote(json_string_value(scope), q, sizeof q);
        tok_quote(p->scope, w, sizeof w);
        al_errf(reason, cap, "scope \"%s\" does not include \"%s\"", q, w);
        return AL_E_SCOPE;
    }
    memcpy(c->scope, json_string_value(scope), slen);
    c->scope[slen] = '\0';

    if ((rc = tok_string_claim(cl, "sub", true, c->sub, reason, cap)) != AL_OK ||
        (rc = tok_string_claim(cl, "iss", false, c->iss, reason, cap)) != AL_OK ||
        (rc = tok_string_claim(cl, "jti", false, c->jti, reason, cap)) != AL_OK)
        return rc;
    return AL_OK;
}

int tok_verify(const struct tok_keyset *ks, const char *token, size_t token_len,
               const struct tok_verify_params *p, struct tok_claims *out, char *reason,
               size_t reason_cap)
{
    if (reason && reason_cap > 0)
        reason[0] = '\0';
    if (out)
        memset(out, 0, sizeof *out);
    if (!ks || !token || !p || !p->audience || p->audience[0] == '\0' ||
        !tok_scope_valid(p->scope) || p->leeway < 0 || p->leeway > TOK_LEEWAY_MAX || p->now < 0 ||
        p->now > TOK_TIME_MAX) {
        al_errf(reason, reason_cap, "invalid verification parameters");
        return AL_E_INVAL;
    }
    if (token_len == 0) {
        al_errf(reason, reason_cap, "empty token");
        return AL_E_FORMAT;
    }
    if (token_len > TOK_MAX_TOKEN) {
        al_errf(reason, reason_cap, "token is %zu bytes, more than the limit of %d", token_len,
                TOK_MAX_TOKEN);
        return AL_E_TOOBIG;
    }

    /* Exactly three segments: header.claims.signature */
    size_t dots[2] = {0, 0}, ndots = 0;
    for (size_t i = 0; i < token_len; i++) {
        if (token[i] == '.') {
            if (ndots < 2)
                dots[ndots] = i;
            ndots++;
        }
    }
    if (ndots != 2) {
        al_errf(reason, reason_cap, "token has %zu segments; a JWS has 3", ndots + 1);
        return AL_E_FORMAT;
    }
    const char *h64 = token, *c64 = token + dots[0] + 1, *s64 = token + dots[1] + 1;
    size_t hlen = dots[0], clen = dots[1] - dots[0] - 1, slen = token_len - dots[1] - 1;
    if (hlen > TOK_MAX_HEADER_B64 || clen > TOK_MAX_CLAIMS_B64 || slen > TOK_SIG_B64_LEN) {
        al_errf(reason, reason_cap,
                "segment too long (header %zu/%d, claims %zu/%d, signature %zu/%d)", hlen,
                TOK_MAX_HEADER_B64, clen, TOK_MAX_CLAIMS_B64, slen, TOK_SIG_B64_LEN);
        return AL_E_TOOBIG;
    }
    if (hlen == 0 || clen == 0) {
        al_errf(reason, reason_cap, "empty header or claims segment");
        return AL_E_FORMAT;
    }

    int rc;
    json_t *hdr = NULL, *cl = NULL;
    uint8_t hbuf[TOK_HEADER_BUF];
    uint8_t cbuf[TOK_CLAIMS_BUF];
    uint8_t sig[TOK_SIG_LEN];
    size_t siglen = 0;
    const struct tok_key *key = NULL;

    size_t hn = 0, cn = 0;
    rc = tok_decode_segment("header", h64, hlen, hbuf, sizeof hbuf, &hn, reason, reason_cap);
    if (rc == AL_OK)
        rc = tok_parse_json("header", hbuf, hn, &hdr, reason, reason_cap);
    if (rc != AL_OK)
        goto done;
    rc = tok_check_header(ks, hdr, &key, reason, reason_cap);
    if (rc != AL_OK)
        goto done;
    /* Checked after alg, so that "alg":"none" with an empty signature is
     * reported as the algorithm refusal it is. */
    if (slen != TOK_SIG_B64_LEN || b64u_decode(s64, slen, sig, sizeof sig, &siglen) != AL_OK ||
        siglen != TOK_SIG_LEN) {
        al_errf(reason, reason_cap, "signature is not strict base64url of %d bytes", TOK_SIG_LEN);
        rc = AL_E_FORMAT;
        goto done;
    }
    /* Claims text must be strict base64url too (decoding is harmless); its
     * JSON is parsed only once the signature holds. */
    rc = tok_decode_segment("claims", c64, clen, cbuf, sizeof cbuf, &cn, reason, reason_cap);
    if (rc != AL_OK)
        goto done;
    /* The signature covers the ASCII text "header.claims" as sent. */
    rc = tok_check_sig(key->pkey, (const uint8_t *)token, hlen + 1 + clen, sig);
    if (rc != AL_OK) {
        al_errf(reason, reason_cap,
                rc == AL_E_SIG ? "signature does not verify with key \"%s\""
                               : "crypto failure verifying with key \"%s\"",
                key->kid);
        goto done;
    }
    /* Only now are the claims worth reading. */
    rc = tok_parse_json("claims", cbuf, cn, &cl, reason, reason_cap);
    if (rc != AL_OK)
        goto done;
    struct tok_claims c;
    memset(&c, 0, sizeof c);
    rc = tok_check_claims(cl, p, &c, reason, reason_cap);
    if (rc != AL_OK)
        goto done;
    memcpy(c.kid, key->kid, strlen(key->kid) + 1);
    if (out)
        *out = c;
done:
    json_decref(hdr);
    json_decref(cl);
    return rc;
}
