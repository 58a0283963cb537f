/* What the two files of ratatoskr.memory.search._rank share: reading numpy arrays through the
 * buffer protocol, the SIMD clones of the inner loops, and the exact-score functions the
 * module table (in _rank.c) lists from _rank_exact.c. */
#ifndef RATATOSKR_RANK_H
#define RATATOSKR_RANK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define DOT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DOT_CLONES
#endif

#define SETTLED_MAX 64 /* settled_top's largest top_k; numpy orders larger ones */

/* A C-contiguous view of obj holding kind: 'f' float32, 'd' float64 or 'q' int64; on a
 * mismatch a TypeError naming name, and nothing held. */
int rank_get_buffer(PyObject *obj, Py_buffer *view, char kind, const char *name);

PyObject *rank_exact_cosine(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *rank_settled_top(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *rank_row_norms(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
