/* The growable byte buffer of buffer.h. */
#include "buffer.h"

int
buffer_init(Buffer *buffer, Py_ssize_t capacity)
{
    buffer->length = 0;
    buffer->capacity = capacity > 0 ? capacity : 1;
    buffer->data = PyMem_Malloc((size_t)buffer->capacity);
    if (buffer->data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

int
buffer_grow(Buffer *buffer, Py_ssize_t extra)
{
    /* Doubling keeps a batch's copies linear in its size. */
    if (extra > PY_SSIZE_T_MAX / 2 - buffer->length) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t capacity = buffer->capacity * 2;
    if (capacity < buffer->length + extra) {
        capacity = buffer->length + extra;
    }
    char *data = PyMem_Realloc(buffer->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    buffer->data = data;
    buffer->capacity = capacity;
    return 0;
}

PyObject *
buffer_finish(Buffer *buffer)
{
    PyObject *result = PyBytes_FromStringAndSize(buffer->data, buffer->length);
    buffer_free(buffer);
    return result;
}

void
buffer_free(Buffer *buffer)
{
    PyMem_Free(buffer->data);
    buffer->data = NULL;
    buffer->length = buffer->capacity = 0;
}
