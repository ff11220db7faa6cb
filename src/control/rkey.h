/*
 * rkey: the keys dialing runners present beside their token, pinned per
 * sandbox. Control plane only.
 *
 * A runner that dials (local and reverse sandboxes) sends its own key on
 * every dial (AL_RUNNER_KEY_HEADER). The first key a sandbox sees is
 * pinned, as SSH pins a host key; later links must present the same one,
 * so a copy of the runner's token alone cannot take the sandbox over. A
 * local sandbox's key is made by airlockd at each start of its runner and
 * handed over on the runner's stdin (it is never on disk); a reverse
 * runner makes its own at start, and enrolling the sandbox again forgets
 * the pin (a new runner may then link).
 *
 * Data model: only the SHA-256 of a key is kept, as 64 hex characters, in
 * DATA/runner-keys/ID (0600, in a 0700 directory), so that a pin outlives
 * airlockd; the caller keeps a copy in memory.
 */
#ifndef AL_RKEY_H
#define AL_RKEY_H

#include <stddef.h>

#include "al_limits.h"

#define RKEY_DIR "runner-keys"
#define RKEY_HASH_HEX 64

/* A fresh key (AL_RUNNER_KEY_LEN base64url characters and a NUL). */
int rkey_new(char out[AL_RUNNER_KEY_LEN + 1]);
/* The hex SHA-256 of key. */
void rkey_hash(const char *key, size_t len, char out[RKEY_HASH_HEX + 1]);
/* The pinned hash of sandbox id: 0 and out, AL_E_NOENT (none), AL_E_IO. */
int rkey_load(const char *data_dir, const char *id, char out[RKEY_HASH_HEX + 1]);
/* Pin hash for id (atomically replaced), or forget it (hash NULL). */
int rkey_store(const char *data_dir, const char *id, const char *hash);
/* Whether key matches the pinned hash (in constant time). */
int rkey_matches(const char *pinned_hash, const char *key, size_t len);

#endif
