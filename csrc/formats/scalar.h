/* A value the application or server hands over as it is (a note, a field of a record's
 * extras, a server variable), as the lines write it: _json._json_scalar in a JSON line,
 * _notes.note_text in a template's. */
#ifndef BOUNDLOG_SCALAR_H
#define BOUNDLOG_SCALAR_H

#include "common/buffer.h"
#include "record/packed.h"

/* Appends `value` as JSON: null, true, false, an int of 64 bits, a float as repr()
 * writes it (null when not finite), a str as a JSON string, and bytes as the JSON
 * string of their str().  0, -1 with an exception set, or UNSUPPORTED (record.h) for
 * a value of any other type (exactly: a subclass could change its str()), an int past
 * 64 bits, or bytes whose str() raised (under python -bb): the reference writes those. */
int scalar_write_json(Buffer *buffer, PyObject *value);

/* Appends `value` as note_text writes it, escaped as a client's bytes in a quoted field
 * (escape.h): "-" for None and for a float that is not finite, true or false, the
 * digits of an int, repr() of a float, a str's UTF-8 bytes, bytes' str().  The same
 * returns, for the same values, as scalar_write_json. */
int scalar_write_text(Buffer *buffer, PyObject *value);

/* scalar_write_json (`json`) or scalar_write_text of a Packed record's field, which
 * is written as the object it was packed from: UNSUPPORTED for PACKED_VALUE_OTHER. */
int scalar_write_packed(Buffer *buffer, const PackedValue *value, int json);

#endif
