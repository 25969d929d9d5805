/* The record of one exchange, built from the scope as asgi._record builds it.
 *
 * Only the shape every server gives is read here: a dict scope with a bytes
 * raw_path, a known http_version, and a list or tuple of (bytes, bytes) headers
 * within the record budget.  Anything else (a request over the budget, a scope some
 * test or framework made by hand) goes to asgi._record itself, so that what a record
 * holds, and what an odd scope raises, is the reference's by construction. */
#include "paths/asgi.h"

#include "common/clock.h"
#include "common/compat.h"
#include "record/budget.h"
#include "record/extras.h"
#include "record/packed.h"
#include "record/record.h"

/* Leave this scope to asgi._record. */
#define UNUSUAL 1

int
asgi_is(PyObject *value, PyObject *name)
{
    if (value == name) {
        return 1;
    }
    if (PyUnicode_CheckExact(value)) {
        /* Equal str objects have the same kind (PEP 393's canonical form). */
        Py_ssize_t length = PyUnicode_GET_LENGTH(name);
        return PyUnicode_GET_LENGTH(value) == length
               && PyUnicode_KIND(value) == PyUnicode_KIND(name)
               && memcmp(PyUnicode_DATA(value), PyUnicode_DATA(name),
                         (size_t)length * PyUnicode_KIND(name)) == 0;
    }
    return PyObject_RichCompareBool(value, name, Py_EQ);
}


PyObject *
asgi_item_hinted(PyObject *mapping, PyObject *name, DictHint *hint)
{
    if (!PyDict_CheckExact(mapping)) {
        return PyObject_GetItem(mapping, name);
    }
    PyObject *value;
    if (dict_get_hinted(mapping, name, hint, &value) == 0) {
        PyErr_SetObject(PyExc_KeyError, name);
    }
    return value;
}

PyObject *
asgi_get_hinted(PyObject *mapping, PyObject *name, PyObject *fallback, DictHint *hint)
{
    if (!PyDict_CheckExact(mapping)) {
        PyObject *get = PyObject_GetAttrString(mapping, "get");
        if (get == NULL) {
            return NULL;
        }
        PyObject *value = PyObject_CallFunctionObjArgs(get, name, fallback, NULL);
        Py_DECREF(get);
        return value;
    }
    PyObject *value;
    if (dict_get_hinted(mapping, name, hint, &value) == 0) {
        value = Py_NewRef(fallback);
    }
    return value;
}

int
asgi_flag(PyObject *mapping, PyObject *name)
{
    PyObject *value = asgi_get(mapping, name, Py_False);
    if (value == NULL) {
        return -1;
    }
    int flag = PyObject_IsTrue(value);
    Py_DECREF(value);
    return flag;
}

/* client[0] if client else None, for None or a non-empty tuple. */
static int
client_address(PyObject *scope, PyObject *name, DictHint *hint, PyObject **address)
{
    PyObject *client;
    if (dict_get_hinted(scope, name, hint, &client) < 0) {
        return -1;
    }
    int rc = 0;
    if (client == NULL || client == Py_None) {
        *address = Py_NewRef(Py_None);
    }
    else if (PyTuple_CheckExact(client) && PyTuple_GET_SIZE(client) > 0) {
        *address = Py_NewRef(PyTuple_GET_ITEM(client, 0));
    }
    else {
        rc = UNUSUAL;
    }
    Py_XDECREF(client);
    return rc;
}

/* Adds what the headers cost the record budget to *size: UNUSUAL for anything but a
 * list or tuple of (bytes, bytes). */
static int
headers_size(PyObject *headers, Py_ssize_t *size)
{
    if (!PyList_CheckExact(headers) && !PyTuple_CheckExact(headers)) {
        return UNUSUAL;
    }
    PyObject *pair;
    for (Py_ssize_t i = 0; (pair = sequence_item_ref(headers, i)) != NULL; i++) {
        int usual = PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2
                    && PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 0))
                    && PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 1));
        if (usual) {
            *size += FIELD_OVERHEAD + PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 0))
                     + PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 1));
        }
        Py_DECREF(pair);
        if (!usual) {
            return UNUSUAL;
        }
    }
    return 0;
}

/* The record's fields 2 to 6 and 9 (client to protocol, request headers) from a scope
 * of the usual shape: 0, UNUSUAL, or -1 on error.  fields[] gets strong references. */
static int
scope_fields(Capture *capture, PyObject **fields)
{
    PyObject *scope = capture->scope;
    Middleware *middleware = capture->middleware;
    PyObject **names = middleware->names;
    DictHint *hints = middleware->hints;
    if (!PyDict_CheckExact(scope)) {
        return UNUSUAL;
    }
    int rc = client_address(scope, names[NAME_CLIENT], &hints[HINT_CLIENT], &fields[2]);
    if (rc != 0) {
        return rc;
    }
    PyObject *version = NULL;
    if (dict_get_hinted(scope, names[NAME_METHOD], &hints[HINT_METHOD], &fields[3]) <= 0
        || dict_get_hinted(scope, names[NAME_RAW_PATH], &hints[HINT_RAW_PATH], &fields[4]) <= 0
        || dict_get_hinted(scope, names[NAME_HEADERS], &hints[HINT_HEADERS], &fields[9]) <= 0
        || dict_get_hinted(scope, names[NAME_HTTP_VERSION], &hints[HINT_HTTP_VERSION],
                           &version) <= 0
        || !PyUnicode_CheckExact(version)
        || dict_get_hinted(middleware->protocols, version, &hints[HINT_PROTOCOL],
                           &fields[6]) <= 0) {
        /* Missing or errors: the reference raises what it raises. */
        Py_XDECREF(version);
        PyErr_Clear();
        return UNUSUAL;
    }
    Py_DECREF(version);
    if (!PyBytes_CheckExact(fields[4]) || PyBytes_GET_SIZE(fields[4]) == 0) {
        return UNUSUAL; /* no raw_path: the reference encodes path */
    }
    if (dict_get_hinted(scope, names[NAME_QUERY_STRING], &hints[HINT_QUERY_STRING], &fields[5])
        < 0) {
        return -1;
    }
    if (fields[5] == NULL) {
        fields[5] = PyBytes_FromStringAndSize(NULL, 0);
        if (fields[5] == NULL) {
            return -1;
        }
    }
    if (!PyBytes_CheckExact(fields[5])) {
        return UNUSUAL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(fields[4]) + PyBytes_GET_SIZE(fields[5]);
    rc = headers_size(fields[9], &size);
    if (rc != 0) {
        return rc;
    }
    return size > capture->middleware->budget_limit ? UNUSUAL : 0;
}

/* The reference's copy of the request's notes: capture's budget.<name>(notes, *rest),
 * a RecordBudget method (`count` arguments in `rest`, at most 3); a new reference.
 * Each argument is held for the call, which may run code. */
static PyObject *
reference_notes(Capture *capture, const char *name, PyObject *const *rest, Py_ssize_t count)
{
    PyObject *args[5] = {Py_NewRef(capture->middleware->budget), Py_NewRef(capture->notes)};
    for (Py_ssize_t i = 0; i < count; i++) {
        args[2 + i] = Py_NewRef(rest[i]);
    }
    PyObject *method = PyUnicode_FromString(name);
    PyObject *bounded = method == NULL ? NULL
                                       : PyObject_VectorcallMethod(method, args, 2 + count, NULL);
    Py_XDECREF(method);
    for (Py_ssize_t i = 0; i < 2 + count; i++) {
        Py_DECREF(args[i]);
    }
    return bounded;
}

/* RecordBudget.notes(notes, path, query, headers): the request's notes copied and cut
 * to what the record's other fields leave of the budget; None when there are none.
 * In C for the usual notes (record/budget.h); a call into Python for the others. */
static PyObject *
bounded_notes(Capture *capture, PyObject *path, PyObject *query, PyObject *headers)
{
    if (capture->notes == NULL || PyDict_Size(capture->notes) == 0) {
        return Py_NewRef(Py_None);
    }
    Py_ssize_t limit = capture->middleware->budget_limit;
    Py_ssize_t used;
    PyObject *bounded = NULL;
    if (budget_used(path, query, headers, limit, &used)) {
        int rc = budget_notes(capture->notes, limit, used, &bounded);
        if (rc != 0) {
            return rc < 0 ? NULL : bounded;
        }
    }
    PyObject *rest[] = {path, query, headers};
    return reference_notes(capture, "notes", rest, 3);
}

/* asgi._record(scope, started, status, sent, response, keeps_response_headers, budget,
 * notes, extras) */
static PyObject *
python_record(Capture *capture, PyObject *status, PyObject *sent, PyObject *extras)
{
    Middleware *middleware = capture->middleware;
    PyObject *started = PyFloat_FromDouble(capture->started);
    PyObject *response = capture->response != NULL ? Py_NewRef(capture->response) : PyDict_New();
    PyObject *record = NULL;
    if (started != NULL && response != NULL) {
        PyObject *args[] = {capture->scope, started, status, sent, response,
                            middleware->keeps_response_headers, middleware->budget,
                            capture->notes != NULL ? capture->notes : Py_None, extras};
        record = PyObject_Vectorcall(middleware->python_record, args, 9, NULL);
    }
    Py_XDECREF(started);
    Py_XDECREF(response);
    return record;
}

static PyObject *
response_headers(Capture *capture)
{
    Middleware *middleware = capture->middleware;
    if (middleware->keeps_response_headers != Py_True || capture->response == NULL) {
        return PyTuple_New(0);
    }
    PyObject *empty = PyTuple_New(0);
    PyObject *response = Py_NewRef(capture->response); /* held: .get() may run code */
    PyObject *headers = empty == NULL ? NULL
                        : asgi_get(response, middleware->names[NAME_HEADERS], empty);
    Py_XDECREF(empty);
    Py_DECREF(response);
    return headers;
}

/* What the log's extras function learns of the exchange (asgi.AccessLogMiddleware
 * ._extras), with the request body's bytes the application received when the log
 * reads them, as the reference adds them: in *extras a new reference, None when the
 * log reads no extras.  For the compiled learner of a log that does not count the
 * request body (the usual extras), its fields instead, as asgi_learn_fields gives
 * them, and *extras NULL: a packed record takes them without an Extras made and freed
 * (made_extras makes it when the record needs one).  0, or -1 on error. */
static int
learn_extras(Capture *capture, int completed, PyObject **extras, PyObject **learnt,
             PyTypeObject **learnt_type)
{
    Middleware *middleware = capture->middleware;
    PyObject *learn = middleware->extras;
    PyObject *done = completed ? Py_True : Py_False;
    *extras = NULL;
    if (middleware->learn_parts != NULL && capture->counting_receive == NULL) {
        /* The compiled learner, without its functools.partial. */
        return asgi_learn_fields(middleware->learn_parts, capture->scope, done, learnt,
                                 learnt_type);
    }
    PyObject *learned;
    if (learn == Py_None) {
        learned = Py_NewRef(Py_None);
    }
    else if (middleware->learn_parts != NULL) {
        PyObject *args[] = {middleware->learn_parts, capture->scope, done};
        learned = asgi_learn_extras(NULL, args, 3);
    }
    else {
        PyObject *args[] = {capture->scope, done};
        learned = PyObject_Vectorcall(learn, args, 2, NULL);
    }
    if (learned == NULL || capture->counting_receive == NULL) {
        *extras = learned;
        return learned == NULL ? -1 : 0;
    }
    PyObject *received = PyObject_GetAttr(capture->counting_receive,
                                          middleware->names[NAME_RECEIVED]);
    *extras = received == NULL ? NULL
              : extras_with_bytes_received(middleware->no_extras, learned, received);
    Py_XDECREF(received);
    Py_DECREF(learned);
    return *extras == NULL ? -1 : 0;
}

/* The record's extras: those learnt as an object, or made of the fields learnt. */
static PyObject *
made_extras(PyObject **extras, PyTypeObject *learnt_type, PyObject **learnt)
{
    if (*extras == NULL) {
        *extras = asgi_learnt_extras(learnt_type, learnt);
    }
    return *extras;
}

/* The bytes sent, as an int: what the send wrapper counted, added to sent_object when
 * the count outgrew a Py_ssize_t (asgi_send.c).  A new reference, NULL on error. */
static PyObject *
sent_of(Capture *capture)
{
    if (capture->sent_object == NULL) {
        return PyLong_FromSsize_t(capture->sent);
    }
    PyObject *base = Py_NewRef(capture->sent_object);
    PyObject *counted = PyLong_FromSsize_t(capture->sent);
    PyObject *sent = counted == NULL ? NULL : PyNumber_Add(base, counted);
    Py_XDECREF(counted);
    Py_DECREF(base);
    return sent;
}

PyObject *
asgi_record(Capture *capture, PyObject *status, int completed)
{
    Middleware *middleware = capture->middleware;
    /* First: the function may run any code, which must not see a half-made record. */
    PyObject *record = NULL;
    PyObject *extras;
    PyObject *learnt[EXTRAS_FIELDS];
    PyTypeObject *learnt_type = NULL;
    for (int i = 0; i < EXTRAS_FIELDS; i++) {
        learnt[i] = NULL;
    }
    if (learn_extras(capture, completed, &extras, learnt, &learnt_type) < 0) {
        return NULL;
    }
    PyObject *fields[FIELDS] = {NULL};
    int rc = scope_fields(capture, fields);
    if (rc == UNUSUAL) {
        PyObject *sent = sent_of(capture);
        if (sent != NULL && made_extras(&extras, learnt_type, learnt) != NULL) {
            record = python_record(capture, status, sent, extras);
        }
        Py_XDECREF(sent);
        goto done;
    }
    if (rc < 0 || (fields[10] = response_headers(capture)) == NULL) {
        goto done;
    }
    double duration = clock_seconds(CLOCK_PERF_COUNTER, middleware->perf_counter)
                      - capture->started;
    double now = clock_seconds(CLOCK_WALL, middleware->wall_clock);
    if (PyErr_Occurred()) {
        goto done;
    }
    fields[7] = Py_NewRef(status);
    /* The count as an int only for a record made of objects: a packed one takes it as
     * it is, when it is all of it. */
    long long sent_count = capture->sent;
    const long long *sent_given = capture->sent_object == NULL ? &sent_count : NULL;
    if (sent_given == NULL && (fields[8] = sent_of(capture)) == NULL) {
        goto done;
    }
    /* A copy, for the application may add fields after the response ends.  Not for
     * the record of a response that ended, for a log that reads notes: held until the
     * application returns, it then takes the notes there are (asgi_with_notes), and
     * its copy now would be thrown away. */
    fields[NOTES] = completed && capture->notes != NULL
                        ? Py_NewRef(Py_None)
                        : bounded_notes(capture, fields[4], fields[5], fields[9]);
    if (fields[NOTES] == NULL) {
        goto done;
    }
    PyTypeObject *packed_type = ((Handoff *)middleware->handoff)->packed_type;
    if (packed_type != NULL && fields[NOTES] == Py_None) {
        /* The record as its hand-off would pack it (handoff.h), without making it (nor
         * its extras, when their fields were learnt).  A log that collects notes holds
         * it until the application ends, and then gives it the notes it has, if any
         * (asgi_with_notes). */
        fields[EXTRAS] = Py_XNewRef(extras);
        ExtrasFields given = {learnt_type, learnt};
        record = packed_from_fields(packed_type, (PyTypeObject *)middleware->record_type,
                                    now - duration, duration, fields,
                                    extras == NULL ? &given : NULL, sent_given,
                                    &((Handoff *)middleware->handoff)->keeps);
        if (record != NULL || PyErr_Occurred()) {
            goto done;
        }
    }
    if (made_extras(&extras, learnt_type, learnt) == NULL) {
        goto done;
    }
    Py_XSETREF(fields[EXTRAS], Py_NewRef(extras));
    if ((fields[8] == NULL && (fields[8] = sent_of(capture)) == NULL)
        || (fields[0] = PyFloat_FromDouble(now - duration)) == NULL
        || (fields[1] = PyFloat_FromDouble(duration)) == NULL) {
        goto done;
    }
    /* tuple.__new__(Record, fields), without the intermediate tuple. */
    record = ((PyTypeObject *)middleware->record_type)->tp_alloc((PyTypeObject *)middleware->record_type, FIELDS);
    if (record != NULL) {
        for (int i = 0; i < FIELDS; i++) {
            PyTuple_SET_ITEM(record, i, fields[i]); /* stolen */
            fields[i] = NULL;
        }
        /* Not a container the collector needs to see: nothing a record holds refers
         * back to it (the header lists are the server's), so it can be in no cycle.
         * Each collection would otherwise walk every queued record. */
        PyObject_GC_UnTrack(record);
    }
done:
    for (int i = 0; i < FIELDS; i++) {
        Py_XDECREF(fields[i]);
    }
    Py_XDECREF(extras);
    for (int i = 0; i < EXTRAS_FIELDS; i++) {
        Py_XDECREF(learnt[i]);
    }
    return record;
}

/* `record` (a Record) with `notes` (stolen) as its notes: a new reference. */
static PyObject *
record_with_notes(PyObject *record, PyObject *notes)
{
    PyTypeObject *type = Py_TYPE(record);
    if (PyTuple_GET_SIZE(record) != FIELDS) {
        Py_DECREF(notes);
        PyErr_SetString(PyExc_SystemError, "asgi_with_notes(): not a record");
        return NULL;
    }
    PyObject *copy = type->tp_alloc(type, FIELDS);
    if (copy == NULL) {
        Py_DECREF(notes);
        return NULL;
    }
    for (int i = 0; i < FIELDS; i++) {
        PyTuple_SET_ITEM(copy, i, i == NOTES ? notes : Py_NewRef(PyTuple_GET_ITEM(record, i)));
    }
    PyObject_GC_UnTrack(copy); /* as asgi_record's */
    return copy;
}

PyObject *
asgi_with_notes(Capture *capture, PyObject *record)
{
    if (packed_check(record)) {
        Packed *packed = (Packed *)record;
        if (capture->notes == NULL || PyDict_Size(capture->notes) == 0) {
            return Py_NewRef(record); /* no notes then nor now */
        }
        /* The notes the request has, in the room that its path, query and header fields
         * leave: all the fields it came with, which the packed record measured, not
         * only those it keeps.  Copied here when they are of the usual kinds and fit,
         * else by the reference; packed with the rest when they are of the kinds
         * packed. */
        Py_ssize_t limit = capture->middleware->budget_limit;
        Py_ssize_t used = budget_packed_used(packed, limit);
        PyObject *bounded = NULL;
        int rc = packed->notes != NULL ? 0
                 : budget_notes(capture->notes, limit, used, &bounded);
        if (rc < 0) {
            return NULL;
        }
        if (rc == 0) {
            /* The reference's RecordBudget.notes_within(notes, used). */
            PyObject *amount = PyLong_FromSsize_t(used);
            bounded = amount == NULL ? NULL : reference_notes(capture, "notes_within", &amount, 1);
            Py_XDECREF(amount);
            if (bounded == NULL) {
                return NULL;
            }
        }
        if (bounded == Py_None && packed->notes == NULL) {
            Py_DECREF(bounded);
            return Py_NewRef(record);
        }
        PyObject *noted = packed->notes == NULL ? packed_with_notes(packed, bounded) : NULL;
        if (noted != NULL || PyErr_Occurred()) {
            Py_DECREF(bounded);
            return noted;
        }
        /* Notes of kinds a Packed does not hold: the record they go into, as the
         * reference makes it. */
        PyObject *unpacked = packed_record(record);
        if (unpacked == NULL) {
            Py_DECREF(bounded);
            return NULL;
        }
        noted = record_with_notes(unpacked, bounded);
        Py_DECREF(unpacked);
        return noted;
    }
    if (PyTuple_GET_SIZE(record) != FIELDS) {
        PyErr_SetString(PyExc_SystemError, "asgi_with_notes(): not a record");
        return NULL;
    }
    PyObject *notes = bounded_notes(capture, PyTuple_GET_ITEM(record, 4),
                                    PyTuple_GET_ITEM(record, 5), PyTuple_GET_ITEM(record, 9));
    if (notes == NULL) {
        return NULL;
    }
    if (notes == Py_None && PyTuple_GET_ITEM(record, NOTES) == Py_None) {
        /* No notes then nor now (most requests): the record as it is, equal to the
         * copy the reference makes, without making and freeing one. */
        Py_DECREF(notes);
        return Py_NewRef(record);
    }
    return record_with_notes(record, notes);
}
