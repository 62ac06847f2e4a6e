"""Wire types shared by broker, client and store: request codes, headers, messages."""
