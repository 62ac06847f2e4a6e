"""The broker process: wires the store and remoting through the processor table."""
