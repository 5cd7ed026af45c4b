package engine_test

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/stratalog/strata/engine"
)

// An in-process share group (a queue over a topic): two workers acquire
// records of the same partition, never the same record at once; a record
// released by one is delivered again with its delivery count one higher, a
// rejected one is archived, and the accepted ones are done.
func ExampleShareGroup() {
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

	jobs, err := e.CreateTopic("jobs", 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 4 {
		if _, _, err := jobs.Produce(nil, fmt.Appendf(nil, "job-%d", i)); err != nil {
			log.Fatal(err)
		}
	}

	q, err := e.ShareGroup("workers", engine.ShareGroupOptions{
		Reset:              engine.ResetEarliest,
		LockDuration:       30 * time.Second, // unacknowledged records come back after this
		DeliveryCountLimit: 5,                // and are archived after this many deliveries
	})
	if err != nil {
		log.Fatal(err)
	}
	a, err := q.Join("jobs")
	if err != nil {
		log.Fatal(err)
	}
	b, err := q.Join("jobs")
	if err != nil {
		log.Fatal(err)
	}

	show := func(who string, rs []engine.ShareRecord) {
		for _, r := range rs {
			fmt.Printf("%s got %s (offset %d, delivery %d)\n", who, r.Value, r.Offset, r.DeliveryCount)
		}
	}
	ra, err := a.Acquire(3)
	if err != nil {
		log.Fatal(err)
	}
	show("a", ra)
	rb, err := b.Acquire(10) // only what a does not hold
	if err != nil {
		log.Fatal(err)
	}
	show("b", rb)

	// a processes job-0, cannot process job-1 now, and job-2 never.
	if err := a.Accept(ra[0]); err != nil {
		log.Fatal(err)
	}
	if err := a.Release(ra[1]); err != nil {
		log.Fatal(err)
	}
	if err := a.Reject(ra[2]); err != nil {
		log.Fatal(err)
	}
	if err := b.Accept(rb...); err != nil {
		log.Fatal(err)
	}

	rb, err = b.Acquire(10) // the released job comes back
	if err != nil {
		log.Fatal(err)
	}
	show("b", rb)
	if err := b.Accept(rb...); err != nil {
		log.Fatal(err)
	}
	off, err := q.Offsets(engine.TopicPartition{Topic: "jobs", Partition: 0})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("share-partition start offset %d, %d in flight\n", off.Start, off.InFlight)
	// Output:
	// a got job-0 (offset 0, delivery 1)
	// a got job-1 (offset 1, delivery 1)
	// a got job-2 (offset 2, delivery 1)
	// b got job-3 (offset 3, delivery 1)
	// b got job-1 (offset 1, delivery 2)
	// share-partition start offset 4, 0 in flight
}
