package main

// `strata cluster log-dirs`: every broker's log directories (DescribeLogDirs,
// kadm's DescribeAllLogDirs), their filesystems' sizes, the partitions in
// them, and the partitions no broker can serve (an offline directory, or on
// Strata a corrupt partition log, reported as an offline directory of its
// own: server/35_describe_log_dirs.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

var logDirsVerb = verbDoc{"log-dirs", "log directories, their sizes and offline or corrupt partitions", cmdDoc{name: "cluster log-dirs",
	usage: "strata cluster log-dirs [--topic T ...] [--partitions] [--format text|json]",
	about: "Prints every broker's log directories (DescribeLogDirs): each directory, whether it is\n" +
		"online, its filesystem's total and usable bytes, and the partitions and bytes in it; then\n" +
		"every partition in an offline directory. Strata reports a partition whose log is corrupt\n" +
		"(it serves nothing: KAFKA_STORAGE_ERROR) as an offline directory of its own, the\n" +
		"partition's directory, while its data directory stays online; those partitions print as\n" +
		"corrupt (docs/reliability.md). --topic limits the partitions to those topics;\n" +
		"--partitions (or --topic) also lists each partition with its size and offset lag."}}

// logDirJSON is one directory of `cluster log-dirs --format json`.
type logDirJSON struct {
	Broker      int32            `json:"broker"`
	Dir         string           `json:"dir"`
	Error       string           `json:"error,omitempty"` // the error code's name; empty: online
	TotalBytes  int64            `json:"total_bytes"`     // -1: not reported
	UsableBytes int64            `json:"usable_bytes"`    // -1: not reported
	Bytes       int64            `json:"bytes"`           // the partitions' sizes summed
	Partitions  []logDirPartJSON `json:"partitions"`
}

// logDirPartJSON is one partition of a directory.
type logDirPartJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Size      int64  `json:"size"`
	OffsetLag int64  `json:"offset_lag"`
	IsFuture  bool   `json:"is_future"`
}

// logDirsJSON is `cluster log-dirs --format json`.
type logDirsJSON struct {
	Dirs []logDirJSON `json:"dirs"`
	// Offline lists the partitions in offline directories: on Strata a
	// corrupt partition (the directory is the partition's own).
	Offline []offlinePartJSON `json:"offline"`
}

type offlinePartJSON struct {
	Broker    int32  `json:"broker"`
	Dir       string `json:"dir"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Error     string `json:"error"`
}

// logDirsReport sorts the described directories (by broker, then
// directory) and their partitions, and lists the partitions of offline
// directories.
func logDirsReport(all kadm.DescribedAllLogDirs) logDirsJSON {
	out := logDirsJSON{Dirs: []logDirJSON{}, Offline: []offlinePartJSON{}}
	for _, d := range all.Sorted() {
		dj := logDirJSON{Broker: d.Broker, Dir: d.Dir, TotalBytes: d.TotalBytes, UsableBytes: d.UsableBytes, Partitions: []logDirPartJSON{}}
		if d.Err != nil {
			dj.Error = d.Err.Error()
			var ke *kerr.Error
			if errors.As(d.Err, &ke) {
				dj.Error = ke.Message // the code's name: KAFKA_STORAGE_ERROR
			}
		}
		for _, p := range d.Topics.Sorted() {
			dj.Bytes += p.Size
			dj.Partitions = append(dj.Partitions, logDirPartJSON{Topic: p.Topic, Partition: p.Partition, Size: p.Size, OffsetLag: p.OffsetLag, IsFuture: p.IsFuture})
			if d.Err != nil {
				out.Offline = append(out.Offline, offlinePartJSON{Broker: d.Broker, Dir: d.Dir, Topic: p.Topic, Partition: p.Partition, Error: dj.Error})
			}
		}
		out.Dirs = append(out.Dirs, dj)
	}
	return out
}

// clusterLogDirs is `strata cluster log-dirs`.
func clusterLogDirs(ctx context.Context, adm *kadm.Client, f *clusterFlags, w io.Writer) error {
	var set kadm.TopicsSet
	if len(f.topics) > 0 {
		md, err := adm.Metadata(ctx, f.topics...)
		if err != nil {
			return err
		}
		set = kadm.TopicsSet{}
		for _, t := range f.topics {
			td, ok := md.Topics[t]
			if !ok || td.Err != nil {
				return fmt.Errorf("topic %q: %v", t, td.Err)
			}
			set.Add(t, td.Partitions.Numbers()...)
		}
	}
	all, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		return err
	}
	rep := logDirsReport(all)
	if f.format == formatJSON {
		if err := writeJSON(w, rep); err != nil {
			return err
		}
		return nil
	}
	return printLogDirs(w, rep, f.partitions || len(f.topics) > 0)
}

// printLogDirs writes the text report.
func printLogDirs(w io.Writer, rep logDirsJSON, partitions bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BROKER\tDIR\tSTATUS\tTOTAL\tUSABLE\tPARTITIONS\tBYTES")
	for _, d := range rep.Dirs {
		status := "online"
		if d.Error != "" {
			status = "offline: " + d.Error
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", d.Broker, d.Dir, status,
			sizeOrDash(d.TotalBytes), sizeOrDash(d.UsableBytes), len(d.Partitions), humanBytes(d.Bytes))
	}
	if partitions {
		fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tBROKER\tDIR\tSIZE\tOFFSET-LAG")
		var rows []offlinePartJSON
		sizes := map[offlinePartJSON]logDirPartJSON{}
		for _, d := range rep.Dirs {
			for _, p := range d.Partitions {
				k := offlinePartJSON{Broker: d.Broker, Dir: d.Dir, Topic: p.Topic, Partition: p.Partition}
				rows = append(rows, k)
				sizes[k] = p
			}
		}
		sort.Slice(rows, func(i, j int) bool {
			a, b := rows[i], rows[j]
			if a.Topic != b.Topic {
				return a.Topic < b.Topic
			}
			if a.Partition != b.Partition {
				return a.Partition < b.Partition
			}
			return a.Broker < b.Broker
		})
		for _, k := range rows {
			p := sizes[k]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\n", k.Topic, k.Partition, k.Broker, k.Dir, humanBytes(p.Size), p.OffsetLag)
		}
	}
	if len(rep.Offline) > 0 {
		fmt.Fprintln(tw, "\nOFFLINE PARTITION\tBROKER\tDIR\tWHY")
		for _, o := range rep.Offline {
			// Kafka lists no partition in an offline directory: on Strata
			// this is a corrupt partition log reported in its own.
			why := "offline: " + o.Error
			if o.Error == kerr.KafkaStorageError.Message {
				why = "corrupt log (KAFKA_STORAGE_ERROR): see the broker's log and " + o.Dir + "/log-corrupt"
			}
			fmt.Fprintf(tw, "%s-%d\t%d\t%s\t%s\n", o.Topic, o.Partition, o.Broker, o.Dir, why)
		}
	}
	return tw.Flush()
}

func sizeOrDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return humanBytes(n)
}

// humanBytes prints n in B, KiB, MiB, GiB or TiB with one decimal.
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, units := float64(n), []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i]
}
