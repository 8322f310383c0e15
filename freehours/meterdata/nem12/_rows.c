/* The NEM12 reader's hot loop in C: a 300 record's interval values, read in one pass
 * (freehours.meterdata.nem12._rows; the pure-Python twin is common._read_row).
 *
 * ``Table().read(rest, count, lookup)`` answers what ``_read_row(rest, count, lookup)`` answers,
 * for the same arguments: ``rest`` is a 300 record past its IntervalDate; None when it has fewer
 * than ``count`` commas (no look-up made); else (the first ``count`` comma-separated texts, each
 * passed through ``lookup``, as a tuple; the index in ``rest`` just past the ``count``-th comma).
 * An exception from ``lookup`` (a text that is not a value) comes out as it is.
 *
 * What makes it faster: ``str.split`` makes a string object of every field, and the dict behind
 * ``lookup`` hashes each one; here the texts are found with memchr and looked up by their bytes
 * in a table of those already met, without making an object. A text the table does not hold
 * (or that is empty: a missing value, which ``lookup`` counts) goes to ``lookup`` as a string,
 * whose answer is kept, so every text is checked by the Python code once per table.
 *
 * Bounds, whatever the file: texts longer than KEY_MAX bytes are never kept; a look-up probes at
 * most MAX_PROBES slots (a text that finds no room goes to ``lookup`` every time, so crafted
 * collisions cost a dict look-up each, never a longer search); the table is emptied when it
 * holds half its ``capacity`` texts, so it stays at ``capacity`` slots (by default CAPACITY,
 * 4 MB, allocated at the first text kept) however many distinct texts come.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define KEY_MAX 16
#define CAPACITY (1 << 17)
#define MIN_CAPACITY 16
#define MAX_CAPACITY (1 << 24)
#define MAX_PROBES 8

typedef struct {
    PyObject *value; /* a strong reference; NULL where the slot is free */
    unsigned char len;
    char key[KEY_MAX];
} Slot;

typedef struct {
    PyObject_HEAD
    Slot *slots; /* capacity of them, allocated at the first text kept */
    size_t capacity; /* a power of two */
    size_t used;
} Table;

static uint64_t
hash_key(const char *text, size_t len)
{
    uint64_t low = 0, high = 0;
    memcpy(&low, text, len < 8 ? len : 8);
    if (len > 8) {
        memcpy(&high, text + 8, len - 8);
    }
    uint64_t hash = (low ^ (high * 0x9E3779B97F4A7C15ULL) ^ len) * 0xFF51AFD7ED558CCDULL;
    return hash ^ (hash >> 29);
}

static void
Table_empty(Table *self)
{
    if (self->slots == NULL) {
        return;
    }
    for (size_t i = 0; i < self->capacity; i++) {
        Py_CLEAR(self->slots[i].value);
    }
    self->used = 0;
}

/* Keep ``value`` for the text: in the first free slot of its probes, or nowhere. */
static int
Table_keep(Table *self, const char *text, size_t len, uint64_t hash, PyObject *value)
{
    if (self->slots == NULL) {
        self->slots = PyMem_Calloc(self->capacity, sizeof(Slot));
        if (self->slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    else if (self->used >= self->capacity / 2) {
        Table_empty(self);
    }
    for (size_t probe = 0; probe < MAX_PROBES; probe++) {
        Slot *slot = &self->slots[(hash + probe) & (self->capacity - 1)];
        if (slot->value == NULL) {
            Py_INCREF(value);
            slot->value = value;
            slot->len = (unsigned char)len;
            memcpy(slot->key, text, len);
            self->used++;
            return 0;
        }
    }
    return 0;
}

/* The value of rest[start:stop] (a new reference), or NULL with the exception set. */
static PyObject *
Table_value(Table *self, PyObject *rest, const char *bytes, Py_ssize_t start, Py_ssize_t stop,
            PyObject *lookup)
{
    size_t len = (size_t)(stop - start);
    int keyed = bytes != NULL && len > 0 && len <= KEY_MAX;
    uint64_t hash = 0;
    if (keyed) {
        const char *text = bytes + start;
        hash = hash_key(text, len);
        if (self->slots != NULL) {
            for (size_t probe = 0; probe < MAX_PROBES; probe++) {
                Slot *slot = &self->slots[(hash + probe) & (self->capacity - 1)];
                if (slot->value == NULL) {
                    break;
                }
                if (slot->len == len && memcmp(slot->key, text, len) == 0) {
                    Py_INCREF(slot->value);
                    return slot->value;
                }
            }
        }
    }
    PyObject *text = PyUnicode_Substring(rest, start, stop);
    if (text == NULL) {
        return NULL;
    }
    PyObject *value = PyObject_CallOneArg(lookup, text);
    Py_DECREF(text);
    if (value != NULL && keyed && value != Py_None &&
        Table_keep(self, bytes + start, len, hash, value) < 0) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
}

/* The index of the first comma in rest[start:end], -1 where there is none, -2 on an error. */
static Py_ssize_t
next_comma(PyObject *rest, const char *bytes, Py_ssize_t start, Py_ssize_t end)
{
    if (bytes != NULL) {
        const char *found = memchr(bytes + start, ',', (size_t)(end - start));
        return found == NULL ? -1 : found - bytes;
    }
    return PyUnicode_FindChar(rest, ',', start, end, 1);
}

static PyObject *
Table_read(Table *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "read(rest, count, lookup) takes three arguments");
        return NULL;
    }
    PyObject *rest = args[0], *lookup = args[2];
    if (!PyUnicode_Check(rest)) {
        PyErr_SetString(PyExc_TypeError, "read(): rest must be a str");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "read(): count must not be negative");
        return NULL;
    }
    Py_ssize_t end = PyUnicode_GET_LENGTH(rest);
    /* One byte a character (latin-1, as the reader decodes): looked up by their bytes. */
    const char *bytes = PyUnicode_KIND(rest) == PyUnicode_1BYTE_KIND
                            ? (const char *)PyUnicode_1BYTE_DATA(rest)
                            : NULL;
    /* The shape first, as split() would: fewer than count commas, and nothing is looked up. */
    Py_ssize_t past = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t comma = next_comma(rest, bytes, past, end);
        if (comma == -2) {
            return NULL;
        }
        if (comma == -1) {
            Py_RETURN_NONE;
        }
        past = comma + 1;
    }
    PyObject *values = PyTuple_New(count);
    if (values == NULL) {
        return NULL;
    }
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t comma = next_comma(rest, bytes, start, end);
        if (comma < 0) { /* found in the first walk: only an error can lose it */
            Py_DECREF(values);
            return NULL;
        }
        PyObject *value = Table_value(self, rest, bytes, start, comma, lookup);
        if (value == NULL) {
            Py_DECREF(values);
            return NULL;
        }
        PyTuple_SET_ITEM(values, i, value);
        start = comma + 1;
    }
    return Py_BuildValue("(Nn)", values, start);
}

static PyObject *
Table_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwargs))
{
    Table *self = (Table *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->capacity = CAPACITY; /* even where __init__ is never called */
    }
    return (PyObject *)self;
}

static int
Table_init(Table *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"capacity", NULL};
    Py_ssize_t capacity = CAPACITY;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n:Table", keywords, &capacity)) {
        return -1;
    }
    if (capacity < MIN_CAPACITY || capacity > MAX_CAPACITY || (capacity & (capacity - 1)) != 0) {
        PyErr_Format(PyExc_ValueError,
                     "Table(capacity=%zd): a power of two from %d to %d", capacity,
                     MIN_CAPACITY, MAX_CAPACITY);
        return -1;
    }
    if (self->slots != NULL) { /* __init__ called again: start empty, at the new size */
        Table_empty(self);
        PyMem_Free(self->slots);
        self->slots = NULL;
    }
    self->capacity = (size_t)capacity;
    return 0;
}

static PyObject *
Table_clear(Table *self, PyObject *Py_UNUSED(ignored))
{
    Table_empty(self);
    Py_RETURN_NONE;
}

static PyObject *
Table_len(Table *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSize_t(self->used);
}

static PyObject *
Table_capacity(Table *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSize_t(self->capacity);
}

static void
Table_dealloc(Table *self)
{
    Table_empty(self);
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Table_methods[] = {
    {"read", (PyCFunction)(void (*)(void))Table_read, METH_FASTCALL,
     "read(rest, count, lookup): (values, index past the count-th comma), or None"},
    {"clear", (PyCFunction)Table_clear, METH_NOARGS, "Forget every text kept."},
    {"kept", (PyCFunction)Table_len, METH_NOARGS, "How many texts are kept."},
    {"capacity", (PyCFunction)Table_capacity, METH_NOARGS, "Slots: it keeps half as many texts."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "freehours.meterdata.nem12._rows.Table",
    .tp_doc = "Value texts already met, by their bytes, and a 300 record's values read with them.",
    .tp_basicsize = sizeof(Table),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Table_new,
    .tp_init = (initproc)Table_init,
    .tp_dealloc = (destructor)Table_dealloc,
    .tp_methods = Table_methods,
};

static struct PyModuleDef rows_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "freehours.meterdata.nem12._rows",
    .m_doc = "The NEM12 reader's hot loop in C (see common._read_row, its pure-Python twin).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__rows(void)
{
    if (PyType_Ready(&TableType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&rows_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Table", (PyObject *)&TableType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "KEY_MAX", KEY_MAX) < 0 ||
        PyModule_AddIntConstant(module, "CAPACITY", CAPACITY) < 0 ||
        PyModule_AddIntConstant(module, "MAX_PROBES", MAX_PROBES) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
