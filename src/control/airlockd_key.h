/*
 * airlockd_key: `airlockd keygen`, `airlockd token` and `airlockd signer`,
 * the commands around the signing key. Each is a struct airlockd_cmd's
 * handler.
 */
#ifndef AL_AIRLOCKD_KEY_H
#define AL_AIRLOCKD_KEY_H

#include "airlockd_cmd.h"

/* keygen [--data DIR] [--rotate]: create or rotate the signing key. */
int airlockd_key_gen(const struct airlockd_cmd *self, int argc, char **argv);
/* token --aud AUD --scope SCOPE [...]: mint a token and print it. */
int airlockd_key_token(const struct airlockd_cmd *self, int argc, char **argv);
/* signer --fd N --data DIR: the key-holding process serve starts. */
int airlockd_key_signer(const struct airlockd_cmd *self, int argc, char **argv);

#endif
