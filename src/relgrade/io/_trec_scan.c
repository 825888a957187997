/*
 * relgrade.io._trec_scan: the compiled passes of relgrade.io.trec_scan.
 *
 * Six functions over numpy arrays (any object exporting a C-contiguous, one-dimensional
 * buffer of the stated item type):
 *
 *   scan(data, start, delim, qoff, qbytes, coff, cbytes, rank, score, slow, soff, sbytes,
 *        heads, counts) -> (status, position)
 *   hash_ids(cbytes, coff, out) -> None
 *   last_line_end(data, n) -> int
 *   repeated_in_blocks(chash, heads, n_rows) -> bool
 *   id_table(known_bytes, known_off, table) -> bool
 *   unknown_at(table, known_bytes, bytes, off, hashes, rows) -> int
 *
 * trec_scan.py documents what each computes; the comments here say how and why. Plain C99
 * and the CPython API: no LLVM or compiler at run time, so a process that scans a run loads
 * a few kilobytes of machine code instead of numba and its LLVM (about 120 MiB and
 * 0.5 CPU-s a process).
 *
 * Every index is checked against the length of the array it reads or writes. The caller
 * sizes the output arrays for the whole file (a line takes at least 12 bytes), so a row or
 * a byte that does not fit means the file grew while it was read: the scan then answers
 * FULL and the caller leaves the file to the reader, as it does for NOT_MINE. An argument
 * of the wrong type, shape or range raises TypeError or ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The scores' fast path relies on one correctly rounded IEEE double operation; flags that
 * allow reassociation, contraction into other operations or wider intermediates would
 * change the last bit of some scores, so refuse to build under them. */
#if defined(__FAST_MATH__)
#error "_trec_scan.c must not be built with -ffast-math: scores must be correctly rounded"
#endif
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "_trec_scan.c needs double arithmetic evaluated in double (FLT_EVAL_METHOD == 0)"
#endif

/* Outcomes of scan(); BAD_OFFSETS (the caller's qoff does not match its counts) becomes a
 * ValueError once the GIL is held again. */
enum { BAD_OFFSETS = -1, OK = 0, NOT_MINE = 1, FULL = 2 };
/* Positions in scan()'s counters array. */
enum { ROW = 0, NQ = 1, NC = 2, NHEADS = 3, NSLOW = 4, NS = 5, N_COUNTS = 6 };

/* ranking._text_hash's constants: splitmix64's multipliers. */
#define MIX1 UINT64_C(0xBF58476D1CE4E5B9)
#define MIX2 UINT64_C(0x94D049BB133111EB)
/* The largest integer below which every integer is exact in a double. */
#define TWO53 (UINT64_C(1) << 53)

/* 10^0 .. 10^22, every one exact in a double (Clinger 1990's fast path). */
static const double POW10[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* ---------------------------------------------------------------------------------------
 * Arguments: numpy arrays through the buffer protocol
 * ------------------------------------------------------------------------------------- */

/* The item types the functions take, with the struct-module codes a buffer may report for
 * them (numpy reports int64 as 'l' on LP64 systems and 'q' elsewhere). */
typedef struct {
    const char *codes;
    Py_ssize_t itemsize;
    const char *name;
} ItemType;

static const ItemType U8 = {"B", 1, "uint8"};
static const ItemType I64 = {"lq", 8, "int64"};
static const ItemType U64 = {"LQ", 8, "uint64"};
static const ItemType F64 = {"d", 8, "float64"};

/* Get a C-contiguous, one-dimensional buffer of `type` from `obj` (writable when asked).
 * On success the caller must PyBuffer_Release it. On failure a TypeError naming the
 * argument is set and -1 returned, with nothing to release. */
static int
get_array(PyObject *obj, Py_buffer *view, const ItemType *type, int writable,
          const char *arg)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: a C-contiguous%s array of %s is needed", arg,
                     writable ? ", writable" : "", type->name);
        return -1;
    }
    const char *f = view->format != NULL ? view->format : "B";
    if (f[0] == '@' || f[0] == '=') {  /* native byte order, spelt out */
        f++;
    }
    if (view->ndim != 1 || view->itemsize != type->itemsize || f[0] == '\0' ||
            f[1] != '\0' || strchr(type->codes, f[0]) == NULL) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s: a one-dimensional array of %s is needed", arg,
                     type->name);
        return -1;
    }
    /* reading an int64_t or a double through a misaligned pointer is undefined behaviour
     * (numpy can make such views, from a buffer at an odd offset) */
    if ((uintptr_t)view->buf % (uintptr_t)type->itemsize != 0) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s: an aligned array of %s is needed", arg,
                     type->name);
        return -1;
    }
    return 0;
}

/* The number of items in a buffer got by get_array. */
static inline Py_ssize_t
length(const Py_buffer *view)
{
    return view->len / view->itemsize;
}

/* A byte that may stand inside a field the scan accepts: printable ASCII, 0x21-0x7E. Never
 * a separator (space, tab), a line end, another control byte or a non-ASCII byte: a file
 * with one is left to the reader. */
static inline int
printable(uint8_t b)
{
    return (uint8_t)(b - 0x21) <= 0x7E - 0x21;
}

static inline int
is_digit(uint8_t b)
{
    return (uint8_t)(b - '0') <= 9;
}

/* ---------------------------------------------------------------------------------------
 * scan
 * ------------------------------------------------------------------------------------- */

/* The scan's arrays, as raw pointers with their lengths (in items). */
typedef struct {
    const uint8_t *data;
    Py_ssize_t n;
    int64_t *qoff, *coff, *rank, *slow, *soff, *heads;
    uint8_t *qbytes, *cbytes, *sbytes;
    double *score;
    Py_ssize_t qoff_len, coff_len, rank_len, score_len, slow_len, soff_len, heads_len;
    Py_ssize_t qbytes_len, cbytes_len, sbytes_len;
} Scan;

/* The end of the field starting at `p`: the first byte at or after `p` that is not
 * printable (n when every byte to the end is). */
static inline Py_ssize_t
field_end(const uint8_t *data, Py_ssize_t p, Py_ssize_t n)
{
    while (p < n && printable(data[p])) {
        p++;
    }
    return p;
}

/* Split, parse and code the whole lines of data[start:n], resuming from the counters in
 * `c` (advanced on OK only). Returns OK, NOT_MINE (a line the scan does not accept; *pos
 * is where it gave up), FULL (an output array has no room: the file grew while read) or
 * BAD_OFFSETS. Runs without the GIL: it touches no Python object and sets no exception. */
static int
scan_lines(const Scan *s, Py_ssize_t start, uint8_t delim, int64_t c[N_COUNTS],
           Py_ssize_t *pos)
{
    const uint8_t *data = s->data;
    const Py_ssize_t n = s->n;
    Py_ssize_t p = start;
    int64_t row = c[ROW], nq = c[NQ], nc = c[NC], nheads = c[NHEADS], nslow = c[NSLOW],
            ns = c[NS];
    /* rows that fit every per-row array: rank, score, and the offsets' row + 1 */
    Py_ssize_t row_cap = s->rank_len;
    if (s->score_len < row_cap) row_cap = s->score_len;
    if (s->qoff_len - 1 < row_cap) row_cap = s->qoff_len - 1;
    if (s->coff_len - 1 < row_cap) row_cap = s->coff_len - 1;
    Py_ssize_t slow_cap = s->slow_len < s->soff_len - 1 ? s->slow_len : s->soff_len - 1;
    int status = OK;

#define GIVE_UP(st) do { status = (st); goto done; } while (0)

    while (p < n) {
        if (row >= row_cap) GIVE_UP(FULL);
        /* --- field 1: query id */
        const int64_t q0 = nq;
        Py_ssize_t e = field_end(data, p, n);
        if (e >= n || data[e] != delim) {  /* another byte, or the data's end */
            p = e;
            GIVE_UP(NOT_MINE);
        }
        if (e == p) GIVE_UP(NOT_MINE);  /* empty field */
        if (e - p > s->qbytes_len - nq) GIVE_UP(FULL);
        memcpy(s->qbytes + nq, data + p, (size_t)(e - p));
        nq += e - p;
        p = e + 1;
        s->qoff[row + 1] = nq;
        /* a new block of equal query ids? The previous row's id is
         * qbytes[qoff[row - 1]:q0]; qoff[row - 1] was written by this function or, for
         * row 1, is the caller's qoff[0]: checked, so a wrong offset cannot read outside. */
        int same = 0;
        if (row > 0) {
            const int64_t prev = s->qoff[row - 1];
            if (prev < 0 || prev > q0) GIVE_UP(BAD_OFFSETS);
            same = nq - q0 == q0 - prev &&
                   memcmp(s->qbytes + q0, s->qbytes + prev, (size_t)(nq - q0)) == 0;
        }
        if (!same) {
            if (nheads >= s->heads_len) GIVE_UP(FULL);
            s->heads[nheads++] = row;
        }
        /* --- field 2: Q0 (read, checked, dropped) */
        e = field_end(data, p, n);
        if (e >= n || data[e] != delim) {
            p = e;
            GIVE_UP(NOT_MINE);
        }
        if (e == p) GIVE_UP(NOT_MINE);
        p = e + 1;
        /* --- field 3: chunk id */
        e = field_end(data, p, n);
        if (e >= n || data[e] != delim) {
            p = e;
            GIVE_UP(NOT_MINE);
        }
        if (e == p) GIVE_UP(NOT_MINE);
        if (e - p > s->cbytes_len - nc) GIVE_UP(FULL);
        memcpy(s->cbytes + nc, data + p, (size_t)(e - p));
        nc += e - p;
        p = e + 1;
        s->coff[row + 1] = nc;
        /* --- field 4: rank, -?[0-9]{1,18}. Eighteen digits always fit an int64, so digits
         * past the 18th are not accumulated (the line is refused for them anyway). */
        int neg = 0;
        if (p < n && data[p] == '-') {
            neg = 1;
            p++;
        }
        Py_ssize_t f = p;
        int64_t r = 0;
        while (p < n && is_digit(data[p])) {
            if (p - f < 18) {
                r = r * 10 + (data[p] - '0');
            }
            p++;
        }
        if (p == f || p - f > 18 || p >= n || data[p] != delim) GIVE_UP(NOT_MINE);
        s->rank[row] = neg ? -r : r;
        p++;
        /* --- field 5: score, -?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?
         * m: its first 19 significant digits (at most 10^19 - 1 < 2^64); exp10: the decimal
         * exponent of m's last digit; dropped: a nonzero digit beyond those 19. */
        const Py_ssize_t s0 = p;
        neg = 0;
        if (p < n && data[p] == '-') {
            neg = 1;
            p++;
        }
        uint64_t m = 0;
        int digits = 0;
        int dropped = 0;
        int64_t exp10 = 0;  /* bounded by the data's length, plus an exponent < 10^6 */
        f = p;
        while (p < n && is_digit(data[p])) {
            const unsigned d = data[p] - '0';
            if (digits < 19) {
                if (digits > 0 || d != 0) {  /* leading zeros are not significant */
                    m = m * 10 + d;
                    digits++;
                }
            } else {
                exp10++;
                if (d != 0) dropped = 1;
            }
            p++;
        }
        if (p == f) GIVE_UP(NOT_MINE);
        if (p < n && data[p] == '.') {
            p++;
            f = p;
            while (p < n && is_digit(data[p])) {
                const unsigned d = data[p] - '0';
                if (digits < 19) {
                    if (digits > 0 || d != 0) {
                        m = m * 10 + d;
                        digits++;
                    }
                    exp10--;
                } else if (d != 0) {
                    dropped = 1;
                }
                p++;
            }
            if (p == f) GIVE_UP(NOT_MINE);
        }
        if (p < n && (data[p] == 'e' || data[p] == 'E')) {
            p++;
            int eneg = 0;
            if (p < n && (data[p] == '+' || data[p] == '-')) {
                eneg = data[p] == '-';
                p++;
            }
            f = p;
            int64_t x = 0;
            while (p < n && is_digit(data[p])) {
                if (x < 100000) {  /* past 10^5 the value is decided anyway: saturate */
                    x = x * 10 + (data[p] - '0');
                }
                p++;
            }
            if (p == f) GIVE_UP(NOT_MINE);
            exp10 += eneg ? -x : x;
        }
        if (p >= n || data[p] != delim) GIVE_UP(NOT_MINE);
        p++;
        if (m == 0 && !dropped) {
            s->score[row] = neg ? -0.0 : 0.0;
        } else if (!dropped && m <= TWO53 && exp10 >= -22 && exp10 <= 22) {
            /* both operands exact, one correctly rounded operation: the nearest double */
            double v = (double)m;
            v = exp10 < 0 ? v / POW10[-exp10] : v * POW10[exp10];
            s->score[row] = neg ? -v : v;
        } else {
            /* outside the fast path: the text is copied for Python's float() */
            const Py_ssize_t len = p - 1 - s0;
            if (nslow >= slow_cap || len > s->sbytes_len - ns) GIVE_UP(FULL);
            s->score[row] = NAN;
            s->slow[nslow] = row;
            memcpy(s->sbytes + ns, data + s0, (size_t)len);
            ns += len;
            nslow++;
            s->soff[nslow] = ns;
        }
        /* --- field 6: tag; then the line's end (LF, CRLF, or the data's end) */
        f = p;
        while (p < n && data[p] != '\n') {
            const uint8_t b = data[p];
            if (b == '\r' && p + 1 < n && data[p + 1] == '\n') break;
            if (!printable(b)) GIVE_UP(NOT_MINE);
            p++;
        }
        if (p == f) GIVE_UP(NOT_MINE);
        if (p < n && data[p] == '\r') p++;
        p++;
        row++;
    }
#undef GIVE_UP
    c[ROW] = row;
    c[NQ] = nq;
    c[NC] = nc;
    c[NHEADS] = nheads;
    c[NSLOW] = nslow;
    c[NS] = ns;
done:
    *pos = p;
    return status;
}

PyDoc_STRVAR(scan_doc,
"scan(data, start, delim, qoff, qbytes, coff, cbytes, rank, score, slow, soff, sbytes,\n"
"     heads, counts) -> (status, position)\n\n"
"Split, parse and code the whole lines of a TREC run held in data[start:] (uint8).\n"
"Resumable: counts (int64, 6) holds rows, query-id bytes, chunk-id bytes, heads, slow\n"
"rows and slow-score bytes written so far, and is advanced on OK. Returns OK, NOT_MINE\n"
"(a line the scan does not accept) or FULL (an output array has no room), and the offset\n"
"in data where the scan stopped. qoff/coff (int64, n_rows + 1; [0] set by the caller) and\n"
"qbytes/cbytes (uint8): the ids in Arrow's string layout; rank int64; score float64, NaN\n"
"on the slow rows (int64), whose score text is copied to sbytes (offsets soff, int64);\n"
"heads (int64): the rows whose query id differs from the row before.");

static PyObject *
py_scan(PyObject *self, PyObject *args)
{
    PyObject *o_data, *o_qoff, *o_qbytes, *o_coff, *o_cbytes, *o_rank, *o_score, *o_slow,
             *o_soff, *o_sbytes, *o_heads, *o_counts;
    Py_ssize_t start;
    int delim;
    if (!PyArg_ParseTuple(args, "OniOOOOOOOOOOO:scan", &o_data, &start, &delim, &o_qoff,
                          &o_qbytes, &o_coff, &o_cbytes, &o_rank, &o_score, &o_slow,
                          &o_soff, &o_sbytes, &o_heads, &o_counts)) {
        return NULL;
    }
    /* a field is a run of printable bytes, so the separator must not be one of them */
    if (delim < 0 || delim > 255 || printable((uint8_t)delim)) {
        return PyErr_Format(PyExc_ValueError,
                            "scan: delim must be a byte outside 0x21-0x7E, not %d", delim);
    }
    /* views[i] is released on every path out once got[i] is set */
    enum { DATA, QOFF, QBYTES, COFF, CBYTES, RANK, SCORE, SLOW, SOFF, SBYTES, HEADS, COUNTS,
           N_ARGS };
    struct { PyObject *obj; const ItemType *type; int writable; const char *name; } spec[] = {
        {o_data, &U8, 0, "data"}, {o_qoff, &I64, 1, "qoff"}, {o_qbytes, &U8, 1, "qbytes"},
        {o_coff, &I64, 1, "coff"}, {o_cbytes, &U8, 1, "cbytes"}, {o_rank, &I64, 1, "rank"},
        {o_score, &F64, 1, "score"}, {o_slow, &I64, 1, "slow"}, {o_soff, &I64, 1, "soff"},
        {o_sbytes, &U8, 1, "sbytes"}, {o_heads, &I64, 1, "heads"},
        {o_counts, &I64, 1, "counts"},
    };
    Py_buffer views[N_ARGS];
    int got = 0;
    PyObject *result = NULL;
    for (; got < N_ARGS; got++) {
        if (get_array(spec[got].obj, &views[got], spec[got].type, spec[got].writable,
                      spec[got].name) < 0) {
            goto release;
        }
    }
    Scan s = {
        .data = views[DATA].buf, .n = length(&views[DATA]),
        .qoff = views[QOFF].buf, .qoff_len = length(&views[QOFF]),
        .qbytes = views[QBYTES].buf, .qbytes_len = length(&views[QBYTES]),
        .coff = views[COFF].buf, .coff_len = length(&views[COFF]),
        .cbytes = views[CBYTES].buf, .cbytes_len = length(&views[CBYTES]),
        .rank = views[RANK].buf, .rank_len = length(&views[RANK]),
        .score = views[SCORE].buf, .score_len = length(&views[SCORE]),
        .slow = views[SLOW].buf, .slow_len = length(&views[SLOW]),
        .soff = views[SOFF].buf, .soff_len = length(&views[SOFF]),
        .sbytes = views[SBYTES].buf, .sbytes_len = length(&views[SBYTES]),
        .heads = views[HEADS].buf, .heads_len = length(&views[HEADS]),
    };
    int64_t *counts = views[COUNTS].buf;
    if (length(&views[COUNTS]) != N_COUNTS) {
        PyErr_SetString(PyExc_ValueError, "scan: counts must hold 6 items");
        goto release;
    }
    if (start < 0 || start > s.n) {
        PyErr_Format(PyExc_ValueError, "scan: start %zd is outside the data (%zd bytes)",
                     start, s.n);
        goto release;
    }
    /* the counters index the arrays: each must lie within the array it counts into (the
     * offsets at [row] are read as the previous row's end) */
    if (counts[ROW] < 0 || counts[ROW] >= s.qoff_len || counts[ROW] >= s.coff_len ||
            counts[NQ] < 0 || counts[NQ] > s.qbytes_len ||
            counts[NC] < 0 || counts[NC] > s.cbytes_len ||
            counts[NHEADS] < 0 || counts[NHEADS] > s.heads_len ||
            counts[NSLOW] < 0 || counts[NSLOW] >= s.soff_len ||
            counts[NS] < 0 || counts[NS] > s.sbytes_len) {
        PyErr_SetString(PyExc_ValueError, "scan: counts lie outside the output arrays");
        goto release;
    }
    /* the counters are copied so that a refusal leaves the caller's untouched */
    int64_t c[N_COUNTS];
    memcpy(c, counts, sizeof c);
    Py_ssize_t pos = start;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scan_lines(&s, start, (uint8_t)delim, c, &pos);
    Py_END_ALLOW_THREADS
    if (status == BAD_OFFSETS) {
        PyErr_SetString(PyExc_ValueError, "scan: qoff does not match counts (an offset "
                        "out of order)");
        goto release;
    }
    if (status == OK) {
        memcpy(counts, c, sizeof c);
    }
    result = Py_BuildValue("(in)", status, pos);
release:
    while (got-- > 0) {
        PyBuffer_Release(&views[got]);
    }
    return result;
}

/* ---------------------------------------------------------------------------------------
 * hash_ids
 * ------------------------------------------------------------------------------------- */

/* Eight bytes as a little-endian word, whatever the host's byte order and alignment (the
 * compiler turns this into one load on a little-endian machine). */
static inline uint64_t
load_le64(const uint8_t *b)
{
    return (uint64_t)b[0] | ((uint64_t)b[1] << 8) | ((uint64_t)b[2] << 16) |
           ((uint64_t)b[3] << 24) | ((uint64_t)b[4] << 32) | ((uint64_t)b[5] << 40) |
           ((uint64_t)b[6] << 48) | ((uint64_t)b[7] << 56);
}

/* ranking._text_hash of the bytes b[0:len] (unsigned arithmetic wraps modulo 2^64, which is
 * the hash's arithmetic). */
static inline uint64_t
text_hash(const uint8_t *b, int64_t len)
{
    uint64_t h = (uint64_t)len;
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        h = (h ^ load_le64(b + i)) * MIX1;
    }
    if (i < len) {  /* the last word, zero-padded */
        uint64_t w = 0;
        for (unsigned sh = 0; i < len; i++, sh += 8) {
            w |= (uint64_t)b[i] << sh;
        }
        h = (h ^ w) * MIX1;
    }
    /* splitmix64's finaliser */
    h ^= h >> 30;
    h *= MIX1;
    h ^= h >> 27;
    h *= MIX2;
    return h ^ (h >> 31);
}

PyDoc_STRVAR(hash_ids_doc,
"hash_ids(cbytes, coff, out) -> None\n\n"
"ranking._text_hash of each string cbytes[coff[r]:coff[r + 1]] into out[r] (uint64):\n"
"h starts at the length; for each 8-byte little-endian word (the last one zero-padded)\n"
"h = (h ^ word) * MIX1; then splitmix64's finaliser. coff (int64) holds len(out) + 1\n"
"offsets, non-decreasing, within cbytes (uint8); ValueError otherwise.");

static PyObject *
py_hash_ids(PyObject *self, PyObject *args)
{
    PyObject *o_cbytes, *o_coff, *o_out;
    if (!PyArg_ParseTuple(args, "OOO:hash_ids", &o_cbytes, &o_coff, &o_out)) {
        return NULL;
    }
    Py_buffer vb, vo, vh;
    if (get_array(o_cbytes, &vb, &U8, 0, "cbytes") < 0) {
        return NULL;
    }
    if (get_array(o_coff, &vo, &I64, 0, "coff") < 0) {
        PyBuffer_Release(&vb);
        return NULL;
    }
    if (get_array(o_out, &vh, &U64, 1, "out") < 0) {
        PyBuffer_Release(&vo);
        PyBuffer_Release(&vb);
        return NULL;
    }
    const uint8_t *bytes = vb.buf;
    const int64_t *off = vo.buf;
    uint64_t *out = vh.buf;
    const Py_ssize_t n_bytes = length(&vb), rows = length(&vh);
    int bad = length(&vo) < rows + 1;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        /* the offsets are checked as they are read: each string lies within cbytes */
        for (Py_ssize_t r = 0; r < rows; r++) {
            const int64_t f = off[r], e = off[r + 1];
            if (f < 0 || e < f || e > n_bytes) {
                bad = 1;
                break;
            }
            out[r] = text_hash(bytes + f, e - f);
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&vh);
    PyBuffer_Release(&vo);
    PyBuffer_Release(&vb);
    if (bad) {
        PyErr_SetString(PyExc_ValueError,
                        "hash_ids: coff must hold len(out) + 1 non-decreasing offsets "
                        "within cbytes");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------
 * last_line_end
 * ------------------------------------------------------------------------------------- */

PyDoc_STRVAR(last_line_end_doc,
"last_line_end(data, n) -> int\n\n"
"The offset of the last LF in data[:n] (uint8), -1 when there is none; 0 <= n <= len(data).");

static PyObject *
py_last_line_end(PyObject *self, PyObject *args)
{
    PyObject *o_data;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On:last_line_end", &o_data, &n)) {
        return NULL;
    }
    Py_buffer v;
    if (get_array(o_data, &v, &U8, 0, "data") < 0) {
        return NULL;
    }
    if (n < 0 || n > length(&v)) {
        PyBuffer_Release(&v);
        return PyErr_Format(PyExc_ValueError, "last_line_end: n %zd is outside the data "
                            "(%zd bytes)", n, length(&v));
    }
    const uint8_t *data = v.buf;
    Py_ssize_t i = n - 1;
    while (i >= 0 && data[i] != '\n') {
        i--;
    }
    PyBuffer_Release(&v);
    return PyLong_FromSsize_t(i);
}

/* ---------------------------------------------------------------------------------------
 * repeated_in_blocks
 * ------------------------------------------------------------------------------------- */

/* Whether some block of rows holds one hash twice. The blocks, heads[b] to heads[b + 1]
 * (the last to n_rows), are checked valid by the caller. One open-addressing table sized
 * for the longest block (a power of two at least twice its length, so at most half full
 * and every probe sequence ends at an empty or foreign slot) is reused for every block: a
 * slot holds a hash and the block that wrote it, so nothing is cleared between blocks.
 * Returns 1, 0, or -1 when the table cannot be allocated. */
static int
repeated(const uint64_t *chash, const int64_t *heads, Py_ssize_t n_heads, int64_t n_rows)
{
    int64_t longest = 1;
    for (Py_ssize_t b = 0; b < n_heads; b++) {
        const int64_t hi = b + 1 < n_heads ? heads[b + 1] : n_rows;
        if (hi - heads[b] > longest) longest = hi - heads[b];
    }
    uint64_t size = 1;
    while (size < 2 * (uint64_t)longest) {
        size *= 2;
    }
    if (size > PY_SSIZE_T_MAX / sizeof(uint64_t)) {
        return -1;
    }
    uint64_t *keys = PyMem_RawMalloc((size_t)size * sizeof(uint64_t));
    int64_t *owner = PyMem_RawMalloc((size_t)size * sizeof(int64_t));
    if (keys == NULL || owner == NULL) {
        PyMem_RawFree(keys);
        PyMem_RawFree(owner);
        return -1;
    }
    for (uint64_t i = 0; i < size; i++) {
        owner[i] = -1;
    }
    const uint64_t mask = size - 1;
    int found = 0;
    for (Py_ssize_t b = 0; b < n_heads && !found; b++) {
        const int64_t hi = b + 1 < n_heads ? heads[b + 1] : n_rows;
        for (int64_t r = heads[b]; r < hi; r++) {
            const uint64_t h = chash[r];
            uint64_t slot = h & mask;
            while (owner[slot] == b) {
                if (keys[slot] == h) {
                    found = 1;
                    break;
                }
                slot = (slot + 1) & mask;
            }
            if (found) break;
            owner[slot] = b;
            keys[slot] = h;
        }
    }
    PyMem_RawFree(keys);
    PyMem_RawFree(owner);
    return found;
}

PyDoc_STRVAR(repeated_in_blocks_doc,
"repeated_in_blocks(chash, heads, n_rows) -> bool\n\n"
"Whether some block of rows (heads, int64: each block's first row, increasing from 0,\n"
"the last block ending at n_rows) holds one chunk hash (chash, uint64) twice: when every\n"
"query id forms one block, False proves no chunk is listed twice for one query.");

static PyObject *
py_repeated_in_blocks(PyObject *self, PyObject *args)
{
    PyObject *o_chash, *o_heads;
    Py_ssize_t n_rows;
    if (!PyArg_ParseTuple(args, "OOn:repeated_in_blocks", &o_chash, &o_heads, &n_rows)) {
        return NULL;
    }
    Py_buffer vc, vh;
    if (get_array(o_chash, &vc, &U64, 0, "chash") < 0) {
        return NULL;
    }
    if (get_array(o_heads, &vh, &I64, 0, "heads") < 0) {
        PyBuffer_Release(&vc);
        return NULL;
    }
    const int64_t *heads = vh.buf;
    const Py_ssize_t n_heads = length(&vh);
    /* every row read, chash[heads[0]] .. chash[n_rows - 1], must exist, and the blocks
     * must follow one another */
    int ok = n_rows >= 0 && n_rows <= length(&vc) && (n_heads == 0 || heads[0] >= 0);
    for (Py_ssize_t b = 0; ok && b < n_heads; b++) {
        const int64_t hi = b + 1 < n_heads ? heads[b + 1] : n_rows;
        ok = heads[b] <= hi;
    }
    int found = 0;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        found = repeated(vc.buf, heads, n_heads, n_rows);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&vh);
    PyBuffer_Release(&vc);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "repeated_in_blocks: heads must be non-decreasing "
                        "rows from 0 to at most n_rows <= len(chash)");
        return NULL;
    }
    if (found < 0) {
        return PyErr_NoMemory();
    }
    return PyBool_FromLong(found);
}

/* ---------------------------------------------------------------------------------------
 * id_table, unknown_at: exact membership of ids in a set of known ids
 * ------------------------------------------------------------------------------------- */

/* The table is an open-addressing hash table with linear probing, held in a caller's uint64
 * array of 2 * size items (size a power of two larger than the number of ids, so at least
 * one slot stays empty and every probe sequence ends): slot s is table[2s] (the id's
 * text_hash) and table[2s + 1] (a reference to the id's bytes: ((start + 1) << 24) | length,
 * 0 for an empty slot). The reference holds the bytes' place itself, so a probe that finds
 * its hash compares the bytes with one more memory access, not two (offsets, then bytes).
 * An id of 2^24 bytes or more, or bytes past 2^40 - 1, cannot be referenced: id_table then
 * answers False and the caller checks another way. */
#define REF_LEN_BITS 24
#define REF_MAX_LEN ((UINT64_C(1) << REF_LEN_BITS) - 1)
#define REF_MAX_START ((UINT64_C(1) << (64 - REF_LEN_BITS)) - 2)

/* A table of short ids (every known id at most SHORT_MAX bytes) holds each id itself, not a
 * reference: slot s is table[2s] (the id's bytes 0-7, little-endian, zero-padded) and
 * table[2s + 1] (its bytes 8-14 above its length + 1 in the low byte: never 0, so 0 still
 * marks an empty slot). A probe then compares two words in the slot it has already
 * loaded, with no second cache miss into the known bytes (the chunk ids of a corpus are
 * usually that short). */
#define SHORT_MAX 15

/* An id of at most SHORT_MAX bytes as the two words a short table holds. */
static inline void
short_words(const uint8_t *b, int64_t len, uint64_t *w0, uint64_t *w1)
{
    uint8_t pad[16] = {0};
    memcpy(pad, b, (size_t)len);
    *w0 = load_le64(pad);
    *w1 = (load_le64(pad + 8) << 8) | (uint64_t)(len + 1);
}

/* The table's size in slots, or 0 when its length is not 2 * a power of two. */
static uint64_t
table_slots(Py_ssize_t items)
{
    if (items < 2 || items % 2 != 0) {
        return 0;
    }
    const uint64_t size = (uint64_t)items / 2;
    return (size & (size - 1)) == 0 ? size : 0;
}

/* How many ids or rows ahead id_table and unknown_at ask for the table slot they will
 * touch (each is a cache miss; several in flight overlap). */
#define PREFETCH_AHEAD 16

static inline void
prefetch(const void *p)
{
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
}

/* The hash of id r, bytes[off[r]:off[r + 1]], into *h: 1, 0 when it cannot be referenced
 * (too long, or starting too far), -1 on bad offsets. */
static inline int
known_id_hash(const uint8_t *bytes, Py_ssize_t n_bytes, const int64_t *off, Py_ssize_t r,
              uint64_t *h)
{
    const int64_t f = off[r], e = off[r + 1];
    if (f < 0 || e < f || e > n_bytes) {
        return -1;
    }
    if ((uint64_t)(e - f) > REF_MAX_LEN || (uint64_t)f > REF_MAX_START) {
        return 0;
    }
    *h = text_hash(bytes + f, e - f);
    return 1;
}

/* Insert ids r = 0 .. n - 1 (bytes[off[r]:off[r + 1]]) into a zeroed table of `size`
 * slots, size > n. Each id is hashed PREFETCH_AHEAD ids before it is inserted (its hash
 * waits in a ring), so its slot is on its way to the cache by then. Returns 1, 0 when an
 * id cannot be referenced, -1 on bad offsets. */
static int
fill_table(uint64_t *table, uint64_t size, const uint8_t *bytes, Py_ssize_t n_bytes,
           const int64_t *off, Py_ssize_t n, int short_ids)
{
    const uint64_t mask = size - 1;
    uint64_t ring[PREFETCH_AHEAD];
    for (Py_ssize_t r = 0; r < n && r < PREFETCH_AHEAD; r++) {
        const int ok = known_id_hash(bytes, n_bytes, off, r, &ring[r]);
        if (ok <= 0) {
            return ok;
        }
        prefetch(table + 2 * (ring[r] & mask));
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        const uint64_t h = ring[r % PREFETCH_AHEAD];
        const Py_ssize_t next = r + PREFETCH_AHEAD;
        if (next < n) {
            uint64_t *slot_of_next = &ring[next % PREFETCH_AHEAD];
            const int ok = known_id_hash(bytes, n_bytes, off, next, slot_of_next);
            if (ok <= 0) {
                return ok;
            }
            prefetch(table + 2 * (*slot_of_next & mask));
        }
        /* off[r], off[r + 1] were checked when id r was hashed */
        const int64_t f = off[r], e = off[r + 1];
        uint64_t slot = h & mask;
        uint64_t w0 = h, w1 = (((uint64_t)f + 1) << REF_LEN_BITS) | (uint64_t)(e - f);
        if (short_ids) {
            if (e - f > SHORT_MAX) {
                return 0;
            }
            short_words(bytes + f, e - f, &w0, &w1);
        }
        while (table[2 * slot + 1] != 0) {  /* ends: fewer ids than slots */
            slot = (slot + 1) & mask;
        }
        table[2 * slot] = w0;
        table[2 * slot + 1] = w1;
    }
    return 1;
}

PyDoc_STRVAR(id_table_doc,
"id_table(known_bytes, known_off, table, short=False) -> bool\n\n"
"Fill table (uint64, 2 * size items, size a power of two > len(known_off) - 1) with the\n"
"ids known_bytes[known_off[r]:known_off[r + 1]] (uint8; int64 offsets, non-decreasing,\n"
"within known_bytes), keyed by their text_hash (hash_ids' hash). False (and the table\n"
"unusable) when an id is 2^24 bytes or longer or starts past 2^40 - 2; ValueError for\n"
"bad offsets or a table of the wrong size. With short true, each slot holds its id's\n"
"bytes themselves (False when an id is longer than 15 bytes): unknown_at must then be\n"
"told short too.");

static PyObject *
py_id_table(PyObject *self, PyObject *args)
{
    PyObject *o_bytes, *o_off, *o_table;
    int short_ids = 0;
    if (!PyArg_ParseTuple(args, "OOO|p:id_table", &o_bytes, &o_off, &o_table, &short_ids)) {
        return NULL;
    }
    Py_buffer vb, vo, vt;
    if (get_array(o_bytes, &vb, &U8, 0, "known_bytes") < 0) {
        return NULL;
    }
    if (get_array(o_off, &vo, &I64, 0, "known_off") < 0) {
        PyBuffer_Release(&vb);
        return NULL;
    }
    if (get_array(o_table, &vt, &U64, 1, "table") < 0) {
        PyBuffer_Release(&vo);
        PyBuffer_Release(&vb);
        return NULL;
    }
    const Py_ssize_t n = length(&vo) - 1;
    const uint64_t size = table_slots(length(&vt));
    int status = -2;  /* the table's size */
    if (n >= 0 && size > (uint64_t)n) {
        uint64_t *table = vt.buf;
        Py_BEGIN_ALLOW_THREADS
        memset(table, 0, (size_t)vt.len);
        status = fill_table(table, size, vb.buf, length(&vb), vo.buf, n, short_ids);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&vt);
    PyBuffer_Release(&vo);
    PyBuffer_Release(&vb);
    if (status == -2) {
        PyErr_SetString(PyExc_ValueError, "id_table: known_off must hold at least one offset "
                        "and table 2 * size items, size a power of two above the ids' count");
        return NULL;
    }
    if (status == -1) {
        PyErr_SetString(PyExc_ValueError, "id_table: known_off must hold non-decreasing "
                        "offsets within known_bytes");
        return NULL;
    }
    return PyBool_FromLong(status);
}

/* Whether the id bytes[f:e] (hash h) is in the table. The reference is checked against
 * the known bytes' length before they are read (the table is a caller's array). Returns
 * 1, 0, or -1 for a reference outside known_bytes. */
static inline int
in_table(const uint64_t *table, uint64_t mask, const uint8_t *known, Py_ssize_t n_known,
         const uint8_t *id, int64_t len, uint64_t h)
{
    uint64_t slot = h & mask;
    /* at most size probes: a table filled by someone else may have no empty slot */
    for (uint64_t tries = 0; tries <= mask; tries++, slot = (slot + 1) & mask) {
        const uint64_t ref = table[2 * slot + 1];
        if (ref == 0) {
            return 0;
        }
        if (table[2 * slot] != h || (int64_t)(ref & REF_MAX_LEN) != len) {
            continue;
        }
        const uint64_t start = (ref >> REF_LEN_BITS) - 1;
        if (start > (uint64_t)n_known || (uint64_t)len > (uint64_t)n_known - start) {
            return -1;
        }
        if (memcmp(known + start, id, (size_t)len) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Whether the id id[0:len] (hash h) is in a short table (see SHORT_MAX): its two words
 * against each slot's, no known bytes read. An id longer than SHORT_MAX is in no short
 * table. Returns 1 or 0. */
static inline int
in_short_table(const uint64_t *table, uint64_t mask, const uint8_t *id, int64_t len,
               uint64_t h)
{
    if (len > SHORT_MAX) {
        return 0;
    }
    uint64_t w0, w1;
    short_words(id, len, &w0, &w1);
    uint64_t slot = h & mask;
    for (uint64_t tries = 0; tries <= mask; tries++, slot = (slot + 1) & mask) {
        const uint64_t got = table[2 * slot + 1];
        if (got == 0) {
            return 0;
        }
        if (got == w1 && table[2 * slot] == w0) {
            return 1;
        }
    }
    return 0;
}

PyDoc_STRVAR(unknown_at_doc,
"unknown_at(table, known_bytes, bytes, off, hashes, rows, short=False) -> int\n\n"
"The first item whose id is not in the table id_table filled from known_bytes, -1 when\n"
"every one is: item i is the string bytes[off[r]:off[r + 1]] (uint8; int64 offsets\n"
"within bytes) of row r = rows[i] (int64, 0 <= r < len(off) - 1), or r = i for every\n"
"row when rows is None. hashes (uint64, one per item): their text_hash when the caller\n"
"has it, else None (computed here). Ids compare byte for byte where the hashes match, so\n"
"a hash collision never passes an unknown id. ValueError for bad offsets, rows, a\n"
"hashes array of another length, or a table that does not match known_bytes. short: the\n"
"table was filled with short=True (known_bytes is then not read).");

static PyObject *
py_unknown_at(PyObject *self, PyObject *args)
{
    PyObject *o_table, *o_known, *o_bytes, *o_off, *o_hashes, *o_rows;
    int short_ids = 0;
    if (!PyArg_ParseTuple(args, "OOOOOO|p:unknown_at", &o_table, &o_known, &o_bytes, &o_off,
                          &o_hashes, &o_rows, &short_ids)) {
        return NULL;
    }
    enum { TABLE, KNOWN, BYTES, OFF, HASHES, ROWS, N_ARGS };
    struct { PyObject *obj; const ItemType *type; const char *name; } spec[] = {
        {o_table, &U64, "table"}, {o_known, &U8, "known_bytes"}, {o_bytes, &U8, "bytes"},
        {o_off, &I64, "off"}, {o_hashes, &U64, "hashes"}, {o_rows, &I64, "rows"},
    };
    Py_buffer views[N_ARGS];
    int held[N_ARGS] = {0};
    PyObject *result = NULL;
    for (int a = 0; a < N_ARGS; a++) {
        if (spec[a].obj == Py_None && (a == HASHES || a == ROWS)) {
            continue;
        }
        if (get_array(spec[a].obj, &views[a], spec[a].type, 0, spec[a].name) < 0) {
            goto release;
        }
        held[a] = 1;
    }
    const uint64_t size = table_slots(length(&views[TABLE]));
    const Py_ssize_t n_off = length(&views[OFF]);
    const Py_ssize_t n_items = held[ROWS] ? length(&views[ROWS]) : n_off - 1;
    if (size == 0 || n_off < 1 || (held[HASHES] && length(&views[HASHES]) != n_items)) {
        PyErr_SetString(PyExc_ValueError, "unknown_at: table must hold 2 * a power of two "
                        "items, off at least one offset, hashes one per item");
        goto release;
    }
    const uint64_t *table = views[TABLE].buf;
    const uint8_t *known = views[KNOWN].buf, *bytes = views[BYTES].buf;
    const Py_ssize_t n_known = length(&views[KNOWN]), n_bytes = length(&views[BYTES]);
    const int64_t *off = views[OFF].buf;
    const uint64_t *hashes = held[HASHES] ? views[HASHES].buf : NULL;
    const int64_t *rows = held[ROWS] ? views[ROWS].buf : NULL;
    const uint64_t mask = size - 1;
    Py_ssize_t first = -1;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n_items; i++) {
        if (hashes != NULL) {
            /* two steps ahead: the slot of a later row, then (its slot now in the cache)
             * the known bytes that slot refers to; only addresses are formed, and a
             * prefetch never faults */
            if (i + PREFETCH_AHEAD < n_items) {
                prefetch(table + 2 * (hashes[i + PREFETCH_AHEAD] & mask));
            }
            if (!short_ids && i + PREFETCH_AHEAD / 2 < n_items) {
                const uint64_t ref = table[2 * (hashes[i + PREFETCH_AHEAD / 2] & mask) + 1];
                const uint64_t start = (ref >> REF_LEN_BITS) - 1;
                if (ref != 0 && start < (uint64_t)n_known) {
                    prefetch(known + start);
                }
            }
        }
        const int64_t r = rows != NULL ? rows[i] : (int64_t)i;
        if (r < 0 || r >= n_off - 1) {
            bad = 1;
            break;
        }
        const int64_t f = off[r], e = off[r + 1];
        if (f < 0 || e < f || e > n_bytes) {
            bad = 1;
            break;
        }
        const uint64_t h = hashes != NULL ? hashes[i] : text_hash(bytes + f, e - f);
        const int found = short_ids
            ? in_short_table(table, mask, bytes + f, e - f, h)
            : in_table(table, mask, known, n_known, bytes + f, e - f, h);
        if (found < 0) {
            bad = 2;
            break;
        }
        if (!found) {
            first = i;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad == 1) {
        PyErr_SetString(PyExc_ValueError, "unknown_at: rows must lie within off, and off "
                        "hold non-decreasing offsets within bytes");
        goto release;
    }
    if (bad == 2) {
        PyErr_SetString(PyExc_ValueError, "unknown_at: the table refers to bytes outside "
                        "known_bytes (filled from other ids)");
        goto release;
    }
    result = PyLong_FromSsize_t(first);
release:
    for (int a = N_ARGS - 1; a >= 0; a--) {
        if (held[a]) {
            PyBuffer_Release(&views[a]);
        }
    }
    return result;
}

/* ---------------------------------------------------------------------------------------
 * The module
 * ------------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"scan", py_scan, METH_VARARGS, scan_doc},
    {"hash_ids", py_hash_ids, METH_VARARGS, hash_ids_doc},
    {"last_line_end", py_last_line_end, METH_VARARGS, last_line_end_doc},
    {"repeated_in_blocks", py_repeated_in_blocks, METH_VARARGS, repeated_in_blocks_doc},
    {"id_table", py_id_table, METH_VARARGS, id_table_doc},
    {"unknown_at", py_unknown_at, METH_VARARGS, unknown_at_doc},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *module)
{
    if (PyModule_AddIntConstant(module, "OK", OK) < 0 ||
            PyModule_AddIntConstant(module, "NOT_MINE", NOT_MINE) < 0 ||
            PyModule_AddIntConstant(module, "FULL", FULL) < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

PyDoc_STRVAR(module_doc,
"The compiled passes of relgrade.io.trec_scan: split and parse a TREC run's lines, hash\n"
"its chunk ids, prove no block of one query holds a chunk twice, and check ids against\n"
"a table of known ids.");

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "relgrade.io._trec_scan",
    .m_doc = module_doc,
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__trec_scan(void)
{
    return PyModuleDef_Init(&moduledef);
}
