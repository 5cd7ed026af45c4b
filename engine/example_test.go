package engine_test

import (
	"fmt"
	"log"
	"os"

	"github.com/stratalog/strata/engine"
)

// Produce by key and consume from an offset, with no network in between.
func ExampleTopic_Produce() {
	dir, err := os.MkdirTemp("", "strata-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := engine.DefaultLogConfig()
	cfg.Preallocate = false // keep the example's footprint small
	e, err := engine.Open(engine.Options{Dir: dir, Log: cfg})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	orders, err := e.CreateTopic("orders", 3, map[string]string{"retention.ms": "86400000"})
	if err != nil {
		log.Fatal(err)
	}
	var p int32
	for _, v := range []string{"created", "paid", "shipped"} {
		// Same key, same partition: per-key order is kept.
		var off int64
		p, off, err = orders.Produce([]byte("order-42"), []byte(v))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("offset %d: %s\n", off, v)
	}
	hw, _ := orders.HighWatermark(p)
	fmt.Println("high watermark:", hw)

	recs, err := orders.Consume(p, 1, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Printf("consumed %d %s=%s\n", r.Offset, r.Key, r.Value)
	}
	// Output:
	// offset 0: created
	// offset 1: paid
	// offset 2: shipped
	// high watermark: 3
	// consumed 1 order-42=paid
	// consumed 2 order-42=shipped
}
