"""mqconsole: a web console for a RocketMQ-compatible cluster (Sidewinder's or RocketMQ's).

    mqconsole -n 127.0.0.1:9876 [--port 8080] [--bind 127.0.0.1]

It talks to the name servers and brokers over remoting through `sidewinder.client.admin.Admin`,
as RocketMQ Dashboard does: overview, topics, consumer groups, messages, dead letters, ACL.
Every page has a JSON twin under /api/. The broker never imports this package (nor its web
stack).
"""
