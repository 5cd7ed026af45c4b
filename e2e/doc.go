// Package e2e holds end-to-end tests: real `strata serve` processes on
// loopback driven by real Kafka clients: franz-go, kcat and
// confluent-kafka-python (librdkafka), kafkajs, sarama and kafka-go.
// It has no non-test code besides small file helpers.
package e2e

import "os"

func writeFile(path, body string) error { return os.WriteFile(path, []byte(body), 0o644) }
