"""POP consumption (RocketMQ 5): pop, ack, change of invisible time, the revive service that
brings un-acked messages back, and held pops. See docs/architecture.md."""
