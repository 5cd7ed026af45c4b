package engine_test

import (
	"fmt"
	"log"
	"os"

	"github.com/stratalog/strata/engine"
)

// A consumer group stuck on a record it cannot process: the record is
// moved to a dead-letter topic with its context headers and the group's
// committed offset moves past it; once the bug is fixed, the dead letter
// is re-driven to the partition it came from.
func ExampleEngine_MoveToDeadLetter() {
	dir, err := os.MkdirTemp("", "strata-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := engine.DefaultLogConfig()
	cfg.Preallocate = false
	e, err := engine.Open(engine.Options{Dir: dir, Log: cfg})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	orders, err := e.CreateTopic("orders", 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	// A dead-letter topic must allow it (KIP-1191) and start with "dlq.".
	dlq, err := e.CreateTopic("dlq.orders", 1, map[string]string{"errors.deadletterqueue.group.enable": "true"})
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range []string{"ok-0", "ok-1", "poison", "ok-3"} {
		if _, _, err := orders.Produce([]byte("order-7"), []byte(v)); err != nil {
			log.Fatal(err)
		}
	}
	// The group "billing" fails on offset 2 again and again.
	if err := e.Commit("billing", "orders", 0, 2); err != nil {
		log.Fatal(err)
	}

	res, err := e.MoveToDeadLetter(engine.TopicPartition{Topic: "orders", Partition: 0}, 2, 3, "",
		engine.DeadLetterOptions{Group: "billing", Reason: "cannot parse"})
	if err != nil {
		log.Fatal(err)
	}
	committed, _ := e.Committed("billing", "orders", 0)
	fmt.Printf("moved %d to %s-%d; billing's committed offset %d -> %d\n", res.Moved, res.Topic, res.Partition, res.Committed, committed)
	letters, err := dlq.Consume(0, 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range letters {
		fmt.Printf("dead letter %d: %s\n", r.Offset, r.Value)
		for _, h := range r.Headers {
			fmt.Printf("  %s=%s\n", h.Key, h.Value)
		}
	}

	rr, err := e.RedriveDeadLetters("dlq.orders", "orders", engine.RedriveOptions{})
	if err != nil {
		log.Fatal(err)
	}
	again, err := orders.Consume(0, 4, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("re-drove %d: orders-0 offset %d is %s (%d headers)\n", rr.Redriven, again[0].Offset, again[0].Value, len(again[0].Headers))
	// Output:
	// moved 1 to dlq.orders-0; billing's committed offset 2 -> 3
	// dead letter 0: poison
	//   __dlq.errors.topic=orders
	//   __dlq.errors.partition=0
	//   __dlq.errors.offset=2
	//   __dlq.errors.group=billing
	//   __dlq.errors.message=cannot parse
	// re-drove 1: orders-0 offset 4 is poison (0 headers)
}
