/*
 * vtfilter: see vtfilter.h for what is handed on and why.
 *
 * Data model. struct vtf is one fixed-size block (no allocation after
 * vtf_new) holding the parser state of one byte stream:
 *   st            where we are: ground, after ESC, inside a CSI, inside a
 *                 string, or after ESC inside a string
 *   u_*           the UTF-8 decoder: code point so far, bytes still needed,
 *                 the range the next byte must fall in (strict UTF-8), the
 *                 bytes seen so far
 *   csi_raw       a CSI's bytes as they came (ESC '[' included), handed on
 *                 as they are when csi_raw_ok: they are then exactly what
 *                 rebuilding from the parse would give (no control or DEL
 *                 inside, no leading zero, no clamped parameter), and
 *                 copying them costs less than printing every parameter
 *   seq, csi_len  the ESC/CSI being parsed; seq_bad means "drop it when the
 *                 final byte arrives" (the stream stays in sync meanwhile)
 *   str, str_len  the OSC being gathered, prefix and terminator included
 *                 (str[0..1] = ESC ']'); str_over means too long
 *   text          printable text decoded but not yet handed on, whole code
 *                 points only; handed on before any other unit and at the
 *                 end of every vtf_feed; text_wide: it holds a code point
 *                 above U+007F (else the unit is marked ascii)
 *   rep_cp        the last base (non-zero-width) character, what REP repeats
 *   ncomb         zero-width code points since that base character
 *   narrow        replace wide code points (the screen is one column wide)
 * Units point into the struct; they are valid only during the emit call.
 *
 * The width tables below were produced by probing libvterm 0.1.4 itself
 * (print "a" then each code point, see where it lands), so they are the
 * library's behaviour rather than a Unicode version's; test_vtfilter checks
 * every code point against the installed library.
 */
#include "vtfilter.h"

#include <stdlib.h>
#include <string.h>

#include "al_err.h"

#define ESC_BYTE 0x1b
#define VTF_SEQ_OUT 128 /* >= 2 + 1 + 16 * 5 + 15 + 2 + 1 bytes of a rebuilt CSI */

enum vtf_state { ST_GROUND, ST_ESC, ST_CSI, ST_STR, ST_STR_ESC };
enum vtf_str_kind { STR_OSC, STR_IGNORE };

struct vtf {
    vtf_emit_fn emit;
    void *ud;
    enum vtf_state st;

    uint32_t u_cp;
    uint8_t u_need, u_lo, u_hi;
    uint8_t u_raw[4], u_rawlen; /* the code point's bytes so far (vtf_pending) */

    struct vtf_seq seq;
    size_t csi_len;
    int csi_raw_ok;
    uint8_t csi_raw[2 + VTF_MAX_CSI_LEN];
    int seq_bad;

    enum vtf_str_kind str_kind;
    int str_over;
    size_t str_len;
    uint8_t str[2 + VTF_MAX_STRING + 2];

    size_t text_len;
    int text_wide; /* text holds a code point above U+007F */
    int text_odd;  /* text holds a code point whose width is not 1 */
    uint8_t text[VTF_TEXT_CHUNK];

    uint32_t rep_cp;
    unsigned ncomb;
    int narrow;

    uint8_t out[VTF_SEQ_OUT];
    struct vtf_stats stats;
};

struct vtf_range {
    uint32_t first, last;
};

/* Code points libvterm 0.1.4 treats as zero-width (combined into the
 * previous cell). Sorted, non-overlapping. */
static const struct vtf_range vtf_zero_width[] = {
    {0x0300, 0x036F},   {0x0483, 0x0486},   {0x0488, 0x0489},   {0x0591, 0x05BD},
    {0x05BF, 0x05BF},   {0x05C1, 0x05C2},   {0x05C4, 0x05C5},   {0x05C7, 0x05C7},
    {0x0600, 0x0603},   {0x0610, 0x0615},   {0x064B, 0x065E},   {0x0670, 0x0670},
    {0x06D6, 0x06E4},   {0x06E7, 0x06E8},   {0x06EA, 0x06ED},   {0x070F, 0x070F},
    {0x0711, 0x0711},   {0x0730, 0x074A},   {0x07A6, 0x07B0},   {0x07EB, 0x07F3},
    {0x0901, 0x0902},   {0x093C, 0x093C},   {0x0941, 0x0948},   {0x094D, 0x094D},
    {0x0951, 0x0954},   {0x0962, 0x0963},   {0x0981, 0x0981},   {0x09BC, 0x09BC},
    {0x09C1, 0x09C4},   {0x09CD, 0x09CD},   {0x09E2, 0x09E3},   {0x0A01, 0x0A02},
    {0x0A3C, 0x0A3C},   {0x0A41, 0x0A42},   {0x0A47, 0x0A48},   {0x0A4B, 0x0A4D},
    {0x0A70, 0x0A71},   {0x0A81, 0x0A82},   {0x0ABC, 0x0ABC},   {0x0AC1, 0x0AC5},
    {0x0AC7, 0x0AC8},   {0x0ACD, 0x0ACD},   {0x0AE2, 0x0AE3},   {0x0B01, 0x0B01},
    {0x0B3C, 0x0B3C},   {0x0B3F, 0x0B3F},   {0x0B41, 0x0B43},   {0x0B4D, 0x0B4D},
    {0x0B56, 0x0B56},   {0x0B82, 0x0B82},   {0x0BC0, 0x0BC0},   {0x0BCD, 0x0BCD},
    {0x0C3E, 0x0C40},   {0x0C46, 0x0C48},   {0x0C4A, 0x0C4D},   {0x0C55, 0x0C56},
    {0x0CBC, 0x0CBC},   {0x0CBF, 0x0CBF},   {0x0CC6, 0x0CC6},   {0x0CCC, 0x0CCD},
    {0x0CE2, 0x0CE3},   {0x0D41, 0x0D43},   {0x0D4D, 0x0D4D},   {0x0DCA, 0x0DCA},
    {0x0DD2, 0x0DD4},   {0x0DD6, 0x0DD6},   {0x0E31, 0x0E31},   {0x0E34, 0x0E3A},
    {0x0E47, 0x0E4E},   {0x0EB1, 0x0EB1},   {0x0EB4, 0x0EB9},   {0x0EBB, 0x0EBC},
    {0x0EC8, 0x0ECD},   {0x0F18, 0x0F19},   {0x0F35, 0x0F35},   {0x0F37, 0x0F37},
    {0x0F39, 0x0F39},   {0x0F71, 0x0F7E},   {0x0F80, 0x0F84},   {0x0F86, 0x0F87},
    {0x0F90, 0x0F97},   {0x0F99, 0x0FBC},   {0x0FC6, 0x0FC6},   {0x102D, 0x1030},
    {0x1032, 0x1032},   {0x1036, 0x1037},   {0x1039, 0x1039},   {0x1058, 0x1059},
    {0x1160, 0x11FF},   {0x135F, 0x135F},   {0x1712, 0x1714},   {0x1732, 0x1734},
    {0x1752, 0x1753},   {0x1772, 0x1773},   {0x17B4, 0x17B5},   {0x17B7, 0x17BD},
    {0x17C6, 0x17C6},   {0x17C9, 0x17D3},   {0x17DD, 0x17DD},   {0x180B, 0x180D},
    {0x18A9, 0x18A9},   {0x1920, 0x1922},   {0x1927, 0x1928},   {0x1932, 0x1932},
    {0x1939, 0x193B},   {0x1A17, 0x1A18},   {0x1B00, 0x1B03},   {0x1B34, 0x1B34},
    {0x1B36, 0x1B3A},   {0x1B3C, 0x1B3C},   {0x1B42, 0x1B42},   {0x1B6B, 0x1B73},
    {0x1DC0, 0x1DCA},   {0x1DFE, 0x1DFF},   {0x200B, 0x200F},   {0x202A, 0x202E},
    {0x2060, 0x2063},   {0x206A, 0x206F},   {0x20D0, 0x20EF},   {0x302A, 0x302F},
    {0x3099, 0x309A},   {0xA806, 0xA806},   {0xA80B, 0xA80B},   {0xA825, 0xA826},
    {0xFB1E, 0xFB1E},   {0xFE00, 0xFE0F},   {0xFE20, 0xFE23},   {0xFEFF, 0xFEFF},
    {0xFFF9, 0xFFFB},   {0x10A01, 0x10A03}, {0x10A05, 0x10A06}, {0x10A0C, 0x10A0F},
    {0x10A38, 0x10A3A}, {0x10A3F, 0x10A3F}, {0x1D167, 0x1D169}, {0x1D173, 0x1D182},
    {0x1D185, 0x1D18B}, {0x1D1AA, 0x1D1AD}, {0x1D242, 0x1D244}, {0xE0001, 0xE0001},
    {0xE0020, 0xE007F}, {0xE0100, 0xE01EF},
};

/* Code points libvterm 0.1.4 lays out two columns wide. */
static const struct vtf_range vtf_wide[] = {
    {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},
    {0x23F0, 0x23F0},   {0x23F3, 0x23F3},   {0x25FD, 0x25FE},   {0x2614, 0x2615},
    {0x2648, 0x2653},   {0x267F, 0x267F},   {0x2693, 0x2693},   {0x26A1, 0x26A1},
    {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},   {0x26CE, 0x26CE},
    {0x26D4, 0x26D4},   {0x26EA, 0x26EA},   {0x26F2, 0x26F3},   {0x26F5, 0x26F5},
    {0x26FA, 0x26FA},   {0x26FD, 0x26FD},   {0x2705, 0x2705},   {0x270A, 0x270B},
    {0x2728, 0x2728},   {0x274C, 0x274C},   {0x274E, 0x274E},   {0x2753, 0x2755},
    {0x2757, 0x2757},   {0x2795, 0x2797},   {0x27B0, 0x27B0},   {0x27BF, 0x27BF},
    {0x2B1B, 0x2B1C},   {0x2B50, 0x2B50},   {0x2B55, 0x2B55},   {0x2E80, 0x3029},
    {0x3030, 0x303E},   {0x3040, 0x3098},   {0x309B, 0xA4CF},   {0xA960, 0xA97C},
    {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},
    {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x16FE0}, {0x17000, 0x187EC},
    {0x18800, 0x18AF2}, {0x1B000, 0x1B001}, {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF},
    {0x1F18E, 0x1F18E}, {0x1F191, 0x1F19A}, {0x1F200, 0x1F202}, {0x1F210, 0x1F23B},
    {0x1F240, 0x1F248}, {0x1F250, 0x1F251}, {0x1F300, 0x1F320}, {0x1F32D, 0x1F335},
    {0x1F337, 0x1F37C}, {0x1F37E, 0x1F393}, {0x1F3A0, 0x1F3CA}, {0x1F3CF, 0x1F3D3},
    {0x1F3E0, 0x1F3F0}, {0x1F3F4, 0x1F3F4}, {0x1F3F8, 0x1F43E}, {0x1F440, 0x1F440},
    {0x1F442, 0x1F4FC}, {0x1F4FF, 0x1F53D}, {0x1F54B, 0x1F54E}, {0x1F550, 0x1F567},
    {0x1F57A, 0x1F57A}, {0x1F595, 0x1F596}, {0x1F5A4, 0x1F5A4}, {0x1F5FB, 0x1F64F},
    {0x1F680, 0x1F6C5}, {0x1F6CC, 0x1F6CC}, {0x1F6D0, 0x1F6D2}, {0x1F6EB, 0x1F6EC},
    {0x1F6F4, 0x1F6F6}, {0x1F910, 0x1F91E}, {0x1F920, 0x1F927}, {0x1F930, 0x1F930},
    {0x1F933, 0x1F93E}, {0x1F940, 0x1F94B}, {0x1F950, 0x1F95E}, {0x1F980, 0x1F991},
    {0x1F9C0, 0x1F9C0}, {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD},
};

/* Blocks of VTF_PLAIN_BLOCK code points of the BMP in which every code
 * point is width 1 (in neither table above, no surrogate, no U+FFFE/F): bit
 * b of byte i is the block starting at (8 * i + b) * VTF_PLAIN_BLOCK. Made
 * from the two tables (box drawing, block elements, Braille, most of Latin,
 * Greek, Cyrillic, arrows and symbols are plain), so that the common glyphs
 * of a TUI skip both binary searches; test_vtfilter checks vtf_cp_width for
 * every code point against the installed libvterm. */
#define VTF_PLAIN_BLOCK 64
static const uint8_t vtf_plain[0x10000 / VTF_PLAIN_BLOCK / 8] = {
    0xf8, 0xcf, 0x3b, 0x04, 0x0f, 0x00, 0x50, 0x00, 0x0c, 0xdf, 0xff, 0x0f, 0xea, 0xce, 0x7f, 0xff,
    0xf4, 0x6f, 0x7f, 0x80, 0xff, 0xcf, 0xff, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0xf0, 0xff, 0xde, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xe0, 0xff, 0x44,
};

static int in_table(uint32_t cp, const struct vtf_range *t, size_t n)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp > t[mid].last)
            lo = mid + 1;
        else if (cp < t[mid].first)
            hi = mid;
        else
            return 1;
    }
    return 0;
}

int vtf_cp_width(uint32_t cp)
{
    if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
        return -1;
    if (cp < 0x300)
        return 1;
    if (cp < 0x10000 &&
        (vtf_plain[cp / VTF_PLAIN_BLOCK / 8] >> (cp / VTF_PLAIN_BLOCK % 8) & 1u) != 0)
        return 1;
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff || cp > 0x10ffff)
        return -1;
    if (in_table(cp, vtf_zero_width, sizeof vtf_zero_width / sizeof vtf_zero_width[0]))
        return 0;
    if (in_table(cp, vtf_wide, sizeof vtf_wide / sizeof vtf_wide[0]))
        return 2;
    return 1;
}

size_t vtf_utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp >= 0xd800 && cp <= 0xdfff)
        return 0;
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    if (cp <= 0x10ffff) {
        out[0] = (uint8_t)(0xf0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (uint8_t)(0x80 | (cp & 0x3f));
        return 4;
    }
    return 0;
}

int vtf_new(vtf_emit_fn emit, void *ud, struct vtf **out)
{
    if (!emit || !out)
        return AL_E_INVAL;
    *out = NULL;
    struct vtf *f = calloc(1, sizeof *f);
    if (!f)
        return AL_E_NOMEM;
    f->emit = emit;
    f->ud = ud;
    f->st = ST_GROUND;
    *out = f;
    return AL_OK;
}

void vtf_free(struct vtf *f)
{
    free(f);
}

void vtf_set_narrow(struct vtf *f, int narrow)
{
    if (f)
        f->narrow = narrow != 0;
}

void vtf_reset(struct vtf *f)
{
    if (!f)
        return;
    f->st = ST_GROUND;
    f->u_need = 0;
    f->text_len = 0;
    f->text_wide = 0;
    f->text_odd = 0;
    f->rep_cp = 0;
    f->ncomb = 0;
}

void vtf_get_stats(const struct vtf *f, struct vtf_stats *out)
{
    if (f && out)
        *out = f->stats;
}

static int emit_unit(struct vtf *f, enum vtf_kind kind, const uint8_t *b, size_t n,
                     const struct vtf_seq *seq)
{
    struct vtf_unit u = {kind, b, n, seq, 0, 0};
    f->stats.units++;
    return f->emit(f->ud, &u);
}

static int flush_text(struct vtf *f)
{
    if (f->text_len == 0)
        return 0;
    struct vtf_unit u = {VTF_TEXT, f->text, f->text_len, NULL, !f->text_wide, !f->text_odd};
    f->text_len = 0;
    f->text_wide = 0;
    f->text_odd = 0;
    f->stats.units++;
    return f->emit(f->ud, &u);
}

static int emit_ctrl(struct vtf *f, uint8_t c)
{
    int rc = flush_text(f);
    if (rc)
        return rc;
    f->out[0] = c;
    return emit_unit(f, VTF_CTRL, f->out, 1, NULL);
}

/* One decoded code point of text: drop C1, bound combining marks, remember
 * the base character for REP, gather into the text run. */
/* put_cp for a code point that came as the well-formed UTF-8 raw[0..k):
 * those bytes are what vtf_utf8_encode would write, so they are copied
 * when the code point is kept as it is (raw NULL: encode it). */
static int put_cp_raw(struct vtf *f, uint32_t cp, const uint8_t *raw, size_t k);

static int put_cp(struct vtf *f, uint32_t cp)
{
    return put_cp_raw(f, cp, NULL, 0);
}

static int put_cp_raw(struct vtf *f, uint32_t cp, const uint8_t *raw, size_t k)
{
    if (cp >= 0x80 && cp <= 0x9f) {
        f->stats.c1_dropped++;
        return 0;
    }
    int w = vtf_cp_width(cp);
    if (w < 0) {
        f->stats.utf8_invalid++;
        cp = 0xfffd;
        w = 1;
    }
    if (w == 2 && f->narrow) {
        f->stats.wide_narrowed++;
        cp = 0xfffd;
        w = 1;
    }
    if (w == 0) {
        if (f->ncomb >= VTF_MAX_COMBINING) {
            f->stats.combining_dropped++;
            return 0;
        }
        f->ncomb++;
    } else {
        f->ncomb = 0;
        f->rep_cp = cp;
    }
    if (f->text_len + 4 > sizeof f->text) {
        int rc = flush_text(f);
        if (rc)
            return rc;
    }
    if (cp >= 0x80)
        f->text_wide = 1;
    if (w != 1)
        f->text_odd = 1;
    if (raw && cp != 0xfffd) {
        memcpy(f->text + f->text_len, raw, k);
        f->text_len += k;
    } else {
        f->text_len += vtf_utf8_encode(cp, f->text + f->text_len);
    }
    return 0;
}

static void start_esc(struct vtf *f)
{
    f->st = ST_ESC;
    memset(&f->seq, 0, sizeof f->seq);
    f->seq_bad = 0;
}

static void start_csi(struct vtf *f)
{
    f->st = ST_CSI;
    memset(&f->seq, 0, sizeof f->seq);
    f->seq.nparams = 1;
    f->seq.params[0] = VTF_PARAM_MISSING;
    f->csi_len = 0;
    f->csi_raw_ok = 1;
    f->csi_raw[0] = ESC_BYTE;
    f->csi_raw[1] = '[';
    f->seq_bad = 0;
}

static void start_str(struct vtf *f, enum vtf_str_kind kind, uint8_t intro)
{
    f->st = ST_STR;
    f->str_kind = kind;
    f->str_over = 0;
    f->str[0] = ESC_BYTE;
    f->str[1] = intro;
    f->str_len = 2;
}

static int ground_byte(struct vtf *f, uint8_t c);
static int esc_byte(struct vtf *f, uint8_t c);

/* C0 controls behave the same in ground, ESC and CSI states: ESC (re)starts
 * a sequence, CAN and SUB cancel one, NUL is ignored, the rest execute at
 * once (before the sequence they interrupt, as terminals do). */
static int control(struct vtf *f, uint8_t c, int in_seq)
{
    if (c == ESC_BYTE) {
        if (in_seq) {
            if (f->st == ST_CSI)
                f->stats.csi_dropped++;
            else
                f->stats.esc_dropped++;
        }
        start_esc(f);
        return 0;
    }
    if (c == 0x18 || c == 0x1a) {
        if (in_seq) {
            if (f->st == ST_CSI)
                f->stats.csi_dropped++;
            else
                f->stats.esc_dropped++;
        }
        f->st = ST_GROUND;
        return 0;
    }
    if (c == 0)
        return 0;
    return emit_ctrl(f, c);
}

static int ground_byte(struct vtf *f, uint8_t c)
{
    if (f->u_need) {
        if (c >= f->u_lo && c <= f->u_hi) {
            f->u_raw[f->u_rawlen++] = c;
            f->u_cp = (f->u_cp << 6) | (c & 0x3fu);
            f->u_lo = 0x80;
            f->u_hi = 0xbf;
            if (--f->u_need == 0)
                return put_cp(f, f->u_cp);
            return 0;
        }
        /* A truncated sequence: one U+FFFD, then c starts afresh. */
        f->u_need = 0;
        int rc = put_cp(f, 0xfffd);
        f->stats.utf8_invalid++;
        if (rc)
            return rc;
    }
    if (c < 0x20)
        return control(f, c, 0);
    if (c < 0x7f)
        return put_cp(f, c);
    if (c == 0x7f)
        return 0;
    f->u_lo = 0x80;
    f->u_hi = 0xbf;
    f->u_raw[0] = c;
    f->u_rawlen = 1;
    if (c >= 0xc2 && c <= 0xdf) {
        f->u_need = 1;
        f->u_cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
        f->u_need = 2;
        f->u_cp = c & 0x0fu;
        if (c == 0xe0)
            f->u_lo = 0xa0; /* no overlong forms */
        if (c == 0xed)
            f->u_hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        f->u_need = 3;
        f->u_cp = c & 0x07u;
        if (c == 0xf0)
            f->u_lo = 0x90;
        if (c == 0xf4)
            f->u_hi = 0x8f; /* nothing above U+10FFFF */
    } else {
        f->stats.utf8_invalid++;
        return put_cp(f, 0xfffd);
    }
    return 0;
}

static int emit_esc(struct vtf *f)
{
    size_t n = 0;
    f->out[n++] = ESC_BYTE;
    for (uint8_t i = 0; i < f->seq.ninter; i++)
        f->out[n++] = f->seq.inter[i];
    f->out[n++] = f->seq.final;
    if (f->seq.ninter == 0 && f->seq.final == 'c') { /* RIS: nothing left to repeat */
        f->rep_cp = 0;
        f->ncomb = 0;
    }
    int rc = flush_text(f);
    if (rc)
        return rc;
    return emit_unit(f, VTF_ESC, f->out, n, &f->seq);
}

static int esc_byte(struct vtf *f, uint8_t c)
{
    if (c < 0x20)
        return control(f, c, 1);
    if (c == 0x7f)
        return 0;
    if (c >= 0x80) { /* not part of any escape sequence: drop the ESC, keep the text */
        f->stats.esc_dropped++;
        f->st = ST_GROUND;
        return ground_byte(f, c);
    }
    if (c < 0x30) {
        if (f->seq.ninter < VTF_MAX_INTERMED)
            f->seq.inter[f->seq.ninter++] = c;
        else
            f->seq_bad = 1;
        return 0;
    }
    f->st = ST_GROUND;
    if (f->seq.ninter == 0 && !f->seq_bad) {
        switch (c) {
        case '[':
            start_csi(f);
            return 0;
        case ']':
            start_str(f, STR_OSC, ']');
            return 0;
        case 'P': /* DCS: libvterm 0.1.4 only answers DECRQSS, and answers an
                   * unknown request through a bad format string */
        case 'X': /* SOS */
        case '^': /* PM */
        case '_': /* APC */
            start_str(f, STR_IGNORE, c);
            return 0;
        case '\\': /* a stray ST */
            return 0;
        default:
            break;
        }
    }
    /* libvterm starts a CSI or a string on these finals even after
     * intermediates; never let it see them. */
    if (f->seq_bad || strchr("PX[]^_", c) != NULL) {
        f->stats.esc_dropped++;
        return 0;
    }
    f->seq.final = c;
    return emit_esc(f);
}

size_t vtf_put_uint(char *o, uint32_t v)
{
    char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < sizeof tmp);
    for (size_t i = 0; i < n; i++)
        o[i] = tmp[n - 1 - i];
    return n;
}

static int expand_rep(struct vtf *f)
{
    int32_t count = f->seq.params[0];
    if (count == VTF_PARAM_MISSING || count == 0)
        count = 1;
    if (count > VTF_MAX_REP)
        count = VTF_MAX_REP;
    if (f->rep_cp == 0) {
        f->stats.rep_dropped++;
        return 0;
    }
    f->stats.rep_expanded++;
    for (int32_t i = 0; i < count; i++) {
        int rc = put_cp(f, f->rep_cp);
        if (rc)
            return rc;
    }
    return 0;
}

/* Where an SGR's trailing bare 38 or 48 is (a 38/48 that is the last
 * parameter and no one's sub-parameter); nparams if it has none. Walks
 * the parameters as libvterm 0.1.4 consumes them: a 38/48 takes its
 * palette and the palette's values (5;N one, 2;R;G;B three, another none),
 * then each command skips the sub-parameters (':') that follow it. */
static uint8_t sgr_bare_colour(const struct vtf_seq *s)
{
    unsigned i = 0;
    while (i < s->nparams) {
        int32_t p = s->params[i];
        if (p == 38 || p == 48) {
            if (i + 1 == s->nparams)
                return (uint8_t)i;
            int32_t k = s->params[i + 1];
            i += k == 5 ? 2u : k == 2 ? 4u : 1u;
        }
        while (i < s->nparams && ((s->sub >> i) & 1u))
            i++;
        i++;
    }
    return s->nparams;
}

static int csi_final(struct vtf *f, uint8_t c)
{
    struct vtf_seq *s = &f->seq;
    f->st = ST_GROUND;
    if (f->seq_bad) {
        f->stats.csi_dropped++;
        return 0;
    }
    s->final = c;
    for (uint8_t i = 0; i < s->nparams; i++) {
        if (s->params[i] > VTF_MAX_CSI_PARAM) {
            s->params[i] = VTF_MAX_CSI_PARAM;
            f->stats.params_clamped++;
            f->csi_raw_ok = 0;
        }
    }
    /* An SGR that ends in a bare 38 or 48 (no colour after it): libvterm
     * 0.1.4 reads the argument after it from whatever CSI came before, so
     * the pen would depend on bytes the runner writes of its own. xterm
     * ignores such a 38/48; so does the filter (an SGR left with nothing
     * is dropped whole: an empty one would reset the pen). */
    if (c == 'm' && s->leader == 0 && s->ninter == 0) {
        uint8_t bare = sgr_bare_colour(s);
        if (bare == 0) {
            f->stats.csi_dropped++;
            return 0;
        }
        if (bare < s->nparams) {
            s->nparams = bare;
            f->csi_raw_ok = 0;
        }
    }
    if (c == 'b') { /* REP: libvterm 0.1.4 may loop forever on it */
        if (s->leader == 0 && s->ninter == 0)
            return expand_rep(f);
        f->stats.rep_dropped++;
        return 0;
    }
    if (f->csi_raw_ok) { /* the bytes as they came: the final is in csi_raw too */
        int rc = flush_text(f);
        return rc ? rc : emit_unit(f, VTF_CSI, f->csi_raw, 2 + f->csi_len, s);
    }
    size_t n = 0;
    f->out[n++] = ESC_BYTE;
    f->out[n++] = '[';
    if (s->leader)
        f->out[n++] = s->leader;
    for (uint8_t i = 0; i < s->nparams; i++) {
        if (s->params[i] != VTF_PARAM_MISSING)
            n += vtf_put_uint((char *)f->out + n, (uint32_t)s->params[i]);
        if (i + 1 < s->nparams)
            f->out[n++] = (s->sub >> i) & 1u ? ':' : ';';
    }
    for (uint8_t i = 0; i < s->ninter; i++)
        f->out[n++] = s->inter[i];
    f->out[n++] = c;
    int rc = flush_text(f);
    if (rc)
        return rc;
    return emit_unit(f, VTF_CSI, f->out, n, s);
}

static int csi_byte(struct vtf *f, uint8_t c)
{
    struct vtf_seq *s = &f->seq;
    if (c < 0x20 || c == 0x7f) {
        f->csi_raw_ok = 0; /* executed (or dropped) apart: not in the unit */
        return c == 0x7f ? 0 : control(f, c, 1);
    }
    if (c >= 0x80) { /* not part of any CSI: drop it, keep the text */
        f->stats.csi_dropped++;
        f->st = ST_GROUND;
        return ground_byte(f, c);
    }
    if (f->csi_len < VTF_MAX_CSI_LEN + 1)
        f->csi_len++;
    if (f->csi_len > VTF_MAX_CSI_LEN)
        f->seq_bad = 1;
    else
        f->csi_raw[1 + f->csi_len] = c;
    if (c >= 0x40)
        return csi_final(f, c);
    if (f->seq_bad)
        return 0;
    if (c >= '0' && c <= '9') {
        int32_t *p = &s->params[s->nparams - 1];
        if (s->ninter) {
            f->seq_bad = 1;
        } else if (*p == VTF_PARAM_MISSING) {
            *p = c - '0';
        } else if (*p <= VTF_MAX_CSI_PARAM) {
            if (*p == 0)
                f->csi_raw_ok = 0; /* a leading zero */
            *p = *p * 10 + (c - '0');
            if (*p > VTF_MAX_CSI_PARAM)
                *p = VTF_MAX_CSI_PARAM + 1; /* clamped at the final byte */
        }
        return 0;
    }
    if (c == ';' || c == ':') {
        if (s->ninter || s->nparams >= VTF_MAX_CSI_PARAMS) {
            f->seq_bad = 1;
            return 0;
        }
        if (c == ':')
            s->sub |= (uint16_t)(1u << (s->nparams - 1));
        s->params[s->nparams++] = VTF_PARAM_MISSING;
        return 0;
    }
    if (c >= 0x3c) { /* '<' '=' '>' '?': one, and only first */
        if (f->csi_len == 1)
            s->leader = c;
        else
            f->seq_bad = 1;
        return 0;
    }
    /* 0x20..0x2f: intermediate */
    if (s->ninter < VTF_MAX_INTERMED)
        s->inter[s->ninter++] = c;
    else
        f->seq_bad = 1;
    return 0;
}

static int str_end(struct vtf *f)
{
    f->st = ST_GROUND;
    if (f->str_kind == STR_IGNORE || f->str_over) {
        f->stats.strings_dropped++;
        return 0;
    }
    f->str[f->str_len++] = ESC_BYTE;
    f->str[f->str_len++] = '\\';
    int rc = flush_text(f);
    if (rc)
        return rc;
    return emit_unit(f, VTF_OSC, f->str, f->str_len, NULL);
}

static int str_byte(struct vtf *f, uint8_t c)
{
    if (c == ESC_BYTE) {
        f->st = ST_STR_ESC;
        return 0;
    }
    if (c == 0x18 || c == 0x1a) {
        f->stats.strings_dropped++;
        f->st = ST_GROUND;
        return 0;
    }
    if (c == 0x07) /* BEL ends an OSC (xterm); in the other strings it is ignored */
        return f->str_kind == STR_OSC ? str_end(f) : 0;
    if (c < 0x20 || c == 0x7f || f->str_kind == STR_IGNORE)
        return 0;
    if (f->str_len - 2 >= VTF_MAX_STRING) {
        f->str_over = 1;
        return 0;
    }
    f->str[f->str_len++] = c;
    return 0;
}

static int str_esc_byte(struct vtf *f, uint8_t c)
{
    if (c == '\\')
        return str_end(f);
    /* ESC then anything else aborts the string and starts a sequence. */
    f->stats.strings_dropped++;
    start_esc(f);
    return esc_byte(f, c);
}

/* How many of p's first n bytes are printable ASCII (0x20-0x7e) before the
 * first that is not: eight at a time while none of the eight is outside
 * the range (a word test that may say "outside" for a byte after one that
 * truly is, never "inside" for one that is not), then byte by byte. */
static size_t printable_prefix(const uint8_t *p, size_t n)
{
    static const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t k = 0;
    for (; k + sizeof(uint64_t) <= n; k += sizeof(uint64_t)) {
        uint64_t w;
        memcpy(&w, p + k, sizeof w);
        const uint64_t below = (w - ones * 0x20u) & ~w & highs; /* a byte < 0x20 */
        const uint64_t above = ((w + ones) | w) & highs;        /* a byte > 0x7e */
        if (below | above)
            break;
    }
    while (k < n && p[k] >= 0x20 && p[k] < 0x7f)
        k++;
    return k;
}

/* The common case at ground: a run of printable ASCII. Each byte is a code
 * point of width 1 that put_cp() would append as it is, so the run is
 * copied whole, as far as the text buffer has room (the caller comes back
 * for the rest). *took: the bytes taken (at least 1 unless rc != 0). */
static int ascii_run(struct vtf *f, const uint8_t *p, size_t n, size_t *took)
{
    *took = 0;
    if (f->text_len == sizeof f->text) {
        int rc = flush_text(f);
        if (rc)
            return rc;
    }
    size_t room = sizeof f->text - f->text_len;
    size_t k = printable_prefix(p, n < room ? n : room);
    memcpy(f->text + f->text_len, p, k);
    f->text_len += k;
    f->rep_cp = p[k - 1];
    f->ncomb = 0;
    *took = k;
    return 0;
}

/* The common case inside a CSI: the digits and ';' of its parameters (a
 * TUI's cursor addressing and colours), taken in one loop as csi_byte would
 * take them one by one; stops before anything else, a separator over
 * VTF_MAX_CSI_SEPS or the length limit (csi_byte then deals with it).
 * Returns the bytes taken. */
static size_t csi_params_run(struct vtf *f, const uint8_t *p, size_t n)
{
    struct vtf_seq *s = &f->seq;
    if (f->seq_bad || s->ninter)
        return 0;
    int32_t *cur = &s->params[s->nparams - 1];
    size_t k = 0;
    for (; k < n && f->csi_len < VTF_MAX_CSI_LEN; k++, f->csi_len++) {
        uint8_t c = p[k];
        if (c >= '0' && c <= '9') {
            if (*cur == VTF_PARAM_MISSING) {
                *cur = c - '0';
            } else if (*cur <= VTF_MAX_CSI_PARAM) {
                if (*cur == 0)
                    f->csi_raw_ok = 0; /* a leading zero */
                *cur = *cur * 10 + (c - '0');
                if (*cur > VTF_MAX_CSI_PARAM)
                    *cur = VTF_MAX_CSI_PARAM + 1; /* clamped at the final byte */
            }
        } else if (c == ';' && s->nparams < VTF_MAX_CSI_PARAMS) {
            cur = &s->params[s->nparams++];
            *cur = VTF_PARAM_MISSING;
        } else {
            break;
        }
        f->csi_raw[2 + f->csi_len] = c; /* csi_len counts bytes before this one */
    }
    return k;
}

/* The common case at ground past ASCII: one whole, well-formed UTF-8
 * sequence in this buffer (box drawing, CJK, Braille...), decoded at once
 * with ground_byte's ranges (no overlong form, surrogate or code point
 * above U+10FFFF) instead of byte by byte. Returns its length and *cp, or
 * 0 (ground_byte then takes the bytes one by one). */
static size_t utf8_whole(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint8_t b = p[0], lo = 0x80, hi = 0xbf;
    size_t k;
    uint32_t v;
    if (b >= 0xc2 && b <= 0xdf) {
        k = 2;
        v = b & 0x1fu;
    } else if (b >= 0xe0 && b <= 0xef) {
        k = 3;
        v = b & 0x0fu;
        lo = b == 0xe0 ? 0xa0 : 0x80;
        hi = b == 0xed ? 0x9f : 0xbf;
    } else if (b >= 0xf0 && b <= 0xf4) {
        k = 4;
        v = b & 0x07u;
        lo = b == 0xf0 ? 0x90 : 0x80;
        hi = b == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (k > n)
        return 0;
    for (size_t j = 1; j < k; j++) {
        if (p[j] < lo || p[j] > hi)
            return 0;
        lo = 0x80;
        hi = 0xbf;
        v = (v << 6) | (p[j] & 0x3fu);
    }
    *cp = v;
    return k;
}

/* CR LF at ground, both in this buffer: one CTRL unit. */
static int emit_crlf(struct vtf *f)
{
    int rc = flush_text(f);
    if (rc)
        return rc;
    f->out[0] = '\r';
    f->out[1] = '\n';
    return emit_unit(f, VTF_CTRL, f->out, 2, NULL);
}

int vtf_feed(struct vtf *f, const uint8_t *p, size_t n)
{
    if (!f || (!p && n))
        return AL_E_INVAL;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        int rc;
        if (c == '\r' && i + 1 < n && p[i + 1] == '\n' && f->st == ST_GROUND && f->u_need == 0) {
            rc = emit_crlf(f);
            if (rc)
                return rc;
            i++;
            continue;
        }
        if (f->st == ST_GROUND && f->u_need == 0 && c >= 0x20 && c < 0x7f) {
            size_t took;
            rc = ascii_run(f, p + i, n - i, &took);
            if (rc)
                return rc;
            i += took - 1;
            continue;
        }
        if (f->st == ST_GROUND && f->u_need == 0 && c >= 0xc2) {
            uint32_t cp;
            size_t k = utf8_whole(p + i, n - i, &cp);
            if (k > 0) {
                rc = put_cp_raw(f, cp, p + i, k);
                if (rc)
                    return rc;
                i += k - 1;
                continue;
            }
        }
        if (f->st == ST_CSI && ((c >= '0' && c <= '9') || c == ';')) {
            size_t took = csi_params_run(f, p + i, n - i);
            if (took > 0) {
                i += took - 1;
                continue;
            }
        }
        switch (f->st) {
        case ST_GROUND:
            rc = ground_byte(f, c);
            break;
        case ST_ESC:
            rc = esc_byte(f, c);
            break;
        case ST_CSI:
            rc = csi_byte(f, c);
            break;
        case ST_STR:
            rc = str_byte(f, c);
            break;
        default:
            rc = str_esc_byte(f, c);
            break;
        }
        if (rc)
            return rc;
    }
    return flush_text(f);
}

/* A CSI's parse so far, as bytes after ESC '[': what a terminal that reads
 * them is left holding, up to the digits of the parameter in progress. */
static size_t csi_prefix(const struct vtf *f, uint8_t *o)
{
    const struct vtf_seq *s = &f->seq;
    size_t n = 0;
    if (s->leader)
        o[n++] = s->leader;
    for (uint8_t i = 0; i < s->nparams; i++) {
        if (s->params[i] != VTF_PARAM_MISSING)
            n += vtf_put_uint((char *)o + n, (uint32_t)s->params[i]);
        if (i + 1 < s->nparams)
            o[n++] = (s->sub >> i) & 1u ? ':' : ';';
    }
    for (uint8_t i = 0; i < s->ninter; i++)
        o[n++] = s->inter[i];
    return n;
}

size_t vtf_pending(const struct vtf *f, uint8_t *out, size_t cap)
{
    uint8_t b[VTF_PENDING_MAX];
    size_t n = 0;
    if (!f || !out)
        return 0;
    switch (f->st) {
    case ST_GROUND:
        if (f->u_need) {
            memcpy(b, f->u_raw, f->u_rawlen);
            n = f->u_rawlen;
        }
        break;
    case ST_ESC:
        b[n++] = ESC_BYTE;
        memcpy(b + n, f->seq.inter, f->seq.ninter);
        n += f->seq.ninter;
        break;
    case ST_CSI:
        b[n++] = ESC_BYTE;
        b[n++] = '[';
        if (!f->seq_bad) /* a CSI that is to be dropped: its start is enough */
            n += csi_prefix(f, b + n);
        break;
    case ST_STR:
    case ST_STR_ESC:
        n = f->str_kind == STR_IGNORE ? 2 : f->str_len;
        memcpy(b, f->str, n);
        if (f->st == ST_STR_ESC)
            b[n++] = ESC_BYTE;
        break;
    }
    if (n > cap)
        n = cap;
    memcpy(out, b, n);
    return n;
}
