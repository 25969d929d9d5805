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

static const char digit_pairs[201] =
    "0001020304050607080910111213141516171819"
    "2021222324252627282930313233343536373839"
    "4041424344454647484950515253545556575859"
    "6061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

int
buffer_write_decimal(Buffer *buffer, long long number)
{
    /* By hand: snprintf cost half a combined line's time.  Two digits at a time, last
     * first, into a local array, then copied (buffer_put: inline for so few bytes). */
    char digits[24];
    char *end = digits + sizeof digits, *start = end;
    /* Unsigned, so that the most negative number negates without overflow. */
    unsigned long long magnitude = number < 0 ? 0ULL - (unsigned long long)number
                                              : (unsigned long long)number;
    while (magnitude >= 100) {
        start -= 2;
        memcpy(start, digit_pairs + 2 * (magnitude % 100), 2);
        magnitude /= 100;
    }
    if (magnitude >= 10) {
        start -= 2;
        memcpy(start, digit_pairs + 2 * magnitude, 2);
    }
    else {
        *--start = (char)('0' + magnitude);
    }
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
