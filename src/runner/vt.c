/*
 * vt: the screen model (see vt.h), the half of it that changes the screen:
 * its life cycle (vt_new, vt_resize, vt_free) and the feed path, PTY
 * output through the filter into libvterm, with the state tracked beside
 * it (tab stops, charsets, IRM/LNM, DECSC, the held glyph, libvterm's
 * previous glyph and pending wrap) and the fixes that keep libvterm 0.1.4
 * on the screen after a unit or a resize. struct vt and what each field
 * means: vt_internal.h.
 *
 * Not here: the DECRQM/DECRQSS queries and the accessors (vt_query.c),
 * the snapshot serializer and its ladder (vt_snapshot.c). The feed path
 * (vt_feed, on_unit, on_text, write_text) calls nothing outside this file
 * but libvterm and the filter, except on rare steps (DECSC reads the pen
 * and the cursor style; the fast path asks DECSCA with DECRQSS). It writes
 * no CSI of its own where libvterm's clamp under DECOM could move the
 * cursor: DECOM, DECAWM and DECLRMM are tracked, not asked.
 */
#include "vt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vterm.h>

#include "al_err.h"
#include "al_limits.h"
#include "vt_internal.h"
#include "vtscreen.h"

/* --- libvterm callbacks ------------------------------------------------ */

static void copy_title(char *dst, const char *src)
{
    size_t n = 0;
    if (src) {
        for (; n < VT_MAX_TITLE && src[n]; n++) {
            unsigned char c = (unsigned char)src[n];
            dst[n] = (char)(c < 0x20 || c == 0x7f ? '?' : c);
        }
    }
    dst[n] = 0;
}

static int cb_settermprop(VTermProp prop, VTermValue *val, void *user)
{
    struct vt *vt = user;
    switch (prop) {
    case VTERM_PROP_CURSORVISIBLE:
        vt->cursor_visible = val->boolean != 0;
        break;
    case VTERM_PROP_ALTSCREEN:
        vt->altscreen = val->boolean != 0;
        break;
    case VTERM_PROP_TITLE:
        copy_title(vt->title, val->string);
        break;
    case VTERM_PROP_ICONNAME:
        copy_title(vt->icon, val->string);
        break;
    default:
        break;
    }
    return 1;
}

/* The cells of each glyph written (libvterm's screen reported them as
 * damage) and what its cell holds: the last one of a text write is its
 * last glyph. */
static void cb_glyph(VTermRect rect, const uint32_t *chars, int n, void *user)
{
    struct vt *vt = user;
    vt->dmg_seen = 1;
    vt->dmg_last = rect;
    if (n < 0)
        n = 0;
    if (n > VT_MAX_CHARS)
        n = VT_MAX_CHARS;
    vt->dmg_n = (uint8_t)n;
    memcpy(vt->dmg_chars, chars, (size_t)n * sizeof *chars);
}

/* What may have changed DECSCA or the scroll region: ask again when
 * needed. */
static void modes_unknown(struct vt *vt)
{
    vt->fast = VT_FAST_UNKNOWN;
    vt->region_known = 0;
}

static void cb_output(const char *s, size_t len, void *user)
{
    struct vt *vt = user;
    if (!vt->capturing)
        return;
    size_t room = VT_CAP_MAX - vt->cap_len;
    if (len > room)
        len = room;
    memcpy(vt->cap + vt->cap_len, s, len);
    vt->cap_len += len;
}

/* --- reading libvterm ------------------------------------------------------- */

void vt_conv_color(const VTermColor *c, struct vt_color *out)
{
    memset(out, 0, sizeof *out);
    if (c->type & VTERM_COLOR_DEFAULT_MASK) {
        out->kind = VT_COLOR_DEFAULT;
    } else if (VTERM_COLOR_IS_INDEXED(c)) {
        out->kind = VT_COLOR_INDEX;
        out->index = c->indexed.idx;
    } else {
        out->kind = VT_COLOR_RGB;
        out->r = c->rgb.red;
        out->g = c->rgb.green;
        out->b = c->rgb.blue;
    }
}

void vt_read_cell(const struct vt *vt, int row, int col, struct vt_cell *out)
{
    VTermScreenCell c;
    memset(&c, 0, sizeof c); /* get_cell leaves parts of it alone */
    memset(out, 0, sizeof *out);
    VTermPos pos = {row, col};
    if (!vts_get_cell(vt->cells, pos, &c))
        return;
    if (c.chars[0] == (uint32_t)-1) {
        out->width = 0;
    } else {
        uint8_t n = 0;
        while (n < VT_MAX_CHARS && c.chars[n]) {
            out->chars[n] = c.chars[n];
            n++;
        }
        out->nchars = n;
        out->width = (uint8_t)(c.width == 2 ? 2 : 1);
    }
    out->attrs.bold = c.attrs.bold;
    out->attrs.underline = c.attrs.underline;
    out->attrs.italic = c.attrs.italic;
    out->attrs.blink = c.attrs.blink;
    out->attrs.reverse = c.attrs.reverse;
    out->attrs.strike = c.attrs.strike;
    out->attrs.font = c.attrs.font;
    vt_conv_color(&c.fg, &out->attrs.fg);
    vt_conv_color(&c.bg, &out->attrs.bg);
}

int vt_row_width(const struct vt *vt, int row)
{
    const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, row);
    int w = li && li->doublewidth ? vt->cols / 2 : vt->cols;
    return w > 0 ? w : 1;
}

/* --- tracked state ----------------------------------------------------- */

static void tab_set(struct vt *vt, int col, int on)
{
    if (col < 0 || col >= AL_MAX_COLS)
        return;
    if (on)
        vt->tabs[col / 8] = (uint8_t)(vt->tabs[col / 8] | (1u << (col % 8)));
    else
        vt->tabs[col / 8] = (uint8_t)(vt->tabs[col / 8] & ~(1u << (col % 8)));
}

/* Default tab stops (every 8 columns) from column `from` on. */
static void tabs_default(struct vt *vt, int from)
{
    for (int c = from; c < AL_MAX_COLS; c++)
        tab_set(vt, c, c % 8 == 0);
}

static void reset_tracked(struct vt *vt)
{
    vt->insert = 0;
    vt->newline = 0;
    memset(vt->gset, 0, sizeof vt->gset);
    vt->gl = 0;
    tabs_default(vt, 0);
    vt->pending_wrap = 0;
    vt->origin = 0;
    vt->awm = 1;
    vt->lrmm = 0;
}

static void save_cursor(struct vt *vt)
{
    vt->saved.valid = 1;
    vterm_state_get_cursorpos(vt->state, &vt->saved.pos);
    vt_read_pen(vt, &vt->saved.pen);
    vt->saved.visible = vt->cursor_visible;
    vt->saved.style = vt_query_style(vt);
}

static void track_esc(struct vt *vt, const struct vtf_seq *s, VTermPos at)
{
    if (s->ninter == 0) {
        switch (s->final) {
        case 'c': /* RIS */
            reset_tracked(vt);
            break;
        case 'H': /* HTS */
            tab_set(vt, at.col, 1);
            break;
        case '7': /* DECSC */
            save_cursor(vt);
            break;
        case 'n': /* LS2 */
            vt->gl = 2;
            break;
        case 'o': /* LS3 */
            vt->gl = 3;
            break;
        default:
            break;
        }
        return;
    }
    /* SCS. libvterm ignores sets it does not know. Its initial G0..G3 are
     * not quite ASCII as designated by ESC ( B: after that designation an
     * ASCII glyph and a combining mark written together are decoded apart
     * (and in the last column no longer join), so "never designated" (0)
     * is kept apart from 'B'. */
    if (s->ninter == 1 && s->inter[0] >= '(' && s->inter[0] <= '+' &&
        (s->final == '0' || s->final == 'A' || s->final == 'B'))
        vt->gset[s->inter[0] - '('] = s->final;
}

static void track_csi(struct vt *vt, const struct vtf_seq *s, VTermPos at)
{
    if (s->ninter != 0)
        return;
    if (s->leader == 0) {
        switch (s->final) {
        case 'h': /* SM/RM: libvterm 0.1.4 acts on the first parameter only */
        case 'l':
            if (s->params[0] == 4)
                vt->insert = s->final == 'h';
            else if (s->params[0] == 20)
                vt->newline = s->final == 'h';
            break;
        case 'g': /* TBC */
            if (s->params[0] == VTF_PARAM_MISSING || s->params[0] == 0)
                tab_set(vt, at.col, 0);
            else if (s->params[0] == 3)
                memset(vt->tabs, 0, sizeof vt->tabs);
            break;
        case 'C': /* CUF and HPR end a pending wrap even where they cannot move */
        case 'a':
            vt->pending_wrap = 0;
            break;
        default:
            break;
        }
        return;
    }
    if (s->leader != '?' || (s->final != 'h' && s->final != 'l'))
        return;
    /* DECSET/DECRST: libvterm 0.1.4 acts on the first parameter only (its
     * sub-parameters ignored), none if it is missing */
    const int on = s->final == 'h';
    switch (s->params[0]) {
    case 6:
        vt->origin = on;
        break;
    case 7:
        vt->awm = on;
        break;
    case 69:
        vt->lrmm = on;
        break;
    case 1048:
    case 1049:
        if (on)
            save_cursor(vt);
        break;
    default:
        break;
    }
}

/* The width libvterm gave the last glyph damaged (dmg_last). The damage
 * is a column at least, but a glyph that starts with a zero-width code
 * point (combining marks that had no glyph to join: libvterm puts them in
 * the cursor's cell) is 0 wide to libvterm: its cursor stays, no pending
 * wrap follows, and a mark joins it while the cursor stands on it. */
static int dmg_width(const struct vt *vt)
{
    if (vt->dmg_n > 0 && vtf_cp_width(vt->dmg_chars[0]) == 0)
        return 0;
    return vt->dmg_last.end_col - vt->dmg_last.start_col;
}

/* After a text unit: the last glyph went to start_col of the cursor's row,
 * dmg_width columns wide; if it reached the end of the row while the
 * cursor stayed at its start, libvterm set its phantom flag iff autowrap
 * was on (as libvterm tests it: a glyph of width 0 only past the end of a
 * line made double width since). */
static void text_done(struct vt *vt, int moved)
{
    if (!vt->dmg_seen) {
        if (moved)
            vt->pending_wrap = 0;
        return;
    }
    VTermPos cur;
    vterm_state_get_cursorpos(vt->state, &cur);
    VTermRect r = vt->dmg_last;
    if (r.start_row == cur.row && r.end_row == cur.row + 1 && r.start_col == cur.col &&
        r.start_col + dmg_width(vt) >= vt_row_width(vt, cur.row))
        vt->pending_wrap = vt->awm;
    else
        vt->pending_wrap = 0;
}

/* The code point of whole, valid UTF-8 at p (as the filter hands text
 * on) and its length in *len. */
static uint32_t utf8_at(const uint8_t *p, size_t n, size_t *len)
{
    uint8_t b = p[0];
    size_t k = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    if (k > n)
        k = n;
    uint32_t cp = k == 1 ? b : b & (0x7fu >> k);
    for (size_t j = 1; j < k; j++)
        cp = (cp << 6) | (p[j] & 0x3fu);
    *len = k;
    return cp;
}

/* DECSCA as libvterm's state has it now (a glyph vt.c puts itself). */
static int protect_on(struct vt *vt)
{
    long a, b;
    return vt_query_status(vt, "\"q", &a, &b) == 0 && a == 1;
}

/* One write of text to libvterm; comb follows the glyph it printed last.
 * 1 if it printed one (dmg_last is then that glyph). */
static int lv_glyphs(struct vt *vt, const uint8_t *p, size_t n)
{
    vt->dmg_seen = 0;
    vterm_input_write(vt->term, (const char *)p, n);
    if (!vt->dmg_seen)
        return 0;
    /* The last damage of a text write is its last glyph. */
    VTermRect r = vt->dmg_last;
    vt->comb.valid = 1;
    vt->comb.pos.row = r.start_row;
    vt->comb.pos.col = r.start_col;
    vt->comb.width = dmg_width(vt);
    vt->comb.n = vt->dmg_n;
    memset(vt->comb.chars, 0, sizeof vt->comb.chars);
    memcpy(vt->comb.chars, vt->dmg_chars, (size_t)vt->dmg_n * sizeof vt->dmg_chars[0]);
    vt->lv_stale = 0; /* libvterm's previous glyph is comb again */
    return 1;
}

/* Text of the run put (through libvterm or into the cells): whether it
 * held a byte above 0x7f (run_hi, see lv_text). Only while GL holds a
 * designated set: only a unit of another kind changes GL, and that unit
 * ends the run. */
static void run_note(struct vt *vt, const uint8_t *p, size_t n)
{
    if (vt->run_hi || vt->gset[vt->gl] == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (p[i] >= 0x80) {
            vt->run_hi = 1;
            return;
        }
    }
}

/* Bytes of the zero-width code points that start whole UTF-8 text. */
static size_t marks_len(const uint8_t *p, size_t n)
{
    size_t k = 0, len;
    while (k < n && p[k] >= 0x80 && vtf_cp_width(utf8_at(p + k, n - k, &len)) == 0)
        k += len;
    return k;
}

/* Combining marks p[0..k) joined to comb, the glyph libvterm printed last,
 * as libvterm joins marks within one piece of decoded text: its cell
 * rewritten with the pen and protection of the moment. libvterm's own
 * previous glyph lacks them: stale (lv_stale), so that own_marks takes the
 * marks that come next. */
static void join_marks(struct vt *vt, const uint8_t *p, size_t k)
{
    if (!vt->lv_stale) {
        vt->lv.pos = vt->comb.pos;
        vt->lv.width = vt->comb.width;
        vt->lv_stale = 1;
    }
    size_t len;
    for (size_t i = 0; i < k; i += len) {
        uint32_t cp = utf8_at(p + i, k - i, &len);
        if (vt->comb.n < VT_MAX_CHARS)
            vt->comb.chars[vt->comb.n++] = cp;
    }
    vts_put_glyph(vt->cells, vt->comb.pos, vt->comb.chars, vt->comb.n, vt->comb.width,
                  protect_on(vt));
}

/* Text written to libvterm, as libvterm would take it within the whole
 * run of text (the text units between two other units: the reference the
 * model keeps to, whatever the PTY's reads). libvterm 0.1.4 decodes one
 * write in pieces: while it starts with ASCII and GL holds a designated
 * set (ESC ( B, as ncurses' sgr0 sends), through that set up to the first
 * byte above 0x7f; from there to its end as UTF-8, whose decoder takes
 * ASCII too. A combining mark that starts a piece joins the glyph before
 * it only if the cursor moved on after that glyph, which it does not in
 * the last column. vt.c writes a run in parts (the held glyph, the fast
 * path's runs), so a part that starts with ASCII after a byte above 0x7f
 * of its run (hi) is decoded through the set where the whole run is
 * UTF-8 by then: marks that start its second piece are joined here when
 * libvterm would not join them. (A set that translates ASCII, DEC
 * graphics or UK, still differs: docs/snapshots.md.) 1 if a glyph was
 * printed; dmg_last is then the last. */
static int lv_text(struct vt *vt, const uint8_t *p, size_t n, int hi)
{
    int seen = 0;
    while (hi && n > 0 && p[0] < 0x80 && vt->gset[vt->gl] != 0) {
        size_t a = 1;
        while (a < n && p[a] < 0x80)
            a++;
        int put = lv_glyphs(vt, p, a);
        seen |= put;
        p += a;
        n -= a;
        size_t k = marks_len(p, n);
        VTermPos cur;
        vterm_state_get_cursorpos(vt->state, &cur);
        if (!put || k == 0 ||
            (cur.row == vt->comb.pos.row && cur.col == vt->comb.pos.col + vt->comb.width))
            break; /* a base character next, or libvterm joins the marks itself */
        join_marks(vt, p, k);
        p += k;
        n -= k;
    }
    if (n > 0)
        seen |= lv_glyphs(vt, p, n);
    return seen;
}

/* Text through libvterm's state (lv_text; hi: a byte above 0x7f came
 * before it in its run, and no single shift is pending), with what vt.c
 * tracks of it: libvterm's previous glyph (comb), the pending wrap. */
static void write_text(struct vt *vt, const uint8_t *p, size_t n, int hi)
{
    if (n == 0)
        return;
    VTermPos before, after;
    vterm_state_get_cursorpos(vt->state, &before);
    vt->dmg_seen = lv_text(vt, p, n, hi);
    vterm_state_get_cursorpos(vt->state, &after);
    text_done(vt, before.row != after.row || before.col != after.col);
    run_note(vt, p, n);
}

/* libvterm's cursor n columns right: ESC [ n C, by hand (snprintf was a
 * tenth of the runner's user time). */
static void write_cuf(struct vt *vt, size_t n)
{
    char cuf[32];
    size_t k = 0;
    cuf[k++] = '\033';
    cuf[k++] = '[';
    k += vtf_put_uint(cuf + k, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n);
    cuf[k++] = 'C';
    vterm_input_write(vt->term, cuf, k);
}

/* libvterm's cursor to row, col (0-based; DECOM off): ESC [ r ; c H. */
static void write_cup(struct vt *vt, VTermPos pos)
{
    char cup[32];
    size_t k = 0;
    cup[k++] = '\033';
    cup[k++] = '[';
    k += vtf_put_uint(cup + k, (uint32_t)pos.row + 1);
    cup[k++] = ';';
    k += vtf_put_uint(cup + k, (uint32_t)pos.col + 1);
    cup[k++] = 'H';
    vterm_input_write(vt->term, cup, k);
}

/* What the cursor is due (cuf_due, at_due), written to libvterm now. */
static void lv_flush(struct vt *vt)
{
    if (vt->at_due) {
        vt->at_due = 0;
        write_cup(vt, vt->due_pos);
    } else if (vt->cuf_due) {
        size_t n = vt->cuf_due;
        vt->cuf_due = 0;
        write_cuf(vt, n);
    }
}

/* Whether libvterm's cursor has a move due. */
static int lv_due(const struct vt *vt)
{
    return vt->at_due || vt->cuf_due;
}

/* Where libvterm's cursor is once what is due is written. */
static void lv_pos(struct vt *vt, VTermPos *pos)
{
    if (vt->at_due) {
        *pos = vt->due_pos;
        return;
    }
    vterm_state_get_cursorpos(vt->state, pos);
    pos->col += (int)vt->cuf_due;
}

/* The cursor moved right by n columns of text the fast path wrote whole. */
static void lv_advance(struct vt *vt, size_t n)
{
    if (vt->at_due)
        vt->due_pos.col += (int)n;
    else
        vt->cuf_due += n;
}

/* Start of the last glyph (a base character and the zero-width code points
 * after it) of whole UTF-8 text; 0 if it is all zero-width. */
static size_t last_glyph_start(const uint8_t *p, size_t n)
{
    size_t i = n;
    while (i > 0) {
        size_t start = i - 1;
        while (start > 0 && (p[start] & 0xc0) == 0x80)
            start--;
        uint32_t cp = p[start];
        if (cp >= 0xf0)
            cp &= 0x07;
        else if (cp >= 0xe0)
            cp &= 0x0f;
        else if (cp >= 0xc0)
            cp &= 0x1f;
        for (size_t k = start + 1; k < i; k++)
            cp = (cp << 6) | (p[k] & 0x3fu);
        if (vtf_cp_width(cp) != 0)
            return start;
        i = start;
    }
    return 0;
}

/* What the filter knows of a text unit's code points (vtf_unit). */
enum vt_text {
    VT_TEXT_ANY = 0, /* whatever UTF-8 */
    VT_TEXT_NARROW,  /* each code point one column wide */
    VT_TEXT_ASCII,   /* each byte printable ASCII */
};

static enum vt_text text_kind(const struct vtf_unit *u)
{
    return u->ascii ? VT_TEXT_ASCII : u->narrow ? VT_TEXT_NARROW : VT_TEXT_ANY;
}

/* Start of the last glyph of whole UTF-8 text of that kind. */
static inline size_t last_start(const uint8_t *p, size_t n, enum vt_text kind)
{
    if (n == 0 || kind == VT_TEXT_ANY)
        return last_glyph_start(p, n);
    size_t i = n - 1;
    while (kind == VT_TEXT_NARROW && i > 0 && (p[i] & 0xc0) == 0x80)
        i--;
    return i;
}

/* libvterm 0.1.4 joins a combining mark to the glyph before it within one
 * write, but across two writes only if the cursor moved on after that
 * glyph, which it does not in the last column. So a glyph that will end in
 * the last column is held back until we know what follows it (held[]), and
 * PTY read boundaries cannot change the screen. */
static int glyph_ends_row(struct vt *vt, const uint8_t *g, size_t n)
{
    uint32_t cp = 0;
    size_t k = 0;
    while (k < n && k < 4 && (k == 0 || (g[k] & 0xc0) == 0x80))
        k++;
    if (k == 0)
        return 0;
    cp = g[0] >= 0xf0   ? g[0] & 0x07u
         : g[0] >= 0xe0 ? g[0] & 0x0fu
         : g[0] >= 0xc0 ? g[0] & 0x1fu
                        : g[0];
    for (size_t i = 1; i < k; i++)
        cp = (cp << 6) | (g[i] & 0x3fu);
    int w = vtf_cp_width(cp);
    if (w <= 0)
        return 0;
    VTermPos pos;
    lv_pos(vt, &pos);
    int col = pos.col, row = pos.row;
    if (vt->pending_wrap) {
        col = 0;
        if (row + 1 < vt->rows)
            row++;
    }
    return col + w >= vt_row_width(vt, row);
}

void vt_sync(struct vt *vt)
{
    if (vt->held_len == 0)
        return;
    lv_flush(vt);
    size_t n = vt->held_len;
    vt->held_len = 0;
    write_text(vt, vt->held, n, vt->held_hi && !vt->held_shift);
}

/* Glyphs of whole, valid UTF-8 text (as the filter hands it on) if each is
 * one code point of width 1 and they end before column `room`; 0 if not. */
static size_t narrow_glyphs(const uint8_t *p, size_t n, size_t room)
{
    size_t glyphs = 0;
    for (size_t i = 0; i < n; glyphs++) {
        if (glyphs >= room)
            return 0;
        uint8_t b = p[i];
        if (b >= 0x20 && b <= 0x7e) {
            i++;
            continue;
        }
        size_t k = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 ? 2 : 0;
        if (k == 0 || i + k > n)
            return 0;
        uint32_t cp = b & (0x7fu >> k);
        for (size_t j = 1; j < k; j++)
            cp = (cp << 6) | (p[i + j] & 0x3fu);
        if (vtf_cp_width(cp) != 1)
            return 0;
        i += k;
    }
    return glyphs;
}

/* The same for text the filter found narrow: one glyph per lead byte. */
static size_t narrow_leads(const uint8_t *p, size_t n, size_t room)
{
    size_t glyphs = 0;
    for (size_t i = 0; i < n; i++)
        glyphs += (p[i] & 0xc0) != 0x80;
    return glyphs <= room ? glyphs : 0;
}

/* The text fast path. libvterm's state spends most of the model's time
 * on each glyph; a run of one-column glyphs (printable ASCII, or any code
 * point of width 1: box drawing, Braille, Latin, Greek... never a
 * zero-width or wide one) that cannot wrap, insert, change charset or
 * protect cells only fills cells and moves the cursor. So such a run goes
 * straight into the cells (vts_put_text, with the pen libvterm gave the
 * layer) and libvterm's cursor moves by one CUF. Conditions: GL is ASCII
 * (never designated or 'B'; libvterm decodes non-ASCII UTF-8 whatever GL
 * is) and no single shift is pending; IRM off; no pending wrap; the row not
 * double width; the run ends before the last column (so no wrap and no
 * phantom); DECLRMM and DECSCA off (see enum vt_fast); DECOM off (under
 * DECOM libvterm's CUF would put a cursor outside the margins back into
 * them, which text does not).
 * The caller writes the unit's last glyph through libvterm as before, which
 * keeps libvterm's previous glyph (combining) and vt's own tracking (comb,
 * pending_wrap) as they were, unless the whole unit goes (whole_fast).
 * Returns the glyphs written, 0 to go the usual way. */
/* The modes under which a glyph vt.c puts itself is what libvterm would
 * put (see fast_text; DECLRMM and DECSCA are vt->fast's). */
static int glyph_modes_plain(const struct vt *vt)
{
    return !vt->single_shift && !vt->insert && !vt->pending_wrap && !vt->origin &&
           (vt->gset[vt->gl] == 0 || vt->gset[vt->gl] == 'B');
}

/* libvterm's previous glyph is now stale (lv_stale): vt.c put the last one,
 * cp at pos (whole_fast, held_fast). */
static void glyph_put_last(struct vt *vt, VTermPos pos, uint32_t cp)
{
    if (!vt->lv_stale) {
        vt->lv.pos = vt->comb.pos;
        vt->lv.width = vt->comb.width;
        vt->lv_stale = 1;
    }
    vt->comb.valid = 1;
    vt->comb.pos = pos;
    vt->comb.width = 1;
    vt->comb.n = 1;
    memset(vt->comb.chars, 0, sizeof vt->comb.chars);
    vt->comb.chars[0] = cp;
}

static int fast_text(struct vt *vt, const uint8_t *p, size_t n, enum vt_text kind, int defer)
{
    /* one glyph alone only when its move is deferred (whole_fast): a CUF
     * written for it costs what libvterm's own glyph does */
    if (n < (defer ? 1u : 2u) || !glyph_modes_plain(vt))
        return 0;
    if (vt->fast == VT_FAST_UNKNOWN) /* asked of libvterm below */
        lv_flush(vt);
    VTermPos pos;
    lv_pos(vt, &pos);
    if (pos.col < 0 || pos.col >= vt->cols)
        return 0;
    size_t room = (size_t)(vt->cols - 1 - pos.col), ascii = 0;
    if (n <= room && kind == VT_TEXT_ASCII) /* the filter says: all printable ASCII */
        ascii = n;
    else if (n <= room && kind == VT_TEXT_ANY) /* printable ASCII: one byte, one glyph */
        while (ascii < n && p[ascii] >= 0x20 && p[ascii] <= 0x7e)
            ascii++;
    size_t glyphs = ascii == n               ? n
                    : kind == VT_TEXT_NARROW ? narrow_leads(p, n, room)
                                             : narrow_glyphs(p, n, room);
    if (glyphs == 0)
        return 0;
    const VTermLineInfo *li = vt->any_dwl ? vterm_state_get_lineinfo(vt->state, pos.row) : NULL;
    if (li && li->doublewidth)
        return 0;
    if (vt->fast == VT_FAST_UNKNOWN) {
        long a, b;
        int protect = vt_query_status(vt, "\"q", &a, &b) == 0 && a == 1;
        vt->fast = !vt->lrmm && !protect ? VT_FAST_OK : VT_FAST_NO;
    }
    if (vt->fast != VT_FAST_OK ||
        (ascii == n ? vts_put_ascii(vt->cells, pos.row, pos.col, p, n)
                    : vts_put_text(vt->cells, pos.row, pos.col, p, n, glyphs)) != 0)
        return 0;
    if (defer)
        lv_advance(vt, glyphs);
    else
        write_cuf(vt, glyphs);
    if (kind != VT_TEXT_ASCII)
        run_note(vt, p, n);
    return (int)glyphs;
}

/* While libvterm's previous glyph is stale (lv_stale: the fast path put
 * the glyph printed last itself), combining marks that start a text unit
 * are vt.c's: libvterm 0.1.4 joins them to its previous glyph if the
 * cursor stands right after it, and would take the wrong one. As
 * libvterm does it: after comb (the glyph printed last), they join it,
 * rewriting its cell with the current pen; where libvterm would join them
 * to its stale glyph instead, they make a glyph of their own at the
 * cursor, as libvterm puts one (past the end of a line made double width
 * since, on the next line; insert mode shifts the row first; no pending
 * wrap while lv_stale, only libvterm's text sets one); anywhere else
 * libvterm joins
 * nothing and takes them itself (its previous glyph is then right again).
 * Returns the bytes of marks taken, 0 for none. */
static size_t own_marks(struct vt *vt, const uint8_t *p, size_t n)
{
    uint32_t marks[2 * VTF_MAX_COMBINING];
    int nm = 0;
    size_t k = 0, len;
    while (k < n) {
        uint32_t cp = utf8_at(p + k, n - k, &len);
        if (vtf_cp_width(cp) != 0)
            break;
        if (nm == (int)(sizeof marks / sizeof marks[0]))
            return 0; /* more than the filter lets through: libvterm's */
        marks[nm++] = cp;
        k += len;
    }
    if (nm == 0 || vt->single_shift)
        return 0;
    VTermPos cur;
    vterm_state_get_cursorpos(vt->state, &cur);
    if (vt->comb.valid && cur.row == vt->comb.pos.row &&
        cur.col == vt->comb.pos.col + vt->comb.width) {
        for (int i = 0; i < nm && vt->comb.n < VT_MAX_CHARS; i++)
            vt->comb.chars[vt->comb.n++] = marks[i];
        vts_put_glyph(vt->cells, vt->comb.pos, vt->comb.chars, vt->comb.n, vt->comb.width,
                      protect_on(vt));
        return k;
    }
    if (cur.row != vt->lv.pos.row || cur.col != vt->lv.pos.col + vt->lv.width)
        return 0;
    if (cur.col >= vt_row_width(vt, cur.row)) {
        /* past the end of a line made double width since: libvterm goes to
         * column 0 of the next line first (scrolling as LF does; CR would
         * stop at a left margin, CUB goes to 0 unless DECOM holds it) */
        char cub[16];
        vterm_input_write(vt->term, "\n", 1);
        vterm_state_get_cursorpos(vt->state, &cur);
        int cl = cur.col > 0 ? snprintf(cub, sizeof cub, "\033[%dD", cur.col) : 0;
        if (cl > 0 && (size_t)cl < sizeof cub)
            vterm_input_write(vt->term, cub, (size_t)cl);
        vterm_state_get_cursorpos(vt->state, &cur);
    }
    if (vt->insert)
        vts_insert_blank(vt->cells, cur.row, cur.col, vt_row_width(vt, cur.row));
    vts_put_glyph(vt->cells, cur, marks, nm, 0, protect_on(vt));
    vt->comb.pos = cur;
    vt->comb.width = 0;
    vt->comb.n = (uint8_t)(nm < VT_MAX_CHARS ? nm : VT_MAX_CHARS);
    memset(vt->comb.chars, 0, sizeof vt->comb.chars);
    memcpy(vt->comb.chars, marks, (size_t)vt->comb.n * sizeof marks[0]);
    return k;
}

/* A whole unit of one-column glyphs that ends before the last column goes
 * into the cells, its last glyph too (fast_text): one libvterm write (the
 * CUF) instead of two. libvterm's previous glyph is then stale (lv_stale;
 * own_marks deals with marks that follow). Not once a line was made double
 * width (own_marks could not put a mark as libvterm would there). 1 if
 * done. */
static int whole_fast(struct vt *vt, const uint8_t *p, size_t n, enum vt_text kind)
{
    if (vt->any_dwl || n == 0)
        return 0;
    if (vt->fast == VT_FAST_UNKNOWN) /* fast_text asks libvterm */
        lv_flush(vt);
    VTermPos pos;
    lv_pos(vt, &pos);
    int glyphs = fast_text(vt, p, n, kind, 1);
    if (glyphs == 0)
        return 0;
    size_t last = last_start(p, n, kind), len;
    pos.col += glyphs - 1;
    glyph_put_last(vt, pos, utf8_at(p + last, n - last, &len));
    vt->pending_wrap = 0;
    return 1;
}

/* A text unit, of the kind the filter found. */
static void on_text(struct vt *vt, const uint8_t *p, size_t n, enum vt_text kind)
{
    /* text after text the fast path wrote whole (a fast SGR between): the
     * CUFs due add up while this goes whole too */
    const int shift = vt->single_shift;
    if (lv_due(vt) && !vt->held_len && n > 0 && whole_fast(vt, p, n, kind)) {
        vt->single_shift = 0;
        return;
    }
    /* one glyph that ends the row, with the cursor due (a TUI's right
     * border after a CUP): held as below, without writing the move first */
    if (lv_due(vt) && !vt->held_len && n <= sizeof vt->held && last_start(p, n, kind) == 0 &&
        glyph_ends_row(vt, p, n)) {
        memcpy(vt->held, p, n);
        vt->held_len = n;
        vt->held_shift = shift;
        vt->held_hi = vt->run_hi;
        vt->single_shift = 0;
        return;
    }
    lv_flush(vt);
    if (vt->held_len) {
        memcpy(vt->tbuf, vt->held, vt->held_len);
        memcpy(vt->tbuf + vt->held_len, p, n);
        n += vt->held_len;
        p = vt->tbuf;
        vt->held_len = 0;
        kind = VT_TEXT_ANY;
    } else if (vt->lv_stale && n > 0 && p[0] >= 0x80) {
        size_t k = own_marks(vt, p, n);
        run_note(vt, p, k);
        p += k;
        n -= k;
    }
    if (n == 0 || whole_fast(vt, p, n, kind)) {
        vt->single_shift = 0;
        return;
    }
    size_t cut = last_start(p, n, kind);
    if (!fast_text(vt, p, cut, kind, 0))
        write_text(vt, p, cut, vt->run_hi && !shift);
    vt->single_shift = 0;
    if (n - cut <= sizeof vt->held && glyph_ends_row(vt, p + cut, n - cut)) {
        memcpy(vt->held, p + cut, n - cut);
        vt->held_len = n - cut;
        vt->held_shift = shift;
        vt->held_hi = vt->run_hi;
        return;
    }
    write_text(vt, p + cut, n - cut, vt->run_hi && !shift);
}

static int is_line_attr(const struct vtf_seq *s);

/* --- SGR without libvterm ------------------------------------------------- */

/* What each SGR code does to the pen, as libvterm 0.1.4's
 * vterm_state_setpen does it; SGR_NONE: not ours (libvterm takes the
 * whole SGR: faint, conceal, codes it ignores...). */
enum sgr_kind {
    SGR_NONE = 0,
    SGR_RESET,  /* 0 or empty: every attribute off, default colours */
    SGR_SET,    /* attr = value */
    SGR_FONT,   /* font = code - 10 */
    SGR_FG16,   /* foreground: indexed colour code - value */
    SGR_BG16,   /* background: the same */
    SGR_FG_DEF, /* default foreground */
    SGR_BG_DEF, /* default background */
    SGR_FG_EXT, /* 38;5;N or 38;2;R;G;B */
    SGR_BG_EXT, /* 48;... */
};

#define SGR_CODES 108 /* 0..107 */

static const struct sgr_rule {
    uint8_t kind;  /* enum sgr_kind */
    uint8_t attr;  /* VTermAttr, for SGR_SET */
    uint8_t value; /* SGR_SET: the value; SGR_FG16/BG16: what to take off the code */
} sgr_rules[SGR_CODES] = {
    [0] = {SGR_RESET, 0, 0},
    [1] = {SGR_SET, VTERM_ATTR_BOLD, 1},
    [3] = {SGR_SET, VTERM_ATTR_ITALIC, 1},
    [4] = {SGR_SET, VTERM_ATTR_UNDERLINE, 1},
    [5] = {SGR_SET, VTERM_ATTR_BLINK, 1},
    [7] = {SGR_SET, VTERM_ATTR_REVERSE, 1},
    [9] = {SGR_SET, VTERM_ATTR_STRIKE, 1},
    [10 ... 19] = {SGR_FONT, 0, 0},
    [21] = {SGR_SET, VTERM_ATTR_UNDERLINE, 2},
    [22] = {SGR_SET, VTERM_ATTR_BOLD, 0},
    [23] = {SGR_SET, VTERM_ATTR_ITALIC, 0},
    [24] = {SGR_SET, VTERM_ATTR_UNDERLINE, 0},
    [25] = {SGR_SET, VTERM_ATTR_BLINK, 0},
    [27] = {SGR_SET, VTERM_ATTR_REVERSE, 0},
    [29] = {SGR_SET, VTERM_ATTR_STRIKE, 0},
    [30 ... 37] = {SGR_FG16, 0, 30},
    [38] = {SGR_FG_EXT, 0, 0},
    [39] = {SGR_FG_DEF, 0, 0},
    [40 ... 47] = {SGR_BG16, 0, 40},
    [48] = {SGR_BG_EXT, 0, 0},
    [49] = {SGR_BG_DEF, 0, 0},
    [90 ... 97] = {SGR_FG16, 0, 90 - 8},
    [100 ... 107] = {SGR_BG16, 0, 100 - 8},
};

static enum sgr_kind sgr_kind_of(int32_t code)
{
    if (code == VTF_PARAM_MISSING)
        return SGR_RESET;
    return code >= 0 && code < SGR_CODES ? (enum sgr_kind)sgr_rules[code].kind : SGR_NONE;
}

static void pen_value(struct vt *vt, VTermAttr attr, int value)
{
    VTermValue v;
    memset(&v, 0, sizeof v);
    if (attr == VTERM_ATTR_UNDERLINE || attr == VTERM_ATTR_FONT)
        v.number = value;
    else
        v.boolean = value;
    vts_set_pen(vt->cells, attr, &v);
}

static void pen_color(struct vt *vt, VTermAttr attr, const VTermColor *c)
{
    VTermValue v;
    memset(&v, 0, sizeof v);
    v.color = *c;
    vts_set_pen(vt->cells, attr, &v);
}

/* Parameters the SGR code at i takes (1, or 3 and 5 for an extended
 * colour), 0 if libvterm must have the SGR: a code not ours, an extended
 * colour that is not whole and in range. */
static int sgr_width(const struct vtf_seq *s, int i, enum sgr_kind k)
{
    if (k == SGR_NONE)
        return 0;
    if (k != SGR_FG_EXT && k != SGR_BG_EXT)
        return 1;
    int kind = i + 1 < s->nparams ? s->params[i + 1] : -1;
    int need = kind == 5 ? 1 : kind == 2 ? 3 : -1;
    if (need < 0 || i + 2 + need > s->nparams)
        return 0;
    for (int j = 0; j < need; j++)
        if (s->params[i + 2 + j] < 0 || s->params[i + 2 + j] > 255)
            return 0;
    return 2 + need;
}

static void sgr_apply(struct vt *vt, const struct vtf_seq *s, int i, enum sgr_kind k)
{
    static const VTermAttr flags[] = {VTERM_ATTR_BOLD,  VTERM_ATTR_UNDERLINE, VTERM_ATTR_ITALIC,
                                      VTERM_ATTR_BLINK, VTERM_ATTR_REVERSE,   VTERM_ATTR_STRIKE,
                                      VTERM_ATTR_FONT};
    int32_t code = s->params[i];
    const int32_t *a = s->params + i + 2;
    VTermColor c;
    switch (k) {
    case SGR_RESET: /* vterm_state_resetpen */
        for (size_t j = 0; j < sizeof flags / sizeof flags[0]; j++)
            pen_value(vt, flags[j], 0);
        pen_color(vt, VTERM_ATTR_FOREGROUND, &vt->default_fg);
        pen_color(vt, VTERM_ATTR_BACKGROUND, &vt->default_bg);
        break;
    case SGR_SET:
        pen_value(vt, (VTermAttr)sgr_rules[code].attr, sgr_rules[code].value);
        break;
    case SGR_FONT:
        pen_value(vt, VTERM_ATTR_FONT, code - 10);
        break;
    case SGR_FG16:
    case SGR_BG16:
        vterm_color_indexed(&c, (uint8_t)(code - sgr_rules[code].value));
        pen_color(vt, k == SGR_FG16 ? VTERM_ATTR_FOREGROUND : VTERM_ATTR_BACKGROUND, &c);
        break;
    case SGR_FG_DEF:
        pen_color(vt, VTERM_ATTR_FOREGROUND, &vt->default_fg);
        break;
    case SGR_BG_DEF:
        pen_color(vt, VTERM_ATTR_BACKGROUND, &vt->default_bg);
        break;
    case SGR_FG_EXT:
    case SGR_BG_EXT:
        if (s->params[i + 1] == 5)
            vterm_color_indexed(&c, (uint8_t)a[0]);
        else
            vterm_color_rgb(&c, (uint8_t)a[0], (uint8_t)a[1], (uint8_t)a[2]);
        pen_color(vt, k == SGR_FG_EXT ? VTERM_ATTR_FOREGROUND : VTERM_ATTR_BACKGROUND, &c);
        break;
    default:
        break;
    }
}

/* An SGR (CSI ... m, no leader or intermediates) applied to the cells'
 * pen directly, as libvterm's state would apply it, instead of through
 * libvterm's parser and state: a TUI sends several SGRs a row, and they
 * were a large part of the model's time. libvterm's own pen is then left
 * behind (pen_stale) until something of libvterm's reads it: DECSC and
 * the alternate screen's ?1048h/?1049h save it, and an SGR that libvterm must apply itself changes
 * it (pen_sync first). Nothing else in libvterm 0.1.4 reads its pen: glyphs and erases take the
 * layer's (vtscreen). 1 if done; 0: nothing applied, libvterm must have it. */
static int sgr_fast(struct vt *vt, const struct vtf_seq *s)
{
    if (s->sub != 0)
        return 0;
    /* libvterm ends every CSI by putting the cursor back inside its row
     * (a double-width line is half as wide) or, with DECOM, inside the
     * margins, and pen_sync writes a CSI when libvterm needs the pen: only
     * where that can never move the cursor are SGRs ours */
    if (vt->any_dwl || vt->origin)
        return 0;
    for (int i = 0; i < s->nparams;) { /* all or nothing: check first */
        int w = sgr_width(s, i, sgr_kind_of(s->params[i]));
        if (w == 0)
            return 0;
        i += w;
    }
    for (int i = 0; i < s->nparams;) {
        enum sgr_kind k = sgr_kind_of(s->params[i]);
        sgr_apply(vt, s, i, k);
        i += k == SGR_FG_EXT || k == SGR_BG_EXT ? (s->params[i + 1] == 5 ? 3 : 5) : 1;
    }
    vt->pen_stale = 1;
    return 1;
}

/* Gives libvterm's state the cells' pen (see sgr_fast). */
static void pen_sync(struct vt *vt)
{
    if (!vt->pen_stale)
        return;
    vt->pen_stale = 0;
    char sgr[VTS_PEN_SGR_MAX];
    size_t n = vts_pen_sgr(vt->cells, sgr);
    vterm_input_write(vt->term, sgr, n);
}

/* Whether pen_sync must come before this unit: libvterm saves its pen
 * (DECSC, ?1048h, ?1049h; and CSI s, SCOSC in later libvterms), or after
 * it pen_sync's own CSI could move the cursor (see sgr_fast: a line made
 * double width, DECOM set). */
static int needs_pen(const struct vtf_unit *u)
{
    const struct vtf_seq *s = u->seq;
    if (u->kind == VTF_ESC)
        return (s->ninter == 0 && s->final == '7') || is_line_attr(s);
    if (u->kind != VTF_CSI)
        return 0;
    if (s->leader == 0)
        return s->final == 's';
    return s->leader == '?' && s->final == 'h' &&
           (s->params[0] == 1048 || s->params[0] == 1049 || s->params[0] == 6);
}

/* ESC # 3, 4, 6: double-height or double-width line. On a one-column
 * screen such a line is zero columns wide and libvterm writes through a
 * NULL cell pointer (ESC # 3, a glyph, ECH). */
static int is_line_attr(const struct vtf_seq *s)
{
    return s->ninter == 1 && s->inter[0] == '#' &&
           (s->final == '3' || s->final == '4' || s->final == '6');
}

/* ESC # 8, DECALN: libvterm 0.1.4 puts an E, with the pen and DECSCA of
 * the moment, in every cell of every row (half the row on a double-width
 * line), one glyph callback a cell, and changes nothing else: the cursor,
 * the margins and the phantom column stay. At about 30 ns a cell, an
 * agent printing DECALNs cost the model 20 us a byte at 80x24 and 164 us
 * at 300x100, and held the loop (or the models' thread, and through it
 * every snapshot) for seconds; vt.c fills the rows itself. */
static int is_decaln(const struct vtf_seq *s)
{
    return s->ninter == 1 && s->inter[0] == '#' && s->final == '8';
}

static void decaln(struct vt *vt)
{
    const int protect = protect_on(vt);
    for (int row = 0; row < vt->rows; row++) {
        const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, row);
        int n = li && li->doublewidth ? vt->cols / 2 : vt->cols;
        (void)vts_fill_row(vt->cells, row, n, 'E', protect); /* no room: vt_feed says so */
    }
}

/* Before shrinking to one column: make every line single width again
 * (ESC # 5 on each), putting the cursor back where it was. */
static void single_width_lines(struct vt *vt)
{
    int any = 0;
    for (int r = 0; r < vt->rows && !any; r++) {
        const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, r);
        any = li && li->doublewidth;
    }
    if (!any)
        return;
    VTermPos cur;
    vterm_state_get_cursorpos(vt->state, &cur);
    const int origin = vt->origin;
    if (origin)
        vt_query(vt, "\033[?6l");
    char q[32];
    for (int r = 0; r < vt->rows; r++) {
        const VTermLineInfo *li = vterm_state_get_lineinfo(vt->state, r);
        if (!li || !li->doublewidth)
            continue;
        if (snprintf(q, sizeof q, "\033[%d;1H\033#5", r + 1) < (int)sizeof q)
            vt_query(vt, q);
    }
    if (origin) {
        /* DECOM homes the cursor to the margins; CUP is then relative. */
        vt_query(vt, "\033[?6h");
        VTermPos home;
        vterm_state_get_cursorpos(vt->state, &home);
        cur.row -= home.row;
        cur.col -= home.col;
    }
    if (snprintf(q, sizeof q, "\033[%d;%dH", cur.row + 1, cur.col + 1) < (int)sizeof q)
        vt_query(vt, q);
    vt->pending_wrap = 0;
}

/* Moves libvterm's cursor to an absolute position whatever DECOM says:
 * CUP is relative to where CUP 1;1 lands. */
static void goto_abs(struct vt *vt, VTermPos pos)
{
    vt_query(vt, "\033[H");
    VTermPos home;
    vterm_state_get_cursorpos(vt->state, &home);
    char q[32];
    int n = snprintf(q, sizeof q, "\033[%d;%dH", pos.row - home.row + 1, pos.col - home.col + 1);
    if (n > 0 && (size_t)n < sizeof q)
        vt_query(vt, q);
}

/* libvterm 0.1.4 keeps a scroll region and side margins set for a larger
 * screen across a resize; the next scroll then memmoves a negative size.
 * Margins that no longer fit go back to the whole screen, as in xterm. */
static void fix_margins(struct vt *vt)
{
    long a, b;
    int bad_rows = vt_query_status(vt, "r", &a, &b) == 0 && (b > vt->rows || a > b);
    int bad_cols = vt_query_status(vt, "s", &a, &b) == 0 && (b > vt->cols || a > b);
    if (!bad_rows && !bad_cols)
        return;
    VTermPos cur;
    vterm_state_get_cursorpos(vt->state, &cur);
    if (bad_rows)
        vt_query(vt, "\033[r");
    if (bad_cols) {
        vt_query(vt, vt->lrmm ? "\033[s" : "\033[?69h\033[s\033[?69l");
    }
    if (cur.row >= vt->rows)
        cur.row = vt->rows - 1;
    if (cur.col >= vt->cols)
        cur.col = vt->cols - 1;
    goto_abs(vt, cur);
    vt->pending_wrap = 0;
}

/* libvterm 0.1.4 can leave its cursor outside the screen: a resize that
 * drops rows moves it up past row 0, and DECRC after a shrink restores a
 * position that no longer exists; the next glyph then reads out of bounds.
 * A CUU/CUD/CUB/CUF by one ends in libvterm's own clamping. */
static void fix_cursor(struct vt *vt)
{
    VTermPos p;
    vterm_state_get_cursorpos(vt->state, &p);
    if (p.row >= 0 && p.row < vt->rows && p.col >= 0 && p.col < vt->cols)
        return;
    if (p.row < 0)
        vt_query(vt, "\033[A");
    else if (p.row >= vt->rows)
        vt_query(vt, "\033[B");
    if (p.col < 0)
        vt_query(vt, "\033[D");
    else if (p.col >= vt->cols)
        vt_query(vt, "\033[C");
    vterm_state_get_cursorpos(vt->state, &p);
    if (p.row < 0 || p.row >= vt->rows || p.col < 0 || p.col >= vt->cols)
        vt_query(vt, "\033[H");
    vt->pending_wrap = 0;
}

/* --- cursor addressing and erases without libvterm ------------------------ */

/* The glyph held back (see glyph_ends_row) put into the cells by vt.c,
 * when a CUP comes next: libvterm would put it in the last column and set
 * its phantom flag, which the CUP clears, and its cursor, which the CUP
 * moves. Only a glyph fast_text could put (one code point of width 1, no
 * single shift, GL ASCII, IRM off, DECLRMM and DECSCA off, no pending
 * wrap, no double-width line); its bookkeeping as in whole_fast. 1 if
 * done (nothing held any more). */
static int held_fast(struct vt *vt)
{
    if (vt->fast != VT_FAST_OK || vt->any_dwl || vt->held_shift || !glyph_modes_plain(vt))
        return 0;
    size_t len;
    uint32_t cp = utf8_at(vt->held, vt->held_len, &len);
    VTermPos pos;
    lv_pos(vt, &pos);
    if (len != vt->held_len || vtf_cp_width(cp) != 1 || pos.row < 0 || pos.row >= vt->rows ||
        pos.col != vt->cols - 1 || vts_put_text(vt->cells, pos.row, pos.col, vt->held, len, 1) != 0)
        return 0;
    glyph_put_last(vt, pos, cp);
    vt->held_len = 0;
    return 1;
}

/* A CUP or HVP (plain, no sub-parameters) taken by vt.c: libvterm's
 * cursor is due there (at_due) and written only before libvterm is next
 * written or read (lv_flush), so that a TUI's row (CUP, text and SGRs
 * the fast paths take, EL, CUP, a border glyph) costs libvterm nothing.
 * As libvterm 0.1.4 does it: a missing or 0 parameter is 1, the position
 * is clamped to the screen (a row's width: no double-width line here),
 * the phantom flag is cleared. Not with DECOM set (the position is then
 * relative to the margins). 1 if taken. */
static int cup_due(struct vt *vt, const struct vtf_seq *s)
{
    if (s->sub != 0 || s->nparams > 2 || vt->any_dwl || vt->origin)
        return 0;
    if (vt->held_len && !held_fast(vt)) {
        lv_flush(vt);
        vt_sync(vt);
    }
    int32_t r = s->nparams > 0 ? s->params[0] : VTF_PARAM_MISSING;
    int32_t c = s->nparams > 1 ? s->params[1] : VTF_PARAM_MISSING;
    r = r == VTF_PARAM_MISSING ? 0 : r - 1;
    c = c == VTF_PARAM_MISSING ? 0 : c - 1;
    vt->due_pos.row = r < 0 ? 0 : r >= vt->rows ? vt->rows - 1 : r;
    vt->due_pos.col = c < 0 ? 0 : c >= vt->cols ? vt->cols - 1 : c;
    vt->cuf_due = 0;
    vt->at_due = 1;
    vt->pending_wrap = 0;
    return 1;
}

/* EL (plain, one parameter at most: 0, 1 or 2) put into the cells by
 * vt.c, as libvterm 0.1.4 erases: the cursor's row from the cursor, up to
 * it, or whole (a row's width: no double-width line here), with the pen,
 * protection ignored; the cursor and the phantom flag stay. Not under
 * DECOM: libvterm ends every CSI, EL too, by putting a cursor that stands
 * outside the margins (after DECRC, say) back into them. 1 if done. */
static int el_fast(struct vt *vt, const struct vtf_seq *s)
{
    if (s->sub != 0 || s->nparams > 1 || vt->any_dwl || vt->held_len || vt->origin)
        return 0;
    VTermPos pos;
    lv_pos(vt, &pos);
    VTermRect r = {pos.row, pos.row + 1, 0, vt->cols};
    switch (s->nparams > 0 ? s->params[0] : VTF_PARAM_MISSING) {
    case VTF_PARAM_MISSING:
    case 0:
        r.start_col = pos.col;
        break;
    case 1:
        r.end_col = pos.col + 1;
        break;
    case 2:
        break;
    default:
        return 0;
    }
    if (r.end_col > r.start_col)
        vts_erase(vt->cells, r);
    return 1;
}

/* A line feed (LF, or CR LF as one unit) done by vt.c: the cursor due
 * one row down, or the scroll region's rows scrolled up one when it
 * stands on the region's last row, as libvterm 0.1.4 does it (its own
 * line infos scroll too, all plain while no line was made double width;
 * LNM adds a CR). Only where libvterm's CR would go to column 0 and its
 * scroll is of whole rows (DECLRMM off: fast known OK), with no pending
 * wrap (libvterm keeps the phantom column when a scroll leaves the cursor
 * where it was) and nothing held. So a line of text and its CR LF cost
 * libvterm nothing. 1 if done. */
static int lf_fast(struct vt *vt, const struct vtf_unit *u)
{
    const int crlf = u->len == 2 && u->bytes[0] == '\r' && u->bytes[1] == '\n';
    if ((!crlf && (u->len != 1 || u->bytes[0] != '\n')) || vt->fast != VT_FAST_OK || vt->any_dwl ||
        vt->held_len || vt->pending_wrap)
        return 0;
    if (vt->origin)
        return 0;            /* the due position is absolute: a CUP is not, under DECOM */
    if (!vt->region_known) { /* DECSTBM, asked once until a unit may change it */
        long top, bottom;
        lv_flush(vt);
        if (vt_query_status(vt, "r", &top, &bottom) != 0 || top < 1 || bottom > vt->rows ||
            top >= bottom)
            return 0;
        vt->region_top = (int)top - 1;
        vt->region_bottom = (int)bottom;
        vt->region_known = 1;
    }
    VTermPos pos;
    lv_pos(vt, &pos);
    if (crlf)
        pos.col = 0;
    if (pos.row == vt->region_bottom - 1)
        vts_scroll_up(vt->cells, vt->region_top, vt->region_bottom);
    else if (pos.row < vt->rows - 1)
        pos.row++;
    if (vt->newline)
        pos.col = 0;
    vt->cuf_due = 0;
    vt->at_due = 1;
    vt->due_pos = pos;
    return 1;
}

/* A unit other than text. */
static void on_other(struct vt *vt, const struct vtf_unit *u)
{
    if (u->kind == VTF_CTRL && lf_fast(vt, u))
        return;
    /* text, then CR (LF): the CUF due after the text is moot, since CR
     * puts the cursor in column 0 wherever it stood (DECLRMM is off while
     * the fast path runs, and fast text leaves no pending wrap); not while
     * a glyph is held, which goes where the CUF puts the cursor */
    if (vt->cuf_due && !vt->held_len && u->kind == VTF_CTRL && u->bytes[0] == '\r')
        vt->cuf_due = 0;
    const int plain_csi = u->kind == VTF_CSI && u->seq->leader == 0 && u->seq->ninter == 0;
    if (plain_csi && (u->seq->final == 'H' || u->seq->final == 'f')) {
        if (cup_due(vt, u->seq))
            return;
        /* CUP and HVP put the cursor where their parameters say, wherever
         * it stood (DECOM adds the margins, not the position); the same */
        if (!vt->held_len)
            vt->cuf_due = 0;
    }
    /* an SGR taken without libvterm reads nothing of it: the move stays due */
    if (lv_due(vt) && !vt->held_len && plain_csi && u->seq->final == 'm' && sgr_fast(vt, u->seq))
        return;
    if (plain_csi && u->seq->final == 'K' && el_fast(vt, u->seq))
        return;
    lv_flush(vt);
    vt_sync(vt);
    if (u->kind == VTF_ESC && vt->cols < 2 && is_line_attr(u->seq))
        return; /* a double-width line one column wide has no room at all */
    if (u->kind == VTF_CSI && u->seq->final == 'm' && u->seq->leader == 0 && u->seq->ninter == 0) {
        if (sgr_fast(vt, u->seq))
            return; /* the cursor, the modes, the tracked state: unchanged */
        pen_sync(vt);
    } else if (vt->pen_stale && needs_pen(u)) {
        pen_sync(vt);
    }
    if (u->kind == VTF_ESC && is_line_attr(u->seq))
        vt->any_dwl = 1;
    VTermPos before, after;
    vterm_state_get_cursorpos(vt->state, &before);
    if (u->kind == VTF_ESC && is_decaln(u->seq))
        decaln(vt);
    else
        vterm_input_write(vt->term, (const char *)u->bytes, u->len);
    vterm_state_get_cursorpos(vt->state, &after);
    if (after.row < 0 || after.row >= vt->rows || after.col < 0 || after.col >= vt->cols) {
        fix_cursor(vt);
        vterm_state_get_cursorpos(vt->state, &after);
    }
    if (before.row != after.row || before.col != after.col)
        vt->pending_wrap = 0;
    if (u->kind == VTF_ESC || (u->kind == VTF_CSI && (u->seq->leader || u->seq->ninter)))
        modes_unknown(vt); /* DECLRMM, DECSCA, DECAWM, RIS, DECRC... may have changed */
    else if (plain_csi && u->seq->final == 'r')
        vt->region_known = 0; /* DECSTBM */
    if (u->kind == VTF_ESC)
        vt->single_shift = u->seq->ninter == 0 && (u->seq->final == 'N' || u->seq->final == 'O');
    switch (u->kind) {
    case VTF_CTRL:
        if (u->bytes[0] == 0x0e) /* SO */
            vt->gl = 1;
        else if (u->bytes[0] == 0x0f) /* SI */
            vt->gl = 0;
        break;
    case VTF_ESC:
        track_esc(vt, u->seq, before);
        break;
    case VTF_CSI:
        track_csi(vt, u->seq, before);
        break;
    default:
        break;
    }
}

static int on_unit(void *ud, const struct vtf_unit *u)
{
    struct vt *vt = ud;
    if (u->kind == VTF_TEXT) {
        on_text(vt, u->bytes, u->len, text_kind(u));
        return 0;
    }
    on_other(vt, u);
    vt->run_hi = 0; /* the run of text ends here, its held glyph written (see lv_text) */
    return 0;
}

/* --- life cycle -------------------------------------------------------- */

static int size_ok(uint16_t cols, uint16_t rows)
{
    if (cols == 0 || rows == 0 || cols > AL_MAX_COLS || rows > AL_MAX_ROWS)
        return AL_E_INVAL;
    if ((uint32_t)cols * rows > VT_MAX_CELLS)
        return AL_E_TOOBIG;
    return AL_OK;
}

int vt_size_check(uint16_t cols, uint16_t rows)
{
    return size_ok(cols, rows);
}

size_t vt_mem_estimate(uint16_t cols, uint16_t rows)
{
    return VT_BYTES_FIXED + (size_t)cols * rows * VT_BYTES_PER_CELL;
}

int vt_new(uint16_t cols, uint16_t rows, struct vt **out)
{
    if (!out)
        return AL_E_INVAL;
    *out = NULL;
    int rc = size_ok(cols, rows);
    if (rc != AL_OK)
        return rc;
    struct vt *vt = calloc(1, sizeof *vt);
    if (!vt)
        return AL_E_NOMEM;
    rc = vtf_new(on_unit, vt, &vt->filter);
    if (rc != AL_OK) {
        free(vt);
        return rc;
    }
    vt->term = vterm_new(rows, cols);
    if (!vt->term) {
        vtf_free(vt->filter);
        free(vt);
        return AL_E_NOMEM;
    }
    vt->cols = cols;
    vt->rows = rows;
    vt->cursor_visible = 1;
    reset_tracked(vt);
    /* A one-column libvterm dereferences NULL on a wide glyph. */
    vtf_set_narrow(vt->filter, cols < 2);

    vterm_set_utf8(vt->term, 1);
    vterm_output_set_callback(vt->term, cb_output, vt);
    vt->state = vterm_obtain_state(vt->term);
    if (vt->state)
        vterm_state_get_default_colors(vt->state, &vt->default_fg, &vt->default_bg);
    rc = vt->state ? vts_new(vt->state, rows, cols, cb_glyph, cb_settermprop, vt, &vt->cells)
                   : AL_E_NOMEM;
    if (rc != AL_OK) {
        vterm_free(vt->term);
        vtf_free(vt->filter);
        free(vt);
        return rc;
    }
    vterm_state_reset(vt->state, 1);
    /* Prime: give libvterm a previous glyph so that its combining and
     * repeat logic never starts from an empty one (docs/snapshots.md). */
    static const char prime[] = " \033[H\033[2J";
    vterm_input_write(vt->term, prime, sizeof prime - 1);
    vt->pending_wrap = 0;
    vt->comb.valid = 1; /* the prime's space at 0,0 */
    vt->comb.width = 1;
    vt->comb.n = 1;
    vt->comb.chars[0] = ' ';
    *out = vt;
    return AL_OK;
}

void vt_free(struct vt *vt)
{
    if (!vt)
        return;
    if (vt->term)
        vterm_free(vt->term);
    vts_free(vt->cells);
    vtf_free(vt->filter);
    free(vt);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int vt_feed(struct vt *vt, const uint8_t *p, size_t n)
{
    if (!vt || (!p && n))
        return AL_E_INVAL;
    uint64_t t0 = now_ns();
    int rc = vtf_feed(vt->filter, p, n);
    lv_flush(vt);                        /* libvterm up to date for whatever reads it next */
    int mem = vts_take_error(vt->cells); /* a row that could not get its cells */
    atomic_fetch_add_explicit(&vt->cost_ns, now_ns() - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&vt->cost_bytes, n, memory_order_release);
    return rc != AL_OK ? rc : mem;
}

void vt_cost(const struct vt *vt, uint64_t *ns, uint64_t *bytes)
{
    *bytes = atomic_load_explicit(&vt->cost_bytes, memory_order_acquire);
    *ns = atomic_load_explicit(&vt->cost_ns, memory_order_relaxed);
}

int vt_resize(struct vt *vt, uint16_t cols, uint16_t rows)
{
    if (!vt)
        return AL_E_INVAL;
    int rc = size_ok(cols, rows);
    if (rc != AL_OK)
        return rc;
    if (cols == vt->cols && rows == vt->rows)
        return AL_OK;
    vt_sync(vt);
    vt->run_hi = 0;
    modes_unknown(vt); /* the fixes below write to libvterm */
    VTermPos before, after;
    vterm_state_get_cursorpos(vt->state, &before);
    uint16_t old_cols = vt->cols;
    if (cols < 2)
        single_width_lines(vt);
    vterm_set_size(vt->term, rows, cols);
    vt->cols = cols;
    vt->rows = rows;
    fix_cursor(vt);
    fix_margins(vt);
    vterm_state_get_cursorpos(vt->state, &after);
    if (before.row != after.row || before.col != after.col)
        vt->pending_wrap = 0;
    if (cols > old_cols)
        tabs_default(vt, old_cols);
    vtf_set_narrow(vt->filter, cols < 2);
    return vts_take_error(vt->cells);
}
