package server

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kadm's DescribeAllLogDirs (the highest version, v5) sees the data
// directory with the filesystem's sizes and every hosted partition with
// its size on disk and offset lag 0; a topic set narrows the partitions.
func TestDescribeLogDirsKadm(t *testing.T) {
	addr, _, eng := startBroker(t)
	for name, n := range map[string]int32{"lda": 2, "ldb": 1} {
		if _, err := eng.CreateTopic(name, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.Topic("lda").Partition(0).Append(prodBatch(t, 20, record.CodecNone, "v-"), 0); err != nil {
		t.Fatal(err)
	}
	adm := newAdmin(t, addr)
	all, err := adm.DescribeAllLogDirs(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := all[0]
	if len(all) != 1 || len(dirs) != 1 {
		t.Fatalf("described %d brokers, %d dirs: %+v", len(all), len(dirs), all)
	}
	d, ok := dirs[eng.Dir()]
	if !ok || d.Err != nil {
		t.Fatalf("data dir %s: %+v", eng.Dir(), dirs)
	}
	if d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes || d.IsCordoned {
		t.Fatalf("dir sizes: total %d usable %d cordoned %v", d.TotalBytes, d.UsableBytes, d.IsCordoned)
	}
	var got []string
	d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
		got = append(got, p.Topic+"-"+string(rune('0'+p.Partition)))
		l := eng.Topic(p.Topic).Partition(p.Partition)
		if p.Size != l.SizeBytes() || p.OffsetLag != 0 || p.IsFuture {
			t.Errorf("%s-%d: size %d lag %d future %v, want size %d lag 0", p.Topic, p.Partition, p.Size, p.OffsetLag, p.IsFuture, l.SizeBytes())
		}
	})
	sort.Strings(got)
	if strings.Join(got, ",") != "lda-0,lda-1,ldb-0" {
		t.Fatalf("partitions %v", got)
	}
	if p, ok := dirs.Lookup(eng.Dir(), "lda", 0); !ok || p.Size <= 0 {
		t.Fatalf("lda-0 after a produce: %+v", p)
	}

	some, err := adm.DescribeAllLogDirs(testCtx(t), kadm.TopicsSet{"lda": {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	some.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			n++
			if p.Topic != "lda" || p.Partition != 1 {
				t.Errorf("asked for lda-1, got %s-%d", p.Topic, p.Partition)
			}
		})
	})
	if n != 1 {
		t.Fatalf("asked for one partition, got %d", n)
	}
}

// Every served version answers on a raw connection: v0..v3 without the
// filesystem sizes, v4+ with them; an empty topic list describes the
// directory and no partition.
func TestDescribeLogDirsVersions(t *testing.T) {
	addr, _, eng := startBroker(t)
	if _, err := eng.CreateTopic("ldv", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, addr)
	for v := int16(0); v <= 5; v++ {
		for _, empty := range []bool{false, true} {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Version = v
			if empty {
				req.Topics = []kmsg.DescribeLogDirsRequestTopic{}
			}
			resp := kmsg.NewPtrDescribeLogDirsResponse()
			c.roundTrip(req, int32(v), resp)
			if resp.ErrorCode != 0 || len(resp.Dirs) != 1 || resp.Dirs[0].Dir != eng.Dir() || resp.Dirs[0].ErrorCode != 0 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			d := resp.Dirs[0]
			if sized := d.TotalBytes > 0 && d.UsableBytes > 0; sized != (v >= 4) {
				t.Fatalf("v%d: total %d usable %d", v, d.TotalBytes, d.UsableBytes)
			}
			if want := map[bool]int{false: 1, true: 0}[empty]; len(d.Topics) != want {
				t.Fatalf("v%d empty=%v: %d topics, want %d", v, empty, len(d.Topics), want)
			}
		}
	}
}

// A corrupt partition (engine/corrupt.go) is not in the data directory's
// entry; it is an offline directory of its own (its partition directory,
// KAFKA_STORAGE_ERROR) holding it, while the directory and the other
// partition stay online.
func TestDescribeLogDirsCorruptPartition(t *testing.T) {
	dir := t.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := eng.CreateTopic("cor", 2, map[string]string{"segment.bytes": "4096"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		for p := range int32(2) {
			if _, err := tp.Partition(p).Append(prodBatch(t, 20, record.CodecNone, "value-"), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	flipFirstBatch(t, filepath.Join(dir, "cor-0"))
	addr, _, eng2 := startBroker(t, func(c *Config, o *engine.Options) {
		o.Dir, o.VerifyRecovery = dir, true
		c.AutoCreateTopics = false
	})
	l0 := eng2.Topic("cor").Partition(0)
	if l0.Corruption() == nil {
		t.Fatal("partition 0 not found corrupt")
	}
	all, err := newAdmin(t, addr).DescribeAllLogDirs(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := all[0]
	main, ok := dirs[eng2.Dir()]
	if !ok || main.Err != nil {
		t.Fatalf("data dir: %+v", dirs)
	}
	if _, ok := dirs.Lookup(eng2.Dir(), "cor", 0); ok {
		t.Fatal("corrupt cor-0 listed in the online data directory")
	}
	if _, ok := dirs.Lookup(eng2.Dir(), "cor", 1); !ok {
		t.Fatal("cor-1 missing from the data directory")
	}
	pdir := filepath.Join(eng2.Dir(), "cor-0")
	cd, ok := dirs[pdir]
	if !ok || cd.Err != kerr.KafkaStorageError {
		t.Fatalf("no offline entry for %s: %+v", pdir, dirs)
	}
	p, ok := dirs.Lookup(pdir, "cor", 0)
	if !ok || p.Size != l0.SizeBytes() || p.Size <= 0 || len(dirs) != 2 {
		t.Fatalf("corrupt entry %+v (size %d), %d dirs", p, l0.SizeBytes(), len(dirs))
	}
}

// flipFirstBatch flips the last byte of the first batch of a partition's
// second segment (a record byte: only the CRC tells).
func flipFirstBatch(t *testing.T, pdir string) {
	t.Helper()
	ents, err := os.ReadDir(pdir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			logs = append(logs, filepath.Join(pdir, e.Name()))
		}
	}
	sort.Strings(logs)
	if len(logs) < 3 {
		t.Fatalf("%s has %d segments", pdir, len(logs))
	}
	data, err := os.ReadFile(logs[1])
	if err != nil {
		t.Fatal(err)
	}
	b, _, _, err := record.Next(data)
	if err != nil {
		t.Fatal(err)
	}
	data[len(b)-1] ^= 0xff
	if err := os.WriteFile(logs[1], data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// An offline data directory is KAFKA_STORAGE_ERROR with no partitions and
// no sizes, as Kafka answers for one; corrupt entries follow the data
// directory's, sorted.
func TestDescribeLogDirsBuild(t *testing.T) {
	parts := []logDirPartition{
		{topic: "b", part: 0, size: 10},
		{topic: "a", part: 1, size: 20, lag: 3},
		{topic: "z", part: 2, size: 30, corruptDir: "/d/z-2"},
		{topic: "a", part: 0, size: 40},
		{topic: "c", part: 0, size: 50, corruptDir: "/d/c-0"},
	}
	off := describeLogDirs("/d", true, 100, 50, parts)
	if len(off) != 1 || off[0].ErrorCode != kerr.KafkaStorageError.Code || len(off[0].Topics) != 0 ||
		off[0].TotalBytes != -1 || off[0].UsableBytes != -1 || off[0].Dir != "/d" {
		t.Fatalf("offline: %+v", off)
	}
	on := describeLogDirs("/d", false, 100, 50, parts)
	var lines []string
	for _, d := range on {
		for _, tp := range d.Topics {
			for _, p := range tp.Partitions {
				lines = append(lines, strings.Join([]string{d.Dir, strconv.Itoa(int(d.ErrorCode)), tp.Topic,
					string(rune('0' + p.Partition)), string(rune('0' + p.Size/10)), string(rune('0' + p.OffsetLag))}, " "))
			}
		}
	}
	want := []string{
		"/d 0 a 0 4 0", "/d 0 a 1 2 3", "/d 0 b 0 1 0",
		"/d/c-0 56 c 0 5 0", "/d/z-2 56 z 2 3 0",
	}
	if strings.Join(lines, "|") != strings.Join(want, "|") || on[0].TotalBytes != 100 || on[0].UsableBytes != 50 {
		t.Fatalf("online:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
