/*
 * secret: where airlockd reads a secret it holds for someone else (a
 * credential proxy's upstream key, a platform's token): a file that only
 * its owner may read, or the first line a command prints. Both give one
 * line; a reason never contains what was read. No state: the callers
 * cache (proxy.c, platform.c).
 */
#ifndef AL_SECRET_H
#define AL_SECRET_H

#include <stddef.h>

#define SECRET_COMMAND_TIMEOUT_MS 5000 /* a command's whole run */

/* Read a secret file: a regular file, not a symlink, mode 0600 or
 * stricter (AL_E_PERM naming its mode otherwise), at most cap - 1 bytes,
 * one line (a trailing newline is dropped; an empty secret, a NUL or an
 * inner newline is AL_E_FORMAT). out is wiped on failure. */
int secret_read_file(const char *path, char *out, size_t cap, char *why, size_t whycap);

/* Run cmd under /bin/sh -c (stdin /dev/null, its own process group,
 * killed with what it started past SECRET_COMMAND_TIMEOUT_MS) and keep the
 * first line it prints. It blocks the caller that long at worst. On
 * failure (timeout, more than cap - 1 bytes, no line, a non-zero exit)
 * out is wiped and why reads "<who>: its <what> <failed|did not finish in
 * time|...>", e.g. who "upstream github", what "secret-command". */
int secret_run_command(const char *cmd, char *out, size_t cap, const char *who, const char *what,
                       char *why, size_t whycap);

#endif
