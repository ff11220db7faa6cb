/*
 * tokcheck: verify one token read from stdin with the shared verifier, as
 * the sandbox side would. Links al_common only (no signing code).
 *
 *   tokcheck --jwks FILE --aud AUD --scope SCOPE [--now UNIX] [--leeway S]
 *
 * Data model: the token is read into a buffer of TOK_MAX_TOKEN + 3 bytes
 * (one trailing "\n" or "\r\n" is dropped; anything longer is refused as
 * too big). Exit 0 with "ok sub=... iss=... jti=... kid=..." on stdout, 1
 * with "rejected: <code phrase>: <reason>" on stdout, 2 for usage errors.
 */
#include "al_err.h"
#include "token.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TOKCHECK_BUF = TOK_MAX_TOKEN + 3 };

static bool parse_i64(const char *s, long long lo, long long hi, int64_t *out)
{
    if (!s || s[0] < '0' || s[0] > '9')
        return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || !end || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int64_t)v;
    return true;
}

static int usage(void)
{
    fputs("usage: tokcheck --jwks FILE --aud AUD --scope SCOPE [--now UNIX] [--leeway S] "
          "< token\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    const char *jwks = NULL, *aud = NULL, *scope = NULL, *now_s = NULL, *leeway_s = NULL;
    for (int i = 1; i < argc; i++) {
        const char **dst = NULL;
        if (strcmp(argv[i], "--jwks") == 0)
            dst = &jwks;
        else if (strcmp(argv[i], "--aud") == 0)
            dst = &aud;
        else if (strcmp(argv[i], "--scope") == 0)
            dst = &scope;
        else if (strcmp(argv[i], "--now") == 0)
            dst = &now_s;
        else if (strcmp(argv[i], "--leeway") == 0)
            dst = &leeway_s;
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "tokcheck: bad argument '%s'\n", argv[i]);
            return usage();
        }
        *dst = argv[++i];
    }
    if (!jwks || !aud || !scope)
        return usage();

    struct tok_verify_params p;
    tok_verify_params_init(&p, aud, scope, (int64_t)time(NULL));
    if (now_s && !parse_i64(now_s, 0, TOK_TIME_MAX, &p.now)) {
        fprintf(stderr, "tokcheck: --now must be Unix seconds\n");
        return 2;
    }
    if (leeway_s && !parse_i64(leeway_s, 0, TOK_LEEWAY_MAX, &p.leeway)) {
        fprintf(stderr, "tokcheck: --leeway must be 0..%d\n", TOK_LEEWAY_MAX);
        return 2;
    }

    char reason[TOK_REASON_MAX + 4096];
    struct tok_keyset *ks = NULL;
    int rc = tok_keyset_from_file(jwks, &ks, reason, sizeof reason);
    if (rc != AL_OK) {
        printf("rejected: %s: %s\n", al_strerror(rc), reason);
        return 1;
    }

    char buf[TOKCHECK_BUF];
    size_t len = fread(buf, 1, sizeof buf, stdin);
    if (ferror(stdin)) {
        tok_keyset_free(ks);
        fprintf(stderr, "tokcheck: cannot read stdin\n");
        return 2;
    }
    if (len > 0 && buf[len - 1] == '\n')
        len--;
    if (len > 0 && buf[len - 1] == '\r')
        len--;

    struct tok_claims c;
    rc = tok_verify(ks, buf, len, &p, &c, reason, sizeof reason);
    tok_keyset_free(ks);
    if (rc != AL_OK) {
        printf("rejected: %s: %s\n", al_strerror(rc), reason);
        return 1;
    }
    printf("ok sub=%s iss=%s jti=%s kid=%s scope=%s exp=%lld\n", c.sub, c.iss, c.jti, c.kid,
           c.scope, (long long)c.exp);
    return 0;
}
