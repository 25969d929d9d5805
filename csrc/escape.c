/* Escaping client bytes (the rule is in escape.h and _escape.py). */
#include "escape.h"

/* For each byte, whether it needs escaping: bit 0 in a quoted field, bit 1 unquoted.
 * Built by the preprocessor so that it is constant data: no state to initialise. */
#define UNSAFE(b) (((b) < 0x20 || (b) > 0x7e || (b) == '"' || (b) == '\\') ? 3 : ((b) == ' ' ? 2 : 0))
#define ROW(b)                                                                              \
    UNSAFE(b), UNSAFE(b + 1), UNSAFE(b + 2), UNSAFE(b + 3), UNSAFE(b + 4), UNSAFE(b + 5),   \
        UNSAFE(b + 6), UNSAFE(b + 7), UNSAFE(b + 8), UNSAFE(b + 9), UNSAFE(b + 10),         \
        UNSAFE(b + 11), UNSAFE(b + 12), UNSAFE(b + 13), UNSAFE(b + 14), UNSAFE(b + 15)
static const unsigned char unsafe[256] = {
    ROW(0x00), ROW(0x10), ROW(0x20), ROW(0x30), ROW(0x40), ROW(0x50), ROW(0x60), ROW(0x70),
    ROW(0x80), ROW(0x90), ROW(0xa0), ROW(0xb0), ROW(0xc0), ROW(0xd0), ROW(0xe0), ROW(0xf0),
};

static const char hex_digits[] = "0123456789abcdef";

int
escape_write(Buffer *buffer, const char *bytes, Py_ssize_t size, EscapeMode mode)
{
    const unsigned char *in = (const unsigned char *)bytes;
    const unsigned char bit = (unsigned char)(mode == ESCAPE_QUOTED ? 1 : 2);
    Py_ssize_t plain = 0;
    /* Almost every value is plain: find the first byte that is not, copy up to it. */
    while (plain < size && !(unsafe[in[plain]] & bit)) {
        plain++;
    }
    if (buffer_write(buffer, bytes, plain) < 0) {
        return -1;
    }
    if (plain == size) {
        return 0;
    }
    /* The rest at worst quadruples (each byte as \xhh). */
    if ((size - plain) > PY_SSIZE_T_MAX / 4 || buffer_reserve(buffer, 4 * (size - plain)) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        return -1;
    }
    char *out = buffer->data + buffer->length;
    for (Py_ssize_t i = plain; i < size; i++) {
        unsigned char b = in[i];
        if (unsafe[b] & bit) {
            *out++ = '\\';
            *out++ = 'x';
            *out++ = hex_digits[b >> 4];
            *out++ = hex_digits[b & 0xf];
        }
        else {
            *out++ = (char)b;
        }
    }
    buffer->length = out - buffer->data;
    return 0;
}
