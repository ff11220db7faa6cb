/*
 * bearer: the token of an HTTP "Authorization: Bearer <token>" value
 * (scheme case-insensitive, RFC 6750), shared by the runner's upgrade and
 * the control plane's API.
 */
#ifndef AL_BEARER_H
#define AL_BEARER_H

/* The token inside value, or NULL if it is not "Bearer <token>". Points
 * into value. */
const char *bearer_token(const char *value);

#endif
