/*
 * vtfilter: a streaming sanitizer placed in front of libvterm 0.1.4.
 *
 * PTY output is untrusted: the program in the sandbox chooses every byte.
 * libvterm 0.1.4 hangs or corrupts memory on a few inputs (REP before or
 * after a zero-width glyph, a CSI with 16 or more separators, a UTF-8
 * encoded C1 control; see docs/snapshots.md). vtf_ parses the stream with
 * its own small state machine and hands on only whole, canonical units:
 *
 *   VTF_TEXT  printable text, whole UTF-8 code points (invalid UTF-8 becomes
 *             U+FFFD, C1 code points U+0080..U+009F are dropped)
 *   VTF_CTRL  one C0 control byte (never ESC, CAN, SUB, NUL), or CR LF
 *             together when they come together (the common line end: one
 *             unit for the pair halves the consumer's work per line)
 *   VTF_ESC   ESC, up to VTF_MAX_INTERMED intermediates, a final byte
 *   VTF_CSI   a CSI rebuilt from its parse (at most VTF_MAX_CSI_SEPS
 *             separators, parameters clamped to VTF_MAX_CSI_PARAM); REP is
 *             never handed on: the filter expands it into text itself
 *   VTF_OSC   a whole OSC string of at most VTF_MAX_STRING bytes,
 *             terminated by ESC '\'; DCS, SOS, PM and APC strings are
 *             dropped whole (libvterm has no use for them but DECRQSS,
 *             whose answer nobody reads, and it answers an unknown
 *             request through a bad format string)
 *
 * Because every unit is whole, the terminal behind the filter is back in
 * its ground state after each unit, and the consumer may inject its own
 * queries between units. A sequence may be split across vtf_feed calls at
 * any byte; the filter keeps the partial state (bounded, no allocation
 * after vtf_new).
 */
#ifndef VTFILTER_H
#define VTFILTER_H

#include <stddef.h>
#include <stdint.h>

#define VTF_MAX_CSI_SEPS 15 /* ';' or ':' in one CSI; more: dropped (libvterm overflows at 16) */
#define VTF_MAX_CSI_PARAMS (VTF_MAX_CSI_SEPS + 1)
#define VTF_MAX_CSI_LEN 128     /* bytes of one CSI after ESC '['; longer: dropped */
#define VTF_MAX_CSI_PARAM 65535 /* a larger parameter value is clamped to this */
#define VTF_MAX_INTERMED 2      /* intermediate bytes in one ESC or CSI; more: dropped */
#define VTF_MAX_STRING 4096     /* body bytes of one OSC string; longer: dropped */
#define VTF_MAX_REP 1024        /* REP expands to at most this many copies */
#define VTF_MAX_COMBINING 8     /* zero-width code points kept after one base character */
#define VTF_TEXT_CHUNK 4096     /* text units are at most this many bytes */

#define VTF_PARAM_MISSING (-1) /* an empty CSI parameter */

enum vtf_kind {
    VTF_TEXT = 1,
    VTF_CTRL,
    VTF_ESC,
    VTF_CSI,
    VTF_OSC,
};

/* The parse of an ESC or CSI unit, so that consumers need not parse again. */
struct vtf_seq {
    uint8_t leader; /* CSI: 0 or one of '<' '=' '>' '?' */
    uint8_t ninter; /* intermediate bytes 0x20..0x2F */
    uint8_t inter[VTF_MAX_INTERMED];
    uint8_t final;
    uint8_t nparams;                    /* CSI: 1..VTF_MAX_CSI_PARAMS; ESC: 0 */
    uint16_t sub;                       /* CSI: bit i set when params[i] is followed by ':' */
    int32_t params[VTF_MAX_CSI_PARAMS]; /* 0..VTF_MAX_CSI_PARAM or VTF_PARAM_MISSING */
};

struct vtf_unit {
    enum vtf_kind kind;
    const uint8_t *bytes; /* the canonical bytes to hand to the terminal, in one write */
    size_t len;
    const struct vtf_seq *seq; /* VTF_ESC and VTF_CSI; NULL otherwise */
    int ascii;                 /* VTF_TEXT: 1 when every byte is printable ASCII */
    int narrow;                /* VTF_TEXT: 1 when every code point is one column wide */
};

/* Receives each unit in stream order. A non-zero return stops vtf_feed,
 * which returns that value; the filter stays consistent. */
typedef int (*vtf_emit_fn)(void *ud, const struct vtf_unit *u);

/* What the filter changed, for tests and logs. */
struct vtf_stats {
    uint64_t units;             /* units handed on */
    uint64_t rep_expanded;      /* REP sequences turned into text */
    uint64_t rep_dropped;       /* REP with nothing to repeat, or not a plain REP */
    uint64_t csi_dropped;       /* malformed, too long, too many separators */
    uint64_t esc_dropped;       /* malformed ESC sequences */
    uint64_t params_clamped;    /* CSI parameters above VTF_MAX_CSI_PARAM */
    uint64_t c1_dropped;        /* UTF-8 encoded U+0080..U+009F */
    uint64_t utf8_invalid;      /* U+FFFD substitutions */
    uint64_t combining_dropped; /* zero-width code points over VTF_MAX_COMBINING */
    uint64_t strings_dropped;   /* over-long OSC, all DCS/SOS/PM/APC, aborted strings */
    uint64_t wide_narrowed;     /* wide code points replaced in narrow mode */
};

struct vtf;

/* 0, AL_E_INVAL or AL_E_NOMEM. */
int vtf_new(vtf_emit_fn emit, void *ud, struct vtf **out);
void vtf_free(struct vtf *f);

/* Filters n bytes. Returns 0, AL_E_INVAL, or the first non-zero emit result.
 * Text decoded so far is handed on before returning; a partial escape
 * sequence or UTF-8 sequence waits for the next call. */
int vtf_feed(struct vtf *f, const uint8_t *p, size_t n);

/* With narrow on, wide code points become U+FFFD (libvterm 0.1.4
 * dereferences NULL for a wide glyph on a one-column screen). */
void vtf_set_narrow(struct vtf *f, int narrow);

/* The longest vtf_pending answer: a whole OSC prefix and an ESC. */
#define VTF_PENDING_MAX (2 + VTF_MAX_STRING + 1)

/* Bytes that put a terminal in its ground state into the parse state the
 * stream has reached: the lead bytes of a partial UTF-8 code point, an ESC
 * or CSI begun (rebuilt from its parse: leader, parameters so far,
 * intermediates), a string begun (an OSC's prefix and the body kept; the
 * introducer of a dropped string). Nothing in the ground state. A snapshot
 * taken between two reads ends with these, so that the stream from its
 * offset, which may start inside a sequence, continues it on the receiver
 * as it did live. Writes at most cap bytes (VTF_PENDING_MAX is always
 * enough) and returns how many. */
size_t vtf_pending(const struct vtf *f, uint8_t *out, size_t cap);

/* Forgets any partial sequence and the character REP would repeat. */
void vtf_reset(struct vtf *f);

void vtf_get_stats(const struct vtf *f, struct vtf_stats *out);

/* Column width of a code point as libvterm 0.1.4 lays it out: 0 for the
 * zero-width (combining) set, 2 for wide, 1 otherwise; -1 for C0/C1
 * controls, DEL, surrogates and values above U+10FFFF. */
int vtf_cp_width(uint32_t cp);

/* Encodes cp (at most U+10FFFF, not a surrogate) as UTF-8 into out[4];
 * returns the length, or 0 if cp is not encodable. */
size_t vtf_utf8_encode(uint32_t cp, uint8_t out[4]);
/* The decimal digits of v at out (at most 10 bytes); their count. For the
 * sequences the screen model writes itself. */
size_t vtf_put_uint(char *out, uint32_t v);

#endif
