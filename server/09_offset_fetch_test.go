package server

import (
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kadm"
)

// The embedded API (engine.Commit / Committed) and the Kafka API read and
// write the same __consumer_offsets records.
func TestGroupOffsetsEmbeddedAndKafkaAgree(t *testing.T) {
	dir := t.TempDir()
	e, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic("t", 2, nil); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"emb", "émoji-group", "console-consumer-77"} {
		if err := e.Commit(g, "t", 0, 33); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	addr, _, eng := startBroker(t, groupTestConfig, func(_ *Config, o *engine.Options) { o.Dir = dir })
	adm := newAdmin(t, addr)
	for _, g := range []string{"emb", "émoji-group", "console-consumer-77"} {
		got, err := adm.FetchOffsets(testCtx(t), g)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := got.Lookup("t", 0); !ok || o.At != 33 {
			t.Errorf("group %q: Kafka API sees %+v, want 33 (committed embedded)", g, o)
		}
	}
	offs := kadm.Offsets{}
	offs.AddOffset("t", 1, 44, -1)
	resp, err := adm.CommitOffsets(testCtx(t), "emb2", offs)
	if err != nil || resp.Error() != nil {
		t.Fatalf("CommitOffsets: %v %v", err, resp.Error())
	}
	if off, err := eng.Committed("emb2", "t", 1); err != nil || off != 44 {
		t.Fatalf("embedded API sees %d, %v; want 44 (committed over Kafka)", off, err)
	}
}
