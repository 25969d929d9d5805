/* Values as the lines write them (see scalar.h). */
#include "formats/scalar.h"

#include <math.h>

#include "formats/escape.h"
#include "record/record.h"

/* Appends str() of an exact bytes object, as a JSON string or escaped.  str() is
 * called rather than repr() copied: under python -b it warns as the reference's does,
 * and when it raises (-bb) the reference writes "<unprintable bytes>", so the record
 * is left to it. */
static int
write_bytes_text(Buffer *buffer, PyObject *bytes, int json)
{
    PyObject *text = PyObject_Str(bytes);
    if (text == NULL) {
        PyErr_Clear();
        return UNSUPPORTED;
    }
    int rc = json ? escape_json_text_write(buffer, text)
                  : escape_text_write(buffer, text, ESCAPE_QUOTED);
    Py_DECREF(text);
    return rc;
}

/* Both rules: they differ only in what they write for None (and a float that is not
 * finite) and in how a str is quoted. */
static int
write_value(Buffer *buffer, PyObject *value, int json)
{
    if (value == Py_None) {
        return json ? BUFFER_LITERAL(buffer, "null") : BUFFER_LITERAL(buffer, "-");
    }
    if (value == Py_True) {
        return BUFFER_LITERAL(buffer, "true");
    }
    if (value == Py_False) {
        return BUFFER_LITERAL(buffer, "false");
    }
    if (PyUnicode_CheckExact(value)) {
        return json ? escape_json_text_write(buffer, value)
                    : escape_text_write(buffer, value, ESCAPE_QUOTED);
    }
    if (PyLong_CheckExact(value)) {
        long long number;
        return record_integer(value, &number) != 0 ? UNSUPPORTED
                                                   : buffer_write_decimal(buffer, number);
    }
    if (PyFloat_CheckExact(value)) {
        double number = PyFloat_AS_DOUBLE(value);
        if (!isfinite(number)) {
            return json ? BUFFER_LITERAL(buffer, "null") : BUFFER_LITERAL(buffer, "-");
        }
        /* float.__repr__'s own formatting. */
        return buffer_write_double(buffer, number, 'r', 0, Py_DTSF_ADD_DOT_0);
    }
    if (PyBytes_CheckExact(value)) {
        return write_bytes_text(buffer, value, json);
    }
    return UNSUPPORTED;
}

int
scalar_write_json(Buffer *buffer, PyObject *value)
{
    return write_value(buffer, value, 1);
}

int
scalar_write_text(Buffer *buffer, PyObject *value)
{
    return write_value(buffer, value, 0);
}

int
scalar_write_packed(Buffer *buffer, const PackedValue *value, int json)
{
    switch (value->kind) {
    case PACKED_VALUE_NONE:
        return json ? BUFFER_LITERAL(buffer, "null") : BUFFER_LITERAL(buffer, "-");
    case PACKED_VALUE_TRUE:
        return BUFFER_LITERAL(buffer, "true");
    case PACKED_VALUE_FALSE:
        return BUFFER_LITERAL(buffer, "false");
    case PACKED_VALUE_INT:
        return buffer_write_decimal(buffer, value->number);
    case PACKED_VALUE_TEXT:
        /* A str's UTF-8 with surrogatepass: escaped as the str is (escape.h). */
        return json ? escape_json_write(buffer, value->text, value->size)
                    : escape_write(buffer, value->text, value->size, ESCAPE_QUOTED);
    default:
        return UNSUPPORTED;
    }
}
