"""Shared plumbing: broker.conf properties, logging, service loops, file I/O."""
