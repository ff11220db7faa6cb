/*
 * b64url: strict base64url without padding (see b64url.h for the rules).
 *
 * Data model: groups of 3 bytes map to 4 characters of 6 bits each; a final
 * group of 1 or 2 bytes maps to 2 or 3 characters whose unused low bits
 * (4 or 2) must be zero on decode. The decode table maps a character to its
 * 6-bit value, or to B64U_BAD for everything outside the alphabet.
 */
#include "b64url.h"

#include "al_err.h"

enum { B64U_BAD = 0xff };

static const char b64u_alphabet[64] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "abcdefghijklmnopqrstuvwxyz"
                                      "0123456789-_";

/* Value of one character, or B64U_BAD (no table: nothing to get wrong). */
static unsigned b64u_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return (unsigned)(c - 'A');
    if (c >= 'a' && c <= 'z')
        return (unsigned)(c - 'a') + 26;
    if (c >= '0' && c <= '9')
        return (unsigned)(c - '0') + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return B64U_BAD;
}

int b64u_encode(const uint8_t *in, size_t in_len, char *out, size_t out_cap, size_t *out_len)
{
    if ((!in && in_len > 0) || !out)
        return AL_E_INVAL;
    if (out_cap > 0)
        out[0] = '\0';
    /* Guard the size arithmetic before using it. */
    if (in_len > (SIZE_MAX / 4) * 3 - 3)
        return AL_E_TOOBIG;
    size_t need = B64U_ENC_LEN(in_len);
    if (out_cap < need + 1)
        return AL_E_TOOBIG;

    size_t o = 0, i = 0;
    for (; i + 3 <= in_len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64u_alphabet[(v >> 18) & 63];
        out[o++] = b64u_alphabet[(v >> 12) & 63];
        out[o++] = b64u_alphabet[(v >> 6) & 63];
        out[o++] = b64u_alphabet[v & 63];
    }
    size_t rest = in_len - i;
    if (rest == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = b64u_alphabet[(v >> 18) & 63];
        out[o++] = b64u_alphabet[(v >> 12) & 63];
    } else if (rest == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = b64u_alphabet[(v >> 18) & 63];
        out[o++] = b64u_alphabet[(v >> 12) & 63];
        out[o++] = b64u_alphabet[(v >> 6) & 63];
    }
    out[o] = '\0';
    if (out_len)
        *out_len = o;
    return AL_OK;
}

int b64u_decode(const char *in, size_t in_len, uint8_t *out, size_t out_cap, size_t *out_len)
{
    if (((!in || !out) && in_len > 0) || !out_len)
        return AL_E_INVAL;
    *out_len = 0;
    if (in_len % 4 == 1)
        return AL_E_FORMAT;
    size_t need = B64U_DEC_LEN(in_len);
    if (out_cap < need)
        return AL_E_TOOBIG;

    size_t o = 0, i = 0;
    for (; i + 4 <= in_len; i += 4) {
        unsigned a = b64u_value((unsigned char)in[i]);
        unsigned b = b64u_value((unsigned char)in[i + 1]);
        unsigned c = b64u_value((unsigned char)in[i + 2]);
        unsigned d = b64u_value((unsigned char)in[i + 3]);
        if (a == B64U_BAD || b == B64U_BAD || c == B64U_BAD || d == B64U_BAD)
            return AL_E_FORMAT;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | d;
        out[o++] = (uint8_t)(v >> 16);
        out[o++] = (uint8_t)(v >> 8);
        out[o++] = (uint8_t)v;
    }
    size_t rest = in_len - i;
    if (rest == 2) {
        unsigned a = b64u_value((unsigned char)in[i]);
        unsigned b = b64u_value((unsigned char)in[i + 1]);
        if (a == B64U_BAD || b == B64U_BAD || (b & 0x0f) != 0)
            return AL_E_FORMAT;
        out[o++] = (uint8_t)(a << 2 | b >> 4);
    } else if (rest == 3) {
        unsigned a = b64u_value((unsigned char)in[i]);
        unsigned b = b64u_value((unsigned char)in[i + 1]);
        unsigned c = b64u_value((unsigned char)in[i + 2]);
        if (a == B64U_BAD || b == B64U_BAD || c == B64U_BAD || (c & 0x03) != 0)
            return AL_E_FORMAT;
        out[o++] = (uint8_t)(a << 2 | b >> 4);
        out[o++] = (uint8_t)((b & 0x0f) << 4 | c >> 2);
    }
    *out_len = o;
    return AL_OK;
}
