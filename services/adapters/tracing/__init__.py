"""Traces out of the process: the log's spans (`agentledger.events.spans`) as OTLP JSON, and
sent live over OTLP/HTTP with the OpenTelemetry SDK when the standard
`OTEL_EXPORTER_OTLP_*` variables say where."""
