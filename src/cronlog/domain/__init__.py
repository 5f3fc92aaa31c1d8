"""The pure scheduling model: no I/O, no clock reads, no Kafka, SQL or gRPC types."""
