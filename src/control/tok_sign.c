/*
 * tok_sign: mint JWS compact tokens signed with Ed25519. See tok_sign.h.
 *
 * Data model: the output buffer (caller's) receives, in place,
 * base64url(header) '.' base64url(claims), which is exactly the signing
 * input; then '.' base64url(signature) and a NUL. The header and claims
 * JSON are built with jansson (insertion order kept) into malloc'd text
 * freed before return.
 */
#include "tok_sign.h"

#include "al_err.h"
#include "b64url.h"

#include <jansson.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tok_sign_jws(const struct keys_signing *k, const char *header, size_t header_len,
                 const char *claims, size_t claims_len, char *out, size_t out_cap, size_t *out_len)
{
    if (!k || !header || !claims || !out || !out_len)
        return AL_E_INVAL;
    *out_len = 0;
    if (out_cap > 0)
        out[0] = '\0';
    if (header_len > SIZE_MAX / 2 || claims_len > SIZE_MAX / 2)
        return AL_E_TOOBIG;
    size_t hl = B64U_ENC_LEN(header_len), cl = B64U_ENC_LEN(claims_len);
    size_t need = hl + 1 + cl + 1 + TOK_SIG_B64_LEN + 1;
    if (hl > SIZE_MAX / 4 || cl > SIZE_MAX / 4 || out_cap < need)
        return AL_E_TOOBIG;

    size_t o = 0, n = 0;
    int rc = b64u_encode((const uint8_t *)header, header_len, out, out_cap, &n);
    if (rc != AL_OK)
        return rc;
    o += n;
    out[o++] = '.';
    rc = b64u_encode((const uint8_t *)claims, claims_len, out + o, out_cap - o, &n);
    if (rc != AL_OK)
        return rc;
    o += n;
    uint8_t sig[TOK_SIG_LEN];
    rc = keys_sign(k, (const uint8_t *)out, o, sig);
    if (rc != AL_OK) {
        out[0] = '\0';
        return rc;
    }
    out[o++] = '.';
    rc = b64u_encode(sig, sizeof sig, out + o, out_cap - o, &n);
    if (rc != AL_OK) {
        out[0] = '\0';
        return rc;
    }
    o += n;
    *out_len = o;
    return AL_OK;
}

/* A required (or defaulted) string claim: non-empty, bounded. */
static bool sign_str_ok(const char *s)
{
    return s && s[0] != '\0' && strlen(s) <= TOK_MAX_CLAIM_STR;
}

int tok_sign_mint(const struct keys_signing *k, const struct tok_sign_req *req, char *out,
                  size_t out_cap, size_t *out_len, char *reason, size_t reason_cap)
{
    if (reason && reason_cap > 0)
        reason[0] = '\0';
    if (!k || !req || !out || !out_len) {
        al_errf(reason, reason_cap, "invalid arguments");
        return AL_E_INVAL;
    }
    *out_len = 0;
    if (out_cap > 0)
        out[0] = '\0';
    const char *iss = req->iss ? req->iss : TOK_SIGN_ISS_DEFAULT;
    if (!sign_str_ok(req->aud) || !sign_str_ok(req->sub) || !sign_str_ok(iss) ||
        (req->jti && !sign_str_ok(req->jti))) {
        al_errf(reason, reason_cap, "aud, sub, iss and jti must be 1 to %d bytes",
                TOK_MAX_CLAIM_STR);
        return AL_E_INVAL;
    }
    if (!tok_scope_list_valid(req->scope)) {
        al_errf(reason, reason_cap,
                "scope must be space-separated scope tokens (printable ASCII, no "
                "quote or backslash), at most %d bytes",
                TOK_MAX_SCOPE);
        return AL_E_INVAL;
    }
    if (req->ttl < 1 || req->ttl > TOK_SIGN_TTL_MAX) {
        al_errf(reason, reason_cap, "ttl must be 1 to %d seconds", TOK_SIGN_TTL_MAX);
        return AL_E_INVAL;
    }
    if (req->now < 0 || req->now > TOK_TIME_MAX - req->ttl) {
        al_errf(reason, reason_cap, "time out of range");
        return AL_E_INVAL;
    }

    char jti[B64U_ENC_LEN(TOK_SIGN_JTI_BYTES) + 1];
    if (req->jti) {
        size_t jl = strlen(req->jti);
        if (jl >= sizeof jti) {
            al_errf(reason, reason_cap, "jti longer than %zu bytes", sizeof jti - 1);
            return AL_E_INVAL;
        }
        memcpy(jti, req->jti, jl + 1);
    } else {
        uint8_t rnd[TOK_SIGN_JTI_BYTES];
        if (RAND_bytes(rnd, sizeof rnd) != 1) {
            ERR_clear_error();
            al_errf(reason, reason_cap, "no randomness for jti");
            return AL_E_CRYPTO;
        }
        int rc = b64u_encode(rnd, sizeof rnd, jti, sizeof jti, NULL);
        if (rc != AL_OK)
            return rc;
    }

    int rc = AL_OK;
    char *htext = NULL, *ctext = NULL;
    json_t *hdr = json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "typ", "JWT", "kid", keys_kid(k));
    json_t *cl = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s}", "iss", iss, "aud", req->aud,
                           "sub", req->sub, "scope", req->scope, "iat", (json_int_t)req->now, "nbf",
                           (json_int_t)req->now, "exp", (json_int_t)req->now + (json_int_t)req->ttl,
                           "jti", jti);
    if (!hdr || !cl) {
        /* json_pack also fails on strings that are not UTF-8. */
        al_errf(reason, reason_cap, "claims are not valid UTF-8 (or out of memory)");
        rc = AL_E_INVAL;
        goto done;
    }
    htext = json_dumps(hdr, JSON_COMPACT);
    ctext = json_dumps(cl, JSON_COMPACT);
    if (!htext || !ctext) {
        rc = AL_E_NOMEM;
        goto done;
    }
    size_t hlen = strlen(htext), clen = strlen(ctext);
    /* Escaping can grow the JSON: keep within what verifiers accept. */
    if (B64U_ENC_LEN(hlen) > TOK_MAX_HEADER_B64 || B64U_ENC_LEN(clen) > TOK_MAX_CLAIMS_B64) {
        al_errf(reason, reason_cap, "claims too large for a token (limit %d characters)",
                TOK_MAX_CLAIMS_B64);
        rc = AL_E_TOOBIG;
        goto done;
    }
    rc = tok_sign_jws(k, htext, hlen, ctext, clen, out, out_cap, out_len);
    if (rc == AL_OK && *out_len > TOK_MAX_TOKEN) {
        al_errf(reason, reason_cap, "token would be %zu bytes, more than %d", *out_len,
                TOK_MAX_TOKEN);
        rc = AL_E_TOOBIG;
    } else if (rc == AL_E_TOOBIG) {
        al_errf(reason, reason_cap, "output buffer too small");
    } else if (rc != AL_OK) {
        al_errf(reason, reason_cap, "signing failed");
    }
    if (rc != AL_OK) {
        *out_len = 0;
        if (out_cap > 0)
            out[0] = '\0';
    }
done:
    free(htext);
    free(ctext);
    json_decref(hdr);
    json_decref(cl);
    return rc;
}
