/*
 * al_err: the one project-wide error enumeration.
 *
 * Every function that can fail returns 0 (AL_OK) on success or one of the
 * negative AL_E* codes below; al_strerror() gives a short English phrase.
 * Human detail, where useful, goes to a caller-supplied buffer.
 */
#ifndef AL_ERR_H
#define AL_ERR_H

enum al_err {
    AL_OK = 0,
    AL_E_NOMEM = -1,    /* allocation failed */
    AL_E_INVAL = -2,    /* bad argument from the caller */
    AL_E_AGAIN = -3,    /* need more input / no room now, try later */
    AL_E_TOOBIG = -4,   /* a size or count exceeds its named limit */
    AL_E_PROTO = -5,    /* peer violated the protocol */
    AL_E_VERSION = -6,  /* no common protocol version */
    AL_E_TYPE = -7,     /* unknown frame type */
    AL_E_STATE = -8,    /* frame or call not valid in this state */
    AL_E_NOCHAN = -9,   /* unknown channel */
    AL_E_EXISTS = -10,  /* channel (or object) already exists */
    AL_E_LIMIT = -11,   /* a count limit (channels, queue) reached */
    AL_E_FORMAT = -12,  /* malformed encoding (base64url, JSON, JWS) */
    AL_E_ALG = -13,     /* token algorithm not accepted */
    AL_E_KID = -14,     /* token key id unknown */
    AL_E_SIG = -15,     /* token signature invalid */
    AL_E_EXPIRED = -16, /* token expired */
    AL_E_NOTYET = -17,  /* token not yet valid */
    AL_E_AUD = -18,     /* token audience mismatch */
    AL_E_SCOPE = -19,   /* token scope does not cover the action */
    AL_E_CLAIM = -20,   /* token claim missing or of the wrong type */
    AL_E_IO = -21,      /* file or system I/O failed */
    AL_E_CRYPTO = -22,  /* crypto library failure */
    AL_E_PERM = -23,    /* file permissions unsafe or access denied */
    AL_E_NOENT = -24,   /* file or object not found */
    AL_E_TIMEOUT = -25, /* a deadline passed */
    AL_E_CLOSED = -26,  /* the link or channel is closed */
};

/* Short, static, never NULL. Unknown codes give "unknown error". */
const char *al_strerror(int err);

#include <stddef.h>

/* Write a human reason into a caller buffer (NULL or cap 0: nothing). */
void al_errf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The code for the errno of a failed file call: missing (ENOENT, ENOTDIR)
 * is AL_E_NOENT, refused (EACCES, EPERM, EROFS, ELOOP as O_NOFOLLOW meets a
 * symlink) AL_E_PERM, EEXIST AL_E_EXISTS, ENOMEM AL_E_NOMEM, anything else
 * AL_E_IO. */
int al_err_from_errno(int e);

#endif
