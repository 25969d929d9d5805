/* A growable byte buffer: the one output of a batch, written straight into the bytes
 * object that is returned (cut to its length at the end, so no copy of it is made).
 *
 * Every write reserves its room first with buffer_reserve(); the writers after it
 * (buffer_put and friends) then cannot fail.  A failed reservation has set MemoryError.
 */
#ifndef BOUNDLOG_BUFFER_H
#define BOUNDLOG_BUFFER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject *bytes; /* the bytes object being written, owned until buffer_finish */
    char *data;      /* its contents */
    Py_ssize_t length;
    Py_ssize_t capacity;
} Buffer;

int buffer_init(Buffer *buffer, Py_ssize_t capacity);
/* Room for `extra` more bytes; 0 on success, -1 with MemoryError set. */
int buffer_grow(Buffer *buffer, Py_ssize_t extra);
/* The bytes written so far (NULL on error); the buffer no longer holds them. */
PyObject *buffer_finish(Buffer *buffer);
void buffer_free(Buffer *buffer);
/* What a format returns for a batch whose writing ended with `rc`: the bytes written
 * (rc 0), None (rc > 0: a record left to the pure-Python core), or NULL (rc < 0, with
 * an exception set).  The buffer no longer holds anything. */
PyObject *buffer_result(Buffer *buffer, int rc);
/* Appends `number` in decimal, as b"%d" % number does: 0, or -1 with MemoryError set. */
int buffer_write_decimal(Buffer *buffer, long long number);
/* Appends `number` as Python formats it: PyOS_double_to_string(number, format,
 * precision, flags) ("%.3f" is 'f', 3, 0; repr() 'r', 0, Py_DTSF_ADD_DOT_0).  0, or -1
 * with an exception set. */
int buffer_write_double(Buffer *buffer, double number, char format, int precision, int flags);

static inline int
buffer_reserve(Buffer *buffer, Py_ssize_t extra)
{
    if (extra <= buffer->capacity - buffer->length) {
        return 0;
    }
    return buffer_grow(buffer, extra);
}

/* Copies `size` bytes: most of a line's pieces are a few bytes (a key, a status, a
 * method), which memcpy's call and size dispatch would cost more than the copy.  Up
 * to 16 bytes are moved as two overlapping words (fixed-size memcpy calls, which the
 * compiler makes single loads and stores), never touching a byte past `size`. */
static inline void
buffer_copy(char *out, const char *in, size_t size)
{
    if (size >= 8 && size <= 16) {
        uint64_t head, tail;
        memcpy(&head, in, 8);
        memcpy(&tail, in + size - 8, 8);
        memcpy(out, &head, 8);
        memcpy(out + size - 8, &tail, 8);
    }
    else if (size >= 4 && size < 8) {
        uint32_t head, tail;
        memcpy(&head, in, 4);
        memcpy(&tail, in + size - 4, 4);
        memcpy(out, &head, 4);
        memcpy(out + size - 4, &tail, 4);
    }
    else if (size > 0 && size < 4) {
        char first = in[0], middle = in[size / 2], last = in[size - 1];
        out[0] = first;
        out[size / 2] = middle;
        out[size - 1] = last;
    }
    else if (size > 16) {
        memcpy(out, in, size);
    }
}

/* Only after buffer_reserve() made room for `size` bytes. */
static inline void
buffer_put(Buffer *buffer, const char *bytes, Py_ssize_t size)
{
    buffer_copy(buffer->data + buffer->length, bytes, (size_t)size);
    buffer->length += size;
}

/* Reserves and writes: 0, or -1 with MemoryError set. */
static inline int
buffer_write(Buffer *buffer, const char *bytes, Py_ssize_t size)
{
    if (buffer_reserve(buffer, size) < 0) {
        return -1;
    }
    buffer_put(buffer, bytes, size);
    return 0;
}

#define BUFFER_LITERAL(buffer, text) buffer_write((buffer), (text), (Py_ssize_t)sizeof(text) - 1)

#endif
