/*
 * tok_sign: minting Airlock access tokens (JWS compact, alg EdDSA).
 *
 * Control plane only (al_control): the sandbox side never links this.
 *
 * Data model: a request (struct tok_sign_req) names the audience, subject,
 * scopes, issuer, the time and the lifetime; the token is written as text
 * into a caller buffer of explicit capacity. Header {"alg":"EdDSA",
 * "typ":"JWT","kid":...}; claims iss, aud, sub, scope, iat, nbf, exp, jti
 * (128 random bits, base64url, unless the caller gives one). No clock is
 * read here: the caller passes now.
 */
#ifndef TOK_SIGN_H
#define TOK_SIGN_H

#include "keys.h"
#include "token.h"

#include <stddef.h>
#include <stdint.h>

#define TOK_SIGN_ISS_DEFAULT "airlockd"

enum {
    TOK_SIGN_TTL_DEFAULT = 300, /* seconds: lifetimes are minutes */
    TOK_SIGN_TTL_MAX = 3600,    /* seconds */
    TOK_SIGN_JTI_BYTES = 16,    /* 128 random bits */
};

struct tok_sign_req {
    const char *iss;   /* NULL: TOK_SIGN_ISS_DEFAULT */
    const char *aud;   /* required: the verifier's identity */
    const char *sub;   /* required: who the token speaks for */
    const char *scope; /* required: space-separated scope list */
    const char *jti;   /* NULL: random */
    int64_t now;       /* Unix seconds; iat = nbf = now */
    int64_t ttl;       /* seconds, 1..TOK_SIGN_TTL_MAX; exp = now + ttl */
};

/* Mint a token into out (cap >= TOK_MAX_TOKEN + 1 always suffices).
 * Refuses (AL_E_INVAL, with a reason) what a verifier would refuse: empty
 * or over-long strings, a malformed scope list, ttl out of range. */
int tok_sign_mint(const struct keys_signing *k, const struct tok_sign_req *req, char *out,
                  size_t out_cap, size_t *out_len, char *reason, size_t reason_cap);

/* Low level: sign arbitrary header and claims bytes as a compact JWS
 * (base64url(header).base64url(claims).base64url(sig)). No checks on the
 * content: tests use it to build hostile but validly signed tokens. */
int tok_sign_jws(const struct keys_signing *k, const char *header, size_t header_len,
                 const char *claims, size_t claims_len, char *out, size_t out_cap, size_t *out_len);

#endif
