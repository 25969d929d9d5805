/* Encoding str fields (see text.h). */
#include "common/text.h"

static int
ready(PyObject *text)
{
#if PY_VERSION_HEX < 0x030C0000
    /* 3.11 may still hold a legacy string not yet in its compact form. */
    return PyUnicode_READY(text);
#else
    (void)text;
    return 0;
#endif
}

int
text_utf8(PyObject *text, TextBytes *out)
{
    if (ready(text) < 0) {
        return -1;
    }
    if (PyUnicode_IS_ASCII(text)) {
        out->data = (const char *)PyUnicode_DATA(text);
        out->size = PyUnicode_GET_LENGTH(text);
        out->owner = NULL;
        return 0;
    }
    /* surrogatepass: a lone surrogate (from surrogateescape decoding) stays encodable,
     * and its three bytes are escaped like any other non-ASCII byte. */
    out->owner = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
    if (out->owner == NULL) {
        return -1;
    }
    out->data = PyBytes_AS_STRING(out->owner);
    out->size = PyBytes_GET_SIZE(out->owner);
    return 0;
}

int
text_latin1_or_utf8(PyObject *text, TextBytes *out)
{
    if (ready(text) < 0) {
        return -1;
    }
    if (PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND) {
        /* A one-byte-kind str stores its code points, all < 256: its latin-1 bytes. */
        out->data = (const char *)PyUnicode_DATA(text);
        out->size = PyUnicode_GET_LENGTH(text);
        out->owner = NULL;
        return 0;
    }
    return text_utf8(text, out);
}

void
text_of_bytes(PyObject *bytes, TextBytes *out)
{
    out->data = PyBytes_AS_STRING(bytes);
    out->size = PyBytes_GET_SIZE(bytes);
    out->owner = NULL;
}
