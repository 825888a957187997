/*
 * relgrade.clicks._log_scan: the compiled check of an impression log stored sorted by session.
 *
 * One function and one type:
 *
 *   check_sorted(stream, weights=None) -> (status, rows, sessions, keys, counts, pairs)
 *   Pairs: the skip-above pairs made in the same pass, read as an Arrow C stream
 *
 * ``stream`` is a PyCapsule named "arrow_array_stream" (the Arrow C stream interface, as a
 * DuckDB relation's __arrow_c_stream__() returns it) whose batches are structs of the typed
 * log's columns in this order: session_id, query_id, ranker, chunk_id (strings, "u" or "U"),
 * position (int64, "l"), clicked (int32, "i"), randomized (boolean, "b"). The capsule's
 * stream is moved out and released here.
 *
 * The pass proves a log clean or gives up; it never words an error. It answers SETTLED only
 * when every row holds a value in every column (the typed view's NULL marks a value that
 * breaks its column's rule), every session's rows are one run of the stream and the runs'
 * session ids strictly increase (bytewise), so that no two runs are one session, every
 * position is at most 64 and shown once in its session, no chunk id is shown twice in a
 * session (64-bit hashes compared first, the ids' bytes on an equal hash), and every row of
 * a session names the session's first query and ranker. Then the log's rows, its sessions
 * and the histogram of the sessions' masks are exactly what check_log.sql computes:
 * ``keys`` holds three uint64 per distinct pattern (the shown, clicked and flagged-randomized
 * positions, bit k - 1 for position k) and ``counts`` one int64 per pattern (its sessions),
 * in no particular order. Anything else, a stream of other columns or types, or a stream
 * that fails, answers NOT_MINE (rows, sessions 0, keys and counts empty): the caller then
 * runs the SQL check, which finds and words whatever the pass gave up on.
 *
 * With ``weights`` (64 float64: the weight of a click at positions 1..64, NaN where there is
 * none), a settled log also gives its skip-above pairs, as sql/clicked.sql and
 * sql/skip_above.sql make them: in each session, a click at position k > 1 with a weight is
 * preferred to every unclicked chunk shown above it, in the order of the session ids (the
 * stored order, which the pass proves increasing), then the clicked position, then the
 * skipped one; the session's rows may be stored in any order of position. ``pairs`` is a
 * Pairs object holding the columns query_id, preferred_chunk_id, other_chunk_id (large
 * strings), weight (float64) and session_id (large string), none null, whose
 * __arrow_c_stream__() gives a fresh stream over them each time, in batches of BATCH_ROWS
 * rows (DuckDB's vector size). The columns are freed when the object and every stream and
 * batch made from it are released (an atomic count: a consumer may release on any thread).
 *
 * Every read is checked against the lengths the Arrow arrays declare: offsets within the
 * data's declared size are trusted as the Arrow format promises, and a string longer than
 * PY_SSIZE_T_MAX or an offset going backwards answers NOT_MINE. Plain C99 and the CPython
 * API.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { SETTLED = 0, NOT_MINE = 1 };

/* The Arrow C data and stream interfaces (https://arrow.apache.org/docs/format/CDataInterface.html),
 * declared here as the specification asks, so that no Arrow header is needed. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif
#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};
#endif

/* The columns, in the stream's order. */
enum { SESSION = 0, QUERY = 1, RANKER = 2, CHUNK = 3, POSITION = 4, CLICKED = 5,
       RANDOMIZED = 6, N_COLUMNS = 7 };

/* splitmix64's finaliser and FNV-1a: a chunk id's 64-bit hash (only compared within one
 * session; an equal hash is settled on the bytes). */
#define MIX1 UINT64_C(0xBF58476D1CE4E5B9)
#define MIX2 UINT64_C(0x94D049BB133111EB)

static inline uint64_t
mix(uint64_t x)
{
    x ^= x >> 30;
    x *= MIX1;
    x ^= x >> 27;
    x *= MIX2;
    x ^= x >> 31;
    return x;
}

static inline uint64_t
bytes_hash(const uint8_t *p, size_t n)
{
    uint64_t h = UINT64_C(0xCBF29CE484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001B3);
    }
    return mix(h ^ (uint64_t)n);
}

/* A growable byte buffer: the current session's id, query, ranker and chunk ids, copied out
 * of the batch (a session can span two batches, and a batch is released when read). */
typedef struct {
    uint8_t *data;
    size_t len, cap;
} Bytes;

static int
bytes_reserve(Bytes *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len) {
        return -1;
    }
    size_t need = b->len + extra;
    if (need <= b->cap) {
        return 0;
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        cap *= 2;
    }
    uint8_t *data = realloc(b->data, cap);
    if (data == NULL) {
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int
bytes_set(Bytes *b, const uint8_t *p, size_t n)
{
    b->len = 0;
    if (bytes_reserve(b, n) < 0) {
        return -1;
    }
    if (n) {
        memcpy(b->data, p, n);
    }
    b->len = n;
    return 0;
}

/* The histogram of sessions' masks: open addressing on (shown, clicks, flagged), kept at most
 * half full. */
typedef struct {
    uint64_t *keys;   /* 3 per slot */
    int64_t *counts;  /* 0: empty slot */
    size_t cap, used;
} Histogram;

static int
histogram_init(Histogram *h, size_t cap)
{
    h->keys = calloc(cap * 3, sizeof(uint64_t));
    h->counts = calloc(cap, sizeof(int64_t));
    h->cap = cap;
    h->used = 0;
    return (h->keys == NULL || h->counts == NULL) ? -1 : 0;
}

static void
histogram_free(Histogram *h)
{
    free(h->keys);
    free(h->counts);
    h->keys = NULL;
    h->counts = NULL;
}

static int histogram_add(Histogram *h, uint64_t a, uint64_t b, uint64_t c, int64_t n);

static int
histogram_grow(Histogram *h)
{
    Histogram bigger = {NULL, NULL, 0, 0};
    if (h->cap > SIZE_MAX / 6 / sizeof(uint64_t) || histogram_init(&bigger, h->cap * 2) < 0) {
        histogram_free(&bigger);
        return -1;
    }
    for (size_t i = 0; i < h->cap; i++) {
        if (h->counts[i]) {
            uint64_t *k = h->keys + 3 * i;
            if (histogram_add(&bigger, k[0], k[1], k[2], h->counts[i]) < 0) {
                histogram_free(&bigger);
                return -1;
            }
        }
    }
    histogram_free(h);
    *h = bigger;
    return 0;
}

static int
histogram_add(Histogram *h, uint64_t a, uint64_t b, uint64_t c, int64_t n)
{
    size_t mask = h->cap - 1;
    size_t i = (size_t)mix(a ^ mix(b ^ mix(c))) & mask;
    for (;;) {
        uint64_t *k = h->keys + 3 * i;
        if (h->counts[i] == 0) {
            k[0] = a;
            k[1] = b;
            k[2] = c;
            h->counts[i] = n;
            h->used++;
            return 2 * h->used > h->cap ? histogram_grow(h) : 0;
        }
        if (k[0] == a && k[1] == b && k[2] == c) {
            h->counts[i] += n;
            return 0;
        }
        i = (i + 1) & mask;
    }
}

/* One string column of a batch: the offsets (32- or 64-bit) and the bytes. */
typedef struct {
    const uint8_t *validity;
    const int32_t *off32;
    const int64_t *off64;
    const uint8_t *data;
    int64_t offset;
} Strings;

static inline int
string_at(const Strings *s, int64_t i, const uint8_t **p, size_t *n)
{
    int64_t j = s->offset + i, a, b;
    if (s->off32) {
        a = s->off32[j];
        b = s->off32[j + 1];
    }
    else {
        a = s->off64[j];
        b = s->off64[j + 1];
    }
    if (a < 0 || b < a || (uint64_t)(b - a) > (uint64_t)PY_SSIZE_T_MAX) {
        return -1;
    }
    *p = s->data + a;
    *n = (size_t)(b - a);
    return 0;
}

static inline int
same(const Bytes *b, const uint8_t *p, size_t n)
{
    return b->len == n && (n == 0 || memcmp(b->data, p, n) == 0);
}

/* <0, 0, >0 as the bytes p[0:n] sort below, equal to, or above b (bytewise, then length). */
static inline int
compare(const uint8_t *p, size_t n, const Bytes *b)
{
    size_t m = n < b->len ? n : b->len;
    int c = m ? memcmp(p, b->data, m) : 0;
    if (c) {
        return c;
    }
    return n < b->len ? -1 : (n > b->len ? 1 : 0);
}

/* Whether the array's validity bitmap marks any of its rows null. */
static int
has_nulls(const struct ArrowArray *a, int64_t parent_offset)
{
    if (a->null_count == 0 || a->n_buffers < 1 || a->buffers[0] == NULL) {
        return 0;
    }
    const uint8_t *bits = a->buffers[0];
    int64_t start = parent_offset + a->offset;
    for (int64_t i = 0; i < a->length; i++) {
        int64_t j = start + i;
        if (!((bits[j >> 3] >> (j & 7)) & 1)) {
            return 1;
        }
    }
    return 0;
}

/* A growable array of int64 string offsets (one more than the strings). */
typedef struct {
    int64_t *data;
    size_t len, cap;
} Offsets;

static int
offsets_push(Offsets *o, int64_t v)
{
    if (o->len == o->cap) {
        size_t cap = o->cap ? o->cap : 1024;
        if (cap > SIZE_MAX / 2 / sizeof(int64_t)) {
            return -1;
        }
        cap *= 2;
        int64_t *data = realloc(o->data, cap * sizeof(int64_t));
        if (data == NULL) {
            return -1;
        }
        o->data = data;
        o->cap = cap;
    }
    o->data[o->len++] = v;
    return 0;
}

/* One string column of the pairs: its bytes and its offsets. */
typedef struct {
    Bytes bytes;
    Offsets offsets;
} StringColumn;

static int
column_push(StringColumn *c, const uint8_t *p, size_t n)
{
    if (c->offsets.len == 0 && offsets_push(&c->offsets, 0) < 0) {
        return -1;
    }
    if (bytes_reserve(&c->bytes, n) < 0 || c->bytes.len + n > (size_t)INT64_MAX) {
        return -1;
    }
    if (n) {
        memcpy(c->bytes.data + c->bytes.len, p, n);
    }
    c->bytes.len += n;
    return offsets_push(&c->offsets, (int64_t)c->bytes.len);
}

static void
column_free(StringColumn *c)
{
    free(c->bytes.data);
    free(c->offsets.data);
    c->bytes.data = NULL;
    c->offsets.data = NULL;
}

/* The skip-above pairs of the sessions passed so far, as skip_above.sql orders them (by
 * session, then the clicked position, then the skipped one): the columns query_id,
 * preferred_chunk_id, other_chunk_id, weight, session_id. */
enum { P_QUERY = 0, P_PREFERRED = 1, P_OTHER = 2, P_SESSION = 3, N_PAIR_STRINGS = 4 };

typedef struct {
    StringColumn strings[N_PAIR_STRINGS];
    double *weight;
    size_t n, cap;
} Pairs;

static void
pairs_free(Pairs *p)
{
    for (int c = 0; c < N_PAIR_STRINGS; c++) {
        column_free(&p->strings[c]);
    }
    free(p->weight);
    p->weight = NULL;
    p->n = p->cap = 0;
}

/* The state of the pass between rows and batches. */
typedef struct {
    Bytes session, query, ranker, chunks;
    uint64_t hashes[64];
    size_t chunk_end[64];  /* where each chunk id of the session ends in chunks */
    int row_at[64];        /* the session's row (index into chunk_end) at position k + 1 */
    int n_chunks;          /* rows of the current session so far */
    int in_session;
    uint64_t shown, clicks, flagged;
    int64_t rows, sessions;
    Histogram histogram;
    /* The pairs, when asked for: weights[k - 1] is the weight of a click at position k, NaN
     * where the curve gives none (such a click gives no pair). */
    int want_pairs;
    double weights[64];
    Pairs pairs;
} State;

/* The session's chunk id at position k (1-based; the position is shown). */
static inline void
chunk_at(const State *s, int k, const uint8_t **p, size_t *n)
{
    int row = s->row_at[k - 1];
    size_t start = row ? s->chunk_end[row - 1] : 0;
    *p = s->chunks.data + start;
    *n = s->chunk_end[row] - start;
}

/* The current session's pairs, appended: for each click at a position k > 1 with a weight,
 * in increasing k, one pair per unclicked position j < k, in increasing j. 0, or -1 when
 * out of memory. */
static int
session_pairs(State *s)
{
    uint64_t skipped = s->shown & ~s->clicks;
    for (int k = 2; k <= 64; k++) {
        uint64_t bit = UINT64_C(1) << (k - 1);
        if (!(s->clicks & bit) || s->weights[k - 1] != s->weights[k - 1]) {
            continue;
        }
        uint64_t above = skipped & (bit - 1);
        if (!above) {
            continue;
        }
        const uint8_t *pref;
        size_t pref_n;
        chunk_at(s, k, &pref, &pref_n);
        for (int j = 1; j < k; j++) {
            if (!((above >> (j - 1)) & 1)) {
                continue;
            }
            const uint8_t *other;
            size_t other_n;
            chunk_at(s, j, &other, &other_n);
            Pairs *p = &s->pairs;
            if (p->n == p->cap) {
                size_t cap = p->cap ? 2 * p->cap : 4096;
                if (cap > SIZE_MAX / sizeof(double)) {
                    return -1;
                }
                double *w = realloc(p->weight, cap * sizeof(double));
                if (w == NULL) {
                    return -1;
                }
                p->weight = w;
                p->cap = cap;
            }
            if (column_push(&p->strings[P_QUERY], s->query.data, s->query.len) < 0
                    || column_push(&p->strings[P_PREFERRED], pref, pref_n) < 0
                    || column_push(&p->strings[P_OTHER], other, other_n) < 0
                    || column_push(&p->strings[P_SESSION], s->session.data, s->session.len) < 0) {
                return -1;
            }
            p->weight[p->n++] = s->weights[k - 1];
        }
    }
    return 0;
}

static int
close_session(State *s)
{
    if (!s->in_session) {
        return 0;
    }
    s->sessions++;
    if (s->want_pairs && session_pairs(s) < 0) {
        return -1;
    }
    return histogram_add(&s->histogram, s->shown, s->clicks, s->flagged, 1);
}

/* Checks the schema: a struct of the seven columns with the expected formats. 1: as
 * expected; 0: not. `wide` receives, per string column, whether its offsets are 64-bit. */
static int
schema_ok(const struct ArrowSchema *schema, int wide[4])
{
    static const char *fixed[3] = {"l", "i", "b"};
    if (schema->format == NULL || strcmp(schema->format, "+s") != 0
            || schema->n_children != N_COLUMNS || schema->children == NULL) {
        return 0;
    }
    for (int c = 0; c < N_COLUMNS; c++) {
        const struct ArrowSchema *child = schema->children[c];
        if (child == NULL || child->format == NULL || child->dictionary != NULL) {
            return 0;
        }
        if (c <= CHUNK) {
            if (strcmp(child->format, "u") == 0) {
                wide[c] = 0;
            }
            else if (strcmp(child->format, "U") == 0) {
                wide[c] = 1;
            }
            else {
                return 0;
            }
        }
        else if (strcmp(child->format, fixed[c - POSITION]) != 0) {
            return 0;
        }
    }
    return 1;
}

/* One batch. SETTLED: its rows fold into the state; NOT_MINE: give up; -1: out of memory. */
static int
scan_batch(State *s, const struct ArrowArray *batch, const int wide[4])
{
    if (batch->n_children != N_COLUMNS || batch->children == NULL || batch->length < 0) {
        return NOT_MINE;
    }
    int64_t n = batch->length;
    if (n == 0) {
        return SETTLED;
    }
    if (batch->null_count != 0 && batch->n_buffers >= 1 && batch->buffers[0] != NULL) {
        if (has_nulls(batch, 0)) {
            return NOT_MINE;
        }
    }
    Strings str[4];
    const int64_t *position = NULL;
    const int32_t *clicked = NULL;
    const uint8_t *randomized = NULL;
    int64_t pos_off = 0, clk_off = 0, rnd_off = 0;
    for (int c = 0; c < N_COLUMNS; c++) {
        const struct ArrowArray *a = batch->children[c];
        if (a == NULL || a->length < batch->offset + n || a->offset < 0
                || a->dictionary != NULL || has_nulls(a, 0)) {
            return NOT_MINE;
        }
        int64_t off = batch->offset + a->offset;
        if (c <= CHUNK) {
            if (a->n_buffers != 3 || a->buffers[1] == NULL
                    || (a->buffers[2] == NULL && a->length > 0)) {
                return NOT_MINE;
            }
            str[c].validity = a->buffers[0];
            str[c].off32 = wide[c] ? NULL : (const int32_t *)a->buffers[1];
            str[c].off64 = wide[c] ? (const int64_t *)a->buffers[1] : NULL;
            str[c].data = a->buffers[2];
            str[c].offset = off;
        }
        else {
            if (a->n_buffers != 2 || a->buffers[1] == NULL) {
                return NOT_MINE;
            }
            if (c == POSITION) {
                position = a->buffers[1];
                pos_off = off;
            }
            else if (c == CLICKED) {
                clicked = a->buffers[1];
                clk_off = off;
            }
            else {
                randomized = a->buffers[1];
                rnd_off = off;
            }
        }
    }
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p;
        size_t len;
        if (string_at(&str[SESSION], i, &p, &len) < 0) {
            return NOT_MINE;
        }
        if (!s->in_session || !same(&s->session, p, len)) {
            /* A new run: its id must sort above the last one, so no session is two runs. */
            if (s->in_session && compare(p, len, &s->session) <= 0) {
                return NOT_MINE;
            }
            if (close_session(s) < 0 || bytes_set(&s->session, p, len) < 0) {
                return -1;
            }
            const uint8_t *q, *r;
            size_t qn, rn;
            if (string_at(&str[QUERY], i, &q, &qn) < 0 || string_at(&str[RANKER], i, &r, &rn) < 0) {
                return NOT_MINE;
            }
            if (bytes_set(&s->query, q, qn) < 0 || bytes_set(&s->ranker, r, rn) < 0) {
                return -1;
            }
            s->in_session = 1;
            s->n_chunks = 0;
            s->chunks.len = 0;
            s->shown = s->clicks = s->flagged = 0;
        }
        else {
            const uint8_t *q, *r;
            size_t qn, rn;
            if (string_at(&str[QUERY], i, &q, &qn) < 0 || string_at(&str[RANKER], i, &r, &rn) < 0) {
                return NOT_MINE;
            }
            if (!same(&s->query, q, qn) || !same(&s->ranker, r, rn)) {
                return NOT_MINE;
            }
        }
        int64_t k = position[pos_off + i];
        if (k < 1 || k > 64) {
            return NOT_MINE;
        }
        uint64_t bit = UINT64_C(1) << (k - 1);
        if (s->shown & bit) {
            return NOT_MINE;
        }
        /* At most 64 rows reach here per session: each holds its own position of 1..64. */
        const uint8_t *d;
        size_t dn;
        if (string_at(&str[CHUNK], i, &d, &dn) < 0 || s->n_chunks >= 64) {
            return NOT_MINE;
        }
        uint64_t h = bytes_hash(d, dn);
        for (int j = 0; j < s->n_chunks; j++) {
            if (s->hashes[j] == h) {
                size_t start = j ? s->chunk_end[j - 1] : 0;
                size_t jn = s->chunk_end[j] - start;
                if (jn == dn && (dn == 0 || memcmp(s->chunks.data + start, d, dn) == 0)) {
                    return NOT_MINE;
                }
            }
        }
        if (bytes_reserve(&s->chunks, dn) < 0) {
            return -1;
        }
        if (dn) {
            memcpy(s->chunks.data + s->chunks.len, d, dn);
        }
        s->chunks.len += dn;
        s->hashes[s->n_chunks] = h;
        s->chunk_end[s->n_chunks] = s->chunks.len;
        s->row_at[k - 1] = s->n_chunks;
        s->n_chunks++;
        int32_t c = clicked[clk_off + i];
        if (c != 0 && c != 1) {
            return NOT_MINE;
        }
        int64_t j = rnd_off + i;
        int flag = (randomized[j >> 3] >> (j & 7)) & 1;
        s->shown |= bit;
        if (c) {
            s->clicks |= bit;
        }
        if (flag) {
            s->flagged |= bit;
        }
        s->rows++;
    }
    return SETTLED;
}

static void
state_free(State *s)
{
    free(s->session.data);
    free(s->query.data);
    free(s->ranker.data);
    free(s->chunks.data);
    histogram_free(&s->histogram);
    pairs_free(&s->pairs);
}

/* The pass over the whole stream. SETTLED, NOT_MINE or -1 (out of memory). */
static int
scan_stream(struct ArrowArrayStream *stream, State *s)
{
    struct ArrowSchema schema;
    memset(&schema, 0, sizeof schema);
    if (stream->get_schema(stream, &schema) != 0) {
        return NOT_MINE;
    }
    int wide[4] = {0, 0, 0, 0};
    int ok = schema_ok(&schema, wide);
    if (schema.release) {
        schema.release(&schema);
    }
    if (!ok) {
        return NOT_MINE;
    }
    for (;;) {
        struct ArrowArray batch;
        memset(&batch, 0, sizeof batch);
        if (stream->get_next(stream, &batch) != 0) {
            return NOT_MINE;
        }
        if (batch.release == NULL) {
            break;
        }
        int status = scan_batch(s, &batch, wide);
        batch.release(&batch);
        if (status != SETTLED) {
            return status;
        }
    }
    return close_session(s) < 0 ? -1 : SETTLED;
}

/* The pairs handed to DuckDB: the columns, shared by the Python object and every Arrow
 * stream and batch made from them (a consumer may release those on another thread, without
 * the GIL, so the count is atomic and no Python object is touched there). */
typedef struct {
    Pairs pairs;
    int64_t refs;
} Shared;

static void
shared_release(Shared *sh)
{
    if (sh != NULL && __atomic_sub_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        pairs_free(&sh->pairs);
        free(sh);
    }
}

static void
shared_keep(Shared *sh)
{
    __atomic_add_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL);
}

/* Rows per Arrow batch: DuckDB's vector size, so that each batch is one of its chunks. */
#define BATCH_ROWS 2048

static const char *const pair_names[5] = {"query_id", "preferred_chunk_id", "other_chunk_id",
                                          "weight", "session_id"};
/* The stream's columns in pair_names' order: the string column of each (-1: the weight). */
static const int pair_strings[5] = {P_QUERY, P_PREFERRED, P_OTHER, -1, P_SESSION};

static void
release_child_schema(struct ArrowSchema *schema)
{
    schema->release = NULL;
}

typedef struct {
    struct ArrowSchema children[5];
    struct ArrowSchema *pointers[5];
} SchemaBlock;

static void
release_schema(struct ArrowSchema *schema)
{
    SchemaBlock *block = schema->private_data;
    for (int c = 0; c < 5; c++) {
        if (block->children[c].release) {
            block->children[c].release(&block->children[c]);
        }
    }
    free(block);
    schema->release = NULL;
}

static int
fill_schema(struct ArrowSchema *out)
{
    SchemaBlock *block = calloc(1, sizeof *block);
    if (block == NULL) {
        return -1;
    }
    for (int c = 0; c < 5; c++) {
        struct ArrowSchema *child = &block->children[c];
        child->format = pair_strings[c] < 0 ? "g" : "U";
        child->name = pair_names[c];
        child->flags = 0;  /* no column holds a null (no validity buffer is given) */
        child->release = release_child_schema;
        block->pointers[c] = child;
    }
    memset(out, 0, sizeof *out);
    out->format = "+s";
    out->name = "";
    out->n_children = 5;
    out->children = block->pointers;
    out->release = release_schema;
    out->private_data = block;
    return 0;
}

/* A batch's column: its buffers' addresses and a hold on the shared columns. */
typedef struct {
    const void *buffers[3];
    Shared *shared;
} ChildPrivate;

static void
release_child_array(struct ArrowArray *array)
{
    ChildPrivate *child = array->private_data;
    shared_release(child->shared);
    free(child);
    array->release = NULL;
}

typedef struct {
    struct ArrowArray children[5];
    struct ArrowArray *pointers[5];
    const void *buffers[1];
} BatchBlock;

static void
release_batch(struct ArrowArray *array)
{
    BatchBlock *block = array->private_data;
    for (int c = 0; c < 5; c++) {
        if (block->children[c].release) {
            block->children[c].release(&block->children[c]);
        }
    }
    free(block);
    array->release = NULL;
}

typedef struct {
    Shared *shared;
    int64_t next;  /* the first row of the next batch */
    const char *error;
} StreamPrivate;

static int
stream_get_schema(struct ArrowArrayStream *stream, struct ArrowSchema *out)
{
    StreamPrivate *sp = stream->private_data;
    if (fill_schema(out) < 0) {
        sp->error = "out of memory";
        return 12; /* ENOMEM */
    }
    return 0;
}

static int
stream_get_next(struct ArrowArrayStream *stream, struct ArrowArray *out)
{
    StreamPrivate *sp = stream->private_data;
    const Pairs *p = &sp->shared->pairs;
    memset(out, 0, sizeof *out);
    if (sp->next >= (int64_t)p->n) {
        return 0;  /* the end: out->release stays NULL */
    }
    int64_t start = sp->next;
    int64_t length = (int64_t)p->n - start < BATCH_ROWS ? (int64_t)p->n - start : BATCH_ROWS;
    BatchBlock *block = calloc(1, sizeof *block);
    if (block == NULL) {
        sp->error = "out of memory";
        return 12;
    }
    for (int c = 0; c < 5; c++) {
        ChildPrivate *child = calloc(1, sizeof *child);
        if (child == NULL) {
            struct ArrowArray partial = {.private_data = block};
            release_batch(&partial);
            sp->error = "out of memory";
            return 12;
        }
        struct ArrowArray *a = &block->children[c];
        child->shared = sp->shared;
        shared_keep(sp->shared);
        if (pair_strings[c] < 0) {
            child->buffers[1] = p->weight;
            a->n_buffers = 2;
        }
        else {
            const StringColumn *col = &p->strings[pair_strings[c]];
            child->buffers[1] = col->offsets.data;
            child->buffers[2] = col->bytes.data ? (const void *)col->bytes.data : (const void *)"";
            a->n_buffers = 3;
        }
        a->length = length;
        a->offset = start;
        a->buffers = child->buffers;
        a->release = release_child_array;
        a->private_data = child;
        block->pointers[c] = a;
    }
    out->length = length;
    out->n_buffers = 1;
    out->buffers = block->buffers;
    out->n_children = 5;
    out->children = block->pointers;
    out->release = release_batch;
    out->private_data = block;
    sp->next = start + length;
    return 0;
}

static const char *
stream_last_error(struct ArrowArrayStream *stream)
{
    StreamPrivate *sp = stream->private_data;
    return sp ? sp->error : NULL;
}

static void
stream_release(struct ArrowArrayStream *stream)
{
    StreamPrivate *sp = stream->private_data;
    if (sp) {
        shared_release(sp->shared);
        free(sp);
    }
    stream->private_data = NULL;
    stream->release = NULL;
}

static void
capsule_release_stream(PyObject *capsule)
{
    struct ArrowArrayStream *stream = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (stream == NULL) {
        PyErr_Clear();
        return;
    }
    if (stream->release) {
        stream->release(stream);
    }
    free(stream);
}

/* The Python object: the pairs' columns, exported as Arrow C streams of BATCH_ROWS rows. */
typedef struct {
    PyObject_HEAD
    Shared *shared;
} PairsObject;

static void
pairs_dealloc(PairsObject *self)
{
    shared_release(self->shared);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
pairs_len(PairsObject *self)
{
    return (Py_ssize_t)self->shared->pairs.n;
}

static PyObject *
pairs_arrow_c_stream(PairsObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"requested_schema", NULL};
    PyObject *requested = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O", keywords, &requested)) {
        return NULL;
    }
    if (requested != Py_None) {
        PyErr_SetString(PyExc_NotImplementedError, "the pairs are exported in their own schema");
        return NULL;
    }
    struct ArrowArrayStream *stream = calloc(1, sizeof *stream);
    StreamPrivate *sp = calloc(1, sizeof *sp);
    if (stream == NULL || sp == NULL) {
        free(stream);
        free(sp);
        return PyErr_NoMemory();
    }
    sp->shared = self->shared;
    shared_keep(self->shared);
    stream->get_schema = stream_get_schema;
    stream->get_next = stream_get_next;
    stream->get_last_error = stream_last_error;
    stream->release = stream_release;
    stream->private_data = sp;
    PyObject *capsule = PyCapsule_New(stream, "arrow_array_stream", capsule_release_stream);
    if (capsule == NULL) {
        stream_release(stream);
        free(stream);
    }
    return capsule;
}

static PyMethodDef pairs_methods[] = {
    {"__arrow_c_stream__", (PyCFunction)(void (*)(void))pairs_arrow_c_stream,
     METH_VARARGS | METH_KEYWORDS,
     "__arrow_c_stream__(requested_schema=None): the pairs as an Arrow C stream capsule\n"
     "(query_id, preferred_chunk_id, other_chunk_id: large strings; weight: float64;\n"
     "session_id: large string), in batches of 2,048 rows."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods pairs_as_sequence = {
    .sq_length = (lenfunc)pairs_len,
};

static PyTypeObject PairsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "relgrade.clicks._log_scan.Pairs",
    .tp_basicsize = sizeof(PairsObject),
    .tp_dealloc = (destructor)pairs_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The skip-above pairs of a settled log (len: how many), read through "
              "__arrow_c_stream__.",
    .tp_methods = pairs_methods,
    .tp_as_sequence = &pairs_as_sequence,
};

PyDoc_STRVAR(check_sorted_doc,
"check_sorted(stream, weights=None) -> (status, rows, sessions, keys, counts, pairs)\n\n"
"Check a typed impression log stored sorted by session, from an Arrow C stream capsule\n"
"(columns session_id, query_id, ranker, chunk_id, position, clicked, randomized). status\n"
"SETTLED: the log breaks no rule; rows and sessions are its counts, keys (bytes of uint64,\n"
"three per pattern: shown, clicks, flagged) and counts (bytes of int64) the histogram of\n"
"its sessions' masks. status NOT_MINE: not settled here (the SQL check decides).\n"
"weights: bytes of 64 float64, the weight of a click at positions 1..64 (NaN: none); when\n"
"given and the log is settled, pairs is the log's skip-above pairs as a Pairs object, in\n"
"skip_above.sql's order; else None.");

static PyObject *
py_check_sorted(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *weights = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &capsule, &weights)) {
        return NULL;
    }
    if (!PyCapsule_IsValid(capsule, "arrow_array_stream")) {
        PyErr_SetString(PyExc_TypeError, "check_sorted needs an arrow_array_stream capsule");
        return NULL;
    }
    State s;
    memset(&s, 0, sizeof s);
    if (weights != Py_None) {
        Py_buffer view;
        if (PyObject_GetBuffer(weights, &view, PyBUF_SIMPLE) < 0) {
            return NULL;
        }
        if (view.len != (Py_ssize_t)sizeof s.weights) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_ValueError, "weights must be 64 float64 (512 bytes)");
            return NULL;
        }
        memcpy(s.weights, view.buf, sizeof s.weights);
        PyBuffer_Release(&view);
        s.want_pairs = 1;
    }
    struct ArrowArrayStream *owned = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (owned == NULL) {
        return NULL;
    }
    if (owned->release == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Arrow stream was already consumed");
        return NULL;
    }
    /* Move the stream out of the capsule (its destructor then leaves it alone). */
    struct ArrowArrayStream stream = *owned;
    owned->release = NULL;

    int status = histogram_init(&s.histogram, 1024) < 0 ? -1 : scan_stream(&stream, &s);
    stream.release(&stream);
    if (status < 0) {
        state_free(&s);
        return PyErr_NoMemory();
    }
    PyObject *keys, *counts, *pairs = Py_None;
    Py_INCREF(Py_None);
    if (status == SETTLED) {
        size_t n = s.histogram.used, at = 0;
        keys = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 3 * sizeof(uint64_t)));
        counts = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(int64_t)));
        if (keys == NULL || counts == NULL) {
            Py_XDECREF(keys);
            Py_XDECREF(counts);
            Py_DECREF(pairs);
            state_free(&s);
            return NULL;
        }
        uint64_t *k = (uint64_t *)PyBytes_AS_STRING(keys);
        int64_t *c = (int64_t *)PyBytes_AS_STRING(counts);
        for (size_t i = 0; i < s.histogram.cap && at < n; i++) {
            if (s.histogram.counts[i]) {
                memcpy(k + 3 * at, s.histogram.keys + 3 * i, 3 * sizeof(uint64_t));
                c[at] = s.histogram.counts[i];
                at++;
            }
        }
        if (s.want_pairs) {
            /* Every string column gets its leading offset even with no pair. */
            for (int col = 0; col < N_PAIR_STRINGS; col++) {
                if (s.pairs.strings[col].offsets.len == 0
                        && offsets_push(&s.pairs.strings[col].offsets, 0) < 0) {
                    Py_DECREF(keys);
                    Py_DECREF(counts);
                    Py_DECREF(pairs);
                    state_free(&s);
                    return PyErr_NoMemory();
                }
            }
            Shared *shared = calloc(1, sizeof *shared);
            PairsObject *obj = shared ? PyObject_New(PairsObject, &PairsType) : NULL;
            if (obj == NULL) {
                free(shared);
                Py_DECREF(keys);
                Py_DECREF(counts);
                Py_DECREF(pairs);
                state_free(&s);
                return shared ? NULL : PyErr_NoMemory();
            }
            shared->pairs = s.pairs;  /* moved: state_free leaves it alone */
            memset(&s.pairs, 0, sizeof s.pairs);
            shared->refs = 1;
            obj->shared = shared;
            Py_DECREF(pairs);
            pairs = (PyObject *)obj;
        }
    }
    else {
        s.rows = s.sessions = 0;
        keys = PyBytes_FromStringAndSize(NULL, 0);
        counts = PyBytes_FromStringAndSize(NULL, 0);
        if (keys == NULL || counts == NULL) {
            Py_XDECREF(keys);
            Py_XDECREF(counts);
            Py_DECREF(pairs);
            state_free(&s);
            return NULL;
        }
    }
    state_free(&s);
    return Py_BuildValue("(iLLNNN)", status, (long long)s.rows, (long long)s.sessions,
                         keys, counts, pairs);
}

static PyMethodDef methods[] = {
    {"check_sorted", py_check_sorted, METH_VARARGS, check_sorted_doc},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *module)
{
    if (PyModule_AddIntConstant(module, "SETTLED", SETTLED) < 0 ||
            PyModule_AddIntConstant(module, "NOT_MINE", NOT_MINE) < 0 ||
            PyModule_AddIntConstant(module, "BATCH_ROWS", BATCH_ROWS) < 0) {
        return -1;
    }
    if (PyType_Ready(&PairsType) < 0) {
        return -1;
    }
    Py_INCREF(&PairsType);
    if (PyModule_AddObject(module, "Pairs", (PyObject *)&PairsType) < 0) {
        Py_DECREF(&PairsType);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

PyDoc_STRVAR(module_doc,
"The compiled check of relgrade.clicks.log for an impression log stored sorted by session:\n"
"one pass over the typed log's Arrow stream that proves it clean and counts its sessions'\n"
"click patterns (and, given the weights, makes its skip-above pairs), or leaves it to the\n"
"SQL check.");

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "relgrade.clicks._log_scan",
    .m_doc = module_doc,
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__log_scan(void)
{
    return PyModuleDef_Init(&moduledef);
}
