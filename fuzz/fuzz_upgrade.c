/*
 * Fuzz target: the runner's upgrade decision (src/runner/upgrade.c) over
 * arbitrary request parts. The input is split at NUL bytes into path,
 * identifier, api-version, the token header's value and the subprotocol
 * offer; the first byte says whether it is an upgrade. A fixed key set
 * verifies tokens, so the token parser behind the decision is exercised
 * as well.
 * Oracle: no crash or leak, and only the statuses of the contract.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "token.h"
#include "bearer.h"
#include "subproto.h"
#include "upgrade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char jwks[] = "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"fuzz-k1\","
                           "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    char *part[5] = {NULL, NULL, NULL, NULL, NULL};
    char *p = buf;
    for (int i = 0; i < 5 && p <= buf + size - 1; i++) {
        part[i] = p;
        p += strlen(p) + 1;
    }
    struct tok_keyset *ks = NULL;
    if (tok_keyset_from_json(jwks, sizeof jwks - 1, &ks, NULL, 0) != 0) {
        free(buf);
        abort();
    }
    struct upgrade_config cfg = {"fuzz-sb", ks, 1800000000, 30};
    struct upgrade_request req = {part[0], data[0] & 1, part[1], part[2], part[3], part[4]};
    struct upgrade_result res;
    upgrade_decide(&cfg, &req, &res);
    if (res.status != 101 && res.status != 200 && res.status != 400 && res.status != 403 &&
        res.status != 404)
        abort();
    (void)bearer_token(part[3]);
    (void)subproto_acceptable(part[4]);
    tok_keyset_free(ks);
    free(buf);
    return 0;
}
