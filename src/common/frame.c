/*
 * frame: airlock.v1 encoder and strict decoder (see frame.h, and
 * docs/protocol.md for the layout of every payload).
 *
 * Data model: a cursor (struct rd / struct wr) walks a byte buffer; every
 * read and write is bounds-checked and a failed one latches the cursor's
 * error, so a payload is either wholly valid or rejected.
 *
 * One table (types[], indexed by type) holds what the protocol says about
 * each frame type: its name, its scope (connection or channel), whether its
 * flags carry a stream, who may send it, what it needs of its channel, and
 * the one function that says whether its fields are valid. Decoding and
 * encoding both check the header and the fields with it; the endpoint reads
 * the rest through fr_type_info(). Each type's payload layout has one decode
 * and one encode case, written side by side so they cannot drift apart.
 */
#include "frame.h"

#include <string.h>

#include "al_err.h"

/* ---- reading ------------------------------------------------------------ */

struct rd {
    const uint8_t *p;
    size_t len, pos;
    int err;
};

static const uint8_t *rd_take(struct rd *r, size_t n)
{
    if (r->err || n > r->len - r->pos) {
        r->err = AL_E_PROTO;
        return NULL;
    }
    const uint8_t *q = r->p + r->pos;
    r->pos += n;
    return q;
}

static uint8_t rd_u8(struct rd *r)
{
    const uint8_t *q = rd_take(r, 1);
    return q ? q[0] : 0;
}

static uint16_t rd_u16(struct rd *r)
{
    const uint8_t *q = rd_take(r, 2);
    return q ? (uint16_t)(q[0] << 8 | q[1]) : 0;
}

static uint32_t rd_u32(struct rd *r)
{
    const uint8_t *q = rd_take(r, 4);
    return q ? (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3] : 0;
}

static uint64_t rd_u64(struct rd *r)
{
    uint64_t hi = rd_u32(r);
    return hi << 32 | rd_u32(r);
}

/* A string: u16 length then bytes; at most max bytes, no NUL inside. */
static struct fr_str rd_str(struct rd *r, size_t max)
{
    struct fr_str s = {NULL, 0};
    uint16_t n = rd_u16(r);
    if (n > max) {
        r->err = AL_E_PROTO;
        return s;
    }
    const uint8_t *q = rd_take(r, n);
    if (!q)
        return s;
    if (memchr(q, 0, n)) {
        r->err = AL_E_PROTO;
        return s;
    }
    s.p = (const char *)q;
    s.len = n;
    return s;
}

/* The rest of the payload as bytes. */
static struct fr_bytes rd_rest(struct rd *r)
{
    struct fr_bytes b = {r->p + r->pos, r->len - r->pos};
    r->pos = r->len;
    return b;
}

static void rd_check(struct rd *r, int ok)
{
    if (!ok)
        r->err = AL_E_PROTO;
}

/* ---- writing ------------------------------------------------------------ */

struct wr {
    uint8_t *p;
    size_t cap, pos;
    int err;
};

static uint8_t *wr_take(struct wr *w, size_t n)
{
    if (w->err || n > w->cap - w->pos) {
        w->err = AL_E_TOOBIG;
        return NULL;
    }
    uint8_t *q = w->p + w->pos;
    w->pos += n;
    return q;
}

static void wr_u8(struct wr *w, uint8_t v)
{
    uint8_t *q = wr_take(w, 1);
    if (q)
        q[0] = v;
}

static void wr_u16(struct wr *w, uint16_t v)
{
    uint8_t *q = wr_take(w, 2);
    if (q) {
        q[0] = (uint8_t)(v >> 8);
        q[1] = (uint8_t)v;
    }
}

static void wr_u32(struct wr *w, uint32_t v)
{
    uint8_t *q = wr_take(w, 4);
    if (q) {
        q[0] = (uint8_t)(v >> 24);
        q[1] = (uint8_t)(v >> 16);
        q[2] = (uint8_t)(v >> 8);
        q[3] = (uint8_t)v;
    }
}

static void wr_u64(struct wr *w, uint64_t v)
{
    wr_u32(w, (uint32_t)(v >> 32));
    wr_u32(w, (uint32_t)v);
}

static void wr_bytes(struct wr *w, const void *p, size_t n)
{
    uint8_t *q = wr_take(w, n);
    if (q && n)
        memcpy(q, p, n);
}

static void wr_str(struct wr *w, struct fr_str s, size_t max)
{
    if (s.len > max || (s.len && !s.p) || (s.len && memchr(s.p, 0, s.len))) {
        w->err = AL_E_INVAL;
        return;
    }
    wr_u16(w, s.len);
    wr_bytes(w, s.p, s.len);
}

static void wr_check(struct wr *w, int ok)
{
    if (!ok && !w->err)
        w->err = AL_E_INVAL;
}

/* ---- the rules of each type ---------------------------------------------- */

/*
 * One function per type says whether a frame's fields are valid; the decoder
 * applies it to what it read, the encoder to what it is asked to write, so a
 * rule is written once. The entries of a list (LIST_REPLY, OPEN's env,
 * VIEWERS) have a rule of their own, applied to each as it is read or
 * written. Layout bounds belong to the cursors: a string's length, and, for
 * the reader before it reads the entries, how many an array holds (which the
 * type's function says again for the writer).
 */

static int relay_role_ok(uint8_t role)
{
    return role == FR_WRITER || role == FR_VIEWER;
}

static int chstate_ok(uint8_t state)
{
    return state == FR_CH_RUNNING || state == FR_CH_EXITED;
}

static int size_ok(uint16_t cols, uint16_t rows)
{
    return cols >= 1 && cols <= AL_MAX_COLS && rows >= 1 && rows <= AL_MAX_ROWS;
}

int fr_signal_ok(unsigned signo)
{
    switch (signo) {
    case 1:  /* HUP */
    case 2:  /* INT */
    case 3:  /* QUIT */
    case 9:  /* KILL */
    case 10: /* USR1 */
    case 12: /* USR2 */
    case 15: /* TERM */
    case 18: /* CONT */
    case 19: /* STOP */
    case 20: /* TSTP */
    case 28: /* WINCH */
        return 1;
    default:
        return 0;
    }
}

static int hello_ok(const struct fr_frame *f)
{
    return f->u.hello.version_min >= 1 && f->u.hello.version_min <= f->u.hello.version_max &&
           (f->u.hello.role == FR_ROLE_HOST || f->u.hello.role == FR_ROLE_CONTROLLER) &&
           f->u.hello.max_frame >= 1024;
}

static int token_ok(const struct fr_frame *f)
{
    return f->u.token.len >= 1 && f->u.token.len <= AL_MAX_TOKEN;
}

static int error_ok(const struct fr_frame *f)
{
    return f->u.error.code != 0;
}

static int list_reply_ok(const struct fr_frame *f)
{
    return f->u.list.count <= AL_MAX_CHANNELS;
}

static int list_entry_ok(const struct fr_list_entry *e)
{
    return e->channel != 0 && chstate_ok(e->state) && e->mode <= FR_MODE_PIPES;
}

static int open_ok(const struct fr_frame *f)
{
    const struct fr_open *o = &f->u.open;
    return !fr_is_proxy_channel(f->channel) && o->mode <= FR_MODE_PIPES &&
           size_ok(o->cols, o->rows) && o->argc >= 1 && o->argc <= AL_MAX_ARGV &&
           o->argv[0].len > 0 && o->envc <= AL_MAX_ENV;
}

/* An env entry: NAME=value with a non-empty NAME. */
static int env_ok(struct fr_str s)
{
    const char *eq = s.p ? memchr(s.p, '=', s.len) : NULL;
    return eq && eq != s.p;
}

static int data_ok(const struct fr_frame *f)
{
    return f->u.data.bytes.len >= 1 && f->u.data.bytes.len <= AL_MAX_DATA &&
           f->u.data.offset <= UINT64_MAX - f->u.data.bytes.len;
}

static int ack_ok(const struct fr_frame *f)
{
    return f->u.ack.limit >= f->u.ack.ack;
}

static int resize_ok(const struct fr_frame *f)
{
    return size_ok(f->u.resize.cols, f->u.resize.rows);
}

static int signal_ok(const struct fr_frame *f)
{
    return fr_signal_ok(f->u.signal.signo) && f->u.signal.scope <= FR_SIG_TREE;
}

static int exit_ok(const struct fr_frame *f)
{
    return f->u.exit.core <= (f->u.exit.signo ? 1 : 0) && f->u.exit.signo < 128 &&
           (f->u.exit.signo == 0 ? f->u.exit.code >= 0 && f->u.exit.code <= 255
                                 : f->u.exit.code == -1);
}

static int attach_ok(const struct fr_frame *f)
{
    return f->u.attach.out_limit >= f->u.attach.out_next &&
           f->u.attach.err_limit >= f->u.attach.err_next &&
           ((f->u.attach.cols == 0 && f->u.attach.rows == 0) ||
            size_ok(f->u.attach.cols, f->u.attach.rows));
}

static int attached_ok(const struct fr_frame *f)
{
    return chstate_ok(f->u.attached.state) && f->u.attached.in_limit >= f->u.attached.in_next;
}

static int gap_ok(const struct fr_frame *f)
{
    return f->u.gap.to > f->u.gap.from;
}

static int snapshot_ok(const struct fr_frame *f)
{
    return size_ok(f->u.snapshot.cols, f->u.snapshot.rows);
}

static int role_ok(const struct fr_frame *f)
{
    return relay_role_ok(f->u.role.role) && f->u.role.in_limit >= f->u.role.in_next;
}

static int viewers_ok(const struct fr_frame *f)
{
    return f->u.viewers.count <= AL_MAX_VIEWERS;
}

static int viewer_ok(const struct fr_viewer *v)
{
    return v->name.len >= 1 && relay_role_ok(v->role);
}

/* PROBE and PROBE_REPLY (§13): which ops each carries and their sizes. */
static int probe_ok(const struct fr_frame *f)
{
    const int req = f->type == FR_PROBE;
    switch (f->u.probe.op) {
    case FR_PROBE_HEADERS:
        return req ? 1 : f->u.probe.nheaders <= AL_PROBE_MAX_HEADERS;
    case FR_PROBE_ECHO:
        return 1;
    case FR_PROBE_SINK:
        return req;
    case FR_PROBE_SOURCE:
        return req ? f->u.probe.count >= 1 && f->u.probe.count <= AL_PROBE_SOURCE_MAX
                   : f->u.probe.bytes.len >= 1;
    default:
        return 0;
    }
}

/* A header's name in a PROBE_REPLY HEADERS: lower-case letters, digits, '-'. */
static int probe_header_ok(const struct fr_probe_header *h)
{
    if (h->name.len < 1)
        return 0;
    for (size_t i = 0; i < h->name.len; i++) {
        char c = h->name.p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return 0;
    }
    return 1;
}

/* PROXY_AT: a base URL agents can use as it is. */
static int proxy_at_ok(const struct fr_frame *f)
{
    struct fr_str u = f->u.proxy_at;
    return u.len > 7 && u.p && memcmp(u.p, "http://", 7) == 0;
}

/* PROXY_OPEN: on an id of the host's space. */
static int proxy_open_ok(const struct fr_frame *f)
{
    return fr_is_proxy_channel(f->channel);
}

/* ---- the table of types --------------------------------------------------- */

struct ftype {
    struct fr_typeinfo info;
    int (*ok)(const struct fr_frame *f); /* the payload's rules; NULL: any value */
};

#define CONN FR_SCOPE_CONN
#define CHAN FR_SCOPE_CHAN
#define HOST FR_BY_HOST
#define CTL FR_BY_CONTROLLER
#define BOTH FR_BY_BOTH
#define PX FR_T_PROXY

/* Indexed by type; a type with no name is not one of airlock.v1's. */
static const struct ftype types[] = {
    /* connection frames (§4.1) */
    [FR_HELLO] = {{"HELLO", CONN, BOTH, 0}, hello_ok},
    [FR_PING] = {{"PING", CONN, BOTH, 0}, NULL},
    [FR_PONG] = {{"PONG", CONN, BOTH, 0}, NULL},
    [FR_TOKEN] = {{"TOKEN", CONN, CTL, 0}, token_ok},
    [FR_ERROR] = {{"ERROR", FR_SCOPE_ANY, BOTH, 0}, error_ok},
    [FR_LIST] = {{"LIST", CONN, CTL, 0}, NULL},
    [FR_LIST_REPLY] = {{"LIST_REPLY", CONN, HOST, 0}, list_reply_ok},
    [FR_PROXY_AT] = {{"PROXY_AT", CONN, HOST, 0}, proxy_at_ok},
    /* probe sessions (§13) */
    [FR_PROBE] = {{"PROBE", CONN, CTL, FR_T_PROBE}, probe_ok},
    [FR_PROBE_REPLY] = {{"PROBE_REPLY", CONN, HOST, FR_T_PROBE}, probe_ok},
    /* channel frames (§4.2); OPEN, OPENED, ATTACH and ATTACHED link a channel */
    [FR_OPEN] = {{"OPEN", CHAN, CTL, 0}, open_ok},
    [FR_OPENED] = {{"OPENED", CHAN, HOST, 0}, NULL},
    [FR_DATA] = {{"DATA", CHAN, BOTH, FR_T_STREAM | FR_T_LINKED | FR_T_LATE | PX}, data_ok},
    [FR_ACK] = {{"ACK", CHAN, BOTH, FR_T_STREAM | FR_T_LINKED | FR_T_LATE | PX}, ack_ok},
    [FR_RESIZE] = {{"RESIZE", CHAN, CTL, FR_T_LINKED | FR_T_NO_CHANNEL}, resize_ok},
    [FR_SIGNAL] = {{"SIGNAL", CHAN, CTL, FR_T_LINKED | FR_T_NO_CHANNEL}, signal_ok},
    [FR_EOF] = {{"EOF", CHAN, BOTH, FR_T_STREAM | FR_T_LINKED | FR_T_LATE | PX}, NULL},
    [FR_EXIT] = {{"EXIT", CHAN, HOST, FR_T_LINKED}, exit_ok},
    [FR_CLOSE] = {{"CLOSE", CHAN, BOTH, FR_T_NO_CHANNEL | FR_T_LATE | PX}, NULL},
    [FR_ATTACH] = {{"ATTACH", CHAN, CTL, FR_T_FLAG0 | FR_T_NO_CHANNEL}, attach_ok},
    [FR_ATTACHED] = {{"ATTACHED", CHAN, HOST, 0}, attached_ok},
    [FR_GAP] = {{"GAP", CHAN, BOTH, FR_T_STREAM | FR_T_LINKED}, gap_ok},
    [FR_SNAPSHOT_REQ] = {{"SNAPSHOT_REQ", CHAN, CTL, FR_T_LINKED | FR_T_NO_CHANNEL}, NULL},
    [FR_SNAPSHOT] = {{"SNAPSHOT", CHAN, HOST, FR_T_FLAG0 | FR_T_LINKED}, snapshot_ok},
    /* relay sessions (§9) */
    [FR_ROLE] = {{"ROLE", CHAN, HOST, FR_T_RELAY | FR_T_LINKED}, role_ok},
    [FR_TAKEOVER] = {{"TAKEOVER", CHAN, CTL, FR_T_RELAY | FR_T_LINKED | FR_T_NO_CHANNEL}, NULL},
    [FR_VIEWERS] = {{"VIEWERS", CHAN, HOST, FR_T_RELAY | FR_T_LINKED}, viewers_ok},
    /* the credential proxy's channels (§5a) */
    [FR_PROXY_OPEN] = {{"PROXY_OPEN", CHAN, HOST, PX}, proxy_open_ok},
};

#undef CONN
#undef CHAN
#undef HOST
#undef CTL
#undef BOTH
#undef PX

static const struct ftype *ftype_of(unsigned type)
{
    if (type < sizeof types / sizeof types[0] && types[type].info.name)
        return &types[type];
    return NULL;
}

const struct fr_typeinfo *fr_type_info(unsigned type)
{
    const struct ftype *t = ftype_of(type);
    return t ? &t->info : NULL;
}

const char *fr_type_name(unsigned type)
{
    const struct ftype *t = ftype_of(type);
    return t ? t->info.name : "?";
}

/* Header rules shared by both directions. */
static int header_ok(const struct fr_typeinfo *t, unsigned flags, uint32_t channel)
{
    if (t->scope == FR_SCOPE_CONN && channel != 0)
        return 0;
    if (t->scope == FR_SCOPE_CHAN && channel == 0)
        return 0;
    if (t->props & FR_T_STREAM)
        return flags < FR_NSTREAMS;
    if (t->props & FR_T_FLAG0)
        return (flags & ~1u) == 0;
    return flags == 0;
}

/* ---- payloads ----------------------------------------------------------- */

/* A u16 count of entries, read before them: more than the array has room
 * for is an error at once. */
static uint16_t rd_count(struct rd *r, unsigned room)
{
    uint16_t n = rd_u16(r);
    rd_check(r, n <= room);
    return n;
}

/* PROBE, PROBE_REPLY: u8 op, then what the op carries one way or the other. */
static void dec_probe(struct rd *r, struct fr_frame *f)
{
    f->u.probe.op = rd_u8(r);
    const int req = f->type == FR_PROBE;
    switch (f->u.probe.op) {
    case FR_PROBE_HEADERS:
        if (req)
            break;
        f->u.probe.nheaders = rd_count(r, AL_PROBE_MAX_HEADERS);
        for (unsigned i = 0; !r->err && i < f->u.probe.nheaders; i++) {
            struct fr_probe_header *h = &f->u.probe.h[i];
            h->name = rd_str(r, AL_PROBE_MAX_HEADER_NAME);
            h->value = rd_str(r, AL_PROBE_MAX_HEADER_VALUE);
            rd_check(r, probe_header_ok(h));
        }
        break;
    case FR_PROBE_SOURCE:
        if (req) {
            f->u.probe.count = rd_u32(r);
            break;
        }
        f->u.probe.bytes = rd_rest(r);
        break;
    case FR_PROBE_ECHO:
    case FR_PROBE_SINK:
        f->u.probe.bytes = rd_rest(r);
        break;
    default:
        r->err = AL_E_PROTO;
        break;
    }
}

static void dec_payload(struct rd *r, struct fr_frame *f)
{
    switch (f->type) {
    case FR_HELLO:
        f->u.hello.version_min = rd_u16(r);
        f->u.hello.version_max = rd_u16(r);
        f->u.hello.role = rd_u8(r);
        f->u.hello.max_frame = rd_u32(r);
        f->u.hello.name = rd_str(r, AL_MAX_NAME);
        break;
    case FR_PING:
    case FR_PONG:
        f->u.ping.ts_us = rd_u64(r);
        break;
    case FR_TOKEN:
        f->u.token = rd_rest(r);
        break;
    case FR_ERROR:
        f->u.error.code = rd_u16(r);
        f->u.error.msg = rd_str(r, AL_MAX_ERRMSG);
        break;
    case FR_LIST:
    case FR_CLOSE:
    case FR_SNAPSHOT_REQ:
    case FR_TAKEOVER:
    case FR_PROXY_OPEN:
        break;
    case FR_PROXY_AT:
        f->u.proxy_at = rd_str(r, AL_MAX_PROXY_URL);
        break;
    case FR_LIST_REPLY:
        f->u.list.count = rd_count(r, AL_MAX_CHANNELS);
        for (unsigned i = 0; !r->err && i < f->u.list.count; i++) {
            struct fr_list_entry *e = &f->u.list.e[i];
            e->channel = rd_u32(r);
            e->state = rd_u8(r);
            e->mode = rd_u8(r);
            e->exit_code = (int32_t)rd_u32(r);
            e->exit_signal = rd_u8(r);
            e->out_end = rd_u64(r);
            e->err_end = rd_u64(r);
            e->in_next = rd_u64(r);
            rd_check(r, list_entry_ok(e));
        }
        break;
    case FR_OPEN: {
        struct fr_open *o = &f->u.open;
        o->mode = rd_u8(r);
        o->cols = rd_u16(r);
        o->rows = rd_u16(r);
        o->term = rd_str(r, AL_MAX_TERM);
        o->cwd = rd_str(r, AL_MAX_STR);
        o->argc = rd_count(r, AL_MAX_ARGV);
        for (unsigned i = 0; !r->err && i < o->argc; i++)
            o->argv[i] = rd_str(r, AL_MAX_STR);
        o->envc = rd_count(r, AL_MAX_ENV);
        for (unsigned i = 0; !r->err && i < o->envc; i++) {
            o->env[i] = rd_str(r, AL_MAX_STR);
            rd_check(r, r->err || env_ok(o->env[i]));
        }
        break;
    }
    case FR_OPENED:
        f->u.opened.pid = rd_u32(r);
        break;
    case FR_DATA:
        f->u.data.offset = rd_u64(r);
        f->u.data.bytes = rd_rest(r);
        break;
    case FR_ACK:
        f->u.ack.ack = rd_u64(r);
        f->u.ack.limit = rd_u64(r);
        break;
    case FR_RESIZE:
        f->u.resize.cols = rd_u16(r);
        f->u.resize.rows = rd_u16(r);
        break;
    case FR_SIGNAL:
        f->u.signal.signo = rd_u8(r);
        f->u.signal.scope = rd_u8(r);
        break;
    case FR_EOF:
        f->u.eof.offset = rd_u64(r);
        break;
    case FR_EXIT:
        f->u.exit.code = (int32_t)rd_u32(r);
        f->u.exit.signo = rd_u8(r);
        f->u.exit.core = rd_u8(r);
        f->u.exit.out_end = rd_u64(r);
        f->u.exit.err_end = rd_u64(r);
        break;
    case FR_ATTACH:
        f->u.attach.out_next = rd_u64(r);
        f->u.attach.out_limit = rd_u64(r);
        f->u.attach.err_next = rd_u64(r);
        f->u.attach.err_limit = rd_u64(r);
        f->u.attach.cols = rd_u16(r);
        f->u.attach.rows = rd_u16(r);
        break;
    case FR_ATTACHED:
        f->u.attached.state = rd_u8(r);
        f->u.attached.in_next = rd_u64(r);
        f->u.attached.in_limit = rd_u64(r);
        break;
    case FR_GAP:
        f->u.gap.from = rd_u64(r);
        f->u.gap.to = rd_u64(r);
        break;
    case FR_SNAPSHOT:
        f->u.snapshot.offset = rd_u64(r);
        f->u.snapshot.cols = rd_u16(r);
        f->u.snapshot.rows = rd_u16(r);
        f->u.snapshot.bytes = rd_rest(r);
        break;
    case FR_ROLE:
        f->u.role.role = rd_u8(r);
        f->u.role.in_next = rd_u64(r);
        f->u.role.in_limit = rd_u64(r);
        break;
    case FR_VIEWERS:
        f->u.viewers.count = rd_count(r, AL_MAX_VIEWERS);
        for (unsigned i = 0; !r->err && i < f->u.viewers.count; i++) {
            struct fr_viewer *v = &f->u.viewers.e[i];
            v->name = rd_str(r, AL_MAX_VIEWER_NAME);
            v->role = rd_u8(r);
            rd_check(r, viewer_ok(v));
        }
        break;
    case FR_PROBE:
    case FR_PROBE_REPLY:
        dec_probe(r, f);
        break;
    default:
        r->err = AL_E_TYPE;
        break;
    }
}

static void enc_probe(struct wr *w, const struct fr_frame *f)
{
    wr_u8(w, f->u.probe.op);
    const int req = f->type == FR_PROBE;
    switch (f->u.probe.op) {
    case FR_PROBE_HEADERS:
        if (req)
            break;
        wr_u16(w, f->u.probe.nheaders);
        for (unsigned i = 0; !w->err && i < f->u.probe.nheaders; i++) {
            const struct fr_probe_header *h = &f->u.probe.h[i];
            wr_check(w, probe_header_ok(h));
            wr_str(w, h->name, AL_PROBE_MAX_HEADER_NAME);
            wr_str(w, h->value, AL_PROBE_MAX_HEADER_VALUE);
        }
        break;
    case FR_PROBE_SOURCE:
        if (req) {
            wr_u32(w, f->u.probe.count);
            break;
        }
        wr_bytes(w, f->u.probe.bytes.p, f->u.probe.bytes.len);
        break;
    case FR_PROBE_ECHO:
    case FR_PROBE_SINK:
        wr_bytes(w, f->u.probe.bytes.p, f->u.probe.bytes.len);
        break;
    default:
        w->err = AL_E_INVAL;
        break;
    }
}

static void enc_payload(struct wr *w, const struct fr_frame *f)
{
    switch (f->type) {
    case FR_HELLO:
        wr_u16(w, f->u.hello.version_min);
        wr_u16(w, f->u.hello.version_max);
        wr_u8(w, f->u.hello.role);
        wr_u32(w, f->u.hello.max_frame);
        wr_str(w, f->u.hello.name, AL_MAX_NAME);
        break;
    case FR_PING:
    case FR_PONG:
        wr_u64(w, f->u.ping.ts_us);
        break;
    case FR_TOKEN:
        wr_bytes(w, f->u.token.p, f->u.token.len);
        break;
    case FR_ERROR:
        wr_u16(w, f->u.error.code);
        wr_str(w, f->u.error.msg, AL_MAX_ERRMSG);
        break;
    case FR_LIST:
    case FR_CLOSE:
    case FR_SNAPSHOT_REQ:
    case FR_TAKEOVER:
    case FR_PROXY_OPEN:
        break;
    case FR_PROXY_AT:
        wr_str(w, f->u.proxy_at, AL_MAX_PROXY_URL);
        break;
    case FR_LIST_REPLY:
        wr_u16(w, f->u.list.count);
        for (unsigned i = 0; !w->err && i < f->u.list.count; i++) {
            const struct fr_list_entry *e = &f->u.list.e[i];
            wr_check(w, list_entry_ok(e));
            wr_u32(w, e->channel);
            wr_u8(w, e->state);
            wr_u8(w, e->mode);
            wr_u32(w, (uint32_t)e->exit_code);
            wr_u8(w, e->exit_signal);
            wr_u64(w, e->out_end);
            wr_u64(w, e->err_end);
            wr_u64(w, e->in_next);
        }
        break;
    case FR_OPEN: {
        const struct fr_open *o = &f->u.open;
        wr_u8(w, o->mode);
        wr_u16(w, o->cols);
        wr_u16(w, o->rows);
        wr_str(w, o->term, AL_MAX_TERM);
        wr_str(w, o->cwd, AL_MAX_STR);
        wr_u16(w, o->argc);
        for (unsigned i = 0; !w->err && i < o->argc; i++)
            wr_str(w, o->argv[i], AL_MAX_STR);
        wr_u16(w, o->envc);
        for (unsigned i = 0; !w->err && i < o->envc; i++) {
            wr_check(w, env_ok(o->env[i]));
            wr_str(w, o->env[i], AL_MAX_STR);
        }
        break;
    }
    case FR_OPENED:
        wr_u32(w, f->u.opened.pid);
        break;
    case FR_DATA:
        wr_u64(w, f->u.data.offset);
        wr_bytes(w, f->u.data.bytes.p, f->u.data.bytes.len);
        break;
    case FR_ACK:
        wr_u64(w, f->u.ack.ack);
        wr_u64(w, f->u.ack.limit);
        break;
    case FR_RESIZE:
        wr_u16(w, f->u.resize.cols);
        wr_u16(w, f->u.resize.rows);
        break;
    case FR_SIGNAL:
        wr_u8(w, f->u.signal.signo);
        wr_u8(w, f->u.signal.scope);
        break;
    case FR_EOF:
        wr_u64(w, f->u.eof.offset);
        break;
    case FR_EXIT:
        wr_u32(w, (uint32_t)f->u.exit.code);
        wr_u8(w, f->u.exit.signo);
        wr_u8(w, f->u.exit.core);
        wr_u64(w, f->u.exit.out_end);
        wr_u64(w, f->u.exit.err_end);
        break;
    case FR_ATTACH:
        wr_u64(w, f->u.attach.out_next);
        wr_u64(w, f->u.attach.out_limit);
        wr_u64(w, f->u.attach.err_next);
        wr_u64(w, f->u.attach.err_limit);
        wr_u16(w, f->u.attach.cols);
        wr_u16(w, f->u.attach.rows);
        break;
    case FR_ATTACHED:
        wr_u8(w, f->u.attached.state);
        wr_u64(w, f->u.attached.in_next);
        wr_u64(w, f->u.attached.in_limit);
        break;
    case FR_GAP:
        wr_u64(w, f->u.gap.from);
        wr_u64(w, f->u.gap.to);
        break;
    case FR_SNAPSHOT:
        wr_u64(w, f->u.snapshot.offset);
        wr_u16(w, f->u.snapshot.cols);
        wr_u16(w, f->u.snapshot.rows);
        wr_bytes(w, f->u.snapshot.bytes.p, f->u.snapshot.bytes.len);
        break;
    case FR_ROLE:
        wr_u8(w, f->u.role.role);
        wr_u64(w, f->u.role.in_next);
        wr_u64(w, f->u.role.in_limit);
        break;
    case FR_VIEWERS:
        wr_u16(w, f->u.viewers.count);
        for (unsigned i = 0; !w->err && i < f->u.viewers.count; i++) {
            const struct fr_viewer *v = &f->u.viewers.e[i];
            wr_check(w, viewer_ok(v));
            wr_str(w, v->name, AL_MAX_VIEWER_NAME);
            wr_u8(w, v->role);
        }
        break;
    case FR_PROBE:
    case FR_PROBE_REPLY:
        enc_probe(w, f);
        break;
    default:
        w->err = AL_E_INVAL;
        break;
    }
}

/* ---- public ------------------------------------------------------------- */

long fr_frame_len(const uint8_t *buf, size_t len)
{
    if (len < AL_FRAME_HEADER)
        return AL_E_AGAIN;
    uint32_t plen =
        (uint32_t)buf[6] << 24 | (uint32_t)buf[7] << 16 | (uint32_t)buf[8] << 8 | buf[9];
    if (plen > AL_MAX_PAYLOAD)
        return AL_E_TOOBIG;
    return (long)(AL_FRAME_HEADER + plen);
}

int fr_decode(const uint8_t *buf, size_t len, struct fr_frame *f)
{
    long flen = fr_frame_len(buf, len);
    if (flen == AL_E_AGAIN)
        return AL_E_PROTO; /* a message shorter than a header */
    if (flen < 0)
        return (int)flen;
    if ((size_t)flen != len)
        return AL_E_PROTO; /* one frame per message, exactly */
    struct rd r = {buf, len, 0, 0};
    f->type = rd_u8(&r);
    f->flags = rd_u8(&r);
    f->channel = rd_u32(&r);
    (void)rd_u32(&r);
    const struct ftype *t = ftype_of(f->type);
    if (!t)
        return AL_E_TYPE;
    if (!header_ok(&t->info, f->flags, f->channel))
        return AL_E_PROTO;
    dec_payload(&r, f);
    if (!r.err && t->ok)
        rd_check(&r, t->ok(f));
    if (r.err)
        return r.err;
    if (r.pos != r.len)
        return AL_E_PROTO; /* trailing bytes */
    return AL_OK;
}

long fr_encode(const struct fr_frame *f, uint8_t *out, size_t cap)
{
    const struct ftype *t = ftype_of(f->type);
    if (!t || !header_ok(&t->info, f->flags, f->channel))
        return AL_E_INVAL;
    struct wr w = {out, cap, 0, 0};
    wr_u8(&w, f->type);
    wr_u8(&w, f->flags);
    wr_u32(&w, f->channel);
    wr_u32(&w, 0); /* length, patched below */
    if (t->ok)
        wr_check(&w, t->ok(f));
    enc_payload(&w, f);
    if (w.err)
        return w.err;
    size_t plen = w.pos - AL_FRAME_HEADER;
    if (plen > AL_MAX_PAYLOAD)
        return AL_E_TOOBIG;
    out[6] = (uint8_t)(plen >> 24);
    out[7] = (uint8_t)(plen >> 16);
    out[8] = (uint8_t)(plen >> 8);
    out[9] = (uint8_t)plen;
    return (long)w.pos;
}
