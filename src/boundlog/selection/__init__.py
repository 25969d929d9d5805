"""What the writer keeps of each batch and how it rewrites it: filters, query
redaction, the client behind trusted proxies.
"""
