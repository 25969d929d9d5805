"""Turning batches of records into bytes on the writer thread: the Apache formats,
JSON, templates, schemas, the dev format, and the escaping and timestamps they share.
"""
