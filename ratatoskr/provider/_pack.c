/* Packing a batch's vectors into float64 bytes, for upsert_many.
 *
 * Python's own converters (array('d', ...), numpy, struct) spend ~20 ns per value going
 * through the generic number protocol; a batch of 500 x 768 spent more time here than in
 * SQLite. This reads each list item once: an exact float is copied, anything else (an int,
 * a bool, a float subclass, a list of the wrong length) returns None, and the caller takes
 * the pure-Python path, which accepts integers and names the first fault. Finiteness and
 * range are checked afterwards in numpy, on the packed values.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *
pack_float_lists(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "pack_float_lists(vectors, dim) takes 2 arguments");
        return NULL;
    }
    PyObject *vectors = args[0];
    Py_ssize_t dim = PyLong_AsSsize_t(args[1]);
    if (dim == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyList_CheckExact(vectors) || dim < 1) {
        Py_RETURN_NONE;
    }
    Py_ssize_t count = PyList_GET_SIZE(vectors);
    if (count > PY_SSIZE_T_MAX / dim / (Py_ssize_t)sizeof(double)) {
        Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, count * dim * (Py_ssize_t)sizeof(double));
    if (out == NULL) {
        return NULL;
    }
    double *dst = (double *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *vector = PyList_GET_ITEM(vectors, i);
        if (!PyList_CheckExact(vector) || PyList_GET_SIZE(vector) != dim) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject **items = ((PyListObject *)vector)->ob_item;
        for (Py_ssize_t j = 0; j < dim; j++) {
            PyObject *item = items[j];
            if (!PyFloat_CheckExact(item)) {
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
            *dst++ = PyFloat_AS_DOUBLE(item);
        }
    }
    return out;
}

static PyMethodDef pack_methods[] = {
    {"pack_float_lists", (PyCFunction)(void (*)(void))pack_float_lists, METH_FASTCALL,
     "pack_float_lists(vectors, dim) -> bytes | None\n\n"
     "The float64 bytes of every list in vectors, in order, when each is a list of exactly\n"
     "dim floats (float itself, not int, bool or a subclass); otherwise None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef pack_module = {
    PyModuleDef_HEAD_INIT, "ratatoskr.provider._pack",
    "Packing lists of floats into float64 bytes (see pack_float_lists).", -1, pack_methods,
};

PyMODINIT_FUNC
PyInit__pack(void)
{
    return PyModule_Create(&pack_module);
}
