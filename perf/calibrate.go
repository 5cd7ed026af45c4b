package perf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// maxCalibrationBytes bounds a calibration file: a loadgen result with its
// full configuration is a few kilobytes; anything near this is not one.
const maxCalibrationBytes = 16 << 20

// ErrBadCalibration wraps every reason a calibration file is refused.
var ErrBadCalibration = errors.New("perf: bad calibration file")

// Calibration holds the figures Plan takes from a `strata loadgen --json`
// result. The file is JSON; only these fields are read, any may be missing,
// and everything else is ignored:
//
//	{"result": {"records_per_sec": float, "mb_per_sec": float,
//	            "produce_p99_ms": float, "broker_cpu_seconds": float,
//	            "duration_s": float, "record_bytes": int,
//	            "records_per_batch": float,
//	            "device": {"bytes_per_record_byte": float}},
//	 "config": {"find_max": bool, "record_bytes": int,
//	            "replication_factor": int, "spawn": int, ...},
//	 "target": {"spawned": int, ...}}
//
// The brokers of the run appended mb_per_sec × replication_factor (default
// 1) in total. From that Plan derives PerCoreMBps = appended /
// (broker_cpu_seconds / duration_s), MB/s per busy core, which carries over
// to other machines better than a raw rate; and, when the run was a capacity
// search (config.find_max) over a known number of spawned brokers
// (config.spawn or target.spawned), a per-broker ceiling = appended /
// brokers. When the run measured its disk (result.device, spawned brokers)
// and disk_amp is not given, disk_amp = max(1, bytes_per_record_byte /
// replication_factor): what that disk wrote per log byte appended.
type Calibration struct {
	Source            string  `json:"source,omitempty"` // file name, for the report
	RecordsPerSec     float64 `json:"records_per_sec"`
	MBPerSec          float64 `json:"mb_per_sec"`
	ProduceP99Ms      float64 `json:"produce_p99_ms"`
	BrokerCPUSeconds  float64 `json:"broker_cpu_seconds"`
	DurationSec       float64 `json:"duration_s"`
	RecordBytes       int     `json:"record_bytes"`
	RecordsPerBatch   float64 `json:"records_per_batch"`  // how well the run batched; 0 = unknown
	CapacitySearch    bool    `json:"capacity_search"`    // the run ramped to its limit (--find-max)
	ReplicationFactor int     `json:"replication_factor"` // of the run's topic; 0 = 1
	Brokers           int     `json:"brokers"`            // brokers the run spawned; 0 = unknown
	// DeviceBytesPerRecordByte is what the spawned brokers' disk wrote per
	// acknowledged record byte (result.device.bytes_per_record_byte):
	// every replica on that disk, so disk_amp is it over the run's
	// replication factor. 0 = not measured.
	DeviceBytesPerRecordByte float64 `json:"device_bytes_per_record_byte,omitempty"`

	// Tiered storage's counters (remote.go): bytes copied to the object
	// store and the store's time for them, bytes remote reads returned
	// and their time. RemoteSource names the file they came from when it
	// is not Source.
	RemoteCopiedBytes float64 `json:"remote_copied_bytes,omitempty"`
	RemoteCopySeconds float64 `json:"remote_copy_seconds,omitempty"`
	RemoteReadBytes   float64 `json:"remote_read_bytes,omitempty"`
	RemoteReadSeconds float64 `json:"remote_read_seconds,omitempty"`
	RemoteSource      string  `json:"remote_source,omitempty"`
}

// ReadCalibrationFile reads and parses a loadgen result file. It is the only
// I/O in this package.
func ReadCalibrationFile(path string) (Calibration, error) {
	f, err := os.Open(path)
	if err != nil {
		return Calibration{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCalibrationBytes+1))
	if err != nil {
		return Calibration{}, fmt.Errorf("%w: %s: %v", ErrBadCalibration, path, err)
	}
	if len(data) > maxCalibrationBytes {
		return Calibration{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrBadCalibration, path, maxCalibrationBytes)
	}
	parse := ParseCalibration
	if isMetricsText(data) {
		parse = ParseMetricsCalibration // remote.go: a /metrics scrape
	}
	c, err := parse(data)
	if err != nil {
		return Calibration{}, fmt.Errorf("%s: %w", path, err)
	}
	c.Source = path
	return c, nil
}

// ParseCalibration parses the bytes of a loadgen result. Missing fields are
// zero; a field of the wrong type, a negative or non-finite number, or a file
// from which neither a per-core rate nor a capacity ceiling can be derived is
// an error.
func ParseCalibration(data []byte) (Calibration, error) {
	if len(data) > maxCalibrationBytes {
		return Calibration{}, fmt.Errorf("%w: %d bytes", ErrBadCalibration, len(data))
	}
	var doc struct {
		Result map[string]json.RawMessage `json:"result"`
		Config map[string]json.RawMessage `json:"config"`
		Target map[string]json.RawMessage `json:"target"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return Calibration{}, fmt.Errorf("%w: %v", ErrBadCalibration, err)
	}
	if doc.Result == nil {
		return Calibration{}, fmt.Errorf("%w: no \"result\" object", ErrBadCalibration)
	}
	var c Calibration
	var recordBytes float64
	for _, f := range []struct {
		key string
		dst *float64
	}{
		{"records_per_sec", &c.RecordsPerSec},
		{"mb_per_sec", &c.MBPerSec},
		{"produce_p99_ms", &c.ProduceP99Ms},
		{"broker_cpu_seconds", &c.BrokerCPUSeconds},
		{"duration_s", &c.DurationSec},
		{"record_bytes", &recordBytes},
		{"records_per_batch", &c.RecordsPerBatch},
		{"remote_copied_bytes", &c.RemoteCopiedBytes},
		{"remote_copy_seconds", &c.RemoteCopySeconds},
		{"remote_read_bytes", &c.RemoteReadBytes},
		{"remote_read_seconds", &c.RemoteReadSeconds},
	} {
		if err := jsonNumber(doc.Result, f.key, f.dst); err != nil {
			return Calibration{}, err
		}
	}
	if raw, ok := doc.Result["device"]; ok && string(raw) != "null" {
		var dev map[string]json.RawMessage
		if err := json.Unmarshal(raw, &dev); err != nil {
			return Calibration{}, fmt.Errorf("%w: \"device\" is not an object: %s", ErrBadCalibration, truncate(string(raw), 40))
		}
		if err := jsonNumber(dev, "bytes_per_record_byte", &c.DeviceBytesPerRecordByte); err != nil {
			return Calibration{}, err
		}
	}
	if recordBytes == 0 {
		if err := jsonNumber(doc.Config, "record_bytes", &recordBytes); err != nil {
			return Calibration{}, err
		}
	}
	if recordBytes != math.Trunc(recordBytes) || recordBytes > maxRecordBytes {
		return Calibration{}, fmt.Errorf("%w: record_bytes %v is not a record size", ErrBadCalibration, recordBytes)
	}
	c.RecordBytes = int(recordBytes)
	c.CapacitySearch = truthy(doc.Config["find_max"])
	var rf, spawn, spawned float64
	for _, f := range []struct {
		m   map[string]json.RawMessage
		key string
		dst *float64
	}{{doc.Config, "replication_factor", &rf}, {doc.Config, "spawn", &spawn}, {doc.Target, "spawned", &spawned}} {
		if err := jsonNumber(f.m, f.key, f.dst); err != nil {
			return Calibration{}, err
		}
		if *f.dst != math.Trunc(*f.dst) || *f.dst < 0 || *f.dst > maxReplication*100 {
			return Calibration{}, fmt.Errorf("%w: %s %v is not a count", ErrBadCalibration, f.key, *f.dst)
		}
	}
	c.ReplicationFactor = int(rf)
	c.Brokers = int(max(spawn, spawned))
	if err := c.validate(); err != nil {
		return Calibration{}, err
	}
	return c, nil
}

// jsonNumber reads m[key] into dst if present and not null.
func jsonNumber(m map[string]json.RawMessage, key string, dst *float64) error {
	raw, ok := m[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%w: %q is not a number: %s", ErrBadCalibration, key, truncate(string(raw), 40))
	}
	return nil
}

// truthy accepts find_max as true, a non-zero number, or a non-empty
// object (a loadgen may record the search's settings there).
func truthy(raw json.RawMessage) bool {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch t := v.(type) {
	case bool:
		return t
	case float64:
		return t != 0
	case map[string]any:
		return len(t) > 0
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// mbps is the run's produce MB/s: as reported, or derived from records/s
// and record size.
func (c *Calibration) mbps() float64 {
	if c.MBPerSec > 0 {
		return c.MBPerSec
	}
	if c.RecordsPerSec > 0 && c.RecordBytes > 0 {
		return c.RecordsPerSec * float64(c.RecordBytes) / bytesPerMB
	}
	return 0
}

// rf is the run's replication factor, 1 when unknown.
func (c *Calibration) rf() float64 {
	return float64(max(1, c.ReplicationFactor))
}

// hasDeviceAmp reports whether the run measured its disk's bytes per
// record byte, from which disk_amp is derived.
func (c *Calibration) hasDeviceAmp() bool { return c != nil && c.DeviceBytesPerRecordByte > 0 }

// appendedMBps is what the run's brokers appended in total.
func (c *Calibration) appendedMBps() float64 { return c.mbps() * c.rf() }

// hasCeiling reports whether a per-broker ceiling can be derived.
func (c *Calibration) hasCeiling() bool {
	return c.CapacitySearch && c.Brokers > 0 && c.mbps() > 0
}

// hasCPU reports whether a per-core rate can be derived.
func (c *Calibration) hasCPU() bool {
	return c.BrokerCPUSeconds > 0 && c.DurationSec > 0 && c.mbps() > 0
}

// perCoreMBps is appended MB/s / (broker_cpu_seconds / duration_s).
func (c *Calibration) perCoreMBps() float64 {
	return c.appendedMBps() / (c.BrokerCPUSeconds / c.DurationSec)
}

func (c *Calibration) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"records_per_sec", c.RecordsPerSec}, {"mb_per_sec", c.MBPerSec},
		{"produce_p99_ms", c.ProduceP99Ms}, {"broker_cpu_seconds", c.BrokerCPUSeconds},
		{"duration_s", c.DurationSec}, {"record_bytes", float64(c.RecordBytes)},
		{"records_per_batch", c.RecordsPerBatch},
		{"remote_copied_bytes", c.RemoteCopiedBytes}, {"remote_copy_seconds", c.RemoteCopySeconds},
		{"remote_read_bytes", c.RemoteReadBytes}, {"remote_read_seconds", c.RemoteReadSeconds},
		{"device.bytes_per_record_byte", c.DeviceBytesPerRecordByte},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > maxLimit*10 {
			return fmt.Errorf("%w: %s = %v", ErrBadCalibration, f.name, f.v)
		}
	}
	if c.ReplicationFactor < 0 || c.ReplicationFactor > maxReplication || c.Brokers < 0 || c.Brokers > maxCount {
		return fmt.Errorf("%w: replication factor %d, brokers %d", ErrBadCalibration, c.ReplicationFactor, c.Brokers)
	}
	if c.DeviceBytesPerRecordByte/c.rf() > maxDiskAmplification {
		return fmt.Errorf("%w: device.bytes_per_record_byte %v over replication factor %v is above the disk write amplification a plan takes (%d)",
			ErrBadCalibration, c.DeviceBytesPerRecordByte, c.rf(), maxDiskAmplification)
	}
	if !c.hasCPU() && !c.hasCeiling() && !c.hasUpload() && !c.hasRemoteRead() {
		return fmt.Errorf("%w: no usable figures: need broker_cpu_seconds and duration_s with mb_per_sec "+
			"(or records_per_sec and record_bytes), a --find-max run's mb_per_sec on spawned brokers, "+
			"or tiered storage's copy or remote read counters (%s and %s, %s and %s)", ErrBadCalibration,
			MetricRemoteCopiedBytes, MetricRemoteCopySeconds, MetricRemoteReadBytes, MetricRemoteReadSeconds)
	}
	for _, r := range []struct {
		ok   bool
		name string
		v    func() float64
	}{{c.hasUpload(), "upload", c.uploadMBps}, {c.hasRemoteRead(), "remote read", c.remoteReadMBps}} {
		if r.ok {
			if v := r.v(); v > maxLimit || v < 1e-6 {
				return fmt.Errorf("%w: %s rate %v MB/s is not a plausible measurement", ErrBadCalibration, r.name, v)
			}
		}
	}
	if c.hasCPU() {
		if pc := c.perCoreMBps(); pc > maxLimit || pc < 1e-6 {
			return fmt.Errorf("%w: %v MB/s per core is not a plausible measurement", ErrBadCalibration, pc)
		}
	}
	if c.hasCeiling() {
		if pb := c.appendedMBps() / float64(c.Brokers); pb > maxLimit || pb < 1e-6 {
			return fmt.Errorf("%w: %v MB/s per broker is not a plausible measurement", ErrBadCalibration, pb)
		}
	}
	return nil
}
