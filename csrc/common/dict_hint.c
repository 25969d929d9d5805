/* Reading a dict's item where the previous dict of the same making had it: see
 * dict_hint.h for why. */
#include "common/dict_hint.h"

#include "common/compat.h"

/* The hint of a key whose dicts never hold it as the same object: the lookup only. */
#define HINT_NEVER ((Py_ssize_t)-1)

#ifdef __STDC_NO_ATOMICS__
#define hint_load(hint) (*(hint))
#define hint_store(hint, value) (*(hint) = (value))
#else
#define hint_load(hint) atomic_load_explicit((hint), memory_order_relaxed)
#define hint_store(hint, value) atomic_store_explicit((hint), (value), memory_order_relaxed)
#endif

/* Where `key` itself (not an equal key) is among the dict's entries, for PyDict_Next;
 * HINT_NEVER when it is not there. */
static Py_ssize_t
position_of(PyObject *dict, PyObject *key)
{
    Py_ssize_t found = HINT_NEVER;
    Py_BEGIN_CRITICAL_SECTION(dict);
    Py_ssize_t position = 0;
    Py_ssize_t before = 0;
    PyObject *entry_key, *entry_value;
    while (PyDict_Next(dict, &position, &entry_key, &entry_value)) {
        if (entry_key == key) {
            /* PyDict_Next leaves `position` past the entry it gave: start from where
             * the call that found it started (empty slots only come before it). */
            found = before;
            break;
        }
        before = position;
    }
    Py_END_CRITICAL_SECTION();
    return found;
}

int
dict_get_hinted(PyObject *dict, PyObject *key, DictHint *hint, PyObject **value)
{
    if (hint == NULL) {
        return PyDict_GetItemRef(dict, key, value);
    }
    Py_ssize_t at = hint_load(hint);
    if (at >= 0) {
        int hit = 0;
        /* The dict may be changed by another thread without the GIL: PyDict_Next and
         * the new reference to what it lends happen under its lock. */
        Py_BEGIN_CRITICAL_SECTION(dict);
        Py_ssize_t position = at;
        PyObject *entry_key, *entry_value;
        if (PyDict_Next(dict, &position, &entry_key, &entry_value) && entry_key == key) {
            *value = Py_NewRef(entry_value);
            hit = 1;
        }
        Py_END_CRITICAL_SECTION();
        if (hit) {
            return 1;
        }
    }
    int rc = PyDict_GetItemRef(dict, key, value);
    if (rc == 1 && at != HINT_NEVER) {
        /* Found, elsewhere than hinted: relearn where (HINT_NEVER when the dict's key is
         * an equal str that is not the same object; no scan again for that key). */
        hint_store(hint, position_of(dict, key));
    }
    return rc;
}
