/* Waiting for RELP's answers without the GIL (see relp.h).
 *
 * relp_await(fd, expected, timeout_ms) reads from the connected socket `fd` until it
 * has received as many bytes as `expected` holds, the bytes received differ from
 * `expected`'s, the server closes the connection, no byte came for `timeout_ms`
 * (-1: no limit), or, with some bytes received, RELP_HAND_BACK_NS have passed.  It
 * returns the bytes received, a prefix of what the server sent: empty only when the
 * server closed the connection.  A timeout with nothing received
 * raises TimeoutError, an error OSError, as socket.recv does; a signal runs its
 * handlers (which may raise) and the wait goes on.
 *
 * Each read is at most what is still expected, so nothing past the batch's answers is
 * taken from the socket; each is preceded by TCP_QUICKACK, which the kernel turns off
 * as it goes, so that the segments read are acknowledged at once (relp.h says why).
 * Only `fd` and memory of its own are touched while the GIL is released: safe with or
 * without the GIL. */
#include "sinks/relp.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#ifndef RELP_PAUSE_NS
#define RELP_PAUSE_NS 50000
#endif
/* A server that answers slowly but steadily never leaves the socket idle for
 * timeout_ms: without this the answers it gave would be counted only once the last
 * one came, and close() giving up meanwhile would count every one of them lost.  What
 * came is handed back this often, and its whole answers counted written. */
#ifndef RELP_HAND_BACK_NS
#define RELP_HAND_BACK_NS 100000000LL
#endif

static long long
monotonic_ns(void)
{
    struct timespec now;
    (void)clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

typedef enum { WAIT_DONE, WAIT_CLOSED, WAIT_TIMEOUT, WAIT_ERROR, WAIT_SIGNAL } WaitEnd;

/* Reads into buffer[*got:size] as described above; returns why it stopped. */
static WaitEnd
wait_for(int fd, const char *expected, char *buffer, Py_ssize_t size, Py_ssize_t *got,
         int timeout_ms, int *error)
{
    long long started = monotonic_ns();
    while (*got < size) {
#ifdef TCP_QUICKACK
        /* Before every read, not once: the kernel leaves quick acknowledgements as soon
         * as we send (a window's next frames may be on their way), and an answer held
         * by the server's Nagle for a delayed acknowledgement costs 40 ms. */
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one)); /* not TCP: no matter */
#endif
        struct pollfd ready = {.fd = fd, .events = POLLIN};
        int polled = poll(&ready, 1, timeout_ms);
        if (polled == 0) {
            return WAIT_TIMEOUT;
        }
        if (polled < 0) {
            *error = errno;
            return errno == EINTR ? WAIT_SIGNAL : WAIT_ERROR;
        }
        ssize_t count = recv(fd, buffer + *got, (size_t)(size - *got), MSG_DONTWAIT);
        if (count == 0) {
            return WAIT_CLOSED;
        }
        if (count < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                continue;
            }
            *error = errno;
            return errno == EINTR ? WAIT_SIGNAL : WAIT_ERROR;
        }
        int differs = memcmp(buffer + *got, expected + *got, (size_t)count) != 0;
        *got += count;
        if (differs) {
            break;
        }
        if (*got < size) {
            if (monotonic_ns() - started >= RELP_HAND_BACK_NS) {
                break;
            }
            struct timespec pause = {.tv_sec = 0, .tv_nsec = RELP_PAUSE_NS};
            (void)nanosleep(&pause, NULL);
        }
    }
    return WAIT_DONE;
}

PyObject *
relp_await(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyLong_Check(args[0]) || !PyBytes_Check(args[1])
        || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "relp_await(fd: int, expected: bytes, timeout_ms: int)");
        return NULL;
    }
    long fd_value = PyLong_AsLong(args[0]);
    long timeout_value = PyLong_AsLong(args[2]);
    if ((fd_value == -1 || timeout_value == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (fd_value < 0 || fd_value > INT_MAX || timeout_value < -1 || timeout_value > INT_MAX
        || PyBytes_GET_SIZE(args[1]) == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "relp_await(): a descriptor, bytes awaited and a timeout of -1 or more");
        return NULL;
    }
    int fd = (int)fd_value;
    int timeout_ms = (int)timeout_value;
    /* Held: the caller's bytes must outlive the wait, whoever else lets go of them. */
    PyObject *expected = Py_NewRef(args[1]);
    Py_ssize_t size = PyBytes_GET_SIZE(expected);
    PyObject *received = PyBytes_FromStringAndSize(NULL, size);
    if (received == NULL) {
        Py_DECREF(expected);
        return NULL;
    }
    Py_ssize_t got = 0;
    WaitEnd end;
    int error = 0;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        end = wait_for(fd, PyBytes_AS_STRING(expected), PyBytes_AS_STRING(received), size,
                       &got, timeout_ms, &error);
        Py_END_ALLOW_THREADS
        if (end != WAIT_SIGNAL) {
            break;
        }
        if (PyErr_CheckSignals() < 0) {
            goto fail;
        }
    }
    if (got == 0 && end == WAIT_TIMEOUT) {
        PyErr_SetString(PyExc_TimeoutError, "timed out");
        goto fail;
    }
    if (got == 0 && end == WAIT_ERROR) {
        errno = error;
        PyErr_SetFromErrno(PyExc_OSError);
        goto fail;
    }
    /* Whatever came is handed back first; an error after it shows at the next read. */
    Py_DECREF(expected);
    if (got < size && _PyBytes_Resize(&received, got) < 0) {
        return NULL;
    }
    return received;
fail:
    Py_DECREF(expected);
    Py_DECREF(received);
    return NULL;
}
