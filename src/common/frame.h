/*
 * frame: the airlock.v1 codec. Bytes in, frames out, and back; no I/O, no
 * state, no allocation. docs/protocol.md is the normative spec.
 *
 * A frame is a 10-byte header (type u8, flags u8, channel u32, payload
 * length u32; integers big-endian) followed by the payload. Each WebSocket
 * binary message carries exactly one frame.
 *
 * Decoding is strict and canonical: reserved flags must be zero, every
 * field must be in range and the payload must be consumed exactly, so that
 * fr_encode(fr_decode(bytes)) == bytes for every accepted input.
 *
 * Strings and byte fields of a decoded frame point into the input buffer:
 * they live as long as it does and are not NUL-terminated.
 */
#ifndef AL_FRAME_H
#define AL_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "al_limits.h"

enum fr_type {
    /* connection level: channel must be 0 */
    FR_HELLO = 0x01,
    FR_PING = 0x02,
    FR_PONG = 0x03,
    FR_TOKEN = 0x04,
    FR_ERROR = 0x05, /* channel 0: about the connection; else that channel */
    FR_LIST = 0x06,
    FR_LIST_REPLY = 0x07,
    FR_PROXY_AT = 0x08, /* host -> controller: where the host's proxy listener is */
    /* probe sessions only (§13): a path's measurements */
    FR_PROBE = 0x0e,       /* controller -> host: u8 op, then per op */
    FR_PROBE_REPLY = 0x0f, /* host -> controller: u8 op, then per op */
    /* channel level: channel must be non-zero */
    FR_OPEN = 0x10,
    FR_OPENED = 0x11,
    FR_DATA = 0x12,
    FR_ACK = 0x13,
    FR_RESIZE = 0x14,
    FR_SIGNAL = 0x15,
    FR_EOF = 0x16,
    FR_EXIT = 0x17,
    FR_CLOSE = 0x18,
    FR_ATTACH = 0x19,
    FR_ATTACHED = 0x1a,
    FR_GAP = 0x1b,
    FR_SNAPSHOT_REQ = 0x1c,
    FR_SNAPSHOT = 0x1d,
    /* relay sessions (airlockd as host to its clients) */
    FR_ROLE = 0x1e,     /* host -> controller: writer or viewer, stdin offsets */
    FR_TAKEOVER = 0x1f, /* controller -> host: asks to become the writer */
    FR_VIEWERS = 0x20,  /* host -> controller: who is attached */
    /* the credential proxy's channels (docs/protocol.md §5a) */
    FR_PROXY_OPEN = 0x21, /* host -> controller: a proxy channel, on an id the host picks */
};

/* Channel ids with this bit set are the host's (PROXY_OPEN), the others the
 * controller's (OPEN): the two sides never pick the same id. */
#define FR_PROXY_CHANNEL_BIT 0x80000000u
static inline int fr_is_proxy_channel(uint32_t ch)
{
    return (ch & FR_PROXY_CHANNEL_BIT) != 0;
}

/* Streams of a channel; carried in the flags of DATA, ACK, EOF and GAP. */
enum fr_stream {
    FR_STDIN = 0,  /* controller -> host */
    FR_STDOUT = 1, /* host -> controller (the PTY output in PTY mode) */
    FR_STDERR = 2, /* host -> controller, pipe mode only */
};
#define FR_NSTREAMS 3

enum fr_role { FR_ROLE_HOST = 1, FR_ROLE_CONTROLLER = 2 };

/*
 * What airlock.v1 says about each frame type (docs/protocol.md §2, §4, §5,
 * §9), from one table in frame.c: the codec checks headers with it, the
 * endpoint who may send a type and what it needs of its channel.
 */
enum fr_scope {
    FR_SCOPE_CONN = 1, /* channel 0 */
    FR_SCOPE_CHAN,     /* channel != 0 */
    FR_SCOPE_ANY,      /* ERROR: 0 about the connection, else about that channel */
};
/* Which roles may send a type (fr_typeinfo.senders). */
#define FR_BY(role) (1u << (role))
#define FR_BY_HOST FR_BY(FR_ROLE_HOST)
#define FR_BY_CONTROLLER FR_BY(FR_ROLE_CONTROLLER)
#define FR_BY_BOTH (FR_BY_HOST | FR_BY_CONTROLLER)
/* Properties of a type (fr_typeinfo.props). */
enum {
    FR_T_STREAM = 1 << 0,     /* flags name a stream (enum fr_stream) */
    FR_T_FLAG0 = 1 << 1,      /* flags may hold bit 0: FR_SNAPSHOT_MORE, FR_ATTACH_RESUME */
    FR_T_RELAY = 1 << 2,      /* a relay-session frame (§9) */
    FR_T_LINKED = 1 << 3,     /* only about a channel opened or attached on this link */
    FR_T_NO_CHANNEL = 1 << 4, /* a host answers it for a channel it lacks with NO_CHANNEL */
    FR_T_LATE = 1 << 5,       /* may still come once its channel is gone: dropped */
    FR_T_PROXY = 1 << 6,      /* may be sent on a proxy channel (§5a) */
    FR_T_PROBE = 1 << 7,      /* a probe session's frame (§13): never in another */
};
struct fr_typeinfo {
    const char *name; /* "DATA" */
    uint8_t scope;    /* enum fr_scope */
    uint8_t senders;  /* FR_BY_* */
    uint16_t props;   /* FR_T_* */
};

/* FR_MODE_PROXY is never on the wire: the mode a PROXY_OPEN gives its
 * channel (two streams: stdin toward the agent, stdout from it). */
enum fr_mode { FR_MODE_PTY = 0, FR_MODE_PIPES = 1, FR_MODE_PROXY = 2 };
enum fr_sigscope { FR_SIG_GROUP = 0, FR_SIG_TREE = 1 };
enum fr_chstate { FR_CH_RUNNING = 1, FR_CH_EXITED = 2 };
/* Role of a relay session's client (ROLE, VIEWERS): only the writer's stdin
 * reaches the terminal. */
enum fr_relay_role { FR_WRITER = 1, FR_VIEWER = 2 };
#define FR_SNAPSHOT_MORE 0x01 /* SNAPSHOT flag: another chunk follows */
/* ATTACH flag: the controller holds every byte before out_next and
 * err_next (it attached this channel before), even when they are 0 */
#define FR_ATTACH_RESUME 0x01
/* What a PROBE asks and a PROBE_REPLY answers (§13). */
enum fr_probe_op {
    FR_PROBE_HEADERS = 1, /* the upgrade request's headers, as the host saw them */
    FR_PROBE_ECHO = 2,    /* these bytes back */
    FR_PROBE_SINK = 3,    /* bytes to drop (PROBE only) */
    FR_PROBE_SOURCE = 4,  /* PROBE: send me u32 bytes; PROBE_REPLY: some of them */
};

/* Wire error codes (ERROR frame). */
enum fr_errcode {
    FR_ERR_PROTOCOL = 1,
    FR_ERR_VERSION = 2,
    FR_ERR_UNKNOWN_TYPE = 3,
    FR_ERR_TOO_BIG = 4,
    FR_ERR_NO_CHANNEL = 5,
    FR_ERR_CHANNEL_EXISTS = 6,
    FR_ERR_LIMIT = 7,
    FR_ERR_OPEN_FAILED = 8,
    FR_ERR_TOKEN_INVALID = 9,
    FR_ERR_TOKEN_EXPIRED = 10,
    FR_ERR_FORBIDDEN = 11,
    FR_ERR_STATE = 12,
    FR_ERR_INTERNAL = 13,
    FR_ERR_TIMEOUT = 14,
};

struct fr_str {
    const char *p;
    uint16_t len;
};

struct fr_bytes {
    const uint8_t *p;
    size_t len;
};

struct fr_list_entry {
    uint32_t channel;
    uint8_t state; /* enum fr_chstate */
    uint8_t mode;  /* enum fr_mode */
    int32_t exit_code;
    uint8_t exit_signal;
    uint64_t out_end, err_end, in_next;
};

struct fr_viewer {
    struct fr_str name; /* 1..AL_MAX_VIEWER_NAME bytes */
    uint8_t role;       /* enum fr_relay_role */
};

/* One header of a PROBE_REPLY HEADERS: its name in lower case, its value
 * redacted by the host (§13). */
struct fr_probe_header {
    struct fr_str name;  /* 1..AL_PROBE_MAX_HEADER_NAME bytes of [a-z0-9-] */
    struct fr_str value; /* 0..AL_PROBE_MAX_HEADER_VALUE bytes */
};

struct fr_open {
    uint8_t mode; /* enum fr_mode */
    uint16_t cols, rows;
    struct fr_str term, cwd;
    uint16_t argc, envc;
    struct fr_str argv[AL_MAX_ARGV];
    struct fr_str env[AL_MAX_ENV]; /* "NAME=value" */
};

struct fr_frame {
    uint8_t type;  /* enum fr_type */
    uint8_t flags; /* stream for DATA/ACK/EOF/GAP, FR_SNAPSHOT_MORE, FR_ATTACH_RESUME, else 0 */
    uint32_t channel;
    union {
        struct {
            uint16_t version_min, version_max;
            uint8_t role; /* enum fr_role */
            uint32_t max_frame;
            struct fr_str name;
        } hello;
        struct {
            uint64_t ts_us; /* PING: sender's clock; PONG: echoed */
        } ping;
        struct fr_bytes token;
        struct {
            uint16_t code; /* enum fr_errcode */
            struct fr_str msg;
        } error;
        struct {
            uint16_t count;
            struct fr_list_entry e[AL_MAX_CHANNELS];
        } list;
        struct fr_str proxy_at; /* PROXY_AT: "http://..." (1..AL_MAX_PROXY_URL bytes) */
        struct fr_open open;
        struct {
            uint32_t pid;
        } opened;
        struct {
            uint64_t offset; /* stream offset of the first byte */
            struct fr_bytes bytes;
        } data;
        struct {
            uint64_t ack;   /* bytes below this are delivered: may be dropped */
            uint64_t limit; /* the sender may send bytes below this offset */
        } ack;
        struct {
            uint16_t cols, rows;
        } resize;
        struct {
            uint8_t signo; /* Linux signal number, see fr_signal_ok() */
            uint8_t scope; /* enum fr_sigscope */
        } signal;
        struct {
            uint64_t offset; /* the stream ends here */
        } eof;
        struct {
            int32_t code;  /* exit code, or -1 when killed by a signal */
            uint8_t signo; /* terminating signal, 0 if none */
            uint8_t core;  /* 1 if it dumped core */
            uint64_t out_end, err_end;
        } exit;
        struct {
            uint64_t out_next, out_limit, err_next, err_limit;
            uint16_t cols, rows; /* 0,0: leave the size alone */
        } attach;
        struct {
            uint8_t state; /* enum fr_chstate */
            uint64_t in_next, in_limit;
        } attached;
        struct {
            uint64_t from, to; /* bytes [from, to) are gone */
        } gap;
        struct {
            uint64_t offset; /* stdout offset this screen corresponds to */
            uint16_t cols, rows;
            struct fr_bytes bytes;
        } snapshot;
        struct {
            uint8_t role;      /* enum fr_relay_role */
            uint64_t in_next;  /* stdin goes on at this offset */
            uint64_t in_limit; /* stdin credit (== in_next for a viewer) */
        } role;
        struct {
            uint16_t count;
            struct fr_viewer e[AL_MAX_VIEWERS];
        } viewers;
        struct {
            uint8_t op;            /* enum fr_probe_op */
            uint32_t count;        /* PROBE SOURCE: bytes asked for */
            struct fr_bytes bytes; /* ECHO, SINK; PROBE_REPLY SOURCE */
            uint16_t nheaders;     /* PROBE_REPLY HEADERS */
            struct fr_probe_header h[AL_PROBE_MAX_HEADERS];
        } probe;
    } u;
};

/*
 * Total length (header + payload) of the frame starting at buf, once at
 * least AL_FRAME_HEADER bytes are available; AL_E_AGAIN before that;
 * AL_E_TOOBIG if the declared payload exceeds AL_MAX_PAYLOAD.
 */
long fr_frame_len(const uint8_t *buf, size_t len);

/* Decode exactly one frame occupying all of buf[0..len). 0 or AL_E_*. */
int fr_decode(const uint8_t *buf, size_t len, struct fr_frame *f);

/* Encode f into out; returns the frame length, or AL_E_TOOBIG / AL_E_INVAL. */
long fr_encode(const struct fr_frame *f, uint8_t *out, size_t cap);

/* Whether a signal number is one a peer may ask for. */
int fr_signal_ok(unsigned signo);

/* The table entry of a frame type, or NULL for a type airlock.v1 lacks. */
const struct fr_typeinfo *fr_type_info(unsigned type);

/* Name of a frame type ("DATA"), or "?" */
const char *fr_type_name(unsigned type);

#endif
