package perf

import (
	"fmt"
	"strings"
)

// textWidth is where Text wraps prose (warnings).
const textWidth = 100

// Text renders the report for a terminal: inputs, every step as
// "symbol = formula = arithmetic = value unit", the result table, then the
// warnings, errors first. Each step line splits on " = " into exactly four
// parts, and Eval of the third part reproduces the fourth's number.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Capacity plan: %s\n", r.Title)
	fmt.Fprintf(&b, "Units: %s.\n", r.Units)

	b.WriteString("\nInputs\n")
	for _, in := range r.Inputs {
		v := withUnit(fmtNum(in.Value), in.Unit)
		note := in.Name
		if in.Source != "" {
			note += " (" + in.Source + ")"
		}
		fmt.Fprintf(&b, "  %-20s %-22s %s\n", in.Symbol, v, note)
	}
	if r.Workload.Keyless {
		fmt.Fprintf(&b, "  %-20s %-22s %s\n", "keyless", "yes", "sticky partitioner")
	}

	b.WriteString("\nSteps (symbol = formula = arithmetic = value)\n")
	section := ""
	for _, s := range r.Steps {
		if s.Section != section {
			section = s.Section
			fmt.Fprintf(&b, "  %s\n", section)
		}
		fmt.Fprintf(&b, "    %s\n      %s = %s = %s = %s\n", s.Name, s.Symbol, s.Formula, s.Arithmetic, withUnit(fmtNum(s.Value), s.Unit))
	}

	b.WriteString("\nResult\n")
	r.writeResult(&b)

	b.WriteString("\nWarnings\n")
	if len(r.Warnings) == 0 {
		b.WriteString("  none: the plan adds up\n")
	}
	for _, w := range r.Warnings {
		head := fmt.Sprintf("  %-5s %s:", strings.ToUpper(string(w.Severity)), w.Code)
		b.WriteString(wrap(head, w.Message, textWidth, "        "))
	}
	return b.String()
}

func (r *Report) writeResult(b *strings.Builder) {
	k := r.Workload.BrokersThatMayFail
	if r.BrokersGiven {
		verdict := "enough"
		if r.Brokers < r.BrokersNeeded {
			verdict = "NOT enough"
		}
		fmt.Fprintf(b, "  brokers      %d given, %s: the limits need %d (bound by %s, including %d that may fail)\n",
			r.Brokers, verdict, r.BrokersNeeded, r.Binding, k)
	} else {
		fmt.Fprintf(b, "  brokers      %d needed (bound by %s, including %d that may fail)\n", r.Brokers, r.Binding, k)
	}
	fmt.Fprintf(b, "\n  %-17s %-15s %-15s %-7s %-12s %s\n", "limit", "cluster demand", "per broker", "needs",
		fmt.Sprintf("util at %d", r.Brokers), fmt.Sprintf("util with %d down", k))
	for _, l := range r.Limits {
		fmt.Fprintf(b, "  %-17s %-15s %-15s %-7d %-12s %s\n", l.Name, withUnit(fmtShort(l.Demand), l.Unit),
			withUnit(fmtShort(l.PerBroker), l.Unit), l.BrokersNeeded, fmtPct(l.Utilization), fmtPct(l.UtilizationDegraded))
	}
	fmt.Fprintf(b, "  (util = demand / (brokers × per broker); target %s; needs = ceil(demand / (per broker × target)))\n\n",
		fmtPct(r.Workload.TargetUtilization))

	given := "derived"
	if r.PartitionsGiven {
		given = "given"
	}
	cons := ""
	if r.Workload.ConsumerGroups > 0 {
		cons = fmt.Sprintf(", consumer parallelism %d", r.PartitionsConsumers)
	}
	fmt.Fprintf(b, "  partitions   %d %s (throughput needs %d%s); %s replicas per broker\n",
		r.Partitions, given, r.PartitionsThroughput, cons, fmtShort(r.PartitionReplicasPerBroker))
	fmt.Fprintf(b, "  ingest       %s MB/s sustained, %s MB/s peak of record bytes; %s MB/s peak on the wire\n",
		fmtShort(r.IngestSustainedMBps), fmtShort(r.IngestPeakMBps), fmtShort(r.WritePeakMBps))
	fmt.Fprintf(b, "  per broker   disk write %s MB/s (%s MB/s of log), network in %s MB/s, out %s MB/s, %s busy cores (peak)\n",
		fmtShort(r.DiskDevicePerBrokerMBps), fmtShort(r.DiskWritePerBrokerMBps), fmtShort(r.NetInPerBrokerMBps), fmtShort(r.NetOutPerBrokerMBps), fmtShort(r.CoresPerBroker))
	obj := ""
	if r.Workload.LocalHotHours > 0 {
		obj = fmt.Sprintf("; object storage %s TB", fmtShort(r.ObjectStorageTB))
	}
	fmt.Fprintf(b, "  storage      %s TB retained; %s TB on broker disks, %s TB per broker of %s TB%s\n",
		fmtShort(r.RetainedTB), fmtShort(r.LocalDiskTB), fmtShort(r.LocalDiskPerBrokerTB), fmtShort(r.DiskPerBrokerTB), obj)
	fmt.Fprintf(b, "  memory       page cache %s GiB needed per broker, %s GiB free\n",
		fmtShort(r.PageCachePerBrokerGiB), fmtShort(r.PageCacheFreeGiB))
	for _, x := range []struct {
		name string
		b    Batching
	}{{"sustained", r.Sustained}, {"peak", r.Peak}} {
		fmt.Fprintf(b, "  batching     %-9s %s records/batch (closes on %s, %s B), %s batches/s, %s requests/s (%s per broker), %s records/request\n",
			x.name, fmtShort(x.b.RecordsPerBatch), x.b.ClosesOn, fmtShort(x.b.AvgBatchBytes), fmtShort(x.b.BatchesPerSec),
			fmtShort(x.b.RequestsPerSec), fmtShort(x.b.RequestsPerSecPerBroker), fmtShort(x.b.RecordsPerRequest))
	}
}

func withUnit(v, unit string) string {
	switch {
	case unit == "":
		return v
	case strings.HasPrefix(unit, ":"):
		return v + unit
	}
	return v + " " + unit
}

// wrap writes head then the words of s, breaking lines at spaces before
// width bytes and indenting continuation lines; it ends with a newline.
func wrap(head, s string, width int, indent string) string {
	var b strings.Builder
	b.WriteString(head)
	line := len(head)
	for _, word := range strings.Fields(s) {
		if line > len(indent) && line+1+len(word) > width {
			b.WriteString("\n" + indent)
			line = len(indent)
		} else {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	b.WriteByte('\n')
	return b.String()
}
