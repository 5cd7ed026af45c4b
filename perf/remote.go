package perf

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Tiered storage's rates, as `strata plan --calibrate` reads them from a
// run: the upload rate (MB/s one broker's remote log manager copies to the
// object store) and the remote read rate (MB/s a remote read returns, per
// reader). They come from the brokers' /metrics, a scrape of one or more
// brokers in one file (Prometheus text format), whose counters are summed:
//
//	upload_mbps      = strata_remote_copied_bytes_total / strata_remote_copy_seconds_total / 10^6
//	remote_read_mbps = strata_remote_read_bytes_total / strata_remote_read_seconds_total / 10^6
//
// The copy seconds are the store's time for the puts (throttle waits
// excluded), the read seconds the remote reads' time: these are the rates
// while uploading and reading, not averages over the run. A loadgen result
// may carry the same four counters in its "result" object
// (remote_copied_bytes, remote_copy_seconds, remote_read_bytes,
// remote_read_seconds).

// The metrics the remote rates are read from.
const (
	MetricRemoteCopiedBytes = "strata_remote_copied_bytes_total"
	MetricRemoteCopySeconds = "strata_remote_copy_seconds_total"
	MetricRemoteReadBytes   = "strata_remote_read_bytes_total"
	MetricRemoteReadSeconds = "strata_remote_read_seconds_total"
)

// ParseMetricsCalibration reads the remote rates from a /metrics scrape
// (one or more brokers' scrapes, concatenated). A file with neither rate
// (no copy and no remote read measured) is an error.
func ParseMetricsCalibration(data []byte) (Calibration, error) {
	if len(data) > maxCalibrationBytes {
		return Calibration{}, fmt.Errorf("%w: %d bytes", ErrBadCalibration, len(data))
	}
	var c Calibration
	dst := map[string]*float64{
		MetricRemoteCopiedBytes: &c.RemoteCopiedBytes, MetricRemoteCopySeconds: &c.RemoteCopySeconds,
		MetricRemoteReadBytes: &c.RemoteReadBytes, MetricRemoteReadSeconds: &c.RemoteReadSeconds,
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(text, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		p, ok := dst[name]
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return Calibration{}, fmt.Errorf("%w: line %d: %s has no value", ErrBadCalibration, line, name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return Calibration{}, fmt.Errorf("%w: line %d: %s value %q", ErrBadCalibration, line, name, truncate(fields[0], 40))
		}
		*p += v
	}
	if err := sc.Err(); err != nil {
		return Calibration{}, fmt.Errorf("%w: %v", ErrBadCalibration, err)
	}
	if err := c.validate(); err != nil {
		return Calibration{}, err
	}
	return c, nil
}

// isMetricsText reports whether a calibration file is a /metrics scrape
// rather than a loadgen JSON result.
func isMetricsText(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) > 0 && t[0] != '{'
}

// hasUpload reports whether an upload rate can be derived.
func (c *Calibration) hasUpload() bool { return c.RemoteCopiedBytes > 0 && c.RemoteCopySeconds > 0 }

// hasRemoteRead reports whether a remote read rate can be derived.
func (c *Calibration) hasRemoteRead() bool { return c.RemoteReadBytes > 0 && c.RemoteReadSeconds > 0 }

func (c *Calibration) uploadMBps() float64 {
	return c.RemoteCopiedBytes / c.RemoteCopySeconds / bytesPerMB
}

func (c *Calibration) remoteReadMBps() float64 {
	return c.RemoteReadBytes / c.RemoteReadSeconds / bytesPerMB
}

// Merge returns c with the figures of o that c does not have (a loadgen
// result and a metrics scrape given together); a figure both have is an
// error.
func (c Calibration) Merge(o Calibration) (Calibration, error) {
	if (c.hasUpload() || c.hasRemoteRead()) && (o.hasUpload() || o.hasRemoteRead()) {
		return c, fmt.Errorf("%w: %s and %s both carry remote rates; give one", ErrBadCalibration, c.Source, o.Source)
	}
	if (c.hasCPU() || c.hasCeiling()) && (o.hasCPU() || o.hasCeiling()) {
		return c, fmt.Errorf("%w: %s and %s are both loadgen results; give one", ErrBadCalibration, c.Source, o.Source)
	}
	if c.RemoteSource == "" && (c.hasUpload() || c.hasRemoteRead()) {
		c.RemoteSource = c.Source
	}
	out := c
	if o.hasUpload() || o.hasRemoteRead() {
		out.RemoteCopiedBytes, out.RemoteCopySeconds = o.RemoteCopiedBytes, o.RemoteCopySeconds
		out.RemoteReadBytes, out.RemoteReadSeconds = o.RemoteReadBytes, o.RemoteReadSeconds
		out.RemoteSource = o.Source
	}
	if o.hasCPU() || o.hasCeiling() {
		r := out
		out = o
		out.RemoteCopiedBytes, out.RemoteCopySeconds = r.RemoteCopiedBytes, r.RemoteCopySeconds
		out.RemoteReadBytes, out.RemoteReadSeconds = r.RemoteReadBytes, r.RemoteReadSeconds
		out.RemoteSource = r.RemoteSource
	}
	return out, nil
}

// remoteCalibration derives the rates a calibration carries (calibration
// section).
func (m *model) remoteCalibration(c *Calibration) {
	r := &m.rec
	if c.hasUpload() {
		m.uploadMBps = r.add("upload_mbps", "MB/s one broker copied to the object store while copying", "MB/s",
			"cal_copied_bytes / cal_copy_s / 10^6", "%s / %s / 10^6", a(c.RemoteCopiedBytes, c.RemoteCopySeconds), c.uploadMBps())
	}
	if c.hasRemoteRead() {
		m.remoteReadMBps = r.add("remote_read_mbps", "MB/s one remote read returned while reading", "MB/s",
			"cal_read_bytes / cal_read_s / 10^6", "%s / %s / 10^6", a(c.RemoteReadBytes, c.RemoteReadSeconds), c.remoteReadMBps())
	}
}

// remoteReads is what the remote read rate means for a tiered plan: how
// long a consumer group takes to read everything only the object store
// holds, one reader per partition.
func (m *model) remoteReads() {
	w, r := m.w, &m.rec
	if w.LocalHotHours <= 0 || m.remoteReadMBps <= 0 {
		return
	}
	r.section = "tiered storage reads"
	ws, P := m.rep.WriteSustainedMBps, float64(m.rep.Partitions)
	remoteH := w.RetentionHours - w.LocalHotHours
	remoteTB := r.add("remote_only_tb", "data only the object store holds (retention beyond the hot window), one copy", "TB",
		"write_sust × (retention_h - hot_h) × 3600 / 10^6", "%s × (%s - %s) × 3600 / 10^6",
		a(ws, w.RetentionHours, w.LocalHotHours), ws*remoteH*3600/bytesPerMB)
	m.rep.RemoteCatchupHours = r.add("remote_catchup_h", "a consumer group reading all of it from the object store, one reader per partition", "h",
		"remote_only_tb × 10^6 / (remote_read_mbps × partitions) / 3600", "%s × 10^6 / (%s × %s) / 3600",
		a(remoteTB, m.remoteReadMBps, P), remoteTB*bytesPerMB/(m.remoteReadMBps*P)/3600)
}

// warnRemote says what tiered storage's rates mean for the plan, or that
// they were not measured.
func (m *model) warnRemote() {
	w, rep := m.w, &m.rep
	if w.LocalHotHours <= 0 {
		return
	}
	if m.uploadMBps <= 0 {
		m.add(SeverityNote, "remote-upload-unmeasured",
			"the object store's upload rate is not modelled: the leaders upload %s MB/s at peak; pass --upload-mbps, "+
				"or --calibrate with a /metrics scrape of brokers that copied (%s, %s)",
			fmtShort(rep.WritePeakMBps), MetricRemoteCopiedBytes, MetricRemoteCopySeconds)
	} else {
		m.add(SeverityNote, "remote-upload",
			"the leaders upload %s MB/s at peak, %s MB/s per broker over %d, each broker uploading at most %s MB/s",
			fmtShort(rep.WritePeakMBps), fmtShort(rep.WritePeakMBps/float64(rep.Brokers)), rep.Brokers, fmtShort(m.uploadMBps))
	}
	if rep.RemoteCatchupHours > 0 {
		m.add(SeverityNote, "remote-catchup",
			"a consumer group reading everything only the object store holds (%s h of data) at %s MB/s per reader, "+
				"one reader per partition over %d partitions, takes %s h",
			fmtShort(w.RetentionHours-w.LocalHotHours), fmtShort(m.remoteReadMBps), rep.Partitions, fmtShort(rep.RemoteCatchupHours))
	}
}
