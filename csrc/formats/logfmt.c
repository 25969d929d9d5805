/* logfmt values and keys (see logfmt.h). */
#include "formats/logfmt.h"

void
logfmt_loosen(Buffer *buffer, Py_ssize_t field, Py_ssize_t value)
{
    char *text = buffer->data + value;
    Py_ssize_t size = buffer->length - value;
    if (size == 4 && memcmp(text, "null", 4) == 0) {
        buffer->length = field;
        return;
    }
    /* A string of at least one character between its quotes. */
    if (size < 3 || text[0] != '"') {
        return;
    }
    for (Py_ssize_t i = 1; i < size - 1; i++) {
        if (text[i] == ' ' || text[i] == '=' || text[i] == '\\') {
            return;
        }
    }
    memmove(text, text + 1, (size_t)(size - 2));
    buffer->length -= 2;
}

int
logfmt_is_key(PyObject *key)
{
    if (!PyUnicode_IS_ASCII(key) || PyUnicode_GET_LENGTH(key) == 0) {
        return 0;
    }
    const Py_UCS1 *chars = PyUnicode_1BYTE_DATA(key);
    for (Py_ssize_t i = 0; i < PyUnicode_GET_LENGTH(key); i++) {
        Py_UCS1 c = chars[i];
        if (c <= ' ' || c > '~' || c == '=' || c == '"' || c == '\\') {
            return 0;
        }
    }
    return 1;
}
