/*
 * libFuzzer target for the token verifier, the JWKS loader and base64url.
 *
 * Data model: the first input byte picks a mode (byte % 4), the rest is
 * the payload:
 *   0  payload is a JWKS text: tok_keyset_from_json, then read every key.
 *   1  payload is a token, verified against a fixed JWKS (kid "fuzz-k1" =
 *      the RFC 8037 key, "fuzz-k2" = RFC 8032 test 2 key) with audience
 *      FUZZ_AUD, scope FUZZ_SCOPE, time FUZZ_NOW and the default leeway.
 *   2  payload is "JWKS\ntoken": both parsed, the token verified against it.
 *   3  payload is base64url text: a successful decode must re-encode to the
 *      same text (strictness means one encoding per byte string), and
 *      encoding the raw payload must decode back to it.
 * Every object is freed before returning; nothing is kept between runs.
 *
 * The seed corpus (fuzz/corpus/token/) holds tokens validly signed with the
 * fixed keys (RFC 8032 test vectors 1 and 2, seeds below), so the fuzzer
 * starts past the signature check. fuzz/make_token_corpus.mjs (npm jose)
 * regenerates them byte for byte (kid fuzz-k1 / fuzz-k2, aud FUZZ_AUD,
 * iat/nbf 1700000000, exp 4000000000).
 *   fuzz-k1 seed 9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60
 *   fuzz-k2 seed 4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb
 */
#include "al_err.h"
#include "b64url.h"
#include "token.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_AUD "fuzz-sb"
#define FUZZ_SCOPE "runner:connect"
#define FUZZ_NOW 1800000000

static const char fuzz_jwks[] =
    "{\"keys\":["
    "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\","
    "\"kid\":\"fuzz-k1\"},"
    "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"PUAXw-hDiVqStwqnTRt-vJyYLM8uxJaMwM1V8Sr0Zgw\","
    "\"kid\":\"fuzz-k2\",\"use\":\"sig\",\"alg\":\"EdDSA\"}]}";

enum { FUZZ_B64_MAX = 8192 };

static void fuzz_verify(const struct tok_keyset *ks, const char *tok, size_t len)
{
    struct tok_verify_params p;
    tok_verify_params_init(&p, FUZZ_AUD, FUZZ_SCOPE, FUZZ_NOW);
    struct tok_claims c;
    char reason[TOK_REASON_MAX];
    int rc = tok_verify(ks, tok, len, &p, &c, reason, sizeof reason);
    if (rc == AL_OK) {
        /* A success must honour the contract. */
        if (c.sub[0] == '\0' || c.exp <= FUZZ_NOW - TOK_LEEWAY_DEFAULT ||
            !tok_scope_covers(c.scope, FUZZ_SCOPE))
            abort();
    } else if (reason[0] == '\0' || strlen(reason) >= sizeof reason) {
        abort();
    }
}

static void fuzz_keyset(const char *text, size_t len)
{
    struct tok_keyset *ks = NULL;
    char reason[TOK_REASON_MAX];
    if (tok_keyset_from_json(text, len, &ks, reason, sizeof reason) != AL_OK)
        return;
    for (size_t i = 0; i < tok_keyset_count(ks); i++) {
        const char *kid = NULL;
        uint8_t x[TOK_KEY_LEN];
        if (tok_keyset_get(ks, i, &kid, x) != AL_OK || !kid || kid[0] == '\0')
            abort();
    }
    tok_keyset_free(ks);
}

static void fuzz_pair(const char *text, size_t len)
{
    const char *nl = memchr(text, '\n', len);
    if (!nl)
        return;
    struct tok_keyset *ks = NULL;
    if (tok_keyset_from_json(text, (size_t)(nl - text), &ks, NULL, 0) != AL_OK)
        return;
    fuzz_verify(ks, nl + 1, len - (size_t)(nl - text) - 1);
    tok_keyset_free(ks);
}

static void fuzz_b64(const char *text, size_t len)
{
    if (len > FUZZ_B64_MAX)
        return;
    uint8_t *raw = malloc(B64U_DEC_LEN(FUZZ_B64_MAX) + 1);
    char *enc = malloc(B64U_ENC_LEN(FUZZ_B64_MAX) + 1);
    uint8_t *back = malloc(FUZZ_B64_MAX + 1);
    if (!raw || !enc || !back)
        goto done;
    size_t n = 0, m = 0;
    if (b64u_decode(text, len, raw, B64U_DEC_LEN(FUZZ_B64_MAX), &n) == AL_OK) {
        if (b64u_encode(raw, n, enc, B64U_ENC_LEN(FUZZ_B64_MAX) + 1, &m) != AL_OK || m != len ||
            memcmp(enc, text, len) != 0)
            abort(); /* two encodings of one byte string */
    }
    if (b64u_encode((const uint8_t *)text, len, enc, B64U_ENC_LEN(FUZZ_B64_MAX) + 1, &m) != AL_OK ||
        b64u_decode(enc, m, back, FUZZ_B64_MAX + 1, &n) != AL_OK || n != len ||
        (len > 0 && memcmp(back, text, len) != 0))
        abort();
done:
    free(raw);
    free(enc);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 4) {
    case 0:
        fuzz_keyset(text, len);
        break;
    case 1: {
        struct tok_keyset *ks = NULL;
        if (tok_keyset_from_json(fuzz_jwks, sizeof fuzz_jwks - 1, &ks, NULL, 0) != AL_OK)
            abort();
        fuzz_verify(ks, text, len);
        tok_keyset_free(ks);
        break;
    }
    case 2:
        fuzz_pair(text, len);
        break;
    default:
        fuzz_b64(text, len);
        break;
    }
    return 0;
}
