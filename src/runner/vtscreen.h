/*
 * vtscreen: the cells of the screen model, a screen layer of our own over
 * libvterm 0.1.4's state layer (VTermState callbacks), in place of
 * libvterm's VTermScreen (issue 16).
 *
 * It keeps what libvterm 0.1.4's screen keeps and reads back the same
 * (vts_get_cell answers as vterm_screen_get_cell would, cell for cell,
 * including the pen an erase or a resize leaves, the right half of a wide
 * glyph, DECSCNM and the cut of a double-width line), but stores each row
 * apart, behind a pointer, so that:
 *   - a scroll of whole rows moves pointers, never cells (libvterm moved
 *     the whole screen, about 70 KB at 80x24, on every newline);
 *   - a row holds cells only as far as it was written: the cells after
 *     that are blank with the row's fill pen, so a newline or an erase to
 *     the end of a row costs nothing per cell, and a row or a screen never
 *     written (an idle terminal's, the alternate screen until used) holds
 *     no cells at all.
 * Internal to the screen model (vt.c, vt_query.c, vt_snapshot.c).
 */
#ifndef VTSCREEN_H
#define VTSCREEN_H

#include <stddef.h>
#include <stdint.h>

#include <vterm.h>

struct vts;

/* Called for each glyph written, with the cells it covers (what libvterm's
 * screen reported as damage for it) and the code points its cell now holds
 * (chars[0..n), n <= VTERM_MAX_CHARS_PER_CELL), so that the caller need not
 * read the cell back. */
typedef void vts_glyph_fn(VTermRect rect, const uint32_t *chars, int n, void *ud);
/* Terminal properties, after the layer took what it needs (the alternate
 * screen, DECSCNM). */
typedef int vts_prop_fn(VTermProp prop, VTermValue *val, void *ud);

/* Takes over state's callbacks. 0 or AL_E_NOMEM. */
int vts_new(VTermState *state, int rows, int cols, vts_glyph_fn *on_glyph, vts_prop_fn *on_prop,
            void *ud, struct vts **out);
void vts_free(struct vts *s);

/* The text fast path (vt.c): glyphs of width 1 as whole, valid UTF-8 text
 * p[0..len), `glyphs` of them (each one code point of width 1: the caller
 * made sure), at row from col on, with the current pen, as libvterm's state
 * would put them one by one when nothing else happens (no wrap, no insert
 * mode, no charset, no protection: the caller makes sure). The cursor is
 * the caller's to move. 0, AL_E_INVAL (outside the row) or AL_E_NOMEM
 * (nothing written). */
int vts_put_text(struct vts *s, int row, int col, const uint8_t *p, size_t len, size_t glyphs);
/* The same for printable ASCII p[0..n): one byte, one glyph. */
int vts_put_ascii(struct vts *s, int row, int col, const uint8_t *p, size_t n);

/* The pen new glyphs and blanks get, one attribute set as libvterm's
 * state sets it (its setpenattr callback): vt.c's own SGR path. */
void vts_set_pen(struct vts *s, VTermAttr attr, const VTermValue *val);
/* The pen as a cell would carry it (attributes, fg, bg; DECSCNM not
 * applied; chars and width left alone). */
void vts_get_pen(const struct vts *s, VTermScreenCell *out);
/* SGRs that give libvterm's state this pen whole ("ESC [ 0;...m", then
 * the colours in one of their own: libvterm 0.1.4 writes past its
 * argument array from the 17th parameter on), written to out (at least
 * VTS_PEN_SGR_MAX bytes); their length. */
#define VTS_PEN_SGR_MAX 96
size_t vts_pen_sgr(const struct vts *s, char *out);

/* A glyph put as libvterm's state puts one (its putglyph callback): chars
 * (n of them, n <= VTERM_MAX_CHARS_PER_CELL) at pos with the current pen;
 * width 0 (a combining mark alone) takes one cell. The glyph callback is
 * called as for any glyph. For vt.c's own handling of combining marks. */
void vts_put_glyph(struct vts *s, VTermPos pos, const uint32_t *chars, int n, int width,
                   int protected_cell);
/* Cells [0, n) of a row hold glyph ch, one column wide, with the current
 * pen and the protection given: what n glyph callbacks of libvterm's
 * state, one for each cell from the left, would leave (DECALN, which
 * vt.c fills itself: libvterm's fill costs a callback a cell). A whole
 * row (n >= cols, ch below 0x10000) takes no cell: its tail is the glyph.
 * The glyph callback is called once, for the last cell. 0 or AL_E_NOMEM
 * (nothing changed). */
int vts_fill_row(struct vts *s, int row, int n, uint32_t ch, int protected_cell);
/* Cells [col, end) of a row move right by one, the first one blank with
 * the current pen: what libvterm's state does before a glyph in insert
 * mode (end: the row's width). */
void vts_insert_blank(struct vts *s, int row, int col, int end);

/* Cells of rect blanked with the current pen, as libvterm's state erases
 * them (its erase callback, not selective): vt.c's own EL. */
void vts_erase(struct vts *s, VTermRect rect);

/* Rows [top, bottom) of the whole width up by one, the last one blank with
 * the current pen, as libvterm's state scrolls them (its scrollrect
 * callback): vt.c's own line feed. */
void vts_scroll_up(struct vts *s, int top, int bottom);

/* As vterm_screen_get_cell: 0 outside the screen. */
int vts_get_cell(const struct vts *s, VTermPos pos, VTermScreenCell *cell);

/* AL_E_NOMEM once a row could not get its cells (that write was dropped);
 * then 0 again. */
int vts_take_error(struct vts *s);

/* Heap the layer holds now, bytes. */
size_t vts_mem(const struct vts *s);

#endif
