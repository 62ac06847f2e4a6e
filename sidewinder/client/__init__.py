"""The native Python client and mqadmin."""
