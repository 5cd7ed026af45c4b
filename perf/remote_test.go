package perf

import (
	"errors"
	"strings"
	"testing"
)

// sampleMetrics is two brokers' /metrics scrapes, concatenated, with the
// series around the remote rates' counters.
const sampleMetrics = `# HELP strata_remote_copied_bytes_total Bytes of every object of the segments copied.
# TYPE strata_remote_copied_bytes_total counter
strata_remote_copied_bytes_total 3e+09
strata_remote_copy_seconds_total 20
strata_remote_copy_throttle_seconds_total 5
strata_remote_read_bytes_total 1.5e+09
strata_remote_read_seconds_total 10
strata_remote_read_time_seconds_bucket{le="0.0001"} 3
strata_remote_fetched_bytes_total 9e+09
# TYPE strata_remote_copied_bytes_total counter
strata_remote_copied_bytes_total 1e+09
strata_remote_copy_seconds_total 20
strata_remote_read_bytes_total 5e+08
strata_remote_read_seconds_total 10
`

// A /metrics scrape gives the upload and remote read rates (counters
// summed over the brokers' scrapes), and a tiered plan uses them: the
// remote upload limit sizes the brokers, and the catch-up read time is
// the data only the object store holds over the readers' rate.
func TestRemoteRatesFromMetrics(t *testing.T) {
	c, err := ParseMetricsCalibration([]byte(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if c.RemoteCopiedBytes != 4e9 || c.RemoteCopySeconds != 40 || c.RemoteReadBytes != 2e9 || c.RemoteReadSeconds != 20 {
		t.Fatalf("counters %+v", c)
	}
	c.Source = "metrics.txt"
	w := reference(t)
	w.LocalHotHours = 12
	w.Calibration = &c
	rep := mustPlan(t, w)
	checkReport(t, rep)
	near(t, "upload_mbps", stepValue(t, rep, "upload_mbps"), 100, 1e-12) // 4e9 B / 40 s
	near(t, "remote_read_mbps", stepValue(t, rep, "remote_read_mbps"), 100, 1e-12)
	// 614.4 MB/s uploaded at peak over 100 MB/s × 0.6 per broker: 11.
	var upload *LimitUse
	for i := range rep.Limits {
		if rep.Limits[i].Name == "remote upload" {
			upload = &rep.Limits[i]
		}
	}
	if upload == nil || upload.BrokersNeeded != 11 || upload.Demand != rep.WritePeakMBps {
		t.Fatalf("remote upload limit %+v", upload)
	}
	// 204.8 MB/s × 156 h = 115.0 TB remote only, read at 100 MB/s by
	// each of 96 partitions' readers: 115,015.68 / 9,600 / 3600 h.
	near(t, "remote_catchup_h", rep.RemoteCatchupHours, 204.8*156*3600/(100*96)/3600, 1e-9)
	if !rep.HasWarning("remote-catchup") || !rep.HasWarning("remote-upload") || rep.HasWarning("remote-upload-unmeasured") {
		t.Errorf("notes %v", codes(rep))
	}
	if rep.HasWarning("calibration-not-ceiling") {
		t.Error("a metrics scrape called a loadgen run")
	}
	// Slower uploads bind the plan.
	c.RemoteCopySeconds = 400
	rep = mustPlan(t, w)
	if rep.Binding != "remote upload" {
		t.Errorf("10 MB/s uploads: binding %q, want remote upload (%+v)", rep.Binding, rep.Limits)
	}
	// Without a rate the plan says it does not model uploads.
	w.Calibration = nil
	if rep := mustPlan(t, w); !rep.HasWarning("remote-upload-unmeasured") || rep.RemoteCatchupHours != 0 {
		t.Errorf("uncalibrated: %v, catch-up %v", codes(rep), rep.RemoteCatchupHours)
	}
	w.Limits.UploadMBps = 100
	if rep := mustPlan(t, w); rep.HasWarning("remote-upload-unmeasured") || len(rep.Limits) == 0 {
		t.Errorf("--upload-mbps: %v", codes(rep))
	}
}

func TestParseMetricsCalibrationRejects(t *testing.T) {
	for _, bad := range []string{
		"strata_remote_copied_bytes_total 10\n",                                    // no time
		"# only comments\nstrata_other_total 5\n",                                  // nothing
		"strata_remote_copied_bytes_total x\nstrata_remote_copy_seconds_total 1\n", // not a number
		"strata_remote_read_bytes_total -1\nstrata_remote_read_seconds_total 1\n",  // negative
	} {
		if _, err := ParseMetricsCalibration([]byte(bad)); !errors.Is(err, ErrBadCalibration) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A loadgen result and a metrics scrape merge; two of either do not.
func TestCalibrationMerge(t *testing.T) {
	lg, err := ParseCalibration([]byte(sampleResult))
	if err != nil {
		t.Fatal(err)
	}
	lg.Source = "lg.json"
	mt, err := ParseMetricsCalibration([]byte(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	mt.Source = "metrics.txt"
	for _, pair := range [][2]Calibration{{lg, mt}, {mt, lg}} {
		got, err := pair[0].Merge(pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if !got.hasCPU() || !got.hasUpload() || got.Source != "lg.json" || got.RemoteSource != "metrics.txt" {
			t.Errorf("merged %+v", got)
		}
	}
	if _, err := lg.Merge(lg); err == nil || !strings.Contains(err.Error(), "both loadgen results") {
		t.Errorf("two loadgen results: %v", err)
	}
	if _, err := mt.Merge(mt); err == nil {
		t.Error("two scrapes merged")
	}
}
