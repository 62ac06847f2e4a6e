"""The send pipeline: every way a message enters becomes one SendRequest, goes through one
check-and-route step, one store write and one reply encoder.

    send = SendProcessor(config, store, topics, groups, ...)     # processor.py
    table.register(send, SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE)
    table.set_frame_lane(send, SEND_MESSAGE_V2)

- lane.py: the send lane: plain SEND_MESSAGE_V2 frames read, routed by the shortcut, encoded
  into the CommitLog and answered straight from a connection's bytes (natively in
  native/src/send_lane.rs; SendLanePy is the reference).
- request.py: SendRequest, and its decoder from a decoded RemotingCommand (SEND_MESSAGE's long
  field names, V2's and a batch's short ones).
- body.py: what a body and properties say (a batch body's messages, WAIT).
- check.py: msgCheck (shared with SEND_REPLY_MESSAGE's processor).
- route.py: the one check-and-route step. It raises refusals (protocol/errors.py, with
  RocketMQ's codes and remarks) and gives what the store gets (a MessageToStore, or a
  BatchToStore for a batch) and whether the producer waits, with its request in one tuple.
  Its fast path for the plain case is a shortcut inside that step.
- The store: MessageStore.append_many (a chunk's sends in one append, a single send as a chunk
  of one) and MessageStore.settled (the one wait for SYNC_FLUSH / SYNC_MASTER).
- reply.py: the one reply encoder (SUCCESS from a template for JSON; refusals as
  remoting.dispatch.error_reply encodes them).
- processor.py: SendProcessor, running decode -> route -> store -> reply for a connection's
  bytes (the lane), a chunk of decoded requests, or one request; ACL (the table's guard)
  only picks the decoder.

A RocketMQ 5 gRPC SendMessage enters the same way: one more decoder yielding SendRequest in
front of the same route, store and (its own) reply encoder.
"""

from sidewinder.broker.send.processor import SendProcessor
from sidewinder.broker.send.request import SendRequest, host_of

__all__ = ["SendProcessor", "SendRequest", "host_of"]
