package engine

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/stratalog/strata/internal/vfs"
)

// File names inside the data directory and partition directories.
const (
	recoveryPointFile = "recovery-point-offset-checkpoint"
	logStartFile      = "log-start-offset-checkpoint"
	cleanShutdownFile = ".strata_cleanshutdown"
	topicsDirName     = "__strata_topics"
	partitionMetaFile = "partition.metadata"
	epochCheckpoint   = "leader-epoch-checkpoint"
	metaPropsFile     = "meta.properties"

	// maxMetaFileBytes bounds any metadata or checkpoint file we read back.
	maxMetaFileBytes = 64 << 20
)

var errBadCheckpoint = errors.New("engine: malformed checkpoint file")

// topicPartition names one partition log in a checkpoint file.
type topicPartition struct {
	Topic     string
	Partition int32
}

// sideName renames a directory entry aside: name (cut to fit the 255-byte
// limit) + "." + tag + suffix, so the suffix is always intact.
func sideName(dir, name, tag, suffix string) string {
	keep := vfs.MaxFileNameLen - len(tag) - len(suffix) - 1
	if len(name) > keep {
		name = name[:keep]
	}
	return filepath.Join(dir, name+"."+tag+suffix)
}

// readSmallFileFS reads a metadata file, refusing files past
// maxMetaFileBytes.
func readSmallFileFS(fsys vfs.FS, path string) ([]byte, error) {
	return vfs.ReadFileLimit(fsys, path, maxMetaFileBytes)
}

// formatOffsetCheckpoint encodes Kafka's offset checkpoint text format:
// "0\n<count>\n<topic> <partition> <offset>\n...", sorted for stable output.
func formatOffsetCheckpoint(m map[topicPartition]int64) []byte {
	keys := make([]topicPartition, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d %d\n", k.Topic, k.Partition, m[k])
	}
	return b.Bytes()
}

// checkpointLines splits a Kafka checkpoint body into its entry lines after
// checking the version (0) and the count line.
func checkpointLines(data []byte) ([]string, error) {
	lines := strings.Split(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	if len(lines) < 2 {
		return nil, fmt.Errorf("%w: missing header", errBadCheckpoint)
	}
	if strings.TrimSpace(lines[0]) != "0" {
		return nil, fmt.Errorf("%w: unsupported version %q", errBadCheckpoint, lines[0])
	}
	count, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || count < 0 {
		return nil, fmt.Errorf("%w: bad count %q", errBadCheckpoint, lines[1])
	}
	if count != len(lines)-2 {
		return nil, fmt.Errorf("%w: count %d but %d entries", errBadCheckpoint, count, len(lines)-2)
	}
	return lines[2:], nil
}

// parseOffsetCheckpoint decodes formatOffsetCheckpoint's output.
func parseOffsetCheckpoint(data []byte) (map[topicPartition]int64, error) {
	lines, err := checkpointLines(data)
	if err != nil {
		return nil, err
	}
	m := make(map[topicPartition]int64, len(lines))
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 3 || validateTopicName(f[0]) != nil {
			return nil, fmt.Errorf("%w: bad entry %q", errBadCheckpoint, line)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 || off < 0 {
			return nil, fmt.Errorf("%w: bad entry %q", errBadCheckpoint, line)
		}
		m[topicPartition{f[0], int32(p)}] = off
	}
	return m, nil
}

// readOffsetCheckpoint reads a checkpoint file of the OS file system; a
// missing file is empty.
func readOffsetCheckpoint(path string) (map[topicPartition]int64, error) {
	return readOffsetCheckpointFS(vfs.OS, path)
}

// readOffsetCheckpointFS reads a checkpoint file; a missing file is empty.
func readOffsetCheckpointFS(fsys vfs.FS, path string) (map[topicPartition]int64, error) {
	data, err := readSmallFileFS(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[topicPartition]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parseOffsetCheckpoint(data)
}

// readCheckpoint reads the data directory's offset checkpoint name
// (recoveryPointFile, logStartFile, cleanerCheckpointFile) from the
// engine's file system; a missing file is empty.
func (e *Engine) readCheckpoint(name string) (map[topicPartition]int64, error) {
	return readOffsetCheckpointFS(e.fs, filepath.Join(e.dir, name))
}

// writeCheckpoint replaces the data directory's offset checkpoint name
// with m, atomically and durably (vfs.WriteFileAtomicFS: after a crash the
// file holds the old or the new offsets, and the new ones once this
// returned nil), through the sync hook.
func (e *Engine) writeCheckpoint(name string, m map[topicPartition]int64) error {
	path := filepath.Join(e.dir, name)
	return e.syncFile(path, func() error { return vfs.WriteFileAtomicFS(e.fs, path, formatOffsetCheckpoint(m)) })
}

// formatTopicID is Kafka's Uuid.toString: base64url without padding.
func formatTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func parseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	if len(s) != 22 {
		return id, fmt.Errorf("topic id %q: want 22 base64url characters", s)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("topic id %q: not base64url", s)
	}
	copy(id[:], b)
	if id == ([16]byte{}) {
		return id, fmt.Errorf("topic id %q: all zero", s)
	}
	return id, nil
}

// formatPartitionMetadata encodes Kafka's partition.metadata file.
func formatPartitionMetadata(id [16]byte) []byte {
	return []byte("version: 0\ntopic_id: " + formatTopicID(id) + "\n")
}

// parsePartitionMetadata decodes Kafka's partition.metadata file.
func parsePartitionMetadata(data []byte) ([16]byte, error) {
	var id [16]byte
	var version, topicID string
	var haveVersion, haveID bool
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return id, fmt.Errorf("partition.metadata: bad line %q", line)
		}
		switch strings.TrimSpace(k) {
		case "version":
			version, haveVersion = strings.TrimSpace(v), true
		case "topic_id":
			topicID, haveID = strings.TrimSpace(v), true
		default:
			return id, fmt.Errorf("partition.metadata: unknown key %q", k)
		}
	}
	if !haveVersion || version != "0" {
		return id, fmt.Errorf("partition.metadata: unsupported version %q", version)
	}
	if !haveID {
		return id, errors.New("partition.metadata: no topic_id")
	}
	return parseTopicID(topicID)
}

// formatEpochCheckpoint encodes Kafka's leader-epoch-checkpoint file.
func formatEpochCheckpoint(entries []epochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// parseEpochCheckpoint decodes a leader-epoch-checkpoint file; entries must
// be strictly increasing in both epoch and start offset.
func parseEpochCheckpoint(data []byte) ([]epochEntry, error) {
	lines, err := checkpointLines(data)
	if err != nil {
		return nil, err
	}
	entries := make([]epochEntry, 0, len(lines))
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: bad entry %q", errBadCheckpoint, line)
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 {
			return nil, fmt.Errorf("%w: bad entry %q", errBadCheckpoint, line)
		}
		e := epochEntry{Epoch: int32(ep), StartOffset: off}
		if n := len(entries); n > 0 && (e.Epoch <= entries[n-1].Epoch || e.StartOffset < entries[n-1].StartOffset) {
			return nil, fmt.Errorf("%w: entries not increasing at %q", errBadCheckpoint, line)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// topicMeta is the persisted form of a topic (__strata_topics/<name>.json).
type topicMeta struct {
	Version    int               `json:"version"`
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// ReplicasOnly: only the partitions with a directory are hosted here
	// (a cluster broker's topic; cluster.go).
	ReplicasOnly bool `json:"replicas_only,omitempty"`
}

const topicMetaVersion = 1

func formatTopicMeta(name string, id [16]byte, partitions int32, configs map[string]string) []byte {
	return formatTopicMetaFlags(name, id, partitions, configs, false)
}

func formatTopicMetaFlags(name string, id [16]byte, partitions int32, configs map[string]string, replicasOnly bool) []byte {
	b, err := json.Marshal(topicMeta{Version: topicMetaVersion, Name: name, ID: formatTopicID(id), Partitions: partitions,
		Configs: configs, ReplicasOnly: replicasOnly})
	if err != nil { // cannot happen: strings and ints only
		panic(err)
	}
	return append(b, '\n')
}

// parseTopicMeta decodes and validates a topic file; maxPartitions bounds the count.
func parseTopicMeta(data []byte) (topicMeta, [16]byte, error) {
	var m topicMeta
	var id [16]byte
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, id, fmt.Errorf("topic metadata: %w", err)
	}
	if m.Version != topicMetaVersion {
		return m, id, fmt.Errorf("topic metadata: unsupported version %d", m.Version)
	}
	if err := validateTopicName(m.Name); err != nil {
		return m, id, fmt.Errorf("topic metadata: %w", err)
	}
	if m.Partitions < 1 || m.Partitions > maxPartitions {
		return m, id, fmt.Errorf("topic metadata: %d partitions", m.Partitions)
	}
	id, err := parseTopicID(m.ID)
	if err != nil {
		return m, id, fmt.Errorf("topic metadata: %w", err)
	}
	return m, id, nil
}
