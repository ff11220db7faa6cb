/*
 * vt_internal: the screen model's insides, shared by vt.c (the model and
 * its feed path), vt_query.c (queries and accessors) and vt_snapshot.c
 * (the serializer). Internal to the screen model: nothing else includes
 * it; callers use vt.h.
 *
 * Data model. struct vt owns one VTerm (libvterm's parser and state keep
 * the cursor, the pen and most modes), one vts screen layer over that
 * state's callbacks (vtscreen.h: the cells of the primary and alternate
 * screens) and one vtf filter that every PTY byte passes first. Beside
 * them it keeps what libvterm 0.1.4 will not tell:
 *   title, icon        from settermprop, copied (libvterm's string is
 *                      transient), at most VT_MAX_TITLE bytes
 *   altscreen, cursor_visible   from settermprop
 *   insert, newline    IRM and LNM, tracked from CSI units (libvterm has no
 *                      DECRQM for ANSI modes)
 *   gset[4], gl        charset designations of G0..G3 (0: as after a reset)
 *                      and the locking shift
 *   tabs               tab stops, one bit per column (HTS, TBC, RIS, resize)
 *   saved              what DECSC last saved (ESC 7, ?1048h, ?1049h)
 *   held               the last glyph of the text so far when it ends in the
 *                      last column: not yet written to libvterm, so that a
 *                      combining mark arriving in the next read still joins
 *                      it (see glyph_ends_row); written before anything else
 *                      and before any look at the screen (vt_sync)
 *   lv_stale, lv       the fast path writes a whole unit, last glyph
 *                      included, into the cells: libvterm's own previous
 *                      glyph is then an older one (lv), and vt.c joins a
 *                      combining mark to comb itself (own_marks in vt.c)
 *   comb               libvterm's hidden "previous glyph": a combining mark
 *                      joins it (rewriting its cell, even after the cell was
 *                      erased or the screen reset) whenever the cursor stands
 *                      right after it; from the last glyph damage of a write
 *   origin, awm, lrmm  DECOM, DECAWM, DECLRMM, tracked from CSI ? h/l units
 *                      and RIS as libvterm 0.1.4 takes them, not asked: a
 *                      DECRQM is a CSI, and libvterm puts the cursor back
 *                      into the margins at the end of every CSI under DECOM,
 *                      wherever the program's bytes left it (after DECRC,
 *                      say); text_done needs DECAWM at every glyph that ends
 *                      a row, the fast paths DECOM and DECLRMM
 *   fast, single_shift whether runs of one-column glyphs may go straight into
 *                      the cells (vtscreen) with one CUF for libvterm's cursor,
 *                      instead of through libvterm's state glyph by glyph: see
 *                      fast_text in vt.c
 *   pen_stale          an SGR went straight to the cells' pen (vt.c, sgr_fast),
 *                      not through libvterm: libvterm's own pen is behind
 *                      until pen_sync gives it the cells' pen (before
 *                      anything that saves it: DECSC, ?1048h, ?1049h,
 *                      and before an SGR only libvterm takes). The pen the
 *                      model reports is the cells' (vt_read_pen).
 *   default_fg, _bg    libvterm's default colours (SGR 39, 49, 0)
 *   pending_wrap       libvterm's hidden "phantom column" flag: the last
 *                      glyph went into the last column with autowrap on, so
 *                      the next one wraps. Worked out from the damage of the
 *                      last glyph of each text unit (see text_done).
 * The rest (DECCKM, mouse, margins, cursor style...) is
 * asked of libvterm when needed, by writing DECRQM/DECRQSS queries between
 * filter units (the filter guarantees libvterm's parser is then idle) and
 * catching the answers in cap[] through the output callback. Outside a
 * query the output (answers to the program's own DA/DSR queries) is
 * dropped: the viewers' terminals answer those.
 *
 * Rows are 0-based and columns logical (on a double-width line column c is
 * the c-th double-width cell), as in libvterm. Every allocation here has
 * one owner: struct vt owns term, cells, filter; vt_snapshot owns its buffers
 * until it hands the result to the caller.
 */
#ifndef VT_INTERNAL_H
#define VT_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <vterm.h>

#include "al_limits.h"
#include "vt.h"
#include "vtfilter.h"

#define VT_CAP_MAX 256     /* bytes of one query answer kept */
#define VT_DEFAULT_STYLE 1 /* DECSCUSR Ps of a reset terminal: blinking block */
#define VT_HELD_MAX (4 * (1 + VTF_MAX_COMBINING)) /* bytes of one glyph held back */

_Static_assert(VT_MAX_CHARS == VTERM_MAX_CHARS_PER_CELL, "cell size follows libvterm");
_Static_assert(AL_MAX_COLS % 8 == 0, "tab bitmap");

/* What the text fast path (vt.c, fast_text) last learnt of the modes it
 * does not track from units: protection (DECSCA, asked with DECRQSS, a DCS
 * that leaves the cursor alone), and side margins (DECLRMM, tracked).
 * Any ESC, or CSI with a leader or intermediates, may change them: back to
 * unknown, worked out again at the next text. */
enum vt_fast { VT_FAST_UNKNOWN = 0, VT_FAST_OK, VT_FAST_NO };

struct vt_saved {
    int valid;
    VTermPos pos;
    struct vt_attrs pen;
    int visible;
    int style;
};

struct vt {
    VTerm *term;
    VTermState *state;
    /* what vt_feed has cost: written by the thread that feeds, read by
     * any (vt_cost) */
    _Atomic uint64_t cost_ns, cost_bytes;
    struct vts *cells; /* the screen's cells (vtscreen.h), over state's callbacks */
    struct vtf *filter;
    uint16_t cols, rows;

    int altscreen, cursor_visible;
    char title[VT_MAX_TITLE + 1];
    char icon[VT_MAX_TITLE + 1];

    int insert, newline;
    uint8_t gset[4];
    uint8_t gl;
    uint8_t tabs[AL_MAX_COLS / 8];
    struct vt_saved saved;
    int pending_wrap;

    size_t held_len; /* a glyph held back, see glyph_ends_row */
    uint8_t held[VT_HELD_MAX];
    uint8_t tbuf[VT_HELD_MAX + VTF_TEXT_CHUNK];

    struct { /* libvterm's "previous glyph" for combining marks */
        int valid;
        VTermPos pos; /* where it was printed */
        int width;    /* its width as libvterm has it (0: marks that had no glyph to join);
                       * a mark joins it iff the cursor is at pos + width */
        uint8_t n;    /* its code points as printed (at most VT_MAX_CHARS) */
        uint32_t chars[VT_MAX_CHARS];
    } comb;

    int lv_stale; /* libvterm's previous glyph is not comb: the fast path wrote the
                   * last glyph itself (see own_marks in vt.c) */
    struct {
        VTermPos pos;
        int width;
    } lv;           /* libvterm's previous glyph, while lv_stale */
    size_t cuf_due; /* columns libvterm's cursor has yet to move right after
                     * text the fast path wrote whole (whole_fast; more
                     * such text, with fast SGRs between, adds to it):
                     * written by lv_flush before anything reads or writes
                     * libvterm, dropped when a CR, CUP or HVP comes next
                     * (see on_unit in vt.c) */

    int at_due; /* libvterm's cursor is due at due_pos (a CUP taken by vt.c,
                 * cup_due; text the fast path wrote whole moves it on):
                 * written by lv_flush as cuf_due is. At most one of
                 * at_due and cuf_due is set. */
    VTermPos due_pos;
    int held_shift;                /* a single shift (SS2/SS3) came before the held glyph */
    int run_hi, held_hi;           /* a byte above 0x7f came earlier in this run of text
                                    * (text units with no other unit between), while a set
                                    * is designated in GL; held_hi: before the held glyph.
                                    * See write_text in vt.c */
    int region_known;              /* region_top/bottom hold DECSTBM as libvterm last answered
                                    * (0: ask again; lf_fast in vt.c) */
    int region_top, region_bottom; /* rows [top, bottom) */

    int fast;         /* enum vt_fast: may printable ASCII bypass libvterm's state */
    int single_shift; /* SS2/SS3 seen: the next glyph is from G2/G3 */

    int dmg_seen; /* damage seen while writing one text unit, and the last */
    VTermRect dmg_last;
    uint8_t dmg_n; /* the code points of that last glyph's cell */
    uint32_t dmg_chars[VT_MAX_CHARS];
    int pen_stale; /* see sgr_fast in vt.c */
    int origin;    /* DECOM (?6), tracked (see above) */
    int any_dwl;   /* a line was made double width or height: no sgr_fast */
    VTermColor default_fg, default_bg;
    int awm;  /* DECAWM (?7), tracked */
    int lrmm; /* DECLRMM (?69), tracked */

    unsigned snap_gaps;            /* what the last snapshot could not reproduce */
    enum vt_snap_level snap_level; /* the ladder's step the last snapshot made */

    int capturing;
    size_t cap_len;
    char cap[VT_CAP_MAX + 1];
};

/* --- vt.c: reading libvterm, the held glyph ------------------------------ */

/* A cell as libvterm stores it (DECSCNM not applied). */
void vt_read_cell(const struct vt *vt, int row, int col, struct vt_cell *out);
/* Columns of a row: half the screen on a double-width line, at least 1. */
int vt_row_width(const struct vt *vt, int row);
void vt_conv_color(const VTermColor *c, struct vt_color *out);
/* Writes the held glyph (see held above) to libvterm: before any look at
 * the screen. */
void vt_sync(struct vt *vt);

/* --- vt_query.c: queries, pens, comparisons ------------------------------ */

/* Writes a query straight to libvterm (never through the filter) and keeps
 * the answer in vt->cap, NUL-terminated. Also used to move libvterm's
 * cursor or change a mode without tracking it. */
void vt_query(struct vt *vt, const char *q);
/* DECRQM for a DEC private mode: 1 set, 0 reset, -1 unknown to libvterm. */
int vt_query_mode(struct vt *vt, int mode);
/* DECRQSS: up to two numbers of the answer to "ESC P $ q <what> ST"; 0 or -1. */
int vt_query_status(struct vt *vt, const char *what, long *a, long *b);
/* DECSCUSR Ps (1..6) of the cursor, VT_DEFAULT_STYLE if libvterm does not say. */
int vt_query_style(struct vt *vt);
/* The pen new glyphs get. */
void vt_read_pen(const struct vt *vt, struct vt_attrs *a);
/* Field by field: 1 if equal. */
int vt_attrs_equal(const struct vt_attrs *a, const struct vt_attrs *b);

#endif
