/*
 * airlockd_key: the commands around the signing key. keygen creates it
 * (DIR/signing-key.pem, 0600) and publishes its public half (DIR/jwks.json),
 * or rotates it keeping the old public keys; token mints a token with it
 * and hands it out only if the published key set verifies it; signer is
 * the process `airlockd serve` starts to hold it (signer.h).
 */
#include "airlockd_key.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "al_err.h"
#include "al_log.h"
#include "keys.h"
#include "signer.h"
#include "tok_sign.h"
#include "token.h"

#define SUB_DEFAULT "operator" /* a minted token's sub without --sub */

int airlockd_key_gen(const struct airlockd_cmd *self, int argc, char **argv)
{
    const char *data = NULL;
    bool rotate = false;
    const struct airlockd_opt opts[] = {
        {"--data", &data, NULL},
        {"--rotate", NULL, &rotate},
    };
    int prc = airlockd_cmd_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (!data)
        data = airlockd_cmd_data_dir();

    struct keys_init_result res;
    char reason[TOK_REASON_MAX + KEYS_PATH_MAX];
    int rc = keys_init_dir(data, rotate, &res, reason, sizeof reason);
    if (rc != AL_OK) {
        airlockd_cmd_err("keygen", "%s", reason[0] ? reason : al_strerror(rc));
        return AIRLOCKD_RC_FAIL;
    }
    if (printf("%s signing key %s in %s/" KEYS_PRIVATE_FILE "; %s/" KEYS_JWKS_FILE
               " publishes %zu key%s\n",
               rotate ? "rotated: new" : "created", res.kid, data, data, res.jwks_keys,
               res.jwks_keys == 1 ? "" : "s") < 0 ||
        fflush(stdout) != 0)
        return AIRLOCKD_RC_FAIL;
    return 0;
}

/* The key-holding process: serve execs it with a socket on --fd. */
int airlockd_key_signer(const struct airlockd_cmd *self, int argc, char **argv)
{
    const char *fd_s = NULL, *data = NULL, *level_s = NULL, *format_s = NULL;
    const struct airlockd_opt opts[] = {{"--fd", &fd_s, NULL},
                                        {"--data", &data, NULL},
                                        {"--log-level", &level_s, NULL},
                                        {"--log-format", &format_s, NULL}};
    int prc = airlockd_cmd_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    long long fd = -1, level = 1;
    int format = format_s ? al_log_format_of(format_s) : AL_LOG_TEXT;
    if (!fd_s || !airlockd_cmd_int(fd_s, 0, INT_MAX, &fd) || !data ||
        (level_s && !airlockd_cmd_int(level_s, 0, 2, &level)) || format < 0) {
        airlockd_cmd_err(self->name,
                         "--fd N and --data DIR are required (--log-level 0 to 2, --log-format "
                         "text|json); airlockd serve starts this itself");
        return AIRLOCKD_RC_USAGE;
    }
    return signer_main((int)fd, data, (int)level, format);
}

/* Whether the token minted for aud and scope verifies against the key set
 * at jwks_path: 0, or -1 after the error line. */
static int token_verifies(const char *jwks_path, const char *aud, const char *scope,
                          const char *token, size_t len, int64_t now)
{
    char reason[TOK_REASON_MAX + KEYS_PATH_MAX];
    struct tok_keyset *ks = NULL;
    int rc = tok_keyset_from_file(jwks_path, &ks, reason, sizeof reason);
    if (rc != AL_OK) {
        airlockd_cmd_err("token", "%s; verifiers need it (run airlockd keygen --rotate)",
                         reason[0] ? reason : al_strerror(rc));
        return -1;
    }
    /* Ask for a scope the token has: this checks key, signature and time. */
    const char *sp = strchr(scope, ' ');
    char first[TOK_MAX_SCOPE + 1];
    size_t fl = sp ? (size_t)(sp - scope) : strlen(scope);
    memcpy(first, scope, fl);
    first[fl] = '\0';
    struct tok_verify_params p;
    tok_verify_params_init(&p, aud, first, now);
    char why[TOK_REASON_MAX];
    rc = tok_verify(ks, token, len, &p, NULL, why, sizeof why);
    tok_keyset_free(ks);
    if (rc != AL_OK) {
        airlockd_cmd_err("token",
                         "the minted token does not verify against %s (%s); "
                         "run airlockd keygen --rotate to republish the keys",
                         jwks_path, why);
        return -1;
    }
    return 0;
}

int airlockd_key_token(const struct airlockd_cmd *self, int argc, char **argv)
{
    const char *data = NULL, *aud = NULL, *scope = NULL, *sub = NULL, *iss = NULL;
    const char *ttl_s = NULL;
    const struct airlockd_opt opts[] = {
        {"--data", &data, NULL}, {"--aud", &aud, NULL}, {"--scope", &scope, NULL},
        {"--sub", &sub, NULL},   {"--iss", &iss, NULL}, {"--ttl", &ttl_s, NULL},
    };
    int prc = airlockd_cmd_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (!aud || !scope) {
        airlockd_cmd_err("token", "--aud and --scope are required (see airlockd token "
                                  "--help)");
        return AIRLOCKD_RC_USAGE;
    }
    long long ttl = TOK_SIGN_TTL_DEFAULT;
    if (ttl_s && !airlockd_cmd_int(ttl_s, 1, TOK_SIGN_TTL_MAX, &ttl)) {
        airlockd_cmd_err("token", "--ttl must be a whole number of seconds from 1 to %d",
                         TOK_SIGN_TTL_MAX);
        return AIRLOCKD_RC_USAGE;
    }
    if (!tok_scope_list_valid(scope)) {
        airlockd_cmd_err("token", "--scope must be space-separated scopes such as "
                                  "'runner:connect' (printable ASCII, no quote or backslash)");
        return AIRLOCKD_RC_USAGE;
    }
    if (!data)
        data = airlockd_cmd_data_dir();

    char key_path[KEYS_PATH_MAX], jwks_path[KEYS_PATH_MAX];
    if (keys_path(data, KEYS_PRIVATE_FILE, key_path, sizeof key_path) != AL_OK ||
        keys_path(data, KEYS_JWKS_FILE, jwks_path, sizeof jwks_path) != AL_OK) {
        airlockd_cmd_err("token", "--data path too long");
        return AIRLOCKD_RC_USAGE;
    }
    time_t now = time(NULL);
    if (now == (time_t)-1) {
        airlockd_cmd_err("token", "cannot read the clock");
        return AIRLOCKD_RC_FAIL;
    }

    char reason[TOK_REASON_MAX + KEYS_PATH_MAX];
    struct keys_signing *k = NULL;
    int rc = keys_load_private(key_path, &k, reason, sizeof reason);
    if (rc != AL_OK) {
        airlockd_cmd_err("token", "%s%s%s%s", reason[0] ? reason : al_strerror(rc),
                         rc == AL_E_NOENT ? " (run: airlockd keygen --data " : "",
                         rc == AL_E_NOENT ? data : "", rc == AL_E_NOENT ? ")" : "");
        return AIRLOCKD_RC_FAIL;
    }
    struct tok_sign_req req = {
        .iss = iss,
        .aud = aud,
        .sub = sub ? sub : SUB_DEFAULT,
        .scope = scope,
        .jti = NULL,
        .now = (int64_t)now,
        .ttl = ttl,
    };
    char token[TOK_MAX_TOKEN + 1];
    size_t len = 0;
    rc = tok_sign_mint(k, &req, token, sizeof token, &len, reason, sizeof reason);
    keys_free(k);
    if (rc != AL_OK) {
        airlockd_cmd_err("token", "%s", reason[0] ? reason : al_strerror(rc));
        return rc == AL_E_INVAL ? AIRLOCKD_RC_USAGE : AIRLOCKD_RC_FAIL;
    }

    /* Never hand out a token the published key set would refuse (for
     * example a jwks.json that lost the current key). */
    if (token_verifies(jwks_path, aud, scope, token, len, (int64_t)now) != 0)
        return AIRLOCKD_RC_FAIL;

    if (printf("%s\n", token) < 0 || fflush(stdout) != 0) {
        airlockd_cmd_err("token", "cannot write to stdout");
        return AIRLOCKD_RC_FAIL;
    }
    return 0;
}
