/* Reading the embedding arrays of a request body straight into float64 and float32.
 *
 * orjson makes a Python float of every value of a body's embeddings (384,000 of them for
 * 500 x 768) and the store's C pass then packs them: most of an upsert_many's decode was
 * spent making objects that only lived to be read once. split_vectors finds the arrays
 * the memory plane packs anyway (args.records[i].embedding or .vector; args.vector of a
 * search), parses their numbers into packed buffers with the checks of _pack.c, and
 * returns the body with each such array replaced by []: orjson then parses what is left
 * (a few hundred KB), accepting and refusing exactly what it would have, and the caller
 * puts the packed vectors back in place of the [] it finds.
 *
 * It answers None (the caller parses the whole body with orjson, as before) whenever the
 * body is not plainly of that shape: a key with an escape on the way, a key twice, a
 * record with both vector keys or none, an array holding anything but JSON numbers with a
 * point or an exponent (an integer, as JSON text, is another payload to the digest), a
 * number outside float64's range (orjson refuses it). So every body it splits holds the
 * same JSON with the same meaning; see memory/body.py for why the rest is equivalent.
 *
 * Numbers: up to 19 significant digits and a decimal exponent within 27 are computed in
 * integers, correctly rounded (fast_number: a product by 5**e exactly, a quotient as a
 * product by a reciprocal whose error bound tells when its bits decide); every other
 * number, and the rare one whose bits do not decide, goes through Python's own correctly
 * rounded parser. Without 128-bit integers every number takes that path; FAST_PATH tells
 * the caller which.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_narrow.h"

#if defined(__SIZEOF_INT128__) && defined(__BYTE_ORDER__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HAVE_FAST_PATH 1
typedef unsigned __int128 u128;
#else
#define HAVE_FAST_PATH 0
#endif

enum { MODE_RECORDS = 0, MODE_QUERY = 1 };
enum { OK = 0, BAIL = 1, FAIL = -1 }; /* FAIL: out of memory, or a Python exception set */
/* a body this large is scanned without the GIL (beside the thread hashing it) */
#define RELEASE_MIN_BYTES (256 * 1024)

typedef const unsigned char *cursor;

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, size_t more)
{
    if (b->len + more <= b->cap) {
        return OK;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) {
        cap *= 2;
    }
    char *data = PyMem_RawRealloc(b->data, cap); /* callable without the GIL */
    if (data == NULL) {
        return FAIL; /* split_vectors raises MemoryError once it holds the GIL again */
    }
    b->data = data;
    b->cap = cap;
    return OK;
}

/* What a scan collects: the float32 values of every vector in one bytes object (grown in
 * place, never copied out), each vector's float64 values only when float32 does not hold
 * them (or one is out of range), kept aside in exact (exact_at: where each vector's start,
 * or -1); per vector its flag, key byte, length and span in the body. A large body is
 * scanned without the GIL (released: the saved thread state), so the body's SHA-256 runs
 * beside it; the rare steps that need Python (the slow number path, growing the bytes)
 * take it back for their moment. */
typedef struct {
    cursor start, end;
    double limit;
    int mode;
    PyThreadState *released; /* non-NULL while the scan runs without the GIL */
    PyObject *narrow;        /* bytes, narrow_cap long, narrow_len used */
    Py_ssize_t narrow_len, narrow_cap;
    Buf scratch; /* the float64 values of the vector being read */
    Buf exact, exact_at, flags, keys, spans, lengths; /* spans: pairs of Py_ssize_t offsets */
} Scan;

static inline void
hold_gil(Scan *s)
{
    if (s != NULL && s->released != NULL) {
        PyEval_RestoreThread(s->released);
    }
}

static inline void
release_gil(Scan *s)
{
    if (s != NULL && s->released != NULL) {
        s->released = PyEval_SaveThread();
    }
}

static void
scan_free(Scan *s)
{
    Py_CLEAR(s->narrow);
    PyMem_RawFree(s->scratch.data);
    PyMem_RawFree(s->exact.data);
    PyMem_RawFree(s->exact_at.data);
    PyMem_RawFree(s->flags.data);
    PyMem_RawFree(s->keys.data);
    PyMem_RawFree(s->spans.data);
    PyMem_RawFree(s->lengths.data);
}

static inline int
is_ws(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline cursor
skip_ws(cursor p, cursor end)
{
    while (p < end && *p <= ' ' && is_ws(*p)) {
        p++;
    }
    return p;
}

/* p at '"': past the closing quote, or NULL when unterminated; *escaped when a backslash
 * is inside. A backslash always escapes the next byte, as JSON's lexer reads it. */
static cursor
skip_string(cursor p, cursor end, int *escaped)
{
    p++;
    while (p < end) {
        const unsigned char *q = memchr(p, '"', (size_t)(end - p));
        if (q == NULL) {
            return NULL;
        }
        const unsigned char *bs = memchr(p, '\\', (size_t)(q - p));
        if (bs == NULL) {
            return q + 1;
        }
        *escaped = 1;
        p = bs + 2;
    }
    return NULL;
}

/* Any value: past its end, or NULL. Only bodies orjson then accepts are used, so this only
 * needs to be exact on valid JSON. */
static cursor
skip_value(cursor p, cursor end)
{
    int escaped = 0;
    if (p >= end) {
        return NULL;
    }
    if (*p == '"') {
        return skip_string(p, end, &escaped);
    }
    if (*p == '{' || *p == '[') {
        Py_ssize_t depth = 0;
        while (p < end) {
            unsigned char c = *p;
            if (c == '"') {
                p = skip_string(p, end, &escaped);
                if (p == NULL) {
                    return NULL;
                }
                continue;
            }
            if (c == '{' || c == '[') {
                depth++;
            }
            else if (c == '}' || c == ']') {
                if (--depth == 0) {
                    return p + 1;
                }
            }
            p++;
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']' && !is_ws(*p)) {
        p++;
    }
    return p;
}

/* -- numbers ------------------------------------------------------------------------- */

#include "_decimal.h"

/* Python's correctly rounded parser, on a copy of the number's text (with the GIL). */
static int
slow_number(Scan *s, cursor from, cursor to, double *out)
{
    char small[64];
    size_t n = (size_t)(to - from);
    char *text = n < sizeof(small) ? small : PyMem_RawMalloc(n + 1);
    if (text == NULL) {
        return FAIL;
    }
    memcpy(text, from, n);
    text[n] = '\0';
    char *stop = NULL;
    hold_gil(s);
    double value = PyOS_string_to_double(text, &stop, NULL);
    int failed = value == -1.0 && PyErr_Occurred();
    release_gil(s);
    int whole = stop == text + n;
    if (text != small) {
        PyMem_RawFree(text);
    }
    if (failed) {
        return FAIL;
    }
    if (!whole || isinf(value)) {
        return BAIL; /* orjson refuses a number beyond float64's range */
    }
    *out = value;
    return OK;
}

/* One JSON number with a point or an exponent at *pp: its float64 value. BAIL on anything
 * else (an integer, bad grammar). */
static inline __attribute__((always_inline)) int
number(Scan *s, cursor *pp, cursor end, double *out)
{
    cursor from = *pp, p = *pp;
    int negative = 0, count = 0, is_float = 0, exp_big = 0;
    uint64_t w = 0;
    Py_ssize_t frac = 0, exp = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end) {
        return BAIL;
    }
    if (*p == '0') {
        p++;
        if (p < end && (unsigned)(*p - '0') <= 9) {
            return BAIL; /* a leading zero: not JSON */
        }
    }
    else if ((unsigned)(*p - '1') <= 8) {
        p = digits(p, end, &w, &count);
    }
    else {
        return BAIL;
    }
    if (p < end && *p == '.') {
        p++;
        cursor first = p;
        if (w == 0) {
            while (p < end && *p == '0') {
                p++;
            }
        }
        p = digits(p, end, &w, &count);
        if (p == first) {
            return BAIL;
        }
        frac = p - first;
        is_float = 1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int exp_negative = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            exp_negative = *p == '-';
            p++;
        }
        cursor first = p;
        while (p < end && (unsigned)(*p - '0') <= 9) {
            if (exp < 100000) {
                exp = exp * 10 + (*p - '0');
            }
            else {
                exp_big = 1;
            }
            p++;
        }
        if (p == first) {
            return BAIL;
        }
        if (exp_negative) {
            exp = -exp;
        }
        is_float = 1;
    }
    if (!is_float) {
        return BAIL;
    }
    *pp = p;
    if (w == 0 && count <= 19) { /* every digit zero: a zero of the sign, whatever exponent */
        *out = negative ? -0.0 : 0.0;
        return OK;
    }
#if HAVE_FAST_PATH
    Py_ssize_t e10 = exp - frac;
    if (!exp_big && count <= 19 && e10 >= -MAX_E10 && e10 <= MAX_E10) {
        double value;
        if (fast_number(w, (int)e10, &value)) {
            *out = negative ? -value : value;
            return OK;
        }
    }
#else
    (void)exp_big;
#endif
    return slow_number(s, from, p, out);
}

static int
narrow_room(Scan *s, Py_ssize_t values)
{
    Py_ssize_t need = s->narrow_len + values * (Py_ssize_t)sizeof(float);
    if (need <= s->narrow_cap) {
        return OK;
    }
    Py_ssize_t cap = s->narrow_cap * 2 > need ? s->narrow_cap * 2 : need;
    hold_gil(s);
    int failed = _PyBytes_Resize(&s->narrow, cap) < 0;
    release_gil(s);
    if (failed) {
        return FAIL;
    }
    s->narrow_cap = cap;
    return OK;
}

/* p at '[': the numbers of a non-empty array, narrowed into s->narrow with their flags (as
 * _pack.c's narrow_float_lists sets them), the float64 values kept when a flag says so;
 * past the ']'. */
static int
numbers(Scan *s, cursor *pp, char key)
{
    cursor p = *pp + 1, end = s->end;
    Py_ssize_t count = 0;
    narrow_seen seen = {0, 0, 0};
    s->scratch.len = 0;
    p = skip_ws(p, end);
    if (p < end && *p == ']') {
        return BAIL;
    }
    for (;;) {
        double value;
        int status = number(s, &p, end, &value);
        if (status != OK) {
            return status;
        }
        if (s->scratch.len + sizeof(double) > s->scratch.cap &&
            buf_reserve(&s->scratch, 1024 * sizeof(double))) {
            return FAIL;
        }
        memcpy(s->scratch.data + s->scratch.len, &value, sizeof(double));
        s->scratch.len += sizeof(double);
        count++;
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == ']') {
            p++;
            break;
        }
        return BAIL;
    }
    if (narrow_room(s, count)) {
        return FAIL;
    }
    const double *wide = (const double *)s->scratch.data;
    float *narrow = (float *)(PyBytes_AS_STRING(s->narrow) + s->narrow_len);
    for (Py_ssize_t j = 0; j < count; j++) {
        narrow[j] = narrow_value(wide[j], s->limit, &seen);
    }
    s->narrow_len += count * (Py_ssize_t)sizeof(float);
    Py_ssize_t at = -1;
    if (seen.inexact || seen.bad) {
        at = (Py_ssize_t)s->exact.len;
        if (buf_reserve(&s->exact, s->scratch.len)) {
            return FAIL;
        }
        memcpy(s->exact.data + s->exact.len, s->scratch.data, s->scratch.len);
        s->exact.len += s->scratch.len;
    }
    if (buf_reserve(&s->exact_at, sizeof(at))) {
        return FAIL;
    }
    memcpy(s->exact_at.data + s->exact_at.len, &at, sizeof(at));
    s->exact_at.len += sizeof(at);
    Py_ssize_t span[2] = {*pp - s->start, p - s->start};
    char flag = narrow_flag(&seen);
    if (buf_reserve(&s->spans, sizeof(span)) || buf_reserve(&s->flags, 1) ||
        buf_reserve(&s->keys, 1) || buf_reserve(&s->lengths, sizeof(count))) {
        return FAIL;
    }
    memcpy(s->spans.data + s->spans.len, span, sizeof(span));
    s->spans.len += sizeof(span);
    s->flags.data[s->flags.len++] = flag;
    s->keys.data[s->keys.len++] = key;
    memcpy(s->lengths.data + s->lengths.len, &count, sizeof(count));
    s->lengths.len += sizeof(count);
    *pp = p;
    return OK;
}

/* -- the body's shape ---------------------------------------------------------------- */

typedef int (*member_fn)(Scan *s, cursor key, size_t key_len, cursor *pp, void *state);

/* p at '{': each member's key (which must hold no escape) and value handed to on_member,
 * which moves past the value; past the '}'. */
static int
members(Scan *s, cursor *pp, member_fn on_member, void *state)
{
    cursor p = skip_ws(*pp + 1, s->end), end = s->end;
    if (p < end && *p == '}') {
        *pp = p + 1;
        return OK;
    }
    for (;;) {
        if (p >= end || *p != '"') {
            return BAIL;
        }
        int escaped = 0;
        cursor key_end = skip_string(p, end, &escaped);
        if (key_end == NULL || escaped) {
            return BAIL;
        }
        cursor key = p + 1;
        size_t key_len = (size_t)(key_end - 1 - key);
        p = skip_ws(key_end, end);
        if (p >= end || *p != ':') {
            return BAIL;
        }
        p = skip_ws(p + 1, end);
        int status = on_member(s, key, key_len, &p, state);
        if (status != OK) {
            return status;
        }
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}') {
            *pp = p + 1;
            return OK;
        }
        return BAIL;
    }
}

static inline int
key_is(cursor key, size_t len, const char *name)
{
    return len == strlen(name) && memcmp(key, name, len) == 0;
}

static int
skip_member(cursor *pp, cursor end)
{
    cursor q = skip_value(*pp, end);
    if (q == NULL) {
        return BAIL;
    }
    *pp = q;
    return OK;
}

static int
record_member(Scan *s, cursor key, size_t len, cursor *pp, void *state)
{
    int *vectors = state;
    char tag = key_is(key, len, "embedding") ? 'e' : key_is(key, len, "vector") ? 'v' : 0;
    if (!tag) {
        return skip_member(pp, s->end);
    }
    if (++*vectors > 1 || *pp >= s->end || **pp != '[') {
        return BAIL; /* both keys, one twice, or a vector that is not an array */
    }
    return numbers(s, pp, tag);
}

static int
records(Scan *s, cursor *pp)
{
    cursor p = skip_ws(*pp + 1, s->end), end = s->end;
    for (;;) {
        if (p >= end || *p != '{') {
            return BAIL;
        }
        int vectors = 0;
        int status = members(s, &p, record_member, &vectors);
        if (status != OK) {
            return status;
        }
        if (vectors != 1) {
            return BAIL;
        }
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == ']') {
            *pp = p + 1;
            return OK;
        }
        return BAIL;
    }
}

static int
args_member(Scan *s, cursor key, size_t len, cursor *pp, void *state)
{
    int *found = state;
    const char *wanted = s->mode == MODE_RECORDS ? "records" : "vector";
    if (!key_is(key, len, wanted)) {
        return skip_member(pp, s->end);
    }
    if (++*found > 1 || *pp >= s->end || **pp != '[') {
        return BAIL;
    }
    return s->mode == MODE_RECORDS ? records(s, pp) : numbers(s, pp, 'v');
}

static int
top_member(Scan *s, cursor key, size_t len, cursor *pp, void *state)
{
    int *found = state;
    if (!key_is(key, len, "args")) {
        return skip_member(pp, s->end);
    }
    if (++*found > 1 || *pp >= s->end || **pp != '{') {
        return BAIL;
    }
    int inner = 0;
    int status = members(s, pp, args_member, &inner);
    return status == OK && inner != 1 ? BAIL : status;
}

static PyObject *
bytes_of(Buf *b)
{
    return PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len);
}

/* The body with each span replaced by [] */
static PyObject *
reduced_body(Scan *s)
{
    Py_ssize_t n = (Py_ssize_t)(s->spans.len / (2 * sizeof(Py_ssize_t)));
    const Py_ssize_t *spans = (const Py_ssize_t *)s->spans.data;
    Py_ssize_t size = s->end - s->start;
    for (Py_ssize_t i = 0; i < n; i++) {
        size -= spans[2 * i + 1] - spans[2 * i] - 2;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) {
        return NULL;
    }
    char *dst = PyBytes_AS_STRING(out);
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(dst, s->start + at, (size_t)(spans[2 * i] - at));
        dst += spans[2 * i] - at;
        *dst++ = '[';
        *dst++ = ']';
        at = spans[2 * i + 1];
    }
    memcpy(dst, s->start + at, (size_t)((s->end - s->start) - at));
    return out;
}

/* Python objects of what the scan found (with the GIL): see split_vectors's docstring. */
static PyObject *
split_result(Scan *s)
{
    Py_ssize_t count = (Py_ssize_t)(s->lengths.len / sizeof(Py_ssize_t));
    const Py_ssize_t *each = (const Py_ssize_t *)s->lengths.data;
    const Py_ssize_t *at = (const Py_ssize_t *)s->exact_at.data;
    PyObject *lengths = PyList_New(count);
    PyObject *exact = PyList_New(count);
    if (lengths == NULL || exact == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *n = PyLong_FromSsize_t(each[i]);
        if (n == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(lengths, i, n);
        PyObject *row = at[i] < 0 ? Py_NewRef(Py_None)
                                  : PyBytes_FromStringAndSize(s->exact.data + at[i],
                                                              each[i] * (Py_ssize_t)sizeof(double));
        if (row == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(exact, i, row);
    }
    if (_PyBytes_Resize(&s->narrow, s->narrow_len) < 0) {
        goto fail;
    }
    PyObject *reduced = reduced_body(s);
    if (reduced == NULL) {
        goto fail;
    }
    return Py_BuildValue("(NONNNN)", reduced, s->narrow, exact, bytes_of(&s->flags),
                         bytes_of(&s->keys), lengths);
fail:
    Py_XDECREF(lengths);
    Py_XDECREF(exact);
    return NULL;
}

static PyObject *
split_vectors(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "split_vectors(body, mode, limit) takes 3 arguments");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    long mode = PyLong_AsLong(args[1]);
    double limit = PyFloat_AsDouble(args[2]);
    if (PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Scan s;
    memset(&s, 0, sizeof(s));
    s.start = view.buf;
    s.end = s.start + view.len;
    s.limit = limit;
    s.mode = mode == MODE_QUERY ? MODE_QUERY : MODE_RECORDS;
    /* room for a value per 20 bytes of body (an embedding's float32 values as JSON take
     * about that), so the float32 bytes are seldom regrown */
    s.narrow_cap = view.len / 20 * (Py_ssize_t)sizeof(float) + 64;
    s.narrow = PyBytes_FromStringAndSize(NULL, s.narrow_cap);
    if (s.narrow == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *probe = args[0]; /* held by the view: immutable bytes are safe to read alone */
    if (view.len >= RELEASE_MIN_BYTES && PyBytes_CheckExact(probe)) {
        s.released = PyEval_SaveThread();
    }
    cursor p = skip_ws(s.start, s.end);
    int found = 0;
    int status = BAIL;
    if (p < s.end && *p == '{') {
        status = members(&s, &p, top_member, &found);
        if (status == OK && found != 1) {
            status = BAIL;
        }
    }
    if (s.released != NULL) {
        PyEval_RestoreThread(s.released);
        s.released = NULL;
    }
    PyObject *result = NULL;
    if (status == FAIL) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
    }
    else if (status == OK) {
        result = split_result(&s);
    }
    else {
        result = Py_NewRef(Py_None);
    }
    scan_free(&s);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
parse_number(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    cursor p = view.buf, end = p + view.len;
    double value;
    int status = number(NULL, &p, end, &value);
    PyBuffer_Release(&view);
    if (status == FAIL) {
        return NULL;
    }
    if (status == BAIL || p != end) {
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(value);
}

static PyMethodDef body_methods[] = {
    {"split_vectors", (PyCFunction)(void (*)(void))split_vectors, METH_FASTCALL,
     "split_vectors(body, mode, limit) -> tuple | None\n\n"
     "mode 0: the vectors of args.records; mode 1: args.vector. When the body is plainly of\n"
     "that shape: (the body with each vector replaced by [], the vectors' float32 bytes,\n"
     "per vector its float64 bytes when its flag holds 1 or 2 (else None), a flag byte per\n"
     "vector as narrow_float_lists sets them, a key byte per vector (e or v), the vectors'\n"
     "lengths). Otherwise None."},
    {"parse_number", (PyCFunction)parse_number, METH_O,
     "parse_number(text) -> float | None: one JSON number with a point or an exponent, as\n"
     "split_vectors reads it (for the tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef body_module = {
    PyModuleDef_HEAD_INIT, "ratatoskr.memory._body",
    "Reading a request body's embedding arrays into packed float64 and float32 (see "
    "split_vectors).",
    -1, body_methods,
};

PyMODINIT_FUNC
PyInit__body(void)
{
#if HAVE_FAST_PATH
    init_tables();
#endif
    PyObject *module = PyModule_Create(&body_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "FAST_PATH", HAVE_FAST_PATH) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
