"""sasl.py: the confluent-kafka-python half of e2e/sasl_test.go.

    python3 sasl.py <broker host:port> <topic> <security.protocol> <sasl.mechanism> <user> <password> [<CA file>]

Configured as against Apache Kafka (security.protocol, sasl.mechanism,
sasl.username, sasl.password, ssl.ca.location): produces RECORDS records to
<topic> (created through AdminClient.create_topics), reads them back with a
consumer from the start, and prints one JSON line:

    {"produced": n, "values": ["0", "1", ...]}

With a wrong password the first request fails; librdkafka reports it
through error_cb, and the script prints {"auth_error": "<librdkafka's
error name>: <message>"} and exits 0. Any other failure exits non-zero;
the run is bounded by DEADLINE seconds.
"""

import json
import sys

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from e2ecommon import Deadline, consume_until

RECORDS = 100
DEADLINE = 60.0


def main():
    if len(sys.argv) not in (7, 8):
        sys.exit("usage: python3 sasl.py <broker> <topic> <security.protocol> <sasl.mechanism> <user> <password> [<CA file>]")
    broker, topic, protocol, mechanism, user, password = sys.argv[1:7]
    deadline = Deadline("sasl.py", DEADLINE)
    left = deadline.left
    auth_errors = []

    def on_error(err):
        if err.code() == KafkaError._AUTHENTICATION:
            auth_errors.append("%s: %s" % (err.name(), err.str()))

    common = {
        "bootstrap.servers": broker,
        "broker.address.family": "v4",
        "client.id": "strata-e2e-sasl",
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "error_cb": on_error,
    }
    if len(sys.argv) == 8:
        common["ssl.ca.location"] = sys.argv[7]

    admin = AdminClient(common)
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                                  operation_timeout=10, request_timeout=15)
    # error_cb runs from poll(): serve it while the creation is pending, so
    # an authentication failure is seen as soon as librdkafka reports it.
    while not all(f.done() for f in futures.values()):
        admin.poll(0.1)
        if auth_errors:
            print(json.dumps({"auth_error": auth_errors[0]}))
            return
        left()
    for fut in futures.values():
        fut.result(timeout=left())
    if auth_errors:
        raise RuntimeError("authentication errors after success: %s" % auth_errors)

    errors = []
    producer = Producer(dict(common, **{"acks": "all", "linger.ms": 5}))
    for i in range(RECORDS):
        producer.produce(topic, value=str(i).encode(),
                         on_delivery=lambda err, msg: err is not None and errors.append(str(err)))
    remaining = producer.flush(left())
    if remaining or errors:
        raise RuntimeError("produce: %d undelivered, errors %s" % (remaining, errors[:3]))

    consumer = Consumer(dict(common, **{"group.id": "sasl-" + topic, "auto.offset.reset": "earliest",
                                        "enable.auto.commit": False}))
    consumer.subscribe([topic])
    try:
        values = consume_until(consumer, RECORDS, deadline, lambda msg: msg.value().decode())
    finally:
        consumer.close()
    print(json.dumps({"produced": RECORDS, "values": values}))


if __name__ == "__main__":
    main()
