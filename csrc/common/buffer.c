/* The growable byte buffer of buffer.h. */
#include "common/buffer.h"

int
buffer_init(Buffer *buffer, Py_ssize_t capacity)
{
    /* At least 2 bytes: a new bytes object of size 0 or 1 may be a shared singleton,
     * which _PyBytes_Resize cannot resize. */
    buffer->bytes = PyBytes_FromStringAndSize(NULL, capacity > 2 ? capacity : 2);
    if (buffer->bytes == NULL) {
        return -1;
    }
    buffer->data = PyBytes_AS_STRING(buffer->bytes);
    buffer->length = 0;
    buffer->capacity = PyBytes_GET_SIZE(buffer->bytes);
    return 0;
}

int
buffer_grow(Buffer *buffer, Py_ssize_t extra)
{
    /* Growing by half keeps the copies linear in the size and the memory held at most
     * 1.5 times the output (tests/e2e/test_faults_hostile.py measures it). */
    if (extra > PY_SSIZE_T_MAX / 2 - buffer->length) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t capacity = buffer->capacity + buffer->capacity / 2;
    if (capacity < buffer->length + extra) {
        capacity = buffer->length + extra;
    }
    if (_PyBytes_Resize(&buffer->bytes, capacity) < 0) {
        /* It has freed the object and set the error. */
        buffer->data = NULL;
        buffer->length = buffer->capacity = 0;
        return -1;
    }
    buffer->data = PyBytes_AS_STRING(buffer->bytes);
    buffer->capacity = capacity;
    return 0;
}

PyObject *
buffer_finish(Buffer *buffer)
{
    PyObject *bytes = buffer->bytes;
    buffer->bytes = NULL;
    buffer->data = NULL;
    if (_PyBytes_Resize(&bytes, buffer->length) < 0) {
        return NULL;
    }
    return bytes;
}

void
buffer_free(Buffer *buffer)
{
    Py_CLEAR(buffer->bytes);
    buffer->data = NULL;
    buffer->length = buffer->capacity = 0;
}

PyObject *
buffer_result(Buffer *buffer, int rc)
{
    if (rc == 0) {
        return buffer_finish(buffer);
    }
    buffer_free(buffer);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

int
buffer_write_decimal(Buffer *buffer, long long number)
{
    /* By hand: snprintf cost half a combined line's time. */
    char digits[24];
    char *end = digits + sizeof digits, *start = end;
    /* Unsigned, so that the most negative number negates without overflow. */
    unsigned long long magnitude = number < 0 ? 0ULL - (unsigned long long)number
                                              : (unsigned long long)number;
    do {
        *--start = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    if (number < 0) {
        *--start = '-';
    }
    return buffer_write(buffer, start, end - start);
}

int
buffer_write_double(Buffer *buffer, double number, char format, int precision, int flags)
{
    char *text = PyOS_double_to_string(number, format, precision, flags, NULL);
    if (text == NULL) {
        return -1;
    }
    int rc = buffer_write(buffer, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return rc;
}
