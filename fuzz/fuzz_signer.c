/*
 * libFuzzer target for signer: the request parser of the key-holding
 * process (its input comes from the serving process, which parses
 * untrusted HTTP/WebSocket/JSON and is assumed compromised), the table of
 * shapes, and the whole answer the signer computes for one request.
 *
 * Fuzz targets link al_runner/al_common, not al_control, so the module is
 * compiled into this file with what it calls: keys.c and tok_sign.c (the
 * minting), db.c for db_name_valid (an empty db_sqlite_backend stands in
 * for the SQLite table; no database is opened).
 *
 * Data model: the whole input is one request datagram. Oracle: no crash,
 * leak or hang; a request the parser accepts re-encodes to exactly the
 * input (one encoding per request); a refusal has a reason; the signer's
 * answer (sg_answer, with the RFC 8037 key) always encodes and decodes
 * back, and a minted token obeys the row: it verifies for its audience
 * and the row's scope, with the signer's lifetime at most the row's
 * bound. The same bytes, read as an answer, also go through the client's
 * decoder, whose accepted answers re-encode to the input.
 */
#include "../src/control/db.c"       // NOLINT(bugprone-suspicious-include)
#include "../src/control/keys.c"     // NOLINT(bugprone-suspicious-include)
#include "../src/control/signer.c"   // NOLINT(bugprone-suspicious-include)
#include "../src/control/tok_sign.c" // NOLINT(bugprone-suspicious-include)

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

const struct db_backend db_sqlite_backend = {.scheme = "sqlite"};

static const uint8_t fz_seed[KEYS_SEED_LEN] = {
    0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
    0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60};

/* One key and its key set for the whole run (reachable, not leaked). */
static struct keys_signing *fz_key;
static struct tok_keyset *fz_set;

static void fz_init(void)
{
    if (fz_key)
        return;
    char *jwks = NULL;
    if (keys_from_seed(fz_seed, &fz_key, NULL, 0) != AL_OK)
        abort();
    const struct keys_signing *ks[] = {fz_key};
    if (keys_jwks_json(ks, 1, &jwks, NULL, 0) != AL_OK ||
        tok_keyset_from_json(jwks, strlen(jwks), &fz_set, NULL, 0) != AL_OK)
        abort();
    free(jwks);
}

static void fz_request(const uint8_t *p, size_t n)
{
    struct signer_req q;
    char why[SIGNER_REASON_MAX + 1] = "";
    int rc = signer_req_parse(p, n, &q, why, sizeof why);
    if (rc != AL_OK) {
        if (!why[0])
            abort();
        return;
    }
    uint8_t again[SIGNER_REQ_MAX];
    size_t len = 0;
    if (signer_req_encode(&q, again, sizeof again, &len) != AL_OK || len != n ||
        memcmp(again, p, n) != 0)
        abort();
    if (q.op == SIGNER_OP_MINT && signer_shape_check(&q, why, sizeof why) == AL_OK) {
        const struct sg_shape *s = sg_shape_of(q.shape);
        if (!s || q.ttl < 1 || q.ttl > s->ttl_max || !sg_pat_ok(s->aud_pat, s->aud_lit, q.aud) ||
            !sg_pat_ok(s->sub_pat, s->sub_lit, q.sub))
            abort();
    }
}

static void fz_answer(const uint8_t *p, size_t n)
{
    static struct signer_resp a, b;
    sg_answer(fz_key, NULL, -1, AL_LOG_TEXT, p, n, &a);
    static uint8_t out[SIGNER_RESP_MAX];
    size_t len = 0;
    if (signer_resp_encode(&a, out, sizeof out, &len) != AL_OK ||
        signer_resp_parse(out, len, &b, NULL, 0) != AL_OK || b.status != a.status)
        abort();
    if (a.status != AL_OK) {
        if (!a.reason[0] || a.token_len != 0)
            abort();
        return;
    }
    if (a.op != SIGNER_OP_MINT)
        return;
    struct signer_req q;
    if (signer_req_parse(p, n, &q, NULL, 0) != AL_OK || signer_shape_check(&q, NULL, 0) != AL_OK)
        abort(); /* nothing is minted that the table refuses */
    const struct sg_shape *s = sg_shape_of(q.shape);
    struct tok_verify_params vp;
    tok_verify_params_init(&vp, q.aud, s->scope, a.exp - (int64_t)q.ttl);
    struct tok_claims cl;
    if (tok_verify(fz_set, a.token, a.token_len, &vp, &cl, NULL, 0) != AL_OK ||
        strcmp(cl.scope, s->scope) != 0 || strcmp(cl.sub, q.sub) != 0 ||
        cl.exp - cl.iat != (int64_t)q.ttl || cl.exp - cl.iat > (int64_t)s->ttl_max)
        abort();
}

static void fz_resp(const uint8_t *p, size_t n)
{
    static struct signer_resp a;
    if (signer_resp_parse(p, n, &a, NULL, 0) != AL_OK)
        return;
    static uint8_t again[SIGNER_RESP_MAX];
    size_t len = 0;
    if (signer_resp_encode(&a, again, sizeof again, &len) != AL_OK || len != n ||
        memcmp(again, p, n) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_init();
    /* a copy of exactly size bytes, so ASan sees any read past the end */
    uint8_t *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    fz_request(p, size);
    fz_answer(p, size);
    fz_resp(p, size);
    free(p);
    return 0;
}
