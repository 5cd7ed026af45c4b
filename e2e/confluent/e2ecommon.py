"""e2ecommon.py: what roundtrip.py and txn.py share (imported from beside them)."""

import sys
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


PARTITIONS = 3  # every topic a script creates


def script_args(usage, n):
    """The script's n arguments, or exit with its usage line."""
    if len(sys.argv) != n + 1:
        sys.exit("usage: python3 " + usage)
    return sys.argv[1:]


class Deadline:
    """A run's time budget: left() is the seconds remaining, and raises
    TimeoutError once none remain, so every wait in a script is bounded."""

    def __init__(self, script, seconds):
        self.script, self.seconds = script, seconds
        self.start = time.monotonic()

    def left(self):
        remaining = self.seconds - (time.monotonic() - self.start)
        if remaining <= 0:
            raise TimeoutError("%s ran past its %.0f s deadline" % (self.script, self.seconds))
        return remaining


def client_config(broker, client_id):
    """The settings every client of a script shares."""
    return {"bootstrap.servers": broker, "broker.address.family": "v4", "client.id": client_id}


def create_topics(common, topics, deadline):
    """Creates topics through AdminClient.create_topics and waits for each."""
    admin = AdminClient(common)
    futures = admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in topics],
                                  operation_timeout=10, request_timeout=15)
    for fut in futures.values():
        fut.result(timeout=deadline.left())


def consume_until(consumer, want, deadline, row):
    """Polls consumer until want records are in (an error record raises) and
    returns row(msg) for each, in the order read."""
    got = []
    while len(got) < want:
        for msg in consumer.consume(num_messages=500, timeout=min(1.0, deadline.left())):
            if msg.error():
                raise KafkaException(msg.error())
            got.append(row(msg))
    return got
