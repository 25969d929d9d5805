/* The bytes of a str field, encoded as the pure-Python core encodes it.
 *
 * Most values are ASCII: their bytes are read in place, without a copy.  Otherwise a
 * bytes object is made and held in `owner` until text_release(). */
#ifndef BOUNDLOG_TEXT_H
#define BOUNDLOG_TEXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    const char *data;
    Py_ssize_t size;
    PyObject *owner; /* a strong reference, or NULL when `data` is the str's own */
} TextBytes;

/* _columns._text: UTF-8 with surrogatepass (method, protocol, client address). */
int text_utf8(PyObject *text, TextBytes *out);
/* _headers._as_bytes for a str: latin-1 when every character fits, else as text_utf8. */
int text_latin1_or_utf8(PyObject *text, TextBytes *out);
/* A bytes object's own bytes (nothing to release, but text_release is harmless). */
void text_of_bytes(PyObject *bytes, TextBytes *out);

static inline void
text_release(TextBytes *text)
{
    Py_CLEAR(text->owner);
}

/* Whether `data` (a header field's name) is `lower` (a lower-case name) in any ASCII
 * case, as the formats compare names: bytes.lower() == lower. */
static inline int
text_is_name(const char *data, Py_ssize_t size, const char *lower, Py_ssize_t lower_size)
{
    if (size != lower_size) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        char c = data[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c + ('a' - 'A'));
        }
        if (c != lower[i]) {
            return 0;
        }
    }
    return 1;
}

#endif
