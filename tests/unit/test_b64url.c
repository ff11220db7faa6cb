/*
 * Unit tests for b64url: RFC 4648 vectors, round trips over random data,
 * and every strictness rule (alphabet, padding, whitespace, length % 4 == 1,
 * non-zero trailing bits, output capacity).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "al_err.h"
#include "b64url.h"
#include "testutil.h"

struct vec {
    const char *raw;
    const char *enc;
};

/* RFC 4648 section 10 test vectors, without padding. */
static const struct vec rfc4648[] = {
    {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},          {"foo", "Zm9v"},
    {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"},
};

static void test_rfc4648_vectors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rfc4648 / sizeof rfc4648[0]; i++) {
        const struct vec *v = &rfc4648[i];
        char enc[32];
        size_t n = 99;
        assert_int_equal(b64u_encode((const uint8_t *)v->raw, strlen(v->raw), enc, sizeof enc, &n),
                         AL_OK);
        assert_string_equal(enc, v->enc);
        assert_int_equal(n, strlen(v->enc));
        assert_int_equal(B64U_ENC_LEN(strlen(v->raw)), strlen(v->enc));

        uint8_t dec[32];
        assert_int_equal(b64u_decode(v->enc, strlen(v->enc), dec, sizeof dec, &n), AL_OK);
        assert_int_equal(n, strlen(v->raw));
        assert_memory_equal(dec, v->raw, n);
        assert_int_equal(B64U_DEC_LEN(strlen(v->enc)), strlen(v->raw));
    }
}

static void test_url_alphabet(void **state)
{
    (void)state;
    /* 0xfb 0xff 0xbf encodes to "-_-_" in base64url ("+/+/" in base64). */
    const uint8_t raw[] = {0xfb, 0xff, 0xbf, 0xfb, 0xff};
    char enc[16];
    assert_int_equal(b64u_encode(raw, sizeof raw, enc, sizeof enc, NULL), AL_OK);
    assert_string_equal(enc, "-_-_-_8");
    uint8_t dec[8];
    size_t n = 0;
    assert_int_equal(b64u_decode(enc, strlen(enc), dec, sizeof dec, &n), AL_OK);
    assert_int_equal(n, sizeof raw);
    assert_memory_equal(dec, raw, sizeof raw);
}

static void test_round_trip_random(void **state)
{
    (void)state;
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    uint8_t raw[300] = {0}, dec[300];
    char enc[B64U_ENC_LEN(300) + 1];
    for (size_t len = 0; len <= sizeof raw; len++) {
        for (size_t i = 0; i < len; i++)
            raw[i] = (uint8_t)tu_rand(&seed);
        size_t n = 0;
        assert_int_equal(b64u_encode(raw, len, enc, sizeof enc, &n), AL_OK);
        assert_int_equal(n, B64U_ENC_LEN(len));
        assert_int_equal(strlen(enc), n);
        size_t m = 0;
        assert_int_equal(b64u_decode(enc, n, dec, sizeof dec, &m), AL_OK);
        assert_int_equal(m, len);
        assert_memory_equal(dec, raw, len);
    }
}

static void expect_format(const char *s)
{
    uint8_t dec[64];
    size_t n = 77;
    assert_int_equal(b64u_decode(s, strlen(s), dec, sizeof dec, &n), AL_E_FORMAT);
    assert_int_equal(n, 0);
}

static void test_rejects_padding_and_foreign_chars(void **state)
{
    (void)state;
    expect_format("Zg==");     /* padding */
    expect_format("Zm8=");     /* padding */
    expect_format("Zm9v\n");   /* newline: length 5 */
    expect_format("Zm9 v");    /* space inside */
    expect_format(" Zm9v");    /* leading space */
    expect_format("Zm9vYg\t"); /* tab */
    expect_format("+/+/");     /* standard base64 alphabet */
    expect_format("ab+c");
    expect_format("ab/c");
    expect_format("a.bc");
    expect_format("\xc3\xa9xx"); /* non-ASCII */
    /* An embedded NUL is a character outside the alphabet. */
    uint8_t dec[8];
    size_t n = 0;
    assert_int_equal(b64u_decode("Zm\0v", 4, dec, sizeof dec, &n), AL_E_FORMAT);
}

static void test_rejects_impossible_length(void **state)
{
    (void)state;
    expect_format("Z");
    expect_format("Zm9vZ");
    expect_format("Zm9vYmFyZ");
}

static void test_rejects_nonzero_trailing_bits(void **state)
{
    (void)state;
    /* "Zg" is the canonical form of "f"; "Zh".."Zv" decode to the same byte
     * with non-zero unused bits in lenient decoders. */
    expect_format("Zh");
    expect_format("Zv");
    expect_format("Zm9"); /* canonical "fo" is "Zm8": low 2 bits of '9' are set */
    expect_format("Zm-");
    uint8_t dec[4];
    size_t n = 0;
    assert_int_equal(b64u_decode("Zg", 2, dec, sizeof dec, &n), AL_OK);
    assert_int_equal(b64u_decode("Zm8", 3, dec, sizeof dec, &n), AL_OK);
    /* Exhaustive: for 1 trailing byte exactly 4 of 64 last chars are valid,
     * for 2 trailing bytes exactly 16. */
    static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    int ok2 = 0, ok3 = 0;
    for (int i = 0; i < 64; i++) {
        char two[3] = {'Q', alpha[i], 0}, three[4] = {'Q', 'Q', alpha[i], 0};
        if (b64u_decode(two, 2, dec, sizeof dec, &n) == AL_OK)
            ok2++;
        if (b64u_decode(three, 3, dec, sizeof dec, &n) == AL_OK)
            ok3++;
    }
    assert_int_equal(ok2, 4);
    assert_int_equal(ok3, 16);
}

static void test_capacity(void **state)
{
    (void)state;
    char enc[9];
    size_t n = 0;
    /* "foobar" needs 8 characters plus the NUL. */
    assert_int_equal(b64u_encode((const uint8_t *)"foobar", 6, enc, 8, &n), AL_E_TOOBIG);
    assert_string_equal(enc, "");
    assert_int_equal(b64u_encode((const uint8_t *)"foobar", 6, enc, 9, &n), AL_OK);
    uint8_t dec[6];
    assert_int_equal(b64u_decode("Zm9vYmFy", 8, dec, 5, &n), AL_E_TOOBIG);
    assert_int_equal(b64u_decode("Zm9vYmFy", 8, dec, 6, &n), AL_OK);
    assert_int_equal(n, 6);
    /* Empty input decodes to nothing, even with no buffer. */
    assert_int_equal(b64u_decode("", 0, NULL, 0, &n), AL_OK);
    assert_int_equal(n, 0);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    char enc[8];
    uint8_t dec[8];
    size_t n = 0;
    assert_int_equal(b64u_encode(NULL, 3, enc, sizeof enc, &n), AL_E_INVAL);
    assert_int_equal(b64u_encode((const uint8_t *)"x", 1, NULL, 0, &n), AL_E_INVAL);
    assert_int_equal(b64u_decode(NULL, 4, dec, sizeof dec, &n), AL_E_INVAL);
    assert_int_equal(b64u_decode("Zm9v", 4, dec, sizeof dec, NULL), AL_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_vectors),
        cmocka_unit_test(test_url_alphabet),
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_rejects_padding_and_foreign_chars),
        cmocka_unit_test(test_rejects_impossible_length),
        cmocka_unit_test(test_rejects_nonzero_trailing_bits),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_invalid_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
