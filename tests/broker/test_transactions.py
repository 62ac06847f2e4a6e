"""The transaction check over a real store: a checked half is put again with its count, the copy
supersedes it, and a restarted broker knows which copy is current (no second commit)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.topics import TRANS_HALF_TOPIC, TopicTable
from sidewinder.broker.transactions import Transactions, to_half
from sidewinder.protocol.message import MessageConst, encode_properties
from sidewinder.protocol.record import Host, MessageRecord, MessageToStore
from sidewinder.store.config import StoreConfig
from sidewinder.store.message_store import MessageStore, PutStatus
from tests.store.small_store import store_config, wait_dispatched

HOST = Host(b"\x7f\x00\x00\x01", 10911)


def broker_config(root: Path) -> BrokerConfig:
    store: StoreConfig = store_config(root)
    # Every half is due at once; the loop is not started, check_once is called by hand.
    return BrokerConfig(transaction_time_out=0, transaction_check_max=2, store=store)


def transactional(n: int) -> MessageToStore:
    props = {
        "UNIQ_KEY": f"{n:032X}",
        MessageConst.TRANSACTION_PREPARED: "true",
        MessageConst.PRODUCER_GROUP: "TXG",
    }
    return MessageToStore(
        topic=b"Orders",
        queue_id=1,
        body=f"order {n}".encode(),
        properties=encode_properties(props, trailing=False),
        sys_flag=0x4,
        born_host=HOST,
        store_host=HOST,
    )


async def started(root: Path) -> tuple[MessageStore, Transactions]:
    config = broker_config(root)
    store = MessageStore(config.store, store_host=HOST)
    await store.start()
    transactions = Transactions(config, store, TopicTable(config, root / "config"), Clients(print))
    transactions.load()
    return store, transactions


def half_at(store: MessageStore, queue_offset: int) -> MessageRecord:
    entry = store.queue_entry(TRANS_HALF_TOPIC, 0, queue_offset)
    assert entry is not None
    record = store.lookup_message_by_offset(entry.phy_offset)
    assert record is not None
    return record


def test_a_checked_half_is_superseded_by_its_copy_across_a_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        store, transactions = await started(tmp_path)
        for n in range(2):
            assert (await store.put_message(to_half(transactional(n)))).status is PutStatus.PUT_OK
        await wait_dispatched(store, TRANS_HALF_TOPIC, 0, 2)
        await transactions.check_once()  # no producer to ask: counted all the same
        await wait_dispatched(store, TRANS_HALF_TOPIC, 0, 4)
        copies = [half_at(store, offset) for offset in (2, 3)]
        assert [c.properties()[MessageConst.TRANSACTION_CHECK_TIMES] for c in copies] == ["1"] * 2
        assert {0, 1} <= transactions.settled and not {2, 3} & transactions.settled
        # A verdict on the first half (a producer's late END_TRANSACTION) meets its copy.
        assert transactions.current(half_at(store, 0)).queue_offset == 2
        await transactions.settle(transactions.current(half_at(store, 0)), commit=True)
        await store.shutdown()

        store, transactions = await started(tmp_path)
        # Settled by its op record: the copy at 2, and the first half through it.
        assert {0, 1, 2} <= transactions.settled and 3 not in transactions.settled
        assert transactions.current(half_at(store, 1)).queue_offset == 3
        await transactions.check_once()  # only the copy at 3 is still open: checked again
        await wait_dispatched(store, TRANS_HALF_TOPIC, 0, 5)
        assert half_at(store, 4).properties()[MessageConst.TRANSACTION_CHECK_TIMES] == "2"
        assert bytes(half_at(store, 4).body) == b"order 1"
        await transactions.check_once()  # checked transactionCheckMax times: discarded
        assert 4 in transactions.settled
        assert store.max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 5
        assert store.max_offset_in_queue("Orders", 1) == 1  # committed once, order 0
        await store.shutdown()

    asyncio.run(scenario())
