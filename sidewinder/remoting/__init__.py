"""RocketMQ remoting: the sans-IO frame codec and the asyncio server and client."""
