package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The report of made-up answers: an online directory with two partitions,
// a corrupt partition reported as an offline directory of its own (as
// Strata does), another broker's offline directory (as Kafka reports one:
// no partitions, no sizes).
func TestLogDirsReport(t *testing.T) {
	all := kadm.DescribedAllLogDirs{
		0: {
			"/data": {Broker: 0, Dir: "/data", TotalBytes: 10 << 30, UsableBytes: 4 << 30, Topics: kadm.DescribedLogDirTopics{
				"t": {1: {Topic: "t", Partition: 1, Size: 2048}, 0: {Topic: "t", Partition: 0, Size: 1024, OffsetLag: 3}},
			}},
			"/data/c-2": {Broker: 0, Dir: "/data/c-2", Err: kerr.KafkaStorageError, TotalBytes: -1, UsableBytes: -1, Topics: kadm.DescribedLogDirTopics{
				"c": {2: {Topic: "c", Partition: 2, Size: 4096}},
			}},
		},
		1: {"/other": {Broker: 1, Dir: "/other", Err: kerr.KafkaStorageError, TotalBytes: -1, UsableBytes: -1, Topics: kadm.DescribedLogDirTopics{}}},
	}
	rep := logDirsReport(all)
	if len(rep.Dirs) != 3 || rep.Dirs[0].Dir != "/data" || rep.Dirs[1].Dir != "/data/c-2" || rep.Dirs[2].Broker != 1 {
		t.Fatalf("dirs %+v", rep.Dirs)
	}
	if d := rep.Dirs[0]; d.Bytes != 3072 || len(d.Partitions) != 2 || d.Partitions[0].Partition != 0 || d.Partitions[0].OffsetLag != 3 || d.Error != "" {
		t.Fatalf("online dir %+v", d)
	}
	if len(rep.Offline) != 1 || rep.Offline[0].Topic != "c" || rep.Offline[0].Partition != 2 || rep.Offline[0].Dir != "/data/c-2" {
		t.Fatalf("offline partitions %+v", rep.Offline)
	}
	var out bytes.Buffer
	if err := printLogDirs(&out, rep, true); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, re := range []string{
		`^0\s+/data\s+online\s+10\.0 GiB\s+4\.0 GiB\s+2\s+3\.0 KiB$`,
		`^0\s+/data/c-2\s+offline: KAFKA_STORAGE_ERROR\s+-\s+-\s+1\s+4\.0 KiB$`,
		`^1\s+/other\s+offline: KAFKA_STORAGE_ERROR\s+-\s+-\s+0\s+0 B$`,
		`^t\s+0\s+0\s+/data\s+1\.0 KiB\s+3$`,
		`^c-2\s+0\s+/data/c-2\s+corrupt log \(KAFKA_STORAGE_ERROR\): see the broker's log and /data/c-2/log-corrupt$`,
	} {
		if !regexpLine(text, re) {
			t.Errorf("no line %s in\n%s", re, text)
		}
	}
}

// The verb against a broker: its data directory online with the topic's
// partitions, in text and JSON; --topic narrows to that topic.
func TestClusterLogDirs(t *testing.T) {
	addr := startGroupsBroker(t)
	createTopic(t, addr, "ld1", 2)
	createTopic(t, addr, "ld2", 1)
	cluster := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := clusterMainEnv(args, &out, &errb, brokerEnv(addr))
		return out.String() + errb.String(), err
	}
	out, err := cluster("log-dirs", "--format", "json")
	rep := decodeJSON[logDirsJSON](t, out)
	if err != nil || len(rep.Dirs) != 1 || rep.Dirs[0].Error != "" || rep.Dirs[0].TotalBytes <= 0 || len(rep.Offline) != 0 {
		t.Fatalf("log-dirs --format json: %v\n%s", err, out)
	}
	var parts []string
	for _, p := range rep.Dirs[0].Partitions {
		parts = append(parts, p.Topic)
	}
	if strings.Join(parts, ",") != "ld1,ld1,ld2" {
		t.Fatalf("partitions %v", parts)
	}
	out, err = cluster("log-dirs", "--topic", "ld2")
	if err != nil || !regexpLine(out, `^0\s+\S+\s+online\s+.*\s+1\s+\S+ B$`) || !regexpLine(out, `^ld2\s+0\s+0\s+\S+\s+0 B\s+0$`) || strings.Contains(out, "ld1") {
		t.Fatalf("log-dirs --topic ld2: %v\n%s", err, out)
	}
	if _, err := cluster("log-dirs", "extra"); err == nil {
		t.Fatal("log-dirs took an argument")
	}
}
