/*
 * b64url: strict base64url (RFC 4648 section 5) without padding, as JWS uses.
 *
 * Data model: the text form is a run of characters from the alphabet
 * A-Z a-z 0-9 - _ with no '=' padding, no whitespace and no line breaks.
 * A text of length n encodes floor(n*6/8) bytes; n % 4 == 1 is impossible
 * and refused; the unused low bits of the last character must be zero, so
 * every byte string has exactly one accepted encoding (no malleability).
 * Buffers belong to the caller; every output has an explicit capacity.
 */
#ifndef B64URL_H
#define B64URL_H

#include <stddef.h>
#include <stdint.h>

/* Characters needed to encode n bytes (no padding, no NUL). */
#define B64U_ENC_LEN(n) (((n) / 3) * 4 + (((n) % 3) ? ((n) % 3) + 1 : 0))
/* Bytes that n characters decode to when n % 4 != 1 (upper bound otherwise). */
#define B64U_DEC_LEN(n) (((n) / 4) * 3 + (((n) % 4) ? ((n) % 4) - 1 : 0))

/*
 * Encode in_len bytes into out as text plus a terminating NUL. out_cap must
 * be at least B64U_ENC_LEN(in_len) + 1, else AL_E_TOOBIG and out is "" (if
 * out_cap > 0). *out_len (optional) gets the text length without the NUL.
 * Returns AL_OK, AL_E_TOOBIG or AL_E_INVAL.
 */
int b64u_encode(const uint8_t *in, size_t in_len, char *out, size_t out_cap, size_t *out_len);

/*
 * Decode exactly in_len characters (NUL bytes inside count as invalid);
 * out may be NULL only when in_len is 0.
 * Returns AL_OK, AL_E_FORMAT (any non-alphabet character, '=', whitespace,
 * in_len % 4 == 1, non-zero trailing bits), AL_E_TOOBIG (out_cap smaller
 * than the decoded size) or AL_E_INVAL. *out_len gets the decoded length;
 * on error it is 0 and out holds unspecified bytes.
 */
int b64u_decode(const char *in, size_t in_len, uint8_t *out, size_t out_cap, size_t *out_len);

#endif
