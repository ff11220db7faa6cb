/*
 * vtwork: see vtwork.h.
 *
 * The ring: VTW_RING bytes, written by the loop alone and read by the
 * thread alone. wr and rd count bytes since the start (they only grow);
 * a byte's place is its count modulo VTW_RING, and wr - rd are the bytes
 * in use. A record is a struct rec header then its bytes, padded to
 * REC_ALIGN, and never wraps: where the rest of the ring is too short for
 * the next record, the loop leaves a skip record (target NULL) there, or
 * nothing at all if not even a header fits, and both sides go on at the
 * ring's start.
 *
 * Waking: the thread sleeps on `work` only after setting `idle` and seeing
 * the ring empty, both under the mutex; the loop stores wr before it reads
 * idle (both sequentially consistent), so one of the two always sees the
 * other. A loop that sees the thread asleep wakes it only once
 * VTW_WAKE_BYTES are queued, or when the `flush` timer (VTW_WAKE_MS, armed
 * by the first push that did not wake it) fires, or when it waits for the
 * thread itself (vtw_sync, vtw_notify, a full ring): a flowing terminal's
 * reads of 4 KiB then cost one wake-up of the thread per VTW_WAKE_BYTES,
 * not one each. vtw_sync waits on `done` the same way, with `syncing`. Room,
 * errors and passed marks reach the loop through a uv_async_t: the loop
 * stores the earliest mark it waits for in notify_at (0: none) and reads
 * rd after; the thread stores rd before it reads notify_at and takes the
 * mark it has passed with a compare-and-exchange to 0, so exactly one
 * side sees a passed mark, and a mark the loop lowered meanwhile stays.
 *
 * Ownership: the loop owns the struct; the thread only reads the ring
 * between rd and wr, and writes rd, the error fields and the flags it is
 * given. vtw_close joins the thread before the handle closes.
 */
#include "vtwork.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"

#define REC_ALIGN 8u

struct rec {
    void *target; /* NULL: skip to the ring's start */
    uint32_t ch;
    uint32_t len; /* bytes after the header, before padding */
};

#define REC_HDR ((size_t)sizeof(struct rec))

_Static_assert(VTW_RING % REC_ALIGN == 0 && sizeof(struct rec) % REC_ALIGN == 0,
               "records stay aligned");
_Static_assert(VTW_PUSH_MAX + sizeof(struct rec) <= VTW_RING,
               "an empty ring takes the largest push");

struct vtw {
    struct vtw_config cfg;
    uv_async_t async;
    uv_timer_t flush; /* the loop's: wakes a thread left asleep with records queued */
    int handles;      /* the loop's handles not yet closed */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    _Atomic size_t wr, rd;
    _Atomic int idle;         /* the thread sleeps, or is about to, on work */
    _Atomic int syncing;      /* the loop waits on done */
    _Atomic int want_room;    /* the loop wants on_room when room comes back */
    _Atomic size_t notify_at; /* the mark on_mark waits for; 0: none */
    _Atomic int passed;       /* the thread passed notify_at: on_mark is due */
    _Atomic int quit;
    _Atomic int err_rc;
    _Atomic uint32_t err_ch;
    _Atomic unsigned err_count;
    int started;
    uint8_t ring[VTW_RING];
};

static size_t pad(size_t n)
{
    return (n + REC_ALIGN - 1) & ~(size_t)(REC_ALIGN - 1);
}

/* ---- the thread --------------------------------------------------------- */

static void wake_loop(struct vtw *w)
{
    (void)uv_async_send(&w->async);
}

/* After rd moved: a waiting vtw_sync, and a loop waiting for room. */
static void after_consume(struct vtw *w, size_t rd)
{
    if (atomic_load(&w->syncing) && rd == atomic_load(&w->wr)) {
        pthread_mutex_lock(&w->mu);
        pthread_cond_broadcast(&w->done);
        pthread_mutex_unlock(&w->mu);
    }
    if (atomic_load(&w->want_room) && atomic_load(&w->wr) - rd <= VTW_RING / 2 &&
        atomic_exchange(&w->want_room, 0))
        wake_loop(w);
    size_t at = atomic_load(&w->notify_at);
    if (at && rd >= at && atomic_compare_exchange_strong(&w->notify_at, &at, 0)) {
        atomic_store(&w->passed, 1);
        wake_loop(w);
    }
}

static void *thread_main(void *arg)
{
    struct vtw *w = arg;
    size_t rd = atomic_load(&w->rd);
    for (;;) {
        if (rd == atomic_load(&w->wr)) {
            pthread_mutex_lock(&w->mu);
            atomic_store(&w->idle, 1);
            while (rd == atomic_load(&w->wr) && !atomic_load(&w->quit))
                pthread_cond_wait(&w->work, &w->mu);
            atomic_store(&w->idle, 0);
            pthread_mutex_unlock(&w->mu);
            if (rd == atomic_load(&w->wr)) /* quit, with nothing left */
                return NULL;
            continue;
        }
        size_t pos = rd % VTW_RING, tail = VTW_RING - pos;
        struct rec h;
        if (tail < REC_HDR) {
            rd += tail;
        } else {
            memcpy(&h, w->ring + pos, REC_HDR);
            if (!h.target) {
                rd += tail;
            } else {
                int rc = w->cfg.feed(h.target, w->ring + pos + REC_HDR, h.len);
                if (rc != AL_OK) {
                    atomic_store(&w->err_ch, h.ch);
                    atomic_store(&w->err_rc, rc);
                    atomic_fetch_add(&w->err_count, 1);
                    wake_loop(w);
                }
                rd += REC_HDR + pad(h.len);
            }
        }
        atomic_store(&w->rd, rd);
        after_consume(w, rd);
    }
}

/* ---- the loop ------------------------------------------------------------ */

static void on_async(uv_async_t *h)
{
    struct vtw *w = h->data;
    unsigned n = atomic_exchange(&w->err_count, 0);
    if (n && w->cfg.on_error)
        w->cfg.on_error(w->cfg.ud, atomic_load(&w->err_ch), atomic_load(&w->err_rc), n);
    if (atomic_exchange(&w->passed, 0) && w->cfg.on_mark)
        w->cfg.on_mark(w->cfg.ud);
    if (w->cfg.on_room && !atomic_load(&w->want_room))
        w->cfg.on_room(w->cfg.ud); /* cheap when nothing waited: the runner re-polls */
}

/* On the loop: wakes the thread if it sleeps (it then feeds all that is
 * queued), and disarms the flush timer. */
static void wake_thread(struct vtw *w)
{
    if (uv_is_active((uv_handle_t *)&w->flush))
        (void)uv_timer_stop(&w->flush);
    if (atomic_load(&w->idle) &&
        atomic_load(&w->rd) != atomic_load_explicit(&w->wr, memory_order_relaxed)) {
        /* Taking the mutex orders this with the thread's check of wr; the
         * signal comes after it is let go, so that the thread, once
         * awake, does not sleep again on the mutex still held here. */
        pthread_mutex_lock(&w->mu);
        pthread_mutex_unlock(&w->mu);
        pthread_cond_signal(&w->work);
    }
}

static void on_flush(uv_timer_t *h)
{
    wake_thread(h->data);
}

int vtw_new(uv_loop_t *loop, const struct vtw_config *cfg, struct vtw **out)
{
    *out = NULL;
    if (!cfg->feed)
        return AL_E_INVAL;
    struct vtw *w = calloc(1, sizeof *w);
    if (!w)
        return AL_E_NOMEM;
    w->cfg = *cfg;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        free(w);
        return AL_E_IO;
    }
    (void)pthread_cond_init(&w->work, NULL);
    (void)pthread_cond_init(&w->done, NULL);
    if (uv_async_init(loop, &w->async, on_async) != 0) {
        pthread_cond_destroy(&w->work);
        pthread_cond_destroy(&w->done);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return AL_E_IO;
    }
    w->async.data = w;
    (void)uv_timer_init(loop, &w->flush); /* cannot fail: it only fills the struct */
    w->flush.data = w;
    w->handles = 2;
    /* the thread takes no signal: SIGCHLD and the rest stay the loop's */
    sigset_t all, old;
    sigfillset(&all);
    (void)pthread_sigmask(SIG_SETMASK, &all, &old);
    int prc = pthread_create(&w->thread, NULL, thread_main, w);
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prc == 0)
        w->started = 1;
    *out = w;
    if (!w->started) {
        vtw_close(w);
        *out = NULL;
        return AL_E_IO;
    }
    return AL_OK;
}

static void free_when_closed(uv_handle_t *h)
{
    struct vtw *w = h->data;
    if (--w->handles > 0)
        return;
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->done);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

void vtw_close(struct vtw *w)
{
    if (!w)
        return;
    if (w->started) {
        pthread_mutex_lock(&w->mu);
        atomic_store(&w->quit, 1);
        pthread_cond_signal(&w->work);
        pthread_mutex_unlock(&w->mu);
        (void)pthread_join(w->thread, NULL);
        w->started = 0;
    }
    uv_close((uv_handle_t *)&w->async, free_when_closed);
    uv_close((uv_handle_t *)&w->flush, free_when_closed);
}

/* The free bytes from wr on: the part before the ring's end (tail) and
 * the part from its start (head), 0 for a part that is not free. */
static void free_parts(const struct vtw *w, size_t *tail, size_t *head)
{
    size_t wr = atomic_load_explicit(&w->wr, memory_order_relaxed);
    size_t used = wr - atomic_load(&w->rd);
    size_t free_bytes = VTW_RING - used, pos = wr % VTW_RING, to_end = VTW_RING - pos;
    *tail = free_bytes < to_end ? free_bytes : to_end;
    *head = free_bytes > to_end ? free_bytes - to_end : 0;
}

static size_t room_now(const struct vtw *w)
{
    size_t tail, head;
    free_parts(w, &tail, &head);
    size_t best = tail > head ? tail : head;
    size_t room = best > REC_HDR ? (best - REC_HDR) & ~(size_t)(REC_ALIGN - 1) : 0;
    return room < VTW_PUSH_MAX ? room : VTW_PUSH_MAX;
}

size_t vtw_room(struct vtw *w, size_t want)
{
    size_t room = room_now(w);
    if (room >= want)
        return room;
    atomic_store(&w->want_room, 1);
    wake_thread(w);     /* what is queued is all the room there will be */
    return room_now(w); /* the thread may have made room meanwhile */
}

int vtw_push(struct vtw *w, void *target, uint32_t ch, const uint8_t *p, size_t n)
{
    if (!target || n == 0 || n > room_now(w))
        return n == 0 || !target ? AL_E_INVAL : AL_E_LIMIT;
    size_t tail, head;
    free_parts(w, &tail, &head);
    size_t need = REC_HDR + pad(n);
    size_t wr = atomic_load_explicit(&w->wr, memory_order_relaxed);
    if (tail < need) { /* room_now promised the start: skip the end */
        if (tail >= REC_HDR) {
            struct rec skip = {NULL, 0, 0};
            memcpy(w->ring + wr % VTW_RING, &skip, REC_HDR);
        }
        wr += tail;
    }
    struct rec h = {target, ch, (uint32_t)n};
    memcpy(w->ring + wr % VTW_RING, &h, REC_HDR);
    memcpy(w->ring + wr % VTW_RING + REC_HDR, p, n);
    atomic_store(&w->wr, wr + need);
    if (!atomic_load(&w->idle))
        return AL_OK; /* the thread is awake: it sees wr before it sleeps */
    /* enough queued, or no timer (cannot happen on an open handle): now */
    int now = wr + need - atomic_load(&w->rd) >= VTW_WAKE_BYTES ||
              (!uv_is_active((uv_handle_t *)&w->flush) &&
               uv_timer_start(&w->flush, on_flush, VTW_WAKE_MS, 0) != 0);
    if (now)
        wake_thread(w);
    return AL_OK;
}

int vtw_busy(const struct vtw *w)
{
    return atomic_load(&w->rd) != atomic_load_explicit(&w->wr, memory_order_relaxed);
}

void vtw_sync(struct vtw *w)
{
    size_t wr = atomic_load_explicit(&w->wr, memory_order_relaxed);
    if (atomic_load(&w->rd) == wr)
        return;
    wake_thread(w);
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->syncing, 1);
    while (atomic_load(&w->rd) != wr)
        pthread_cond_wait(&w->done, &w->mu);
    atomic_store(&w->syncing, 0);
    pthread_mutex_unlock(&w->mu);
}

size_t vtw_mark(const struct vtw *w)
{
    return atomic_load_explicit(&w->wr, memory_order_relaxed);
}

int vtw_passed(const struct vtw *w, size_t mark)
{
    return atomic_load(&w->rd) >= mark;
}

int vtw_notify(struct vtw *w, size_t mark)
{
    if (vtw_passed(w, mark))
        return 1;
    size_t cur = atomic_load(&w->notify_at);
    while ((cur == 0 || mark < cur) && !atomic_compare_exchange_weak(&w->notify_at, &cur, mark))
        ;
    /* The thread may have passed the mark before it saw notify_at: then the
     * call is made here (other marks may wait on it). */
    cur = mark;
    if (vtw_passed(w, mark) && atomic_compare_exchange_strong(&w->notify_at, &cur, 0)) {
        atomic_store(&w->passed, 1);
        wake_loop(w);
    }
    wake_thread(w); /* the loop waits for it now */
    return 0;
}
