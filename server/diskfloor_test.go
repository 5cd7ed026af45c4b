package server

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceResponses counts the Produce responses a franz-go client read.
type produceResponses struct{ n atomic.Int64 }

func (h *produceResponses) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == 0 && e2e.Err() == nil {
		h.n.Add(1)
	}
}

// TestFloorRefusesProduceRetriably: below the free-space floor (raised over
// the real filesystem's usable space), Produce is answered
// KAFKA_STORAGE_ERROR, which franz-go retries: its ProduceSync keeps
// retrying while a consumer reads what was there, DeleteRecords moves the
// log start and CreateTopics is refused; once the floor is under the
// usable space again the same ProduceSync succeeds at the next offset and
// every acknowledged record is read back.
func TestFloorRefusesProduceRetriably(t *testing.T) {
	addr, s, eng := startBroker(t)
	ctx := testCtx(t)
	adm := newAdmin(t, addr)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "floor"); err != nil {
		t.Fatal(err)
	}
	hook := &produceResponses{}
	prod := newClient(t, addr, kgo.DefaultProduceTopic("floor"), kgo.WithHooks(hook),
		// franz-go refreshes metadata before retrying a KAFKA_STORAGE_ERROR
		// (as the Java client does for its InvalidMetadataException): no
		// older than MetadataMinAge, 5 s by default.
		kgo.MetadataMinAge(20*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	for i := 0; i < 3; i++ {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	eng.SetMinFreeSpace(math.MaxInt64, 100) // the floor is the filesystem's size
	if !eng.FreeSpace().Below {
		t.Fatalf("not below a floor at the filesystem's size: %+v", eng.FreeSpace())
	}
	waitLog(t, s, "log directory below its free-space floor")

	// The wire: KAFKA_STORAGE_ERROR, which Kafka clients retry.
	raw := newClient(t, addr)
	req := prodRequest(13, -1, "floor", eng.Topic("floor").ID(), 0, prodBatch(t, 1, record.CodecNone, "refused"))
	resp := issue[*kmsg.ProduceResponse](t, raw, req)
	code := resp.Topics[0].Partitions[0].ErrorCode
	if code != kerr.KafkaStorageError.Code || !kerr.IsRetriable(kerr.ErrorForCode(code)) {
		t.Fatalf("produce below the floor: error %v, want KAFKA_STORAGE_ERROR (retriable)", kerr.ErrorForCode(code))
	}

	// A franz-go producer retries until space returns.
	before := hook.n.Load()
	done := make(chan kgo.ProduceResults, 1)
	go func() { done <- prod.ProduceSync(ctx, kgo.StringRecord("r3")) }()
	for hook.n.Load() < before+3 { // three refused attempts, at least
		select {
		case res := <-done:
			t.Fatalf("produce below the floor finished: %v", res.FirstErr())
		case <-ctx.Done():
			t.Fatal("the producer did not retry")
		case <-time.After(5 * time.Millisecond):
		}
	}

	// Fetch, DeleteRecords and CreateTopics below the floor.
	if got := floorValues(consumeAll(t, addr, "floor", 3)); fmt.Sprint(got) != "[r0 r1 r2]" {
		t.Fatalf("consumed %v below the floor", got)
	}
	var to kadm.Offsets
	to.Add(kadm.Offset{Topic: "floor", Partition: 0, At: 1})
	del, err := adm.DeleteRecords(ctx, to)
	if err != nil || del.Error() != nil {
		t.Fatalf("DeleteRecords below the floor: %v, %v", err, del.Error())
	}
	ct, err := adm.CreateTopic(ctx, 1, 1, nil, "refused")
	if err == nil {
		err = ct.Err
	}
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("CreateTopics below the floor: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if err := eng.Offline(); err != nil {
		t.Fatalf("directory offline below the floor: %v", err)
	}

	// Space returns: the waiting ProduceSync lands at offset 3.
	eng.SetMinFreeSpace(1<<20, 100)
	select {
	case res := <-done:
		r, err := res.First()
		if err != nil || r.Offset != 3 {
			t.Fatalf("produce after recovery: offset %v, %v; want 3", r, err)
		}
	case <-ctx.Done():
		t.Fatal("the producer never succeeded after space returned")
	}
	waitLog(t, s, "log directory back above its free-space floor")
	if got := floorValues(consumeAll(t, addr, "floor", 3)); fmt.Sprint(got) != "[r1 r2 r3]" {
		t.Fatalf("consumed %v after recovery, want [r1 r2 r3]", got)
	}
}

func floorValues(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}
