"""The native Python client library: Producer, PullConsumer, PushConsumer, SimpleConsumer, Admin.

It logs through loggers (sidewinder.common.log.library_logger) and configures nothing: a program
that configures structlog gets the client's lines its way, one that does not gets them on stderr.
"""
