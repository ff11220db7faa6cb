/*
 * token: verification of Airlock access tokens (JWS compact, alg EdDSA).
 *
 * Shared code: the sandbox side (airlock-runner) links it, so it holds
 * public keys only and contains no signing code. Minting lives in
 * src/control/tok_sign.c. docs/tokens.md describes the format.
 *
 * Data model:
 *   struct tok_keyset   opaque, owned by the caller (tok_keyset_free): up to
 *                       TOK_MAX_KEYS Ed25519 public keys, each named by a
 *                       unique kid, loaded from a JWKS. Several keys allow
 *                       rotation. Read-only after loading.
 *   struct tok_verify_params  what the caller expects: its own identity
 *                       (aud), the action's scope, the time (Unix seconds,
 *                       the module never reads a clock) and the leeway.
 *   struct tok_claims   what a verified token says, copied into fixed
 *                       buffers (no allocation, nothing to free).
 * Every function returns AL_OK or a negative AL_E_* code (al_err.h) and,
 * when given one, writes a one-line human reason into a caller buffer.
 */
#ifndef TOKEN_H
#define TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    TOK_MAX_TOKEN = 4096,      /* whole compact token, bytes */
    TOK_MAX_HEADER_B64 = 512,  /* encoded header segment, characters */
    TOK_MAX_CLAIMS_B64 = 3072, /* encoded claims segment, characters */
    TOK_SIG_B64_LEN = 86,      /* encoded Ed25519 signature, exactly */
    TOK_SIG_LEN = 64,          /* Ed25519 signature, bytes */
    TOK_KEY_LEN = 32,          /* Ed25519 public key, bytes */
    TOK_MAX_KEYS = 16,         /* keys in one JWKS */
    TOK_MAX_JWKS_BYTES = 65536,
    TOK_MAX_KID = 128,       /* kid length, bytes (printable ASCII) */
    TOK_MAX_CLAIM_STR = 255, /* sub, iss, jti, each aud entry, bytes */
    TOK_MAX_SCOPE = 1024,    /* the scope claim, bytes */
    TOK_MAX_AUD_ITEMS = 8,   /* entries of an aud array */
    TOK_LEEWAY_DEFAULT = 30, /* seconds of clock skew tolerated */
    TOK_LEEWAY_MAX = 300,
    TOK_REASON_MAX = 256, /* a reason buffer this size never truncates much */
};
/* Largest accepted NumericDate: 9999-12-31T23:59:59Z. Time claims outside
 * [0, TOK_TIME_MAX] are malformed; this also keeps the arithmetic exact. */
#define TOK_TIME_MAX INT64_C(253402300799)

struct tok_keyset;

/* Parse a JWKS {"keys":[{"kty":"OKP","crv":"Ed25519","x":...,"kid":...}]}.
 * Refuses other kty/crv, x not 32 bytes, a private part ("d"), "use" other
 * than "sig", "alg" other than "EdDSA", missing or duplicate kid
 * (AL_E_EXISTS), no keys (AL_E_FORMAT), too many (AL_E_TOOBIG), and
 * duplicate JSON member names. */
int tok_keyset_from_json(const char *json, size_t len, struct tok_keyset **out, char *reason,
                         size_t reason_cap);
/* Same from a file of at most TOK_MAX_JWKS_BYTES (AL_E_NOENT, AL_E_PERM,
 * AL_E_IO, AL_E_TOOBIG for file problems). */
int tok_keyset_from_file(const char *path, struct tok_keyset **out, char *reason,
                         size_t reason_cap);
void tok_keyset_free(struct tok_keyset *ks);
size_t tok_keyset_count(const struct tok_keyset *ks);
/* Key i (0-based, file order): its kid (owned by ks) and raw public key. */
int tok_keyset_get(const struct tok_keyset *ks, size_t i, const char **kid, uint8_t x[TOK_KEY_LEN]);

struct tok_verify_params {
    const char *audience; /* the verifier's identity; aud must name it */
    const char *scope;    /* the action, one scope token, e.g. "runner:connect" */
    int64_t now;          /* Unix seconds from the caller's clock */
    int64_t leeway;       /* seconds, 0..TOK_LEEWAY_MAX */
};

/* The Unix time in whole seconds, from CLOCK_REALTIME: the clock a check's
 * `now` should come from. time() may read a coarse clock some milliseconds
 * behind, which would accept a token just after the instant a deadline
 * computed from CLOCK_REALTIME (exp + leeway) closed its link. */
int64_t tok_now(void);

/* Fill p with the given values and leeway TOK_LEEWAY_DEFAULT. */
void tok_verify_params_init(struct tok_verify_params *p, const char *audience, const char *scope,
                            int64_t now);

struct tok_claims {
    char kid[TOK_MAX_KID + 1];
    char sub[TOK_MAX_CLAIM_STR + 1]; /* required */
    char iss[TOK_MAX_CLAIM_STR + 1]; /* "" when absent */
    char jti[TOK_MAX_CLAIM_STR + 1]; /* "" when absent */
    char scope[TOK_MAX_SCOPE + 1];   /* the whole scope claim */
    int64_t exp;
    int64_t nbf; /* valid when has_nbf */
    int64_t iat; /* valid when has_iat */
    bool has_nbf;
    bool has_iat;
};

/*
 * Verify a compact token of token_len bytes. Checks, in this order: total
 * size, exactly 3 segments, each segment's size, header (strict base64url,
 * JSON object, no duplicate names), alg == "EdDSA", no crit, typ "JWT" if
 * present, kid known, signature segment (86 characters of strict
 * base64url, 64 bytes), claims segment strict base64url, the Ed25519
 * signature over "header.claims"; only then the claims JSON (object, no
 * duplicate names): exp, nbf, iat, aud, scope, sub, iss, jti. Returns
 * AL_OK and fills *out (may be NULL), or a code among
 * AL_E_TOOBIG, AL_E_FORMAT, AL_E_ALG, AL_E_KID, AL_E_SIG, AL_E_EXPIRED,
 * AL_E_NOTYET, AL_E_AUD, AL_E_SCOPE, AL_E_CLAIM, AL_E_INVAL, AL_E_NOMEM,
 * AL_E_CRYPTO; on failure *out is zeroed.
 */
int tok_verify(const struct tok_keyset *ks, const char *token, size_t token_len,
               const struct tok_verify_params *p, struct tok_claims *out, char *reason,
               size_t reason_cap);

/* A scope list as RFC 6749 section 3.3 defines it: one or more tokens of
 * printable ASCII except '"' and '\', separated by single spaces. */
bool tok_scope_list_valid(const char *list);
/* One scope token (no space). */
bool tok_scope_valid(const char *scope);
/* True when the space-separated list contains want as a whole member
 * ("runner:connectx" does not cover "runner:connect"). */
bool tok_scope_covers(const char *list, const char *want);

#endif
