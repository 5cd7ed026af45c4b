package engine_test

import (
	"fmt"
	"log"
	"os"

	"github.com/stratalog/strata/engine"
)

// An in-process consumer group: two members share a topic's partitions
// (range assignment), the group rebalances when one leaves, and a member
// whose committed offset was deleted by retention resumes at the earliest
// retained record (auto.offset.reset=earliest).
func ExampleConsumerGroup() {
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

	events, err := e.CreateTopic("events", 4, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 8 {
		if _, _, err := events.Produce(nil, fmt.Appendf(nil, "event-%d", i)); err != nil {
			log.Fatal(err)
		}
	}

	g, err := e.ConsumerGroup("billing", engine.GroupOptions{Assignor: engine.AssignRange})
	if err != nil {
		log.Fatal(err)
	}
	opts := engine.MemberOptions{Topics: []string{"events"}, Reset: engine.ResetEarliest}
	a, err := g.Join(opts)
	if err != nil {
		log.Fatal(err)
	}
	b, err := g.Join(opts)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range []*engine.GroupMember{a, b} {
		parts, gen := m.Assignment()
		recs, err := m.Poll(100)
		if err != nil {
			log.Fatal(err)
		}
		if err := m.Commit(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("generation %d: %v polled %d records\n", gen, parts, len(recs))
	}

	// b leaves: a owns every partition; nothing new to read.
	if err := b.Leave(); err != nil {
		log.Fatal(err)
	}
	parts, gen := a.Assignment()
	recs, _ := a.Poll(100)
	fmt.Printf("generation %d: %v polled %d records\n", gen, parts, len(recs))

	// One partition gets two more records (offsets 2 and 3), then
	// everything below offset 3 is deleted: the group's committed offset
	// there, 2, is below the log start.
	var p int32
	for _, v := range []string{"late-1", "late-2"} {
		if p, _, err = events.Produce([]byte("k"), []byte(v)); err != nil {
			log.Fatal(err)
		}
	}
	if err := events.Truncate(p, 3); err != nil {
		log.Fatal(err)
	}
	// A new member of the group takes over and resumes at offset 3.
	if err := a.Leave(); err != nil {
		log.Fatal(err)
	}
	c, err := g.Join(opts)
	if err != nil {
		log.Fatal(err)
	}
	recs, err = c.Poll(100)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Printf("resumed at %s-%d offset %d: %s\n", r.Topic, r.Partition, r.Offset, r.Value)
	}
	// Output:
	// generation 2: [{events 0} {events 1}] polled 4 records
	// generation 2: [{events 2} {events 3}] polled 4 records
	// generation 3: [{events 0} {events 1} {events 2} {events 3}] polled 0 records
	// resumed at events-0 offset 3: late-2
}
