"""txn.py: the confluent-kafka-python half of TestConfluentPythonTransactions.

    python3 txn.py <broker host:port> <in topic> <out topic> <group> <transactional id>

Consume-transform-produce with librdkafka's transactions: produces RECORDS
records (key "k<i%KEYS>", value "<i>") to <in topic>; then a read_committed
consumer in <group> copies them to <out topic> through a transactional
producer, one transaction per consume() call. Every second transaction is
aborted after its records were flushed to the broker (so the log holds them)
and the consumer seeks back to redo them; the others commit their records
and the consumer's positions together (send_offsets_to_transaction). Then a
read_committed and a read_uncommitted consumer read <out topic> from the
start. Prints one JSON line on stdout:

    {"aborted": <records written by aborted transactions>,
     "committed_reader": [[partition, key, value], ...],
     "uncommitted_reader": <records the read_uncommitted consumer read>}

Any failure exits non-zero with the error on stderr; the run is bounded by
DEADLINE seconds.
"""

import json
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from e2ecommon import Deadline, client_config, consume_until, create_topics, script_args

RECORDS = 600
KEYS = 10
DEADLINE = 100.0


def main():
    broker, in_topic, out_topic, group, txn_id = script_args(
        "txn.py <broker host:port> <in topic> <out topic> <group> <transactional id>", 5)
    deadline = Deadline("txn.py", DEADLINE)
    left = deadline.left
    common = client_config(broker, "strata-e2e-confluent-txn")
    create_topics(common, [in_topic, out_topic], deadline)

    producer = Producer(dict(common, **{"enable.idempotence": True, "partitioner": "murmur2_random"}))
    for i in range(RECORDS):
        producer.produce(in_topic, key=b"k%d" % (i % KEYS), value=b"%d" % i)
    if producer.flush(left()):
        raise RuntimeError("input records undelivered")

    consumer = Consumer(dict(common, **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed", "session.timeout.ms": 10000,
    }))
    consumer.subscribe([in_topic])
    txp = Producer(dict(common, **{"transactional.id": txn_id, "partitioner": "murmur2_random"}))
    txp.init_transactions(left())
    copied = aborted = transactions = 0
    try:
        while copied < RECORDS:
            msgs = consumer.consume(num_messages=100, timeout=min(1.0, left()))
            if not msgs:
                continue
            for m in msgs:
                if m.error():
                    raise KafkaException(m.error())
            txp.begin_transaction()
            for m in msgs:
                txp.produce(out_topic, key=m.key(), value=m.value())
            if transactions % 2 == 1:
                if txp.flush(left()):  # the aborted records reach the log first
                    raise RuntimeError("records of an aborted transaction undelivered")
                txp.abort_transaction(left())
                aborted += len(msgs)
                first = {}
                for m in msgs:
                    first.setdefault(m.partition(), m.offset())
                for p, off in first.items():
                    consumer.seek(TopicPartition(in_topic, p, off))
            else:
                txp.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                consumer.consumer_group_metadata(), left())
                txp.commit_transaction(left())
                copied += len(msgs)
            transactions += 1
    finally:
        consumer.close()

    def read(isolation, want):
        reader = Consumer(dict(common, **{
            "group.id": group + "-" + isolation, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "isolation.level": isolation,
        }))
        reader.subscribe([out_topic])
        row = lambda m: [str(m.partition()), m.key().decode(), m.value().decode()]  # noqa: E731
        try:
            got = consume_until(reader, want, deadline, row)
            # anything past want is read too, so the test sees an excess
            got += [row(m) for m in reader.consume(num_messages=500, timeout=min(1.0, left())) if not m.error()]
        finally:
            reader.close()
        return got

    committed_reader = read("read_committed", RECORDS)
    uncommitted = read("read_uncommitted", RECORDS + aborted)
    json.dump({"aborted": aborted, "committed_reader": committed_reader,
               "uncommitted_reader": len(uncommitted)}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
