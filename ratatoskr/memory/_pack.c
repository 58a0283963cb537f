/* Packing a batch's vectors into float64 and float32 bytes, for upsert_many and search.
 *
 * Python's own converters (array('d', ...), numpy, struct) spend ~20 ns per value going
 * through the generic number protocol; a batch of 500 x 768 spent more time here than in
 * SQLite. This reads each list item once: an exact float is copied, anything else (an int,
 * a bool, a float subclass, a list of the wrong length) returns None, and the caller takes
 * the pure-Python path, which accepts integers and names the first fault. Finiteness,
 * float32 range, all-zero vectors and float32 exactness are checked in the same pass
 * (narrow_float_lists), each fault only flagged: the caller names it the slow way.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#include "_narrow.h"

/* Every check upsert_many makes on the values, in the pass that reads them: returns
 * (float64 bytes, float32 bytes, one flag byte per vector) where a flag holds INEXACT when
 * float32 does not hold every value exactly, BAD_VALUE when a value is not finite or rounds
 * to infinity in float32 (|v| >= limit), ALL_ZERO when every float32 value is zero. A bad
 * value is stored as zero in the float32 bytes and counts neither way. Rounding is C's
 * double-to-float conversion, the same round-to-nearest-even numpy's astype uses. One pass
 * (read, widen, narrow, check) rather than a pack then a check over the packed bytes: the
 * second pass re-read 3 MB for a 500 x 768 batch, ~40 % of the time here. */

static PyObject *
narrow_float_lists(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "narrow_float_lists(vectors, dim, limit) takes 3 arguments");
        return NULL;
    }
    PyObject *vectors = args[0];
    Py_ssize_t dim = PyLong_AsSsize_t(args[1]);
    if (dim == -1 && PyErr_Occurred()) {
        return NULL;
    }
    double limit = PyFloat_AsDouble(args[2]);
    if (limit == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyList_CheckExact(vectors) || dim < 1) {
        Py_RETURN_NONE;
    }
    Py_ssize_t count = PyList_GET_SIZE(vectors);
    if (count > PY_SSIZE_T_MAX / dim / (Py_ssize_t)sizeof(double)) {
        Py_RETURN_NONE;
    }
    PyObject *wide = PyBytes_FromStringAndSize(NULL, count * dim * (Py_ssize_t)sizeof(double));
    PyObject *narrow = PyBytes_FromStringAndSize(NULL, count * dim * (Py_ssize_t)sizeof(float));
    PyObject *flags = PyBytes_FromStringAndSize(NULL, count);
    if (wide == NULL || narrow == NULL || flags == NULL) {
        Py_XDECREF(wide);
        Py_XDECREF(narrow);
        Py_XDECREF(flags);
        return NULL;
    }
    double *wdst = (double *)PyBytes_AS_STRING(wide);
    float *ndst = (float *)PyBytes_AS_STRING(narrow);
    char *flag = PyBytes_AS_STRING(flags);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *vector = PyList_GET_ITEM(vectors, i);
        if (!PyList_CheckExact(vector) || PyList_GET_SIZE(vector) != dim) {
            goto not_plain;
        }
        PyObject **items = ((PyListObject *)vector)->ob_item;
        narrow_seen seen = {0, 0, 0};
        for (Py_ssize_t j = 0; j < dim; j++) {
            PyObject *item = items[j];
            if (!PyFloat_CheckExact(item)) {
                goto not_plain;
            }
            double value = PyFloat_AS_DOUBLE(item);
            wdst[j] = value;
            ndst[j] = narrow_value(value, limit, &seen);
        }
        wdst += dim;
        ndst += dim;
        flag[i] = narrow_flag(&seen);
    }
    return Py_BuildValue("(NNN)", wide, narrow, flags);

not_plain:
    Py_DECREF(wide);
    Py_DECREF(narrow);
    Py_DECREF(flags);
    Py_RETURN_NONE;
}

static PyMethodDef pack_methods[] = {
    {"narrow_float_lists", (PyCFunction)(void (*)(void))narrow_float_lists, METH_FASTCALL,
     "narrow_float_lists(vectors, dim, limit) -> tuple[bytes, bytes, bytes] | None\n\n"
     "When every list in vectors holds exactly dim floats (float itself, not int, bool or a\n"
     "subclass): their float64 bytes, their float32 bytes and a flag byte per vector, 1 not\n"
     "exact in float32, 2 a value not finite or not below limit in magnitude, 4 all zero in\n"
     "float32. Otherwise None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef pack_module = {
    PyModuleDef_HEAD_INIT, "ratatoskr.memory._pack",
    "Packing and checking lists of floats (see narrow_float_lists).", -1, pack_methods,
};

PyMODINIT_FUNC
PyInit__pack(void)
{
    return PyModule_Create(&pack_module);
}
