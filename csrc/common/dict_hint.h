/* Reading a dict's item where the previous dict of the same making had it.
 *
 * Why: the ASGI request path reads about a dozen items from dicts that the server and
 * the application build the same way for every request (uvicorn's scope is one dict
 * display, an application's messages are literals), so each key is the same interned
 * str at the same position of the dict's entries every time.  A PyDict_GetItemRef
 * costs 110-130 instructions on the builds measured (hash, probe, the checks around
 * them): about a seventh of what the access log adds to a request behind uvicorn.
 * PyDict_Next from the remembered position hands the entry over for a third of that,
 * and the key it gives is compared by identity with the one asked for: the same object
 * is the same key.  Anything else (another shape, an equal key that is not the same
 * object, an absent key) goes to PyDict_GetItemRef, whose answer is the answer by
 * definition; the position is relearnt when the lookup finds the key.
 *
 * A hint is only ever a guess, read and written with relaxed atomics by whichever
 * thread reads such a dict: an outdated one costs a lookup, nothing else.  Zero (a
 * new object's memory) is a fine first guess.  A key found once as an equal str that
 * is not the same object is looked up from then on, as it would be without a hint. */
#ifndef BOUNDLOG_DICT_HINT_H
#define BOUNDLOG_DICT_HINT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef __STDC_NO_ATOMICS__
typedef volatile Py_ssize_t DictHint;
#else
#include <stdatomic.h>
typedef _Atomic Py_ssize_t DictHint;
#endif

/* PyDict_GetItemRef(dict, key, value) for an exact dict, trying *hint first (none:
 * NULL): 1 and a strong reference, 0 and NULL when absent, -1 on error. */
int dict_get_hinted(PyObject *dict, PyObject *key, DictHint *hint, PyObject **value);

#endif
