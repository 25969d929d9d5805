"""OTLP/HTTP: each record an OpenTelemetry LogRecord, each batch one POST to a collector."""
