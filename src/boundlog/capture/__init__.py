"""What the request paths collect for a record: a WSGI environ, an exchange's extras,
the application's fields, routes, request ids, trace context, websockets, body byte counts.
"""
