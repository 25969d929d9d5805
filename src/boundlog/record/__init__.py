"""The record and its budget: what travels from a request path to the writer thread,
and what it may keep alive.
"""
