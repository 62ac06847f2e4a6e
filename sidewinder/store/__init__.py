"""The RocketMQ-compatible message store: CommitLog, ConsumeQueue, IndexFile."""
