"""The native Python client and mqadmin."""

from sidewinder.common.log import configure_library_logging

configure_library_logging()
