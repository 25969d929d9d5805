/* Escaping client bytes (the rules are in escape.h, formats/_escape.py and formats/_json.py). */
#include "formats/escape.h"

#include "common/text.h"

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

/* Whether any byte of `word` is zero: exact (a borrow can only mark bytes above a zero
 * one).  ONES has 1 in each byte. */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define HAS_ZERO(word) (((word) - ONES) & ~(word) & HIGHS)
/* Whether any byte of `word` is below n (n at most 0x80): never wrong when one is, and
 * a false alarm only sends the word to the byte-by-byte look. */
#define HAS_LESS(word, n) (((word) - ONES * (n)) & ~(word) & HIGHS)

/* How many bytes at the start of `in` are plain (unsafe[] has `bit` clear for them).
 * Values are mostly plain, and long ones (a user agent, a referer) are read eight
 * bytes at a time: a word is plain when none of its bytes is below 0x20 (0x21 for an
 * unquoted field, where a space is escaped too), from 0x7f on, '"' or '\\'.  The
 * byte-by-byte look decides the rest, so the word test may only err towards unsafe. */
static inline Py_ssize_t
plain_prefix(const unsigned char *in, Py_ssize_t size, unsigned char bit)
{
    const unsigned long long below = bit == 1 ? 0x20 : 0x21;
    Py_ssize_t plain = 0;
    for (; plain + 8 <= size; plain += 8) {
        unsigned long long word;
        memcpy(&word, in + plain, sizeof word);
        if ((word & HIGHS) | HAS_LESS(word, below) | HAS_ZERO(word ^ (ONES * 0x7f))
            | HAS_ZERO(word ^ (ONES * '"')) | HAS_ZERO(word ^ (ONES * '\\'))) {
            break;
        }
    }
    while (plain < size && !(unsafe[in[plain]] & bit)) {
        plain++;
    }
    return plain;
}

int
escape_write(Buffer *buffer, const char *bytes, Py_ssize_t size, EscapeMode mode)
{
    const unsigned char *in = (const unsigned char *)bytes;
    const unsigned char bit = (unsigned char)(mode == ESCAPE_QUOTED ? 1 : 2);
    /* Almost every value is plain: find the first byte that is not, copy up to it. */
    Py_ssize_t plain = plain_prefix(in, size, bit);
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

int
escape_text_write(Buffer *buffer, PyObject *text, EscapeMode mode)
{
    TextBytes bytes;
    if (text_utf8(text, &bytes) < 0) {
        return -1;
    }
    int rc = escape_write(buffer, bytes.data, bytes.size, mode);
    text_release(&bytes);
    return rc;
}

/* The JSON string rule (escape.h).  A byte that is plain in a quoted log field is
 * plain in a JSON string too: printable ASCII other than '"' and '\\' (bit 0 of
 * `unsafe`).  The rest is written by the helpers below, each at most 6 bytes a byte. */

/* \uhhhh for one UTF-16 code unit. */
static char *
put_json_unit(char *out, unsigned int unit)
{
    *out++ = '\\';
    *out++ = 'u';
    *out++ = hex_digits[(unit >> 12) & 0xf];
    *out++ = hex_digits[(unit >> 8) & 0xf];
    *out++ = hex_digits[(unit >> 4) & 0xf];
    *out++ = hex_digits[unit & 0xf];
    return out;
}

/* An ASCII byte as encode_basestring_ascii writes it, once _json_string has made each
 * backslash the text \x5c (whose own backslash JSON then escapes: \\x5c). */
static char *
put_json_ascii(char *out, unsigned char b)
{
    switch (b) {
    case '"':
        *out++ = '\\';
        *out++ = '"';
        return out;
    case '\\':
        memcpy(out, "\\\\x5c", 5);
        return out + 5;
    case '\b':
        *out++ = '\\';
        *out++ = 'b';
        return out;
    case '\f':
        *out++ = '\\';
        *out++ = 'f';
        return out;
    case '\n':
        *out++ = '\\';
        *out++ = 'n';
        return out;
    case '\r':
        *out++ = '\\';
        *out++ = 'r';
        return out;
    case '\t':
        *out++ = '\\';
        *out++ = 't';
        return out;
    default:
        if (!(unsafe[b] & 1)) {
            *out++ = (char)b;
            return out;
        }
        return put_json_unit(out, b);
    }
}

/* The length of the well-formed UTF-8 sequence starting in[0] (Unicode's table 3-7,
 * which Python's strict decoder follows), with its code point in *code; 0 if none. */
static int
utf8_sequence(const unsigned char *in, Py_ssize_t size, unsigned int *code)
{
    unsigned char b = in[0];
    if (b < 0x80) {
        *code = b;
        return 1;
    }
    if (b < 0xc2 || b > 0xf4) {
        return 0; /* a continuation byte, an overlong lead (C0, C1), or past U+10FFFF */
    }
    if (b < 0xe0) {
        if (size < 2 || (in[1] & 0xc0) != 0x80) {
            return 0;
        }
        *code = ((unsigned int)(b & 0x1f) << 6) | (in[1] & 0x3f);
        return 2;
    }
    /* The second byte's range excludes overlong forms (E0, F0), surrogates (ED) and
     * code points past U+10FFFF (F4). */
    unsigned char low = 0x80, high = 0xbf;
    if (b == 0xe0) {
        low = 0xa0;
    }
    else if (b == 0xed) {
        high = 0x9f;
    }
    else if (b == 0xf0) {
        low = 0x90;
    }
    else if (b == 0xf4) {
        high = 0x8f;
    }
    int length = b < 0xf0 ? 3 : 4;
    if (size < length || in[1] < low || in[1] > high) {
        return 0;
    }
    unsigned int value = b & (length == 3 ? 0x0f : 0x07);
    for (int i = 1; i < length; i++) {
        if ((in[i] & 0xc0) != 0x80) {
            return 0;
        }
        value = (value << 6) | (in[i] & 0x3f);
    }
    *code = value;
    return length;
}

int
escape_json_write(Buffer *buffer, const char *bytes, Py_ssize_t size)
{
    const unsigned char *in = (const unsigned char *)bytes;
    Py_ssize_t plain = plain_prefix(in, size, 1);
    /* The quotes, the plain bytes, and at worst 6 bytes for each of the others. */
    if ((size - plain) > (PY_SSIZE_T_MAX - 2 - plain) / 6
        || buffer_reserve(buffer, 2 + plain + 6 * (size - plain)) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        return -1;
    }
    char *out = buffer->data + buffer->length;
    *out++ = '"';
    buffer_copy(out, bytes, (size_t)plain);
    out += plain;
    /* Read as UTF-8 first; at the first byte that is not, start again from the first
     * byte that was not plain with every byte from 0x80 on as \xhh: the whole value
     * is either valid or not.  What is before it is ASCII either way. */
    char *rest = out;
    Py_ssize_t i = plain;
    while (i < size) {
        unsigned int code;
        int length = utf8_sequence(in + i, size - i, &code);
        if (length == 0) {
            break;
        }
        if (code < 0x80) {
            out = put_json_ascii(out, (unsigned char)code);
        }
        else if (code < 0x10000) {
            out = put_json_unit(out, code);
        }
        else {
            /* A UTF-16 surrogate pair, as JSON spells a character past U+FFFF. */
            code -= 0x10000;
            out = put_json_unit(out, 0xd800 | (code >> 10));
            out = put_json_unit(out, 0xdc00 | (code & 0x3ff));
        }
        i += length;
    }
    if (i < size) {
        out = rest;
        for (i = plain; i < size; i++) {
            unsigned char b = in[i];
            if (b < 0x80) {
                out = put_json_ascii(out, b);
            }
            else {
                /* backslashreplace's \xhh, whose backslash JSON escapes */
                *out++ = '\\';
                *out++ = '\\';
                *out++ = 'x';
                *out++ = hex_digits[b >> 4];
                *out++ = hex_digits[b & 0xf];
            }
        }
    }
    *out++ = '"';
    buffer->length = out - buffer->data;
    return 0;
}

int
escape_json_text_write(Buffer *buffer, PyObject *text)
{
    TextBytes bytes;
    if (text_utf8(text, &bytes) < 0) {
        return -1;
    }
    int rc = escape_json_write(buffer, bytes.data, bytes.size);
    text_release(&bytes);
    return rc;
}
