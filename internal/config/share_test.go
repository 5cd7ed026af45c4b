package config

import "testing"

func TestApplyShareGroupKeys(t *testing.T) {
	d := Defaults().Groups
	if d.ShareLockDurationMs != 30000 || d.ShareDeliveryCountLimit != 5 || d.ShareMaxRecordLocks != 2000 ||
		d.ShareSessionTimeoutMs != 45000 || d.ShareHeartbeatIntervalMs != 5000 || d.ShareMaxSize != 200 || d.ShareStatePartitions != 50 {
		t.Fatalf("share defaults %+v", d)
	}
	b := Defaults()
	err := b.Apply(map[string]string{
		"group.share.record.lock.duration.ms":          "1500",
		"group.share.delivery.count.limit":             "3",
		"group.share.partition.max.record.locks":       "500",
		"group.share.session.timeout.ms":               "10000",
		"group.share.heartbeat.interval.ms":            "1000",
		"group.share.max.size":                         "20",
		"share.coordinator.state.topic.num.partitions": "3",
	})
	if err != nil {
		t.Fatal(err)
	}
	g := b.Groups
	if g.ShareLockDurationMs != 1500 || g.ShareDeliveryCountLimit != 3 || g.ShareMaxRecordLocks != 500 ||
		g.ShareSessionTimeoutMs != 10000 || g.ShareHeartbeatIntervalMs != 1000 || g.ShareMaxSize != 20 || g.ShareStatePartitions != 3 {
		t.Fatalf("share config %+v", g)
	}
	for _, bad := range []map[string]string{
		{"group.share.record.lock.duration.ms": "999"}, // Kafka's minimum is 1000
		{"group.share.delivery.count.limit": "1"},
		{"group.share.delivery.count.limit": "11"},
		{"group.share.max.size": "0"},
	} {
		b := Defaults()
		if err := b.Apply(bad); err == nil {
			t.Errorf("Apply(%v) accepted", bad)
		}
	}
}
