package rlm

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/remote/objstore"
)

// State is a remote segment's state, KIP-405's RemoteLogSegmentState.
type State string

// The states, in the order a segment goes through them. DELETE_FINISHED
// is written by dropping the segment from the partition's file.
const (
	CopyStarted    State = "COPY_SEGMENT_STARTED"
	CopyFinished   State = "COPY_SEGMENT_FINISHED"
	DeleteStarted  State = "DELETE_SEGMENT_STARTED"
	DeleteFinished State = "DELETE_SEGMENT_FINISHED"
)

// File kinds: the key suffixes of a segment's objects.
const (
	KindLog         = ".log"
	KindOffsetIndex = ".index"
	KindTimeIndex   = ".timeindex"
	KindTxnIndex    = ".txnindex"
	KindSnapshot    = ".snapshot"
	KindEpochs      = ".leader-epoch-checkpoint"
)

// allKinds are every suffix a segment's objects may have (cleanup deletes
// them all, whichever were written).
var allKinds = []string{KindLog, KindOffsetIndex, KindTimeIndex, KindTxnIndex, KindSnapshot, KindEpochs}

// FileMeta is one object of a segment: its size and checksum
// (objstore.Sum's String: "crc32c:<8 hex digits>"), or, for an object
// copied before CRC-32C (2026-12-05), its SHA-256 in SHA256.
type FileMeta struct {
	Size     int64  `json:"size"`
	Checksum string `json:"checksum,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
}

// Segment is one remote segment's metadata (KIP-405's
// RemoteLogSegmentMetadata, for one broker).
type Segment struct {
	ID           string `json:"id"`   // unique per upload (base64url of 16 random bytes)
	Base         int64  `json:"base"` // first offset
	End          int64  `json:"end"`  // exclusive: the last offset is End-1
	MaxTimestamp int64  `json:"maxTimestamp"`
	Size         int64  `json:"size"` // bytes of the .log object
	LeaderEpoch  int32  `json:"leaderEpoch"`
	State        State  `json:"state"`
	EventMs      int64  `json:"eventMs"` // when the state was last changed
	// Files holds each uploaded object by kind (KindLog, ...), set when
	// the copy finished.
	Files map[string]FileMeta `json:"files,omitempty"`
}

// partitionMeta is one partition's metadata file.
type partitionMeta struct {
	Version   int    `json:"version"`
	Topic     string `json:"topic"`
	TopicID   string `json:"topicId"` // hex
	Partition int32  `json:"partition"`
	// CopiedEnd is the End of the newest segment that reached
	// COPY_FINISHED (-1: none): local retention may delete below it. It
	// never moves back, even when remote retention deletes that segment.
	CopiedEnd int64 `json:"copiedEnd"`
	// LogStart is the floor DeleteRecords set: offsets below it are
	// deleted everywhere (0: none).
	LogStart int64     `json:"logStart,omitempty"`
	Segments []Segment `json:"segments"` // by Base
	// Seq is the sequence number of the last metadata-log record this
	// state includes (single broker, eventlog.go; 0: none).
	Seq uint64 `json:"seq,omitempty"`
}

const metaVersion = 1

// metaFileName is "<topic id hex>-<partition>.json".
func metaFileName(id [16]byte, p int32) string {
	return hex.EncodeToString(id[:]) + "-" + strconv.FormatInt(int64(p), 10) + ".json"
}

// loadMetas reads every partition file of dir.
func loadMetas(fsys vfs.FS, dir string) (map[tp]*partitionMeta, error) {
	out := map[tp]*partitionMeta{}
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, ent := range ents {
		name := ent.Name()
		if ent.IsDir() || !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := vfs.ReadFileLimit(fsys, filepath.Join(dir, name), 64<<20)
		if err != nil {
			return nil, err
		}
		var m partitionMeta
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("rlm: %s: %w", name, err)
		}
		if m.Version != metaVersion {
			return nil, fmt.Errorf("rlm: %s: version %d", name, m.Version)
		}
		id, err := parseTopicID(m.TopicID)
		if err != nil {
			return nil, fmt.Errorf("rlm: %s: %w", name, err)
		}
		if metaFileName(id, m.Partition) != name {
			return nil, fmt.Errorf("rlm: %s names %s-%d", name, m.TopicID, m.Partition)
		}
		out[tp{id, m.Partition}] = &m
	}
	return out, nil
}

func parseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("bad topic id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

// tp names a partition by topic id.
type tp struct {
	id [16]byte
	p  int32
}

// newSegmentID is a fresh unique segment id.
func newSegmentID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ObjectKey is the key of a segment's object of kind:
// "<topic>-<partition>/<20-digit base offset>-<segment id><kind>", the
// KIP-405 layout. A topic name starting with "." (which object keys may
// not) has it written "=2E" ("=" never occurs in topic names).
func ObjectKey(topic string, partition int32, base int64, id, kind string) string {
	if strings.HasPrefix(topic, ".") {
		topic = "=2E" + topic[1:]
	}
	return fmt.Sprintf("%s-%d/%020d-%s%s", topic, partition, base, id, kind)
}

// sumOf is an object's recorded checksum.
func sumOf(f FileMeta) (objstore.Sum, error) {
	if f.Checksum != "" {
		return objstore.ParseSum(f.Checksum)
	}
	return objstore.ParseSum(f.SHA256)
}

// ensureDir creates the metadata directory, durably (its parent synced
// after the creation).
func ensureDir(fsys vfs.FS, dir string) error {
	if _, err := fsys.Stat(dir); err == nil {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return fsys.SyncDir(filepath.Dir(dir))
}
