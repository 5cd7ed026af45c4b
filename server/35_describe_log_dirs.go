package server

import (
	"encoding/binary"
	"path/filepath"
	"sort"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs v0..v5 (KIP-113; TotalBytes and UsableBytes from v4,
// KIP-827; IsCordoned from v5, always false: directories are not
// cordoned here). kadm's DescribeAllLogDirs and DescribeBrokerLogDirs
// negotiate the highest of these.
func init() { register(35, 0, 5, handleDescribeLogDirs) }

// handleDescribeLogDirs describes the broker's one data directory (log.dirs
// takes one path) and the partitions it hosts, as Kafka does for each of
// its log directories:
//
//   - the directory: its absolute path, error code 0, and the filesystem's
//     total and usable bytes as the free-space floor last saw them (v4+;
//     -1 if never measured); every hosted partition of the topics asked
//     (all with a null topic list) with its size on disk (the bytes of its
//     segment files) and its offset lag, max(HW - log end, 0) as Kafka
//     computes it for a current (not future) log: 0 on a leader;
//   - offline (an I/O error on data, engine.ErrOffline): error code
//     KAFKA_STORAGE_ERROR and no partitions and no sizes, as Kafka answers
//     for an offline log directory;
//   - a corrupt partition (engine/corrupt.go: its log stopped at a bad
//     batch, the directory online): Kafka has no per-partition error
//     field, and it would take the whole directory offline for a storage
//     error on one log; reporting this one directory offline would hide
//     the partitions that still serve. So the partition is left out of the
//     data directory's entry and reported the way Kafka reports a log it
//     cannot serve, inside an offline log directory: an entry of its own
//     whose Dir is the partition's directory (<data dir>/<topic>-<p>), with
//     KAFKA_STORAGE_ERROR, that one partition with its size on disk and
//     offset lag 0, and no filesystem sizes. Tools that move replicas off
//     offline directories (kafka-log-dirs, Cruise Control) see an offline
//     replica on this broker, which is what it is; `strata logdirs
//     describe` prints it as corrupt.
//
// Each partition appears once. Without a storage engine (--blackhole) no
// directory is described.
func handleDescribeLogDirs(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeLogDirsRequest)
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	if !s.authorizedCluster(rc, auth.OpDescribe) { // authz.go: Kafka answers no directories (v3+: the error)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.Dirs = []kmsg.DescribeLogDirsResponseDir{}
		rc.respond(resp)
		return
	}
	if s.eng == nil {
		resp.Dirs = []kmsg.DescribeLogDirsResponseDir{}
		rc.respond(resp)
		return
	}
	var want map[string]map[int32]bool // nil: every partition
	if req.Topics != nil {
		want = make(map[string]map[int32]bool, len(req.Topics))
		for _, t := range req.Topics {
			ps := want[t.Topic]
			if ps == nil {
				ps = make(map[int32]bool, len(t.Partitions))
				want[t.Topic] = ps
			}
			for _, p := range t.Partitions {
				ps[p] = true
			}
		}
	}
	var parts []logDirPartition
	for _, t := range s.eng.Topics() {
		ps, asked := want[t.Name()]
		if t.Deleted() || want != nil && !asked {
			continue
		}
		for p := range t.Partitions() {
			l := t.Partition(p)
			if l == nil || want != nil && !ps[p] {
				continue // not a replica here (cluster), or not asked
			}
			lp := logDirPartition{topic: t.Name(), part: p, size: l.SizeBytes(), lag: max(l.HighWatermark()-l.LogEndOffset(), 0)}
			if r, ok := s.remoteLog().(remoteSizer); ok && l.Config().RemoteStorageEnable {
				lp.remote, _ = r.RemoteSize(l.TopicID(), p) // 0 before its first copy
				lp.hasRemote = true
			}
			if c := l.Corruption(); c != nil {
				lp.corruptDir, lp.lag = filepath.Dir(c.Segment), 0
			}
			parts = append(parts, lp)
		}
	}
	free := s.eng.FreeSpace()
	total, usable := free.TotalBytes, free.UsableBytes
	if total <= 0 {
		total, usable = -1, -1 // never measured (statfs failed from the start)
	}
	resp.Dirs = describeLogDirs(s.eng.Dir(), s.eng.Offline() != nil, total, usable, parts)
	rc.respond(resp)
}

// logDirPartition is one hosted partition as DescribeLogDirs reports it.
type logDirPartition struct {
	topic      string
	part       int32
	size       int64  // bytes of its segment files
	lag        int64  // Kafka's offset lag
	corruptDir string // its directory when its log is corrupt, else ""
	// remote is the bytes of its remote segments (tiered storage),
	// reported in the RemoteSizeTag tagged field when hasRemote.
	remote    int64
	hasRemote bool
}

// describeLogDirs builds the answer's directories from the data directory
// dir, whether it is offline, its filesystem's sizes and the partitions
// (see handleDescribeLogDirs): the data directory first, then one offline
// entry per corrupt partition, by directory name.
func describeLogDirs(dir string, offline bool, total, usable int64, parts []logDirPartition) []kmsg.DescribeLogDirsResponseDir {
	d := kmsg.NewDescribeLogDirsResponseDir()
	d.Dir = dir
	d.Topics = []kmsg.DescribeLogDirsResponseDirTopic{}
	if offline {
		d.ErrorCode = kerr.KafkaStorageError.Code
		return []kmsg.DescribeLogDirsResponseDir{d}
	}
	d.TotalBytes, d.UsableBytes = total, usable
	var healthy []logDirPartition
	var corrupt []kmsg.DescribeLogDirsResponseDir
	for _, p := range parts {
		if p.corruptDir == "" {
			healthy = append(healthy, p)
			continue
		}
		cd := kmsg.NewDescribeLogDirsResponseDir()
		cd.Dir = p.corruptDir
		cd.ErrorCode = kerr.KafkaStorageError.Code
		cd.Topics = logDirTopics([]logDirPartition{p})
		corrupt = append(corrupt, cd)
	}
	d.Topics = logDirTopics(healthy)
	sort.Slice(corrupt, func(i, j int) bool { return corrupt[i].Dir < corrupt[j].Dir })
	return append([]kmsg.DescribeLogDirsResponseDir{d}, corrupt...)
}

// logDirTopics groups partitions by topic, topics by name and partitions
// by number.
func logDirTopics(parts []logDirPartition) []kmsg.DescribeLogDirsResponseDirTopic {
	sort.Slice(parts, func(i, j int) bool {
		a, b := parts[i], parts[j]
		return a.topic < b.topic || a.topic == b.topic && a.part < b.part
	})
	out := []kmsg.DescribeLogDirsResponseDirTopic{}
	for _, p := range parts {
		if len(out) == 0 || out[len(out)-1].Topic != p.topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = p.topic
			out = append(out, t)
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size, rp.OffsetLag = p.part, p.size, p.lag
		if p.hasRemote {
			rp.UnknownTags.Set(RemoteSizeTag, binary.BigEndian.AppendUint64(nil, uint64(p.remote)))
		}
		t := &out[len(out)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	return out
}
