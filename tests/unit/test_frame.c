/*
 * Tests of the airlock.v1 codec (src/common/frame.c).
 *
 * The test vectors live in docs/protocol.md, the normative spec: each one is
 * decoded, re-encoded byte for byte, and compared with the same frame built
 * here field by field, so the spec and the code cannot drift apart.
 * `test_frame --print-vectors` prints the vectors as the spec shows them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "al_err.h"
#include "frame.h"
#include "testutil.h"

#define S(lit) ((struct fr_str){(lit), (uint16_t)(sizeof(lit) - 1)})
#define B(lit) ((struct fr_bytes){(const uint8_t *)(lit), sizeof(lit) - 1})

/* One example of every frame type (and each stream / flag variant). */
static const char *const vector_names[] = {
    "HELLO",        "PING",     "PONG",          "TOKEN",        "ERROR",        "LIST",
    "LIST_REPLY",   "OPEN",     "OPENED",        "DATA_STDIN",   "DATA_STDOUT",  "ACK",
    "RESIZE",       "SIGNAL",   "EOF",           "EXIT",         "EXIT_SIGNAL",  "CLOSE",
    "ATTACH",       "ATTACHED", "GAP",           "SNAPSHOT_REQ", "SNAPSHOT",     "ROLE",
    "TAKEOVER",     "VIEWERS",  "PROBE_HEADERS", "PROBE_ECHO",   "PROBE_SOURCE", "REPLY_HEADERS",
    "REPLY_SOURCE", "PROXY_AT", "PROXY_OPEN",
};
#define NVEC (sizeof vector_names / sizeof vector_names[0])

static void build_vector(const char *name, struct fr_frame *f)
{
    memset(f, 0, sizeof *f);
    if (!strcmp(name, "HELLO")) {
        f->type = FR_HELLO;
        f->u.hello.version_min = 1;
        f->u.hello.version_max = 1;
        f->u.hello.role = FR_ROLE_HOST;
        f->u.hello.max_frame = AL_MAX_FRAME;
        f->u.hello.name = S("runner");
    } else if (!strcmp(name, "PING")) {
        f->type = FR_PING;
        f->u.ping.ts_us = 1000000;
    } else if (!strcmp(name, "PONG")) {
        f->type = FR_PONG;
        f->u.ping.ts_us = 1000000;
    } else if (!strcmp(name, "TOKEN")) {
        f->type = FR_TOKEN;
        f->u.token = B("eyJ.e30.sig");
    } else if (!strcmp(name, "ERROR")) {
        f->type = FR_ERROR;
        f->channel = 7;
        f->u.error.code = FR_ERR_NO_CHANNEL;
        f->u.error.msg = S("no such channel");
    } else if (!strcmp(name, "LIST")) {
        f->type = FR_LIST;
    } else if (!strcmp(name, "LIST_REPLY")) {
        f->type = FR_LIST_REPLY;
        f->u.list.count = 2;
        f->u.list.e[0] = (struct fr_list_entry){1, FR_CH_RUNNING, FR_MODE_PTY, 0, 0, 1234, 0, 5};
        f->u.list.e[1] = (struct fr_list_entry){2, FR_CH_EXITED, FR_MODE_PIPES, 3, 0, 10, 2, 0};
    } else if (!strcmp(name, "OPEN")) {
        f->type = FR_OPEN;
        f->channel = 1;
        f->u.open.mode = FR_MODE_PTY;
        f->u.open.cols = 80;
        f->u.open.rows = 24;
        f->u.open.term = S("xterm-256color");
        f->u.open.cwd = S("/work");
        f->u.open.argc = 2;
        f->u.open.argv[0] = S("sh");
        f->u.open.argv[1] = S("-i");
        f->u.open.envc = 1;
        f->u.open.env[0] = S("LANG=C.UTF-8");
    } else if (!strcmp(name, "OPENED")) {
        f->type = FR_OPENED;
        f->channel = 1;
        f->u.opened.pid = 4242;
    } else if (!strcmp(name, "DATA_STDIN")) {
        f->type = FR_DATA;
        f->flags = FR_STDIN;
        f->channel = 1;
        f->u.data.offset = 0;
        f->u.data.bytes = B("ls\r");
    } else if (!strcmp(name, "DATA_STDOUT")) {
        f->type = FR_DATA;
        f->flags = FR_STDOUT;
        f->channel = 1;
        f->u.data.offset = 4096;
        f->u.data.bytes = B("\x1b[1mhi\x1b[0m\r\n");
    } else if (!strcmp(name, "ACK")) {
        f->type = FR_ACK;
        f->flags = FR_STDOUT;
        f->channel = 1;
        f->u.ack.ack = 4096;
        f->u.ack.limit = 4096 + 524288;
    } else if (!strcmp(name, "RESIZE")) {
        f->type = FR_RESIZE;
        f->channel = 1;
        f->u.resize.cols = 132;
        f->u.resize.rows = 43;
    } else if (!strcmp(name, "SIGNAL")) {
        f->type = FR_SIGNAL;
        f->channel = 1;
        f->u.signal.signo = 2;
        f->u.signal.scope = FR_SIG_GROUP;
    } else if (!strcmp(name, "EOF")) {
        f->type = FR_EOF;
        f->flags = FR_STDIN;
        f->channel = 1;
        f->u.eof.offset = 3;
    } else if (!strcmp(name, "EXIT")) {
        f->type = FR_EXIT;
        f->channel = 1;
        f->u.exit.code = 3;
        f->u.exit.out_end = 4107;
        f->u.exit.err_end = 0;
    } else if (!strcmp(name, "EXIT_SIGNAL")) {
        f->type = FR_EXIT;
        f->channel = 2;
        f->u.exit.code = -1;
        f->u.exit.signo = 9;
        f->u.exit.out_end = 10;
        f->u.exit.err_end = 2;
    } else if (!strcmp(name, "CLOSE")) {
        f->type = FR_CLOSE;
        f->channel = 1;
    } else if (!strcmp(name, "ATTACH")) {
        f->type = FR_ATTACH;
        f->channel = 1;
        f->u.attach.out_next = 4096;
        f->u.attach.out_limit = 4096 + 524288;
        f->u.attach.err_next = 0;
        f->u.attach.err_limit = 524288;
        f->u.attach.cols = 80;
        f->u.attach.rows = 24;
    } else if (!strcmp(name, "ATTACHED")) {
        f->type = FR_ATTACHED;
        f->channel = 1;
        f->u.attached.state = FR_CH_RUNNING;
        f->u.attached.in_next = 3;
        f->u.attached.in_limit = 3 + 524288;
    } else if (!strcmp(name, "GAP")) {
        f->type = FR_GAP;
        f->flags = FR_STDOUT;
        f->channel = 1;
        f->u.gap.from = 0;
        f->u.gap.to = 1048576;
    } else if (!strcmp(name, "SNAPSHOT_REQ")) {
        f->type = FR_SNAPSHOT_REQ;
        f->channel = 1;
    } else if (!strcmp(name, "SNAPSHOT")) {
        f->type = FR_SNAPSHOT;
        f->flags = 0;
        f->channel = 1;
        f->u.snapshot.offset = 4107;
        f->u.snapshot.cols = 80;
        f->u.snapshot.rows = 24;
        f->u.snapshot.bytes = B("\x1b[H\x1b[2Jhi");
    } else if (!strcmp(name, "ROLE")) {
        f->type = FR_ROLE;
        f->channel = 1;
        f->u.role.role = FR_WRITER;
        f->u.role.in_next = 3;
        f->u.role.in_limit = 3 + 524288;
    } else if (!strcmp(name, "TAKEOVER")) {
        f->type = FR_TAKEOVER;
        f->channel = 1;
    } else if (!strcmp(name, "VIEWERS")) {
        f->type = FR_VIEWERS;
        f->channel = 1;
        f->u.viewers.count = 2;
        f->u.viewers.e[0] = (struct fr_viewer){S("alice"), FR_WRITER};
        f->u.viewers.e[1] = (struct fr_viewer){S("bob"), FR_VIEWER};
    } else if (!strcmp(name, "PROBE_HEADERS")) {
        f->type = FR_PROBE;
        f->u.probe.op = FR_PROBE_HEADERS;
    } else if (!strcmp(name, "PROBE_ECHO")) {
        f->type = FR_PROBE;
        f->u.probe.op = FR_PROBE_ECHO;
        f->u.probe.bytes = B("ping");
    } else if (!strcmp(name, "PROBE_SOURCE")) {
        f->type = FR_PROBE;
        f->u.probe.op = FR_PROBE_SOURCE;
        f->u.probe.count = 1048576;
    } else if (!strcmp(name, "REPLY_HEADERS")) {
        f->type = FR_PROBE_REPLY;
        f->u.probe.op = FR_PROBE_HEADERS;
        f->u.probe.nheaders = 2;
        f->u.probe.h[0] = (struct fr_probe_header){S("host"), S("a:1")};
        f->u.probe.h[1] = (struct fr_probe_header){S("authorization"), S("Bearer (9)")};
    } else if (!strcmp(name, "REPLY_SOURCE")) {
        f->type = FR_PROBE_REPLY;
        f->u.probe.op = FR_PROBE_SOURCE;
        f->u.probe.bytes = B("\0\0\0");
    } else if (!strcmp(name, "PROXY_AT")) {
        f->type = FR_PROXY_AT;
        f->u.proxy_at = S("http://127.0.0.1:8091");
    } else if (!strcmp(name, "PROXY_OPEN")) {
        f->type = FR_PROXY_OPEN;
        f->channel = FR_PROXY_CHANNEL_BIT | 1;
    } else {
        fail_msg("no vector builder for %s", name);
    }
}

/* ---- reading the vectors out of docs/protocol.md ------------------------ */

struct vec {
    char name[32];
    uint8_t bytes[512];
    size_t len;
};

/*
 * The spec writes each vector as a line "vector NAME" followed by hex lines
 * up to a blank line, inside a fenced block.
 */
static int load_vectors(struct vec *out, int max)
{
    const char *src = getenv("AL_SRC");
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/protocol.md", src ? src : ".");
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    int n = 0;
    char line[512];
    char hex[4096];
    struct vec *cur = NULL;
    hex[0] = 0;
    while (fgets(line, sizeof line, fp)) {
        if (!strncmp(line, "vector ", 7)) {
            if (n >= max)
                break;
            cur = &out[n++];
            memset(cur, 0, sizeof *cur);
            sscanf(line + 7, "%31s", cur->name);
            hex[0] = 0;
            continue;
        }
        if (cur && (line[0] == '\n' || line[0] == '`')) {
            long len = tu_hex_decode(hex, cur->bytes, sizeof cur->bytes);
            assert_true(len > 0);
            cur->len = (size_t)len;
            cur = NULL;
            continue;
        }
        if (cur) {
            size_t hl = strlen(hex), ll = strlen(line);
            assert_true(hl + ll < sizeof hex);
            memcpy(hex + hl, line, ll + 1);
        }
    }
    fclose(fp);
    return n;
}

static void print_vectors(void)
{
    uint8_t buf[AL_MAX_FRAME];
    struct fr_frame f;
    for (size_t i = 0; i < NVEC; i++) {
        build_vector(vector_names[i], &f);
        long n = fr_encode(&f, buf, sizeof buf);
        printf("vector %s\n", vector_names[i]);
        for (long j = 0; j < n; j++)
            printf("%02x%s", buf[j], (j + 1) % 16 == 0 || j + 1 == n ? "\n" : " ");
        printf("\n");
    }
}

/* ---- tests ---------------------------------------------------------------- */

static void test_vectors_round_trip(void **state)
{
    (void)state;
    static struct vec v[64];
    int n = load_vectors(v, 64);
    assert_int_equal(n, (int)NVEC);
    static uint8_t buf[AL_MAX_FRAME];
    static struct fr_frame f, want;
    for (int i = 0; i < n; i++) {
        /* the spec's bytes decode ... */
        int rc = fr_decode(v[i].bytes, v[i].len, &f);
        if (rc != 0)
            fail_msg("vector %s does not decode: %s", v[i].name, al_strerror(rc));
        /* ... re-encode byte for byte ... */
        long len = fr_encode(&f, buf, sizeof buf);
        assert_int_equal(len, (long)v[i].len);
        assert_memory_equal(buf, v[i].bytes, v[i].len);
        /* ... and are what the frame built field by field encodes to. */
        build_vector(v[i].name, &want);
        len = fr_encode(&want, buf, sizeof buf);
        assert_int_equal(len, (long)v[i].len);
        assert_memory_equal(buf, v[i].bytes, v[i].len);
        assert_int_equal(f.type, want.type);
        assert_int_equal(f.channel, want.channel);
        assert_int_equal(f.flags, want.flags);
    }
    /* every frame type has a vector */
    static const uint8_t types[] = {
        FR_HELLO,      FR_PING,         FR_PONG,     FR_TOKEN,     FR_ERROR,    FR_LIST,
        FR_LIST_REPLY, FR_OPEN,         FR_OPENED,   FR_DATA,      FR_ACK,      FR_RESIZE,
        FR_SIGNAL,     FR_EOF,          FR_EXIT,     FR_CLOSE,     FR_ATTACH,   FR_ATTACHED,
        FR_GAP,        FR_SNAPSHOT_REQ, FR_SNAPSHOT, FR_ROLE,      FR_TAKEOVER, FR_VIEWERS,
        FR_PROBE,      FR_PROBE_REPLY,  FR_PROXY_AT, FR_PROXY_OPEN};
    for (size_t t = 0; t < sizeof types; t++) {
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= v[i].bytes[0] == types[t];
        if (!seen)
            fail_msg("no vector for %s", fr_type_name(types[t]));
    }
}

static void test_decoded_fields(void **state)
{
    (void)state;
    uint8_t buf[AL_MAX_FRAME];
    struct fr_frame f, g;
    build_vector("OPEN", &f);
    long n = fr_encode(&f, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(fr_decode(buf, (size_t)n, &g), 0);
    assert_int_equal(g.u.open.argc, 2);
    assert_int_equal(g.u.open.argv[1].len, 2);
    assert_memory_equal(g.u.open.argv[1].p, "-i", 2);
    assert_memory_equal(g.u.open.env[0].p, "LANG=C.UTF-8", 12);
    assert_memory_equal(g.u.open.term.p, "xterm-256color", 14);
    assert_int_equal(g.u.open.cols, 80);

    build_vector("EXIT_SIGNAL", &f);
    n = fr_encode(&f, buf, sizeof buf);
    assert_int_equal(fr_decode(buf, (size_t)n, &g), 0);
    assert_int_equal(g.u.exit.code, -1);
    assert_int_equal(g.u.exit.signo, 9);

    build_vector("LIST_REPLY", &f);
    n = fr_encode(&f, buf, sizeof buf);
    assert_int_equal(fr_decode(buf, (size_t)n, &g), 0);
    assert_int_equal(g.u.list.count, 2);
    assert_int_equal(g.u.list.e[1].exit_code, 3);
    assert_int_equal(g.u.list.e[0].out_end, 1234);
}

/* Encode a vector, let mutate() damage it, expect decode to fail with rc. */
static void expect_reject(const char *name, void (*mutate)(uint8_t *, size_t *), int rc)
{
    uint8_t buf[AL_MAX_FRAME + 16];
    struct fr_frame f;
    build_vector(name, &f);
    long n = fr_encode(&f, buf, sizeof buf);
    assert_true(n > 0);
    size_t len = (size_t)n;
    mutate(buf, &len);
    int got = fr_decode(buf, len, &f);
    if (got != rc)
        fail_msg("%s: expected %s, got %s", name, al_strerror(rc), al_strerror(got));
}

static void set_len(uint8_t *b, uint32_t v)
{
    b[6] = (uint8_t)(v >> 24);
    b[7] = (uint8_t)(v >> 16);
    b[8] = (uint8_t)(v >> 8);
    b[9] = (uint8_t)v;
}

static void m_truncate(uint8_t *b, size_t *len)
{
    (*len)--;
    set_len(b, (uint32_t)(*len - AL_FRAME_HEADER));
}
static void m_trailing(uint8_t *b, size_t *len)
{
    b[(*len)++] = 0;
    set_len(b, (uint32_t)(*len - AL_FRAME_HEADER));
}
static void m_short_msg(uint8_t *b, size_t *len)
{
    (void)b;
    *len -= 1; /* header says more than the message holds */
}
static void m_flags(uint8_t *b, size_t *len)
{
    (void)len;
    b[1] = 0x80;
}
static void m_stream3(uint8_t *b, size_t *len)
{
    (void)len;
    b[1] = 3;
}
static void m_chan0(uint8_t *b, size_t *len)
{
    (void)len;
    b[2] = b[3] = b[4] = b[5] = 0;
}
static void m_chan1(uint8_t *b, size_t *len)
{
    (void)len;
    b[5] = 1;
}
static void m_type(uint8_t *b, size_t *len)
{
    (void)len;
    b[0] = 0x42;
}
static void m_huge(uint8_t *b, size_t *len)
{
    (void)len;
    set_len(b, AL_MAX_PAYLOAD + 1);
}
static void m_version(uint8_t *b, size_t *len)
{
    (void)len;
    b[10] = 0;
    b[11] = 2; /* min 2 > max 1 */
}
static void m_role(uint8_t *b, size_t *len)
{
    (void)len;
    b[14] = 3;
}
static void m_resize0(uint8_t *b, size_t *len)
{
    (void)len;
    b[10] = b[11] = 0;
}
static void m_signal(uint8_t *b, size_t *len)
{
    (void)len;
    b[10] = 11; /* SEGV: not on the allow list */
}
static void m_ack_order(uint8_t *b, size_t *len)
{
    (void)len;
    b[18] = 0; /* limit < ack */
    memset(b + 18, 0, 8);
}
static void m_nul_in_string(uint8_t *b, size_t *len)
{
    (void)len;
    b[len[0] - 1] = 0; /* last byte of the name string */
}
static void m_gap_empty(uint8_t *b, size_t *len)
{
    (void)len;
    memcpy(b + 18, b + 10, 8); /* to == from */
}
static void m_exit_code(uint8_t *b, size_t *len)
{
    (void)len;
    b[10] = 0x7f; /* code huge while no signal */
}
static void m_data_empty(uint8_t *b, size_t *len)
{
    *len = AL_FRAME_HEADER + 8;
    set_len(b, 8);
}

static void m_relay_role(uint8_t *b, size_t *len)
{
    (void)len;
    b[10] = 3; /* neither writer nor viewer */
}
static void m_relay_role0(uint8_t *b, size_t *len)
{
    (void)len;
    b[10] = 0;
}
static void m_role_limit(uint8_t *b, size_t *len)
{
    (void)len;
    memset(b + 19, 0, 8); /* in_limit 0 < in_next 3 */
}
static void m_viewer_role(uint8_t *b, size_t *len)
{
    b[*len - 1] = 0; /* bob's role */
}
static void m_viewers_count(uint8_t *b, size_t *len)
{
    (void)len;
    b[11] = 3; /* three entries announced, two present */
}

/*
 * A VIEWERS frame written byte by byte (not by the encoder): count entries,
 * each a name of name_len bytes 'v' and the given role.
 */
static size_t raw_viewers(uint8_t *out, unsigned count, unsigned name_len, uint8_t role)
{
    size_t n = AL_FRAME_HEADER;
    out[n++] = (uint8_t)(count >> 8);
    out[n++] = (uint8_t)count;
    for (unsigned i = 0; i < count; i++) {
        out[n++] = (uint8_t)(name_len >> 8);
        out[n++] = (uint8_t)name_len;
        memset(out + n, 'v', name_len);
        n += name_len;
        out[n++] = role;
    }
    memset(out, 0, AL_FRAME_HEADER);
    out[0] = FR_VIEWERS;
    out[5] = 1; /* channel 1 */
    set_len(out, (uint32_t)(n - AL_FRAME_HEADER));
    return n;
}

/* PROBE and PROBE_REPLY (§13): each op's shape, one way or the other. */
static void test_probe_frames(void **state)
{
    (void)state;
    static uint8_t buf[AL_MAX_FRAME];
    static struct fr_frame f, g;
    /* a SINK is asked, never answered; SOURCE asks 1..AL_PROBE_SOURCE_MAX */
    build_vector("PROBE_ECHO", &f);
    f.u.probe.op = FR_PROBE_SINK;
    long n = fr_encode(&f, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(fr_decode(buf, (size_t)n, &g), 0);
    assert_int_equal(g.u.probe.bytes.len, 4);
    buf[0] = FR_PROBE_REPLY; /* the same bytes from the host: refused */
    assert_int_equal(fr_decode(buf, (size_t)n, &g), AL_E_PROTO);
    f.type = FR_PROBE_REPLY;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    build_vector("PROBE_SOURCE", &f);
    f.u.probe.count = 0;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    f.u.probe.count = AL_PROBE_SOURCE_MAX;
    n = fr_encode(&f, buf, sizeof buf);
    assert_true(n > 0);
    buf[n - 4] = 0xff; /* over the most one may ask */
    assert_int_equal(fr_decode(buf, (size_t)n, &g), AL_E_PROTO);
    /* a SOURCE reply carries at least a byte; an ECHO any number */
    build_vector("REPLY_SOURCE", &f);
    f.u.probe.bytes.len = 0;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    build_vector("PROBE_ECHO", &f);
    f.type = FR_PROBE_REPLY;
    f.u.probe.bytes.len = 0;
    assert_true(fr_encode(&f, buf, sizeof buf) > 0);
    /* an unknown op either way; a HEADERS request with bytes after it */
    build_vector("PROBE_HEADERS", &f);
    n = fr_encode(&f, buf, sizeof buf);
    assert_int_equal(n, AL_FRAME_HEADER + 1);
    buf[AL_FRAME_HEADER] = 5;
    assert_int_equal(fr_decode(buf, (size_t)n, &g), AL_E_PROTO);
    buf[AL_FRAME_HEADER] = 0;
    assert_int_equal(fr_decode(buf, (size_t)n, &g), AL_E_PROTO);
    buf[AL_FRAME_HEADER] = FR_PROBE_HEADERS;
    buf[9] = 2; /* two bytes of payload: one too many */
    uint8_t longer[AL_FRAME_HEADER + 2];
    memcpy(longer, buf, AL_FRAME_HEADER + 1);
    longer[AL_FRAME_HEADER + 1] = 0;
    assert_int_equal(fr_decode(longer, sizeof longer, &g), AL_E_PROTO);
    /* header names: [a-z0-9-], 1..64 bytes; values up to 128 */
    build_vector("REPLY_HEADERS", &f);
    f.u.probe.h[0].name = (struct fr_str){"Host", 4};
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    f.u.probe.h[0].name = (struct fr_str){"", 0};
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    static char big[AL_PROBE_MAX_HEADER_VALUE + 1];
    memset(big, 'v', sizeof big);
    f.u.probe.h[0].name = (struct fr_str){"x-a", 3};
    f.u.probe.h[0].value = (struct fr_str){big, AL_PROBE_MAX_HEADER_VALUE};
    assert_true(fr_encode(&f, buf, sizeof buf) > 0);
    f.u.probe.h[0].value = (struct fr_str){big, AL_PROBE_MAX_HEADER_VALUE + 1};
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    f.u.probe.h[0].value = (struct fr_str){big, 1};
    f.u.probe.nheaders = AL_PROBE_MAX_HEADERS + 1;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    /* a probe frame on a channel, or from the wrong side */
    build_vector("PROBE_ECHO", &f);
    f.channel = 1;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    assert_int_equal(fr_type_info(FR_PROBE)->senders, FR_BY_CONTROLLER);
    assert_int_equal(fr_type_info(FR_PROBE_REPLY)->senders, FR_BY_HOST);
    assert_true(fr_type_info(FR_PROBE)->props & FR_T_PROBE);
}

static void test_relay_frames(void **state)
{
    (void)state;
    static uint8_t raw[AL_MAX_FRAME];
    static struct fr_frame f;
    /* at the limits: accepted, and the fields come back */
    size_t n = raw_viewers(raw, AL_MAX_VIEWERS, AL_MAX_VIEWER_NAME, FR_VIEWER);
    assert_int_equal(fr_decode(raw, n, &f), 0);
    assert_int_equal(f.u.viewers.count, AL_MAX_VIEWERS);
    assert_int_equal(f.u.viewers.e[AL_MAX_VIEWERS - 1].name.len, AL_MAX_VIEWER_NAME);
    assert_int_equal(f.u.viewers.e[AL_MAX_VIEWERS - 1].role, FR_VIEWER);
    n = raw_viewers(raw, 0, 0, 0); /* nobody attached */
    assert_int_equal(fr_decode(raw, n, &f), 0);
    assert_int_equal(f.u.viewers.count, 0);
    /* one over: refused */
    n = raw_viewers(raw, AL_MAX_VIEWERS + 1, 1, FR_WRITER);
    assert_int_equal(fr_decode(raw, n, &f), AL_E_PROTO);
    n = raw_viewers(raw, 1, AL_MAX_VIEWER_NAME + 1, FR_WRITER);
    assert_int_equal(fr_decode(raw, n, &f), AL_E_PROTO);
    n = raw_viewers(raw, 1, 0, FR_WRITER); /* empty name */
    assert_int_equal(fr_decode(raw, n, &f), AL_E_PROTO);
    n = raw_viewers(raw, 1, 5, 3); /* bad role */
    assert_int_equal(fr_decode(raw, n, &f), AL_E_PROTO);
    n = raw_viewers(raw, 1, 5, FR_WRITER);
    raw[AL_FRAME_HEADER + 4] = 0; /* NUL inside the name */
    assert_int_equal(fr_decode(raw, n, &f), AL_E_PROTO);

    /* the encoder refuses what the decoder would */
    static uint8_t buf[AL_MAX_FRAME];
    static const char name65[AL_MAX_VIEWER_NAME + 2] =
        "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv";
    build_vector("VIEWERS", &f);
    f.u.viewers.count = AL_MAX_VIEWERS + 1;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    build_vector("VIEWERS", &f);
    f.u.viewers.e[1].name = (struct fr_str){name65, AL_MAX_VIEWER_NAME + 1};
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    f.u.viewers.e[1].name = (struct fr_str){name65, AL_MAX_VIEWER_NAME};
    assert_true(fr_encode(&f, buf, sizeof buf) > 0);
    f.u.viewers.e[1].name = (struct fr_str){name65, 0};
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    build_vector("VIEWERS", &f);
    f.u.viewers.e[0].role = 0;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    build_vector("ROLE", &f);
    f.u.role.role = 3;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    build_vector("ROLE", &f);
    f.u.role.in_limit = 2;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);

    /* the decoded fields of the vectors */
    build_vector("VIEWERS", &f);
    long len = fr_encode(&f, buf, sizeof buf);
    assert_int_equal(fr_decode(buf, (size_t)len, &f), 0);
    assert_int_equal(f.u.viewers.count, 2);
    assert_memory_equal(f.u.viewers.e[0].name.p, "alice", 5);
    assert_int_equal(f.u.viewers.e[0].role, FR_WRITER);
    assert_memory_equal(f.u.viewers.e[1].name.p, "bob", 3);
    assert_int_equal(f.u.viewers.e[1].role, FR_VIEWER);
    build_vector("ROLE", &f);
    len = fr_encode(&f, buf, sizeof buf);
    assert_int_equal(fr_decode(buf, (size_t)len, &f), 0);
    assert_int_equal(f.u.role.role, FR_WRITER);
    assert_int_equal(f.u.role.in_next, 3);
    assert_int_equal(f.u.role.in_limit, 3 + 524288);
    assert_string_equal(fr_type_name(FR_ROLE), "ROLE");
    assert_string_equal(fr_type_name(FR_TAKEOVER), "TAKEOVER");
    assert_string_equal(fr_type_name(FR_VIEWERS), "VIEWERS");
    assert_string_equal(fr_type_name(FR_PROXY_OPEN + 1), "?");

    /* damaged vectors */
    expect_reject("ROLE", m_relay_role, AL_E_PROTO);
    expect_reject("ROLE", m_relay_role0, AL_E_PROTO);
    expect_reject("ROLE", m_role_limit, AL_E_PROTO);
    expect_reject("ROLE", m_trailing, AL_E_PROTO);
    expect_reject("ROLE", m_truncate, AL_E_PROTO);
    expect_reject("ROLE", m_chan0, AL_E_PROTO);
    expect_reject("ROLE", m_flags, AL_E_PROTO);
    expect_reject("TAKEOVER", m_trailing, AL_E_PROTO);
    expect_reject("TAKEOVER", m_chan0, AL_E_PROTO);
    expect_reject("TAKEOVER", m_flags, AL_E_PROTO);
    expect_reject("VIEWERS", m_viewer_role, AL_E_PROTO);
    expect_reject("VIEWERS", m_viewers_count, AL_E_PROTO);
    expect_reject("VIEWERS", m_trailing, AL_E_PROTO);
    expect_reject("VIEWERS", m_truncate, AL_E_PROTO);
    expect_reject("VIEWERS", m_chan0, AL_E_PROTO);
    expect_reject("VIEWERS", m_flags, AL_E_PROTO);
}

/* EXIT's core byte (payload offset 5): 0 or 1, and 1 only with a signal */
static void m_exit_core1(uint8_t *b, size_t *len)
{
    (void)len;
    b[AL_FRAME_HEADER + 5] = 1;
}
static void m_exit_core2(uint8_t *b, size_t *len)
{
    (void)len;
    b[AL_FRAME_HEADER + 5] = 2;
}

/* PROXY_AT's url: "http://" then at least one byte */
static void m_proxy_scheme(uint8_t *b, size_t *len)
{
    (void)len;
    b[AL_FRAME_HEADER + 2 + 4] = 's'; /* "https//..." */
}
static void m_proxy_short(uint8_t *b, size_t *len)
{
    b[AL_FRAME_HEADER] = 0;
    b[AL_FRAME_HEADER + 1] = 7; /* "http://" alone */
    *len = AL_FRAME_HEADER + 2 + 7;
    set_len(b, 2 + 7);
}
static void m_proxy_low_id(uint8_t *b, size_t *len)
{
    (void)len;
    b[2] = 0; /* channel 1: the controller's space */
}
static void m_open_high_id(uint8_t *b, size_t *len)
{
    (void)len;
    b[2] = 0x80; /* an OPEN in the host's space */
}
static void m_proxy_at_long(uint8_t *b, size_t *len)
{
    /* a url of AL_MAX_PROXY_URL + 1 bytes */
    size_t n = AL_MAX_PROXY_URL + 1;
    b[AL_FRAME_HEADER] = (uint8_t)(n >> 8);
    b[AL_FRAME_HEADER + 1] = (uint8_t)n;
    memset(b + AL_FRAME_HEADER + 2 + 21, 'a', n - 21);
    *len = AL_FRAME_HEADER + 2 + n;
    set_len(b, (uint32_t)(2 + n));
}

static void test_proxy_frames(void **state)
{
    (void)state;
    expect_reject("PROXY_AT", m_proxy_scheme, AL_E_PROTO);
    expect_reject("PROXY_AT", m_proxy_short, AL_E_PROTO);
    expect_reject("PROXY_AT", m_proxy_at_long, AL_E_PROTO);
    expect_reject("PROXY_AT", m_nul_in_string, AL_E_PROTO);
    expect_reject("PROXY_AT", m_chan1, AL_E_PROTO);
    expect_reject("PROXY_AT", m_flags, AL_E_PROTO);
    expect_reject("PROXY_AT", m_trailing, AL_E_PROTO);
    expect_reject("PROXY_AT", m_truncate, AL_E_PROTO);
    expect_reject("PROXY_OPEN", m_proxy_low_id, AL_E_PROTO);
    expect_reject("PROXY_OPEN", m_chan0, AL_E_PROTO);
    expect_reject("PROXY_OPEN", m_flags, AL_E_PROTO);
    expect_reject("PROXY_OPEN", m_trailing, AL_E_PROTO);
    expect_reject("OPEN", m_open_high_id, AL_E_PROTO);
    /* the longest url fits */
    uint8_t buf[AL_FRAME_HEADER + 2 + AL_MAX_PROXY_URL];
    char url[AL_MAX_PROXY_URL];
    memcpy(url, "http://", 7);
    memset(url + 7, 'h', sizeof url - 7);
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_PROXY_AT;
    f.u.proxy_at = (struct fr_str){url, AL_MAX_PROXY_URL};
    long n = fr_encode(&f, buf, sizeof buf);
    assert_int_equal(n, sizeof buf);
    assert_int_equal(fr_decode(buf, (size_t)n, &f), 0);
    assert_int_equal(f.u.proxy_at.len, AL_MAX_PROXY_URL);
    /* the encoder keeps the same rules */
    f.u.proxy_at = (struct fr_str){"https://x", 9};
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    memset(&f, 0, sizeof f);
    f.type = FR_PROXY_OPEN;
    f.channel = 5;
    assert_true(fr_encode(&f, buf, sizeof buf) < 0);
    /* which frames a proxy channel may carry */
    assert_true(fr_type_info(FR_DATA)->props & FR_T_PROXY);
    assert_true(fr_type_info(FR_ACK)->props & FR_T_PROXY);
    assert_true(fr_type_info(FR_EOF)->props & FR_T_PROXY);
    assert_true(fr_type_info(FR_CLOSE)->props & FR_T_PROXY);
    assert_false(fr_type_info(FR_RESIZE)->props & FR_T_PROXY);
    assert_false(fr_type_info(FR_GAP)->props & FR_T_PROXY);
    assert_string_equal(fr_type_name(FR_PROXY_AT), "PROXY_AT");
    assert_string_equal(fr_type_name(FR_PROXY_OPEN), "PROXY_OPEN");
}

static void test_rejects(void **state)
{
    (void)state;
    expect_reject("DATA_STDOUT", m_short_msg, AL_E_PROTO);
    expect_reject("ATTACH", m_truncate, AL_E_PROTO);
    expect_reject("ATTACH", m_trailing, AL_E_PROTO);
    expect_reject("OPEN", m_truncate, AL_E_PROTO);
    expect_reject("OPEN", m_trailing, AL_E_PROTO);
    expect_reject("HELLO", m_flags, AL_E_PROTO);
    expect_reject("DATA_STDOUT", m_stream3, AL_E_PROTO);
    expect_reject("DATA_STDOUT", m_chan0, AL_E_PROTO);
    expect_reject("PING", m_chan1, AL_E_PROTO);
    expect_reject("PING", m_type, AL_E_TYPE);
    expect_reject("PING", m_huge, AL_E_TOOBIG);
    expect_reject("HELLO", m_version, AL_E_PROTO);
    expect_reject("HELLO", m_role, AL_E_PROTO);
    expect_reject("HELLO", m_nul_in_string, AL_E_PROTO);
    expect_reject("RESIZE", m_resize0, AL_E_PROTO);
    expect_reject("SIGNAL", m_signal, AL_E_PROTO);
    expect_reject("ACK", m_ack_order, AL_E_PROTO);
    expect_reject("GAP", m_gap_empty, AL_E_PROTO);
    expect_reject("EXIT", m_exit_code, AL_E_PROTO);
    expect_reject("EXIT", m_exit_core1, AL_E_PROTO);        /* a core without a signal */
    expect_reject("EXIT_SIGNAL", m_exit_core2, AL_E_PROTO); /* core is 0 or 1 */
    expect_reject("EXIT_SIGNAL", m_exit_core1, 0);          /* killed, core dumped */
    expect_reject("DATA_STDOUT", m_data_empty, AL_E_PROTO);
    /* a message shorter than a header */
    struct fr_frame f;
    assert_int_equal(fr_decode((const uint8_t *)"\x02\x00", 2, &f), AL_E_PROTO);
    assert_int_equal(fr_frame_len((const uint8_t *)"\x02\x00", 2), AL_E_AGAIN);
}

/* ATTACH's flag RESUME (bit 0) decodes and re-encodes; other bits are refused. */
static void test_attach_resume(void **state)
{
    (void)state;
    struct fr_frame f, g;
    uint8_t buf[128];
    build_vector("ATTACH", &f);
    f.flags = FR_ATTACH_RESUME;
    long n = fr_encode(&f, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(buf[1], 0x01);
    assert_int_equal(fr_decode(buf, (size_t)n, &g), 0);
    assert_int_equal(g.flags, FR_ATTACH_RESUME);
    assert_int_equal(g.u.attach.out_next, f.u.attach.out_next);
    for (unsigned bit = 1; bit < 8; bit++) {
        buf[1] = (uint8_t)(1u << bit);
        assert_int_equal(fr_decode(buf, (size_t)n, &g), AL_E_PROTO);
        buf[1] = (uint8_t)((1u << bit) | FR_ATTACH_RESUME);
        assert_int_equal(fr_decode(buf, (size_t)n, &g), AL_E_PROTO);
    }
    /* ATTACHED has no flag */
    build_vector("ATTACHED", &f);
    n = fr_encode(&f, buf, sizeof buf);
    buf[1] = 0x01;
    assert_int_equal(fr_decode(buf, (size_t)n, &g), AL_E_PROTO);
}

static void test_limits(void **state)
{
    (void)state;
    static uint8_t big[AL_MAX_FRAME + 64];
    static struct fr_frame f;
    uint8_t *buf = malloc(AL_MAX_FRAME + 64);
    assert_non_null(buf);
    memset(big, 'x', sizeof big);

    /* the largest DATA frame fits exactly; one byte more does not */
    memset(&f, 0, sizeof f);
    f.type = FR_DATA;
    f.flags = FR_STDOUT;
    f.channel = 1;
    f.u.data.bytes.p = big;
    f.u.data.bytes.len = AL_MAX_DATA;
    long n = fr_encode(&f, buf, AL_MAX_FRAME + 64);
    assert_int_equal(n, AL_MAX_FRAME);
    assert_int_equal(fr_decode(buf, (size_t)n, &f), 0);
    f.u.data.bytes.p = big;
    f.u.data.bytes.len = AL_MAX_DATA + 1;
    assert_true(fr_encode(&f, buf, AL_MAX_FRAME + 64) < 0);

    /* the encoder never writes past cap */
    f.u.data.bytes.len = 100;
    assert_int_equal(fr_encode(&f, buf, 50), AL_E_TOOBIG);

    /* argv count, string and TERM limits */
    memset(&f, 0, sizeof f);
    build_vector("OPEN", &f);
    f.u.open.argc = AL_MAX_ARGV + 1;
    for (unsigned i = 0; i < AL_MAX_ARGV + 1 && i < AL_MAX_ARGV; i++)
        f.u.open.argv[i] = (struct fr_str){"a", 1};
    assert_true(fr_encode(&f, buf, AL_MAX_FRAME) < 0);
    build_vector("OPEN", &f);
    f.u.open.term = (struct fr_str){(const char *)big, AL_MAX_TERM + 1};
    assert_true(fr_encode(&f, buf, AL_MAX_FRAME) < 0);
    build_vector("OPEN", &f);
    f.u.open.env[0] = S("=novar");
    assert_true(fr_encode(&f, buf, AL_MAX_FRAME) < 0);
    build_vector("OPEN", &f);
    f.u.open.argv[0] = S("");
    assert_true(fr_encode(&f, buf, AL_MAX_FRAME) < 0);

    /* a token at the limit passes, one byte more fails */
    memset(&f, 0, sizeof f);
    f.type = FR_TOKEN;
    f.u.token.p = big;
    f.u.token.len = AL_MAX_TOKEN;
    n = fr_encode(&f, buf, AL_MAX_FRAME);
    assert_true(n > 0);
    assert_int_equal(fr_decode(buf, (size_t)n, &f), 0);
    f.u.token.p = big;
    f.u.token.len = AL_MAX_TOKEN + 1;
    assert_true(fr_encode(&f, buf, AL_MAX_FRAME) < 0);
    free(buf);
}

/*
 * frame.c's table of types agrees with the spec's tables (docs/protocol.md
 * §4.1, §4.2): every row's type, name and direction, and the scope of the
 * table it stands in; a type no row names is unknown.
 */
static void test_type_table(void **state)
{
    (void)state;
    const char *src = getenv("AL_SRC");
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/protocol.md", src ? src : ".");
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[1024];
    unsigned scope = 0, rows = 0;
    int seen[256] = {0};
    while (fgets(line, sizeof line, fp)) {
        if (!strncmp(line, "### 4.1 ", 8))
            scope = FR_SCOPE_CONN;
        else if (!strncmp(line, "### 4.2 ", 8))
            scope = FR_SCOPE_CHAN;
        else if (!strncmp(line, "## 5.", 5))
            scope = 0;
        unsigned type;
        char name[32], dir[64];
        if (!scope || sscanf(line, "| 0x%x | %31[A-Z_] | %63[^|]|", &type, name, dir) != 3)
            continue;
        rows++;
        const struct fr_typeinfo *t = fr_type_info(type);
        assert_non_null(t);
        seen[type] = 1;
        assert_string_equal(t->name, name);
        assert_string_equal(fr_type_name(type), name);
        assert_int_equal(t->scope, type == FR_ERROR ? FR_SCOPE_ANY : scope);
        unsigned by = !strncmp(dir, "both", 4) || !strncmp(dir, "stream's", 8) ? FR_BY_BOTH
                      : !strncmp(dir, "controller", 10)                        ? FR_BY_CONTROLLER
                                                                               : FR_BY_HOST;
        assert_int_equal(t->senders, by);
        assert_int_equal((t->props & FR_T_STREAM) != 0, !strncmp(dir, "stream's", 8));
        assert_int_equal((t->props & FR_T_RELAY) != 0, strstr(line, "§9") != NULL);
        assert_int_equal((t->props & FR_T_PROBE) != 0, strstr(line, "§13") != NULL);
    }
    fclose(fp);
    assert_int_equal(rows, 28);
    for (unsigned type = 0; type < 256; type++)
        if (!seen[type]) {
            assert_null(fr_type_info(type));
            assert_string_equal(fr_type_name(type), "?");
        }
    /* what a missing channel gets: NO_CHANNEL from a host, or dropped (§5, §6) */
    assert_true(fr_type_info(FR_CLOSE)->props & FR_T_NO_CHANNEL);
    assert_true(fr_type_info(FR_CLOSE)->props & FR_T_LATE);
    assert_false(fr_type_info(FR_GAP)->props & (FR_T_NO_CHANNEL | FR_T_LATE));
    assert_true(fr_type_info(FR_SNAPSHOT)->props & FR_T_FLAG0);
}

/* Every truncation of every vector is rejected, never accepted or crashing. */
static void test_every_truncation(void **state)
{
    (void)state;
    uint8_t buf[AL_MAX_FRAME];
    struct fr_frame f;
    for (size_t i = 0; i < NVEC; i++) {
        build_vector(vector_names[i], &f);
        long n = fr_encode(&f, buf, sizeof buf);
        assert_true(n > 0);
        for (long cut = 0; cut < n; cut++)
            assert_true(fr_decode(buf, (size_t)cut, &f) < 0);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--print-vectors")) {
        print_vectors();
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_round_trip),
        cmocka_unit_test(test_decoded_fields),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_attach_resume),
        cmocka_unit_test(test_proxy_frames),
        cmocka_unit_test(test_relay_frames),
        cmocka_unit_test(test_probe_frames),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_type_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
