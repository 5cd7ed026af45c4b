package config

import "testing"

func TestApplyGroupKeys(t *testing.T) {
	b := Defaults()
	err := b.Apply(map[string]string{
		"group.min.session.timeout.ms":     "500",
		"group.max.session.timeout.ms":     "60000",
		"group.initial.rebalance.delay.ms": "0",
		"group.max.size":                   "10",
		"offsets.topic.num.partitions":     "7",
		"offset.metadata.max.bytes":        "100",
		"offsets.retention.minutes":        "2",
	})
	if err != nil {
		t.Fatal(err)
	}
	g := b.Groups
	if g.MinSessionTimeoutMs != 500 || g.MaxSessionTimeoutMs != 60000 || g.InitialRebalanceDelayMs != -1 ||
		g.MaxSize != 10 || g.OffsetsPartitions != 7 || g.OffsetMetadataMaxBytes != 100 || g.OffsetsRetentionMs != 120_000 {
		t.Fatalf("group config %+v", g)
	}
	if len(b.Unknown) != 0 {
		t.Fatalf("unknown keys %v", b.Unknown)
	}
	for _, bad := range []map[string]string{
		{"group.max.size": "0"},
		{"offsets.topic.num.partitions": "x"},
		{"group.initial.rebalance.delay.ms": "-5"},
	} {
		b := Defaults()
		if err := b.Apply(bad); err == nil {
			t.Errorf("Apply(%v) accepted", bad)
		}
	}
}
