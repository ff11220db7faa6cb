/*
 * al_version: the build's version, one string for every program (airlockd,
 * airlock-runner, airlock): `--version`, airlockd's Server header, /healthz,
 * /metrics' airlock_build_info and each side's HELLO name carry it.
 *
 * It comes from cmake/version.cmake at build time: `git describe` in a
 * checkout, VERSION's text in a tree without .git, or what the packager
 * passes (-DAIRLOCK_VERSION=, debian/rules: the package's version).
 */
#ifndef AL_VERSION_H
#define AL_VERSION_H

#include <stddef.h>
#include <stdio.h>

/* "0.1.0", "0.1.0+g1a2b3c4-dirty", "1.2.3-4-gabcdef0": [0-9A-Za-z.+~:_-] only. */
const char *al_version(void);

/* bytes of "<prog>/<version>" with its NUL: the HELLO name's room */
#define AL_VERSION_NAME_MAX 128

/* "<prog>/<version>" into buf (cut to fit cap): the HELLO name and the
 * Server header. Returns buf. */
const char *al_version_name(const char *prog, char *buf, size_t cap);

/* "<prog> <version>\n" on to: what `--version` prints. 0, or -1 when the
 * write failed (a closed stdout). */
int al_version_print(FILE *to, const char *prog);

#endif
