"""ACL 1.0: RocketMQ 4.9's plain ACL files and the check every request passes (validator.py)."""
