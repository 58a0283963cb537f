/* The exact float64 scores of ratatoskr.memory.search._rank (module table in _rank.c).
 *
 * The scores that decide a search (exact_cosine, settled_top, row_norms) are float64 sums in
 * the order cosine.py fixes: eight lanes, lane k summing the products of the values at
 * k, k + 8, k + 16, ... in turn from +0.0, then (lane k + lane k+4), then (k + k+2), then
 * the two left. cosine.py computes the same order with numpy where this module was not
 * built, so both give the same bits: products and sums are single IEEE operations here
 * (the file is built with -ffp-contract=off: no fused multiply-add), in a fixed order.
 */
#include "_rank.h"

#include <math.h>

/* The float64 dot product of two float32 rows of dim values, in cosine.py's lane order. */
DOT_CLONES static double
lane_dot(const float *restrict a, const float *restrict b, Py_ssize_t dim)
{
    double lane[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    Py_ssize_t full = dim - dim % 8, j = 0;
    for (; j < full; j += 8) {
        for (int k = 0; k < 8; k++) {
            lane[k] += (double)a[j + k] * (double)b[j + k];
        }
    }
    for (; j < dim; j++) {
        lane[j - full] += (double)a[j] * (double)b[j];
    }
    double t0 = lane[0] + lane[4], t1 = lane[1] + lane[5];
    double t2 = lane[2] + lane[6], t3 = lane[3] + lane[7];
    return (t0 + t2) + (t1 + t3);
}

/* The arguments of exact_cosine and settled_top (matrix, rows, query, norms), checked. */
typedef struct {
    Py_buffer matrix, rows, query, norms;
    Py_ssize_t dim, n;
    int held; /* how many of the four views are held */
} Scoring;

static void
close_scoring(Scoring *s)
{
    Py_buffer *views[4] = {&s->matrix, &s->rows, &s->query, &s->norms};
    for (int i = 0; i < s->held; i++) {
        PyBuffer_Release(views[i]);
    }
    s->held = 0;
}

static int
open_scoring(Scoring *s, PyObject *const *args, const char *name)
{
    s->held = 0;
    if (rank_get_buffer(args[0], &s->matrix, 'f', "matrix") < 0) {
        return -1;
    }
    s->held = 1;
    if (rank_get_buffer(args[1], &s->rows, 'q', "rows") < 0) {
        goto fail;
    }
    s->held = 2;
    if (rank_get_buffer(args[2], &s->query, 'f', "query") < 0) {
        goto fail;
    }
    s->held = 3;
    if (rank_get_buffer(args[3], &s->norms, 'd', "norms") < 0) {
        goto fail;
    }
    s->held = 4;
    s->dim = s->query.len / 4;
    s->n = s->rows.len / 8;
    Py_ssize_t capacity = s->dim ? s->matrix.len / 4 / s->dim : 0;
    if (s->dim == 0 || s->matrix.len != capacity * s->dim * 4 || s->norms.len / 8 < capacity) {
        PyErr_Format(PyExc_ValueError, "%s: shapes do not agree", name);
        goto fail;
    }
    const long long *row = s->rows.buf;
    for (Py_ssize_t i = 0; i < s->n; i++) {
        if (row[i] < 0 || row[i] >= capacity) {
            PyErr_Format(PyExc_IndexError, "%s: a row lies outside the matrix", name);
            goto fail;
        }
    }
    return 0;
fail:
    close_scoring(s);
    return -1;
}

/* The exact float64 score of each of s's rows, into score[n]. */
static void
score_exactly(const Scoring *s, double *score)
{
    const float *m = s->matrix.buf, *q = s->query.buf;
    const double *norm = s->norms.buf;
    const long long *row = s->rows.buf;
    double query_norm = sqrt(lane_dot(q, q, s->dim));
    for (Py_ssize_t i = 0; i < s->n; i++) {
        double scale = norm[row[i]] * query_norm;
        double v = lane_dot(m + row[i] * s->dim, q, s->dim) / scale;
        /* rounding can carry two parallel vectors' cosine an ulp past 1: a score is in [-1, 1] */
        score[i] = v > 1.0 ? 1.0 : (v < -1.0 ? -1.0 : v);
    }
}

/* The exact float64 scores of a search's candidates: the last step of its ranking. */
PyObject *
rank_exact_cosine(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "exact_cosine(matrix, rows, query, norms) takes 4 arguments");
        return NULL;
    }
    Scoring s;
    if (open_scoring(&s, args, "exact_cosine") < 0) {
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, s.n * (Py_ssize_t)sizeof(double));
    if (out != NULL) {
        score_exactly(&s, (double *)PyBytes_AS_STRING(out));
    }
    close_scoring(&s);
    return out;
}

/* The candidates' exact scores, and their top_k in order when the scores alone settle it:
 * (rows, scores) as lists, best first, or None when two of the top_k + 1 best scores are
 * equal (the order then goes by chunk id, which only the caller knows). One call where
 * numpy took a dozen (scores, argsort, slices, lists) on the ~18 candidates of a search. */
PyObject *
rank_settled_top(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "settled_top(matrix, rows, query, norms, top_k) takes 5 arguments");
        return NULL;
    }
    Py_ssize_t top_k = PyLong_AsSsize_t(args[4]);
    if (top_k == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (top_k < 1 || top_k > SETTLED_MAX) {
        PyErr_Format(PyExc_ValueError, "settled_top: top_k must be in 1..%d", SETTLED_MAX);
        return NULL;
    }
    Scoring s;
    if (open_scoring(&s, args, "settled_top") < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    double *score = PyMem_Malloc((size_t)(s.n ? s.n : 1) * sizeof(double));
    if (score == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    score_exactly(&s, score);
    /* the best min(n, top_k + 1), descending, by insertion (top_k is small) */
    double best[SETTLED_MAX + 1];
    Py_ssize_t best_at[SETTLED_MAX + 1], held = 0, keep = s.n < top_k + 1 ? s.n : top_k + 1;
    for (Py_ssize_t i = 0; i < s.n; i++) {
        double v = score[i];
        if (held == keep && !(v > best[held - 1])) {
            continue; /* equal to the last kept: the kept values are the same either way */
        }
        Py_ssize_t at = held < keep ? held++ : held - 1;
        while (at > 0 && best[at - 1] < v) {
            best[at] = best[at - 1];
            best_at[at] = best_at[at - 1];
            at--;
        }
        best[at] = v;
        best_at[at] = i;
    }
    for (Py_ssize_t i = 1; i < held; i++) { /* a tie among the top_k + 1: ids decide */
        if (best[i] == best[i - 1]) {
            goto tie;
        }
    }
    Py_ssize_t hits = held < top_k ? held : top_k;
    PyObject *rows = PyList_New(hits), *scores = PyList_New(hits);
    if (rows == NULL || scores == NULL) {
        Py_XDECREF(rows);
        Py_XDECREF(scores);
        goto done;
    }
    const long long *row = s.rows.buf;
    for (Py_ssize_t i = 0; i < hits; i++) {
        PyObject *r = PyLong_FromLongLong(row[best_at[i]]);
        PyObject *v = PyFloat_FromDouble(best[i]);
        if (r == NULL || v == NULL) {
            Py_XDECREF(r);
            Py_XDECREF(v);
            Py_DECREF(rows);
            Py_DECREF(scores);
            goto done;
        }
        PyList_SET_ITEM(rows, i, r);
        PyList_SET_ITEM(scores, i, v);
    }
    result = PyTuple_Pack(2, rows, scores);
    Py_DECREF(rows);
    Py_DECREF(scores);
    goto done;
tie:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(score);
    close_scoring(&s);
    return result;
}

PyObject *
rank_row_norms(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "row_norms(matrix, dim) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t dim = PyLong_AsSsize_t(args[1]);
    if (dim == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer matrix;
    if (rank_get_buffer(args[0], &matrix, 'f', "matrix") < 0) {
        return NULL;
    }
    PyObject *out = NULL;
    Py_ssize_t count = dim > 0 ? matrix.len / 4 / dim : 0;
    if (dim < 1 || matrix.len != count * dim * 4) {
        PyErr_SetString(PyExc_ValueError, "row_norms: shapes do not agree");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(double));
    if (out == NULL) {
        goto done;
    }
    double *norm = (double *)PyBytes_AS_STRING(out);
    const float *m = matrix.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        norm[i] = sqrt(lane_dot(m + i * dim, m + i * dim, dim));
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&matrix);
    return out;
}
