"""roundtrip.py: the confluent-kafka-python half of e2e/confluent_test.go.

    python3 roundtrip.py <broker host:port> <topic> <group> <codec>

With confluent-kafka-python (librdkafka underneath): creates <topic> with 3
partitions through AdminClient.create_topics; produces 2,000 keyed records
(50 keys "k<i%50>", value "<i/50>-" + 100 x "v") with an idempotent producer
(acks=all) and the murmur2_random partitioner (Java's placement), compressed
with <codec>; then a consumer in group <group> subscribes, reads every
record from the start, commits synchronously and reads its committed offsets
back. Prints one JSON line on stdout:

    {"acks": [[partition, offset], ...],
     "records": [[partition, offset, key, value], ...],
     "committed": [[partition, offset], ...]}

librdkafka's logs go to stderr. Any failure exits non-zero with the error on
stderr; the whole run is bounded by DEADLINE seconds.
"""

import json
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from e2ecommon import PARTITIONS, Deadline, client_config, consume_until, create_topics, script_args

RECORDS = 2000
KEYS = 50
DEADLINE = 90.0


def main():
    broker, topic, group, codec = script_args("roundtrip.py <broker host:port> <topic> <group> <codec>", 4)
    deadline = Deadline("roundtrip.py", DEADLINE)
    left = deadline.left
    common = client_config(broker, "strata-e2e-confluent")
    create_topics(common, [topic], deadline)

    acks = []
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acks.append([msg.partition(), msg.offset()])

    producer = Producer(dict(common, **{
        "enable.idempotence": True,
        "acks": "all",
        "partitioner": "murmur2_random",
        "compression.codec": codec,
        "linger.ms": 5,
        "message.timeout.ms": 30000,
    }))
    for i in range(RECORDS):
        key = "k%d" % (i % KEYS)
        value = "%d-%s" % (i // KEYS, "v" * 100)
        while True:
            try:
                producer.produce(topic, value=value.encode(), key=key.encode(), on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: serve callbacks and retry
                producer.poll(0.1)
                left()
    remaining = producer.flush(left())
    if remaining or errors or len(acks) != RECORDS:
        raise RuntimeError("produce: %d undelivered, %d acks, errors %s" % (remaining, len(acks), errors[:3]))

    consumer = Consumer(dict(common, **{
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
    }))
    consumer.subscribe([topic])
    try:
        records = consume_until(consumer, RECORDS, deadline, lambda msg: [
            msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()])
        consumer.commit(asynchronous=False)
        committed = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=left())
    finally:
        consumer.close()
    for tp in committed:
        if tp.error is not None:
            raise KafkaException(tp.error)

    json.dump({"acks": acks, "records": records,
               "committed": [[tp.partition, tp.offset] for tp in committed]}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
