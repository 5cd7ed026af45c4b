package server

import (
	"strconv"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/metrics/metricstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Consumer group lag in seconds (strata_group_lag_seconds), with the
// scrape's clock and the broker's clock as inputs: a group member that
// polled and committed 4 of 10 records stamped 10 s apart is as old as the
// 5th record; records deleted past its position make it the age of the log
// start's record; a LogAppendTime topic's age is from the broker's append
// time; a group at the end is 0 old. Per partition with
// metrics.partition.labels, the largest per group without it.
func TestMetricsGroupLagSeconds(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	appendAt := t0.Add(50 * time.Second) // the broker's clock: LogAppendTime
	scrapeAt := t0.Add(100 * time.Second)
	for _, perPartition := range []bool{false, true} {
		t.Run("partition.labels="+strconv.FormatBool(perPartition), func(t *testing.T) {
			addr, url, _ := startMeteredBrokerWith(t,
				metrics.Options{PartitionLabels: perPartition, Now: func() time.Time { return scrapeAt }},
				func(_ *Config, o *engine.Options) { o.Now = func() time.Time { return appendAt } })
			ctx := testCtx(t)
			adm := newAdmin(t, addr)
			const created, appended, group = "stamped", "appended", "slow"
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, created); err != nil {
				t.Fatal(err)
			}
			lat := "LogAppendTime"
			if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.type": &lat}, appended); err != nil {
				t.Fatal(err)
			}
			// One batch per record (ProduceSync), record k stamped t0 + 10k s.
			prod := newClient(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()))
			for k := range 10 {
				for _, topic := range []string{created, appended} {
					r := &kgo.Record{Topic: topic, Value: []byte("v" + strconv.Itoa(k)), Timestamp: t0.Add(time.Duration(k) * 10 * time.Second)}
					if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}

			// A group member polls 4 records of each topic and commits them.
			cons := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(created, appended), kgo.DisableAutoCommit())
			polled := map[string][]*kgo.Record{}
			for len(polled[created]) < 4 || len(polled[appended]) < 4 {
				fs := cons.PollRecords(ctx, 1)
				if err := fs.Err0(); err != nil {
					t.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if len(polled[r.Topic]) < 4 {
						polled[r.Topic] = append(polled[r.Topic], r)
					}
				})
			}
			commit := append(polled[created][:4:4], polled[appended][:4]...)
			if err := cons.CommitRecords(ctx, commit...); err != nil {
				t.Fatal(err)
			}
			cons.Close() // without autocommit, leaving commits nothing more
			committed, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			for _, topic := range []string{created, appended} {
				if o, _ := committed.Lookup(topic, 0); o.At != 4 {
					t.Fatalf("%s: committed offset %d, want 4", topic, o.At)
				}
			}

			lagSecs := func(f metricstest.Families, topic string) float64 {
				t.Helper()
				labels := []string{"group", group}
				if perPartition {
					labels = append(labels, "topic", topic, "partition", "0")
				}
				if f.Find(metrics.GroupLagSeconds, labels...) == nil {
					t.Fatalf("no %s%v", metrics.GroupLagSeconds, labels)
				}
				return f.Gauge(metrics.GroupLagSeconds, labels...)
			}
			f := scrapeMetrics(t, url)
			if perPartition {
				// The 5th record (offset 4) was stamped t0 + 40 s; every
				// record of the LogAppendTime topic at the broker's appendAt.
				if got := lagSecs(f, created); got != 60 {
					t.Errorf("CreateTime topic: lag %v s, want 60 (the record at the committed offset, stamped 60 s before the scrape)", got)
				}
				if got := lagSecs(f, appended); got != 50 {
					t.Errorf("LogAppendTime topic: lag %v s, want 50 (appended 50 s before the scrape)", got)
				}
			} else if got := lagSecs(f, ""); got != 60 {
				t.Errorf("group: lag %v s, want 60 (the older of its partitions' 60 and 50)", got)
			}

			// Delete the CreateTime topic's records below offset 7: the
			// oldest unconsumed record is the log start's, stamped t0 + 70 s.
			del := kadm.Offsets{}
			del.Add(kadm.Offset{Topic: created, Partition: 0, At: 7})
			if r, err := adm.DeleteRecords(ctx, del); err != nil || r.Error() != nil {
				t.Fatalf("delete records: %v %v", err, r.Error())
			}
			f = scrapeMetrics(t, url)
			if perPartition {
				if got := lagSecs(f, created); got != 30 {
					t.Errorf("CreateTime topic after deleting below offset 7: lag %v s, want 30", got)
				}
			} else if got := lagSecs(f, ""); got != 50 {
				t.Errorf("group after deleting below offset 7: lag %v s, want 50 (the LogAppendTime topic's, now the older)", got)
			}

			// Commit the ends: the group is caught up, 0 s behind.
			ends := kadm.Offsets{}
			for _, topic := range []string{created, appended} {
				ends.Add(kadm.Offset{Topic: topic, Partition: 0, At: 10, LeaderEpoch: -1})
			}
			if r, err := adm.CommitOffsets(ctx, group, ends); err != nil || r.Error() != nil {
				t.Fatalf("commit the ends: %v %v", err, r.Error())
			}
			f = scrapeMetrics(t, url)
			for _, topic := range []string{created, appended} {
				if got := lagSecs(f, topic); got != 0 {
					t.Errorf("%s: lag %v s at the end of the log, want 0", topic, got)
				}
				if !perPartition {
					break
				}
			}
		})
	}
}
