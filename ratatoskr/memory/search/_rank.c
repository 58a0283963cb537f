/* A mirror search's inner steps in C: the candidate cut of a scoped search in one pass over
 * its rows (ranking.py), the exact float64 scores of the candidates (cosine.py) and the
 * hits' embeddings as lists of floats, read where the rows lie.
 *
 * A scoped search's first step scores the rows its filter admits in float32 and keeps the
 * few that could belong to the exact top_k (ranking.candidates); the float64 rescore
 * that decides the answer follows (_rank_exact.c). In numpy the first step is a dozen calls (a
 * gather or a slice, a mat-vec, a scale, a sort or partitions, comparisons), each with a
 * fixed cost that is most of the work for the ~100 rows of one end_user, and a gather that
 * copies every scattered row (an agent_self's 2 % of the mirror). Here each admitted row is
 * read once where it lies, its score kept in a short descending list of the best, and the
 * cut decided the same way: the top_k + margin best, or, when the cut is crowded (the last
 * of them within epsilon of the k-th), every row within epsilon of the k-th.
 *
 * The float32 sums are taken in another order than BLAS's; both stay within ~5e-5 of the
 * exact cosine at these dimensions, far inside epsilon, which is what makes the cut safe.
 *
 * The hits' embeddings (rows_to_lists) are thousands of Python floats per search (ten hits
 * at 768 is 7,680), and making them was the largest part of an end_user search under a
 * writer: each new float is popped off pymalloc's free list, a chain of dependent reads
 * that miss the cache one after another once other work has gone through it. So the floats
 * come from a pool this module keeps (pooled_float): a float the pool alone still refers
 * to (its reference count is 1) is no longer seen by anyone, so it is given its new value
 * and handed out again; the reads of the pool's slots are independent and overlap, and the
 * floats are not freed when the hits are. A float anyone else holds is never touched.
 *
 * The exact float64 scores (exact_cosine, settled_top, row_norms) are in _rank_exact.c.
 */
#include "_rank.h"

#include <math.h>

#if defined(__GNUC__) && !defined(__clang__)
/* the float32 cut may fuse multiply-adds (setup.py turns contraction off for the exact
 * sums of _rank_exact.c, which this file does not hold) */
#pragma GCC optimize("fp-contract=fast")
#endif
#include <string.h>

#define LANES 64 /* independent partial sums: four AVX-512 (eight AVX2) registers, so the
                  * multiply-adds of one row overlap instead of waiting on each other */
#define RELEASE_GIL_FLOATS 1048576 /* below this much work, releasing the GIL costs more */

int
rank_get_buffer(PyObject *obj, Py_buffer *view, char kind, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    const char *format = view->format ? view->format : "B";
    if (*format == '@' || *format == '=' || *format == '<') { /* native order, x86's */
        format++;
    }
    char got = format[0];
    int ok = format[0] != '\0' && format[1] == '\0' &&
             (kind == 'f'   ? got == 'f' && view->itemsize == 4
              : kind == 'd' ? got == 'd' && view->itemsize == 8
                            : (got == 'q' || got == 'l') && view->itemsize == 8);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: expected contiguous %s", name,
                     kind == 'f' ? "float32" : kind == 'd' ? "float64" : "int64");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The float32 dot product of two rows of dim values, in LANES interleaved partial sums:
 * four vectors of 16 (AVX-512 registers; two AVX2 ones each, four SSE ones), so the
 * multiply-adds of one row overlap instead of waiting on each other, then summed pairwise
 * in vector halves: an array of 64 partial sums was reduced to scalars one by one, which
 * cost a row as much as its multiply-adds. Inlined into each clone of cut_rows, so it is
 * compiled for each instruction set, with its multiply-adds fused where the machine has
 * FMA (these sums only pick candidates: they need to be close, not to follow cosine.py's
 * order). */
#if defined(__GNUC__)
#define INLINE __attribute__((always_inline)) /* into each clone, so compiled for its ISA */
#else
#define INLINE
#endif
typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));

INLINE static inline f32x16
load16(const float *p)
{
    f32x16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

INLINE static inline f32x8
load8(const float *p)
{
    f32x8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

INLINE static inline float
sum8(f32x8 t)
{
    f32x4 l4, h4;
    memcpy(&l4, &t, sizeof l4);
    memcpy(&h4, (const char *)&t + sizeof l4, sizeof h4);
    f32x4 u = l4 + h4;
    return (u[0] + u[2]) + (u[1] + u[3]);
}

INLINE static inline float
sum16(f32x16 s)
{
    f32x8 lo, hi;
    memcpy(&lo, &s, sizeof lo);
    memcpy(&hi, (const char *)&s + sizeof lo, sizeof hi);
    return sum8(lo + hi);
}

INLINE static inline float
dot_f32(const float *restrict a, const float *restrict b, Py_ssize_t dim)
{
    f32x16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    Py_ssize_t j = 0;
    for (; j + LANES <= dim; j += LANES) {
        s0 += load16(a + j) * load16(b + j);
        s1 += load16(a + j + 16) * load16(b + j + 16);
        s2 += load16(a + j + 32) * load16(b + j + 32);
        s3 += load16(a + j + 48) * load16(b + j + 48);
    }
    for (; j + 16 <= dim; j += 16) {
        s0 += load16(a + j) * load16(b + j);
    }
    float rest = 0.0f;
    for (; j < dim; j++) {
        rest += a[j] * b[j];
    }
    return sum16((s0 + s1) + (s2 + s3)) + rest;
}

typedef struct {
    const float *matrix;
    const float *inv_norms;
    const long long *rows;
    const float *query;
    Py_ssize_t n, dim, capacity, want, top_k;
    float epsilon;
    float *unit;          /* dim: the query over its norm (the norm taken in double) */
    float *scores;        /* n */
    float *best;          /* want, descending */
    Py_ssize_t *best_pos; /* want */
    long long *out;       /* n */
} Cut;

/* dot_f32 of four rows with one query at once: each query vector loaded serves all four,
 * and the reads of four cold rows from memory overlap (as BLAS's kernels do). Measured on
 * 20,000 rows scattered over a 1M x 384 matrix, it cut ~7 % off one row at a time with
 * software prefetches, which added nothing once four rows stream at once. In vectors of 8
 * (one AVX2 register): its eight partial sums, two query vectors and a row's load fit
 * AVX2's sixteen registers; in vectors of 16 they did not, and the spills to the stack
 * made the AVX2 clone two and a half times slower than BLAS on the same rows. */
INLINE static inline void
dot4_f32(const float *restrict a0, const float *restrict a1, const float *restrict a2,
         const float *restrict a3, const float *restrict b, Py_ssize_t dim, float *out)
{
    f32x8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    f32x8 t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};
    Py_ssize_t j = 0;
    for (; j + 16 <= dim; j += 16) {
        f32x8 q0 = load8(b + j), q1 = load8(b + j + 8);
        s0 += load8(a0 + j) * q0;
        t0 += load8(a0 + j + 8) * q1;
        s1 += load8(a1 + j) * q0;
        t1 += load8(a1 + j + 8) * q1;
        s2 += load8(a2 + j) * q0;
        t2 += load8(a2 + j + 8) * q1;
        s3 += load8(a3 + j) * q0;
        t3 += load8(a3 + j + 8) * q1;
    }
    for (; j + 8 <= dim; j += 8) {
        f32x8 q0 = load8(b + j);
        s0 += load8(a0 + j) * q0;
        s1 += load8(a1 + j) * q0;
        s2 += load8(a2 + j) * q0;
        s3 += load8(a3 + j) * q0;
    }
    float r0 = 0.0f, r1 = 0.0f, r2 = 0.0f, r3 = 0.0f;
    for (; j < dim; j++) {
        r0 += a0[j] * b[j];
        r1 += a1[j] * b[j];
        r2 += a2[j] * b[j];
        r3 += a3[j] * b[j];
    }
    out[0] = sum8(s0 + t0) + r0;
    out[1] = sum8(s1 + t1) + r1;
    out[2] = sum8(s2 + t2) + r2;
    out[3] = sum8(s3 + t3) + r3;
}

/* Scores every row and keeps the want best; returns -1 when a row lies outside the matrix
 * (nothing is read there), else how many candidate rows it wrote to out. A NaN score (a row
 * whose norm float32 cannot score: ranking.inverse_norms) makes its row a candidate always:
 * the float64 step ranks it exactly. */
DOT_CLONES static Py_ssize_t
cut_rows(Cut *c)
{
    double qq = 0.0;
    for (Py_ssize_t j = 0; j < c->dim; j++) {
        qq += (double)c->query[j] * (double)c->query[j];
    }
    double norm = sqrt(qq); /* in double: a tiny or huge query neither vanishes nor overflows */
    for (Py_ssize_t j = 0; j < c->dim; j++) {
        c->unit[j] = (float)((double)c->query[j] / norm);
    }
    const long long *rows = c->rows;
    for (Py_ssize_t i = 0; i < c->n; i++) {
        if (rows[i] < 0 || rows[i] >= c->capacity) {
            return -1;
        }
    }
    Py_ssize_t dim = c->dim;
    const float *matrix = c->matrix;
    Py_ssize_t i = 0;
    for (; i + 4 <= c->n; i += 4) {
        float dots[4];
        dot4_f32(matrix + rows[i] * dim, matrix + rows[i + 1] * dim, matrix + rows[i + 2] * dim,
                 matrix + rows[i + 3] * dim, c->unit, dim, dots);
        for (int k = 0; k < 4; k++) {
            c->scores[i + k] = dots[k] * c->inv_norms[rows[i + k]];
        }
    }
    for (; i < c->n; i++) {
        c->scores[i] = dot_f32(matrix + rows[i] * dim, c->unit, dim) * c->inv_norms[rows[i]];
    }
    Py_ssize_t held = 0;
    for (i = 0; i < c->n; i++) {
        float s = c->scores[i];
        if (isnan(s)) {
            continue; /* a candidate whatever the others score: added below */
        }
        if (held == c->want && !(s > c->best[held - 1])) {
            continue;
        }
        Py_ssize_t at = held < c->want ? held++ : held - 1;
        while (at > 0 && c->best[at - 1] < s) {
            c->best[at] = c->best[at - 1];
            c->best_pos[at] = c->best_pos[at - 1];
            at--;
        }
        c->best[at] = s;
        c->best_pos[at] = i;
    }
    if (c->n <= c->want || held < c->want) { /* every row is a candidate, in row order */
        memcpy(c->out, c->rows, (size_t)c->n * sizeof(long long));
        return c->n;
    }
    float bound = c->best[c->top_k - 1] - c->epsilon; /* below the top_k-th highest */
    if (c->best[c->want - 1] >= bound) {              /* a crowded cut: every near tie */
        Py_ssize_t count = 0;
        for (Py_ssize_t i = 0; i < c->n; i++) {
            if (c->scores[i] >= bound || isnan(c->scores[i])) {
                c->out[count++] = c->rows[i];
            }
        }
        return count;
    }
    for (Py_ssize_t i = 0; i < c->want; i++) {
        c->out[i] = c->rows[c->best_pos[i]];
    }
    Py_ssize_t count = c->want;
    for (Py_ssize_t i = 0; i < c->n; i++) {
        if (isnan(c->scores[i])) {
            c->out[count++] = c->rows[i];
        }
    }
    return count;
}

static PyObject *
scoped_candidates(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "scoped_candidates(matrix, inv_norms, rows, query, top_k, want, "
                        "epsilon) takes 7 arguments");
        return NULL;
    }
    Py_ssize_t top_k = PyLong_AsSsize_t(args[4]);
    Py_ssize_t want = PyLong_AsSsize_t(args[5]);
    double epsilon = PyFloat_AsDouble(args[6]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (top_k < 1 || want < top_k) {
        PyErr_SetString(PyExc_ValueError, "scoped_candidates: need 1 <= top_k <= want");
        return NULL;
    }
    Py_buffer matrix, inv_norms, rows, query;
    if (rank_get_buffer(args[0], &matrix, 'f', "matrix") < 0) {
        return NULL;
    }
    if (rank_get_buffer(args[1], &inv_norms, 'f', "inv_norms") < 0) {
        PyBuffer_Release(&matrix);
        return NULL;
    }
    if (rank_get_buffer(args[2], &rows, 'q', "rows") < 0) {
        PyBuffer_Release(&matrix);
        PyBuffer_Release(&inv_norms);
        return NULL;
    }
    if (rank_get_buffer(args[3], &query, 'f', "query") < 0) {
        PyBuffer_Release(&matrix);
        PyBuffer_Release(&inv_norms);
        PyBuffer_Release(&rows);
        return NULL;
    }
    PyObject *result = NULL;
    Cut c = {0};
    c.dim = query.len / 4;
    c.n = rows.len / 8;
    c.capacity = c.dim ? matrix.len / 4 / c.dim : 0;
    if (c.dim == 0 || matrix.len != c.capacity * c.dim * 4 || inv_norms.len / 4 < c.capacity) {
        PyErr_SetString(PyExc_ValueError, "scoped_candidates: shapes do not agree");
        goto done;
    }
    c.matrix = matrix.buf;
    c.inv_norms = inv_norms.buf;
    c.rows = rows.buf;
    c.query = query.buf;
    c.top_k = top_k;
    c.want = want;
    c.epsilon = (float)epsilon;
    PyObject *out = PyBytes_FromStringAndSize(NULL, c.n * (Py_ssize_t)sizeof(long long));
    c.scores = PyMem_Malloc((size_t)(c.n ? c.n : 1) * sizeof(float));
    c.unit = PyMem_Malloc((size_t)c.dim * sizeof(float));
    c.best = PyMem_Malloc((size_t)want * sizeof(float));
    c.best_pos = PyMem_Malloc((size_t)want * sizeof(Py_ssize_t));
    if (out == NULL || c.scores == NULL || c.unit == NULL || c.best == NULL || c.best_pos == NULL) {
        Py_XDECREF(out);
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        goto free_scratch;
    }
    c.out = (long long *)PyBytes_AS_STRING(out);
    Py_ssize_t count;
    if (c.n * c.dim > RELEASE_GIL_FLOATS) {
        Py_BEGIN_ALLOW_THREADS
        count = cut_rows(&c);
        Py_END_ALLOW_THREADS
    }
    else {
        count = cut_rows(&c);
    }
    if (count < 0) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_IndexError, "scoped_candidates: a row lies outside the matrix");
        goto free_scratch;
    }
    if (_PyBytes_Resize(&out, count * (Py_ssize_t)sizeof(long long)) == 0) {
        result = out;
    }
free_scratch:
    PyMem_Free(c.scores);
    PyMem_Free(c.unit);
    PyMem_Free(c.best);
    PyMem_Free(c.best_pos);
done:
    PyBuffer_Release(&matrix);
    PyBuffer_Release(&inv_norms);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&query);
    return result;
}

#define POOL_MAX 65536 /* floats kept for reuse (1.5 MiB): a few searches' embeddings */
#define POOL_PROBES 4   /* slots looked at for a free float before a new one is made */

static PyObject **pool = NULL; /* owned references; slots [0, pool_len) are filled */
static Py_ssize_t pool_len = 0, pool_next = 0;

/* A float of ``value``: one of the pool's that nobody else holds, else a new one, which
 * takes the place of a held one in the pool once it is full (so the pool keeps no float
 * alive for long that a caller still holds). Needs the GIL: the reference count read and
 * the write of the value happen with no other thread running. */
static PyObject *
pooled_float(double value)
{
#ifdef Py_GIL_DISABLED
    return PyFloat_FromDouble(value); /* reference counts are not exact without the GIL */
#else
    for (int probe = 0; probe < POOL_PROBES && pool_len > 0; probe++) {
        PyObject *held = pool[pool_next];
        pool_next = pool_next + 1 < pool_len ? pool_next + 1 : 0;
        if (Py_REFCNT(held) == 1) {
            ((PyFloatObject *)held)->ob_fval = value;
            Py_INCREF(held);
            return held;
        }
    }
    PyObject *fresh = PyFloat_FromDouble(value);
    if (fresh == NULL) {
        return NULL;
    }
    if (pool == NULL) {
        pool = PyMem_RawMalloc(POOL_MAX * sizeof(PyObject *));
        if (pool == NULL) {
            return fresh; /* no pool: the float is still good */
        }
    }
    Py_INCREF(fresh);
    if (pool_len < POOL_MAX) {
        pool[pool_len++] = fresh;
    }
    else {
        /* the slot before the cursor was the last one probed, and is held */
        Py_ssize_t slot = pool_next > 0 ? pool_next - 1 : pool_len - 1;
        Py_SETREF(pool[slot], fresh);
    }
    return fresh;
#endif
}

/* The hits' embeddings as lists of Python floats, read from the mirror's rows in place:
 * numpy would copy the rows (matrix[rows]) and then convert them (tolist). */
static PyObject *
rows_to_lists(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "rows_to_lists(matrix, rows, dim) takes 3 arguments");
        return NULL;
    }
    Py_ssize_t dim = PyLong_AsSsize_t(args[2]);
    if (dim == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer matrix, rows;
    if (rank_get_buffer(args[0], &matrix, 'f', "matrix") < 0) {
        return NULL;
    }
    if (rank_get_buffer(args[1], &rows, 'q', "rows") < 0) {
        PyBuffer_Release(&matrix);
        return NULL;
    }
    PyObject *out = NULL;
    Py_ssize_t capacity = dim > 0 ? matrix.len / 4 / dim : 0, n = rows.len / 8;
    const long long *row = rows.buf;
    if (dim < 1 || matrix.len != capacity * dim * 4) {
        PyErr_SetString(PyExc_ValueError, "rows_to_lists: shapes do not agree");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (row[i] < 0 || row[i] >= capacity) {
            PyErr_SetString(PyExc_IndexError, "rows_to_lists: a row lies outside the matrix");
            goto done;
        }
    }
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        const float *values = (const float *)matrix.buf + row[i] * dim;
        PyObject *list = PyList_New(dim);
        for (Py_ssize_t j = 0; list != NULL && j < dim; j++) {
            PyObject *value = pooled_float((double)values[j]);
            if (value == NULL) {
                Py_CLEAR(list);
                break;
            }
            PyList_SET_ITEM(list, j, value);
        }
        if (list == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, list);
    }
done:
    PyBuffer_Release(&matrix);
    PyBuffer_Release(&rows);
    return out;
}

static PyMethodDef rank_methods[] = {
    {"scoped_candidates", (PyCFunction)(void (*)(void))scoped_candidates, METH_FASTCALL,
     "scoped_candidates(matrix, inv_norms, rows, query, top_k, want, epsilon) -> bytes\n\n"
     "The rows (int64 bytes) that could hold the exact top_k of query among rows of the\n"
     "float32 matrix, by float32 cosine (the dot with the query made unit length in double,\n"
     "times inv_norms[row]): every row when there are at most want, else the want best, or\n"
     "every row within epsilon of the top_k-th best when the want-th is within it too; and\n"
     "every row whose score is NaN (a NaN inverse norm: float32 cannot score the row)."},
    {"exact_cosine", (PyCFunction)(void (*)(void))rank_exact_cosine, METH_FASTCALL,
     "exact_cosine(matrix, rows, query, norms) -> bytes\n\n"
     "The float64 cosine (float64 bytes) of query with each of rows of the float32 matrix,\n"
     "given norms (float64, row_norms of every row), in cosine.py's summation order."},
    {"settled_top", (PyCFunction)(void (*)(void))rank_settled_top, METH_FASTCALL,
     "settled_top(matrix, rows, query, norms, top_k) -> tuple[list[int], list[float]] | None\n\n"
     "exact_cosine's scores of rows, and the top_k of rows with their scores, best first,\n"
     "when no two of the top_k + 1 best scores are equal; else None. top_k is 1..64."},
    {"row_norms", (PyCFunction)(void (*)(void))rank_row_norms, METH_FASTCALL,
     "row_norms(matrix, dim) -> bytes\n\n"
     "The float64 norm of each dim-long float32 row, in cosine.py's summation order."},
    {"rows_to_lists", (PyCFunction)(void (*)(void))rows_to_lists, METH_FASTCALL,
     "rows_to_lists(matrix, rows, dim) -> list[list[float]]\n\n"
     "The float32 rows of matrix at rows, each as a list of Python floats (from the\n"
     "module's pool of floats no one else holds, or new)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef rank_module = {
    PyModuleDef_HEAD_INIT, "ratatoskr.memory.search._rank",
    "A mirror search's inner steps: the candidate cut, the exact scores, the hits' lists.", -1,
    rank_methods,
};

PyMODINIT_FUNC
PyInit__rank(void)
{
    PyObject *module = PyModule_Create(&rank_module);
    if (module != NULL && PyModule_AddIntConstant(module, "SETTLED_MAX", SETTLED_MAX) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
