"""The name server process: route table for brokers and topics."""
