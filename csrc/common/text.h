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

#endif
