package main

// `strata groups`: consumer-group administration against any
// Kafka-compatible cluster, built on franz-go's kadm (ListGroups,
// DescribeGroups, OffsetFetch, ListOffsets, DescribeConfigs, OffsetCommit).
//
// describe shows, per partition, the committed offset, the log start and
// end, the lag in records, the lag in time (age of the oldest record not
// yet consumed, read with one fetch at the committed offset) and the
// retention cliff: how long until that record is due for deletion under the
// topic's retention.ms (its timestamp + retention.ms - now). A group whose
// cliff is near loses data silently when it passes; one whose committed
// offset is already below the log start has lost records ("LOST").

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const groupsAbout = `Consumer-group administration against any Kafka-compatible cluster.
Every verb takes --brokers (default: $STRATA_BROKERS, else 127.0.0.1:9092)
and --timeout.`

// groupsVerbs are the groups verbs and their help.
var groupsVerbs = []verbDoc{
	{"list", "list groups and their states", cmdDoc{name: "groups list", usage: "strata groups list [--state STATE ...] [--format text|json]",
		about: "Prints each group's name, state and protocol type. --state keeps only groups in that\n" +
			"state (repeatable; one of " + strings.Join(groupStates, ", ") + ",\n" +
			"in any case, as Kafka's tools accept). --format json prints an array of objects."}},
	{"describe", "per-partition offsets, lag and retention cliff", cmdDoc{name: "groups describe", usage: "strata groups describe GROUP ... [--format text|json]",
		about: "Prints per partition the committed offset, log start, end, lag in records and time, and\n" +
			"the retention cliff: the time until the oldest unconsumed record falls off retention.ms\n" +
			"(LOST when the committed offset is below the log start already). --format json prints\n" +
			"an array of groups, times in milliseconds (null where the text prints \"-\")."}},
	{"delete", "delete groups and their committed offsets", cmdDoc{name: "groups delete", usage: "strata groups delete GROUP ...",
		about: "Deletes each named group with its committed offsets (DeleteGroups). A group with\n" +
			"members is refused (NON_EMPTY_GROUP): stop its consumers first."}},
	{"reset-offsets", "move a group's committed offsets", cmdDoc{name: "groups reset-offsets",
		usage: "strata groups reset-offsets GROUP --topic T [--partitions 0,1,...]\n" +
			"    (--to-earliest | --to-latest | --to-datetime 2006-01-02T15:04:05Z | --to-offset N) [--execute]",
		about: "Prints the new offsets, and commits them only with --execute. The group must have no\n" +
			"members (stop its consumers first), as in Kafka."}},
}

// groupStates are Kafka's group states (GroupState: the classic protocol's
// and KIP-848's), as ListGroups' StatesFilter takes them.
var groupStates = []string{"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead", "Assigning", "Reconciling"}

// canonicalStates maps --state values, in any case, to Kafka's spelling.
func canonicalStates(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, v := range in {
		found := ""
		for _, st := range groupStates {
			if strings.EqualFold(strings.TrimSpace(v), st) {
				found = st
			}
		}
		if found == "" {
			return nil, fmt.Errorf("--state %q: not a group state (%s)", v, strings.Join(groupStates, ", "))
		}
		out = append(out, found)
	}
	return out, nil
}

// timeNow is the wall clock the shell passes to describe.
var timeNow = time.Now

type groupsFlags struct {
	fs         *flag.FlagSet
	brokers    string
	timeout    time.Duration
	states     multiFlag
	topic      string
	partitions string
	earliest   bool
	latest     bool
	datetime   string
	offset     int64
	execute    bool
	format     outputFormat
}

func newGroupsFlags(v verbDoc) *groupsFlags {
	f := &groupsFlags{fs: flag.NewFlagSet("strata groups "+v.verb, flag.ContinueOnError), offset: -1, format: formatText}
	f.fs.StringVar(&f.brokers, "brokers", "", brokersHelp)
	f.fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the cluster")
	switch v.verb {
	case "list":
		f.fs.Var(&f.states, "state", "only groups in this `state` (repeatable)")
		f.fs.Var(&f.format, "format", formatHelp)
	case "describe":
		f.fs.Var(&f.format, "format", formatHelp)
	case "reset-offsets":
		f.fs.StringVar(&f.topic, "topic", "", "topic whose offsets to reset (required)")
		f.fs.StringVar(&f.partitions, "partitions", "", "comma-separated partitions (default: all)")
		f.fs.BoolVar(&f.earliest, "to-earliest", false, "reset to the log start offset")
		f.fs.BoolVar(&f.latest, "to-latest", false, "reset to the end offset")
		f.fs.StringVar(&f.datetime, "to-datetime", "", "reset to the first offset at or after this RFC 3339 `time`")
		f.fs.Int64Var(&f.offset, "to-offset", -1, "reset to this `offset` (clamped to [start, end])")
		f.fs.BoolVar(&f.execute, "execute", false, "commit the new offsets (default: only print them)")
	}
	return f
}

func (f *groupsFlags) seeds() []string { return splitSeeds(f.brokers) }

func (f *groupsFlags) client() (*kadm.Client, *kgo.Client, error) {
	return adminClient(f.seeds(), f.timeout)
}

func groupsMain(args []string, stdout, stderr io.Writer, now func() time.Time) error {
	return groupsMainEnv(args, stdout, stderr, now, os.Getenv)
}

func groupsMainEnv(args []string, stdout, stderr io.Writer, now func() time.Time, getenv func(string) string) error {
	v, ok, err := dispatchVerb("groups", groupsAbout, groupsVerbs, args, stdout)
	if !ok {
		return err
	}
	f := newGroupsFlags(v)
	pos, err := parseFlags(f.fs, args[1:], v.doc, true, stdout)
	if err != nil {
		return err
	}
	f.brokers = resolveBrokers(f.brokers, getenv)
	if err := groupsCheckArgs(f, v.verb, pos); err != nil {
		return asUsage(v.doc, err)
	}
	adm, cl, err := f.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	switch v.verb {
	case "list":
		return groupsList(ctx, adm, f, stdout)
	case "describe":
		return groupsDescribe(ctx, adm, f.seeds(), pos, f.format, stdout, now())
	case "delete":
		return groupsDelete(ctx, adm, pos, stdout)
	default:
		return groupsReset(ctx, adm, f, pos[0], stdout)
	}
}

// groupsCheckArgs checks what can be checked before connecting, and
// spells --state values as Kafka does.
func groupsCheckArgs(f *groupsFlags, verb string, pos []string) error {
	switch verb {
	case "list":
		if len(pos) != 0 {
			return fmt.Errorf("list takes no arguments, got %q", pos)
		}
		states, err := canonicalStates(f.states)
		if err != nil {
			return err
		}
		f.states = states
	case "describe":
		if len(pos) == 0 {
			return errors.New("describe: name at least one group")
		}
	case "delete":
		if len(pos) == 0 {
			return errors.New("delete: name at least one group")
		}
	case "reset-offsets":
		if len(pos) != 1 {
			return errors.New("reset-offsets: name exactly one group")
		}
		if f.topic == "" {
			return errors.New("reset-offsets: --topic is required")
		}
		modes := 0
		for _, b := range []bool{f.earliest, f.latest, f.datetime != "", f.offset >= 0} {
			if b {
				modes++
			}
		}
		if modes != 1 {
			return errors.New("reset-offsets: give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset")
		}
		if f.datetime != "" {
			if _, err := time.Parse(time.RFC3339, f.datetime); err != nil {
				return fmt.Errorf("--to-datetime: %w", err)
			}
		}
	}
	return nil
}

func groupsList(ctx context.Context, adm *kadm.Client, f *groupsFlags, w io.Writer) error {
	listed, err := adm.ListGroups(ctx, f.states...)
	if err != nil {
		return err
	}
	if f.format == formatJSON {
		out := []groupListJSON{}
		for _, g := range listed.Sorted() {
			out = append(out, groupListJSON{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType})
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL-TYPE")
	for _, g := range listed.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, g.State, g.ProtocolType)
	}
	return tw.Flush()
}

// partitionLag is one row of describe.
type partitionLag struct {
	topic            string
	partition        int32
	committed        int64 // -1: none
	start, end       int64
	lag              int64
	oldestUnconsumed int64 // ms timestamp of the record at the committed offset; -1 unknown
	retentionMs      int64 // -1: infinite
	member, client   string
	err              error
}

// cliff returns the retention-cliff column: time until the committed
// offset's record is due for deletion, "LOST" if it is gone already, "-" if
// nothing is unconsumed or retention is infinite.
func (p *partitionLag) cliff(now time.Time) string {
	switch {
	case p.committed >= 0 && p.committed < p.start:
		return "LOST"
	case p.lag <= 0:
		return "-"
	case p.retentionMs < 0:
		return "never"
	case p.oldestUnconsumed < 0:
		return "?"
	}
	left := time.UnixMilli(p.oldestUnconsumed).Add(time.Duration(p.retentionMs) * time.Millisecond).Sub(now)
	if left <= 0 {
		return "due now"
	}
	return left.Truncate(time.Second).String()
}

func (p *partitionLag) lagTime(now time.Time) string {
	if p.lag <= 0 || p.oldestUnconsumed < 0 {
		return "-"
	}
	return now.Sub(time.UnixMilli(p.oldestUnconsumed)).Truncate(time.Millisecond).String()
}

// groupListJSON is one group of `groups list --format json`.
type groupListJSON struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
}

// groupJSON is one group of `groups describe --format json`.
type groupJSON struct {
	Group        string             `json:"group"`
	State        string             `json:"state"`
	ProtocolType string             `json:"protocol_type"`
	Protocol     string             `json:"protocol"`
	Members      int                `json:"members"`
	Coordinator  int32              `json:"coordinator"`
	Partitions   []groupPartitionJS `json:"partitions"`
}

// groupPartitionJS is one row of describe. Null stands where the text
// prints "-" (or "?", "never"): no commit, no lag, unknown, infinite.
type groupPartitionJS struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	Committed      *int64 `json:"committed"`
	LogStartOffset int64  `json:"log_start_offset"`
	EndOffset      int64  `json:"end_offset"`
	Lag            int64  `json:"lag"`
	LagMs          *int64 `json:"lag_ms"`             // age of the oldest unconsumed record
	RetentionMs    *int64 `json:"retention_ms"`       // the topic's retention.ms; null: infinite
	CliffMs        *int64 `json:"retention_cliff_ms"` // until that record is due for deletion (<= 0: due now)
	Lost           bool   `json:"lost"`               // the committed offset is below the log start
	Member         string `json:"member,omitempty"`   // the member assigned the partition
	Client         string `json:"client,omitempty"`   // its client id
	Error          string `json:"error,omitempty"`    // why the lag is unknown
}

// json is the row for --format json.
func (p *partitionLag) json(now time.Time) groupPartitionJS {
	ptr := func(v int64) *int64 { return &v }
	out := groupPartitionJS{Topic: p.topic, Partition: p.partition, LogStartOffset: p.start, EndOffset: p.end, Lag: p.lag,
		Lost: p.committed >= 0 && p.committed < p.start, Member: p.member, Client: p.client}
	if p.committed >= 0 {
		out.Committed = ptr(p.committed)
	}
	if p.retentionMs >= 0 {
		out.RetentionMs = ptr(p.retentionMs)
	}
	if p.err != nil {
		out.Error = p.err.Error()
	}
	if p.lag > 0 && p.oldestUnconsumed >= 0 {
		out.LagMs = ptr(now.Sub(time.UnixMilli(p.oldestUnconsumed)).Milliseconds())
		if p.retentionMs >= 0 && !out.Lost {
			out.CliffMs = ptr(time.UnixMilli(p.oldestUnconsumed).Add(time.Duration(p.retentionMs) * time.Millisecond).Sub(now).Milliseconds())
		}
	}
	return out
}

func groupsDescribe(ctx context.Context, adm *kadm.Client, seeds []string, groups []string, format outputFormat, w io.Writer, now time.Time) error {
	lags, err := adm.Lag(ctx, groups...)
	if err != nil {
		return err
	}
	var out []groupJSON
	for gi, g := range groups {
		l, ok := lags[g]
		if !ok {
			return fmt.Errorf("group %s: no answer", g)
		}
		if err := l.Error(); err != nil {
			return fmt.Errorf("group %s: %w", g, err)
		}
		rows := lagRows(l)
		if err := fillTimes(ctx, adm, seeds, rows); err != nil {
			return err
		}
		if format == formatJSON {
			gj := groupJSON{Group: g, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol,
				Members: len(l.Members), Coordinator: l.Coordinator.NodeID, Partitions: []groupPartitionJS{}}
			for i := range rows {
				gj.Partitions = append(gj.Partitions, rows[i].json(now))
			}
			out = append(out, gj)
			continue
		}
		if gi > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "Group %s: state %s, protocol %s/%s, %d members, coordinator %d\n",
			g, l.State, l.ProtocolType, l.Protocol, len(l.Members), l.Coordinator.NodeID)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tLOG-START\tEND\tLAG\tLAG-TIME\tRETENTION-CLIFF\tMEMBER\tCLIENT")
		for i := range rows {
			r := &rows[i]
			committed := "-"
			if r.committed >= 0 {
				committed = strconv.FormatInt(r.committed, 10)
			}
			lag := strconv.FormatInt(r.lag, 10)
			if r.err != nil {
				lag = "error: " + r.err.Error()
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.topic, r.partition, committed,
				r.start, r.end, lag, r.lagTime(now), r.cliff(now), orDash(r.member), orDash(r.client))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if format == formatJSON {
		return writeJSON(w, out)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func lagRows(l kadm.DescribedGroupLag) []partitionLag {
	var rows []partitionLag
	for _, m := range l.Lag.Sorted() {
		r := partitionLag{topic: m.Topic, partition: m.Partition, committed: m.Commit.At,
			start: m.Start.Offset, end: m.End.Offset, lag: m.Lag, err: m.Err,
			oldestUnconsumed: -1, retentionMs: -1}
		if m.Member != nil {
			r.member, r.client = m.Member.MemberID, m.Member.ClientID
		}
		if r.lag < 0 && r.err == nil {
			r.lag = 0
		}
		rows = append(rows, r)
	}
	return rows
}

// fillTimes reads each topic's retention.ms and the timestamp of the first
// unconsumed record of each lagging partition (one fetch at the committed
// offset, or at the log start when nothing is committed).
func fillTimes(ctx context.Context, adm *kadm.Client, seeds []string, rows []partitionLag) error {
	topics := map[string]bool{}
	at := map[string]map[int32]kgo.Offset{}
	for _, r := range rows {
		topics[r.topic] = true
		if r.lag <= 0 || r.err != nil {
			continue
		}
		from := max(r.committed, r.start)
		if at[r.topic] == nil {
			at[r.topic] = map[int32]kgo.Offset{}
		}
		at[r.topic][r.partition] = kgo.NewOffset().At(from)
	}
	if len(topics) == 0 {
		return nil
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	retention := map[string]int64{}
	if cfgs, err := adm.DescribeTopicConfigs(ctx, names...); err == nil {
		for _, rc := range cfgs {
			retention[rc.Name] = -1
			for _, c := range rc.Configs {
				if c.Key == "retention.ms" && c.Value != nil {
					if v, err := strconv.ParseInt(*c.Value, 10, 64); err == nil {
						retention[rc.Name] = v
					}
				}
			}
		}
	}
	stamps := map[string]map[int32]int64{}
	if len(at) > 0 {
		var err error
		if stamps, err = firstTimestamps(ctx, seeds, at); err != nil {
			return err
		}
	}
	for i := range rows {
		r := &rows[i]
		if v, ok := retention[r.topic]; ok {
			r.retentionMs = v
		}
		if ts, ok := stamps[r.topic][r.partition]; ok {
			r.oldestUnconsumed = ts
		}
	}
	return nil
}

// firstTimestamps fetches the first record at each given offset and returns
// its timestamp (ms). Partitions that return nothing before the context's
// deadline or a short bound are left out.
func firstTimestamps(ctx context.Context, seeds []string, at map[string]map[int32]kgo.Offset) (map[string]map[int32]int64, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(at), kgo.FetchMaxPartitionBytes(64 << 10), kgo.FetchMaxWait(200 * time.Millisecond)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	want := 0
	for _, ps := range at {
		want += len(ps)
	}
	out := map[string]map[int32]int64{}
	got := 0
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for got < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if out[r.Topic] == nil {
				out[r.Topic] = map[int32]int64{}
			}
			if _, ok := out[r.Topic][r.Partition]; !ok {
				out[r.Topic][r.Partition] = r.Timestamp.UnixMilli()
				got++
				cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
			}
		})
	}
	return out, nil
}

func groupsDelete(ctx context.Context, adm *kadm.Client, groups []string, w io.Writer) error {
	resps, err := adm.DeleteGroups(ctx, groups...)
	if err != nil {
		return err
	}
	var errs []error
	for _, g := range groups {
		r, ok := resps[g]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("deleting %s: no answer", g))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("deleting %s: %w%s", g, r.Err, errDetail(r.Err, r.ErrMessage)))
		default:
			fmt.Fprintf(w, "Deleted group %s.\n", g)
		}
	}
	return errors.Join(errs...)
}

func groupsReset(ctx context.Context, adm *kadm.Client, f *groupsFlags, groupID string, w io.Writer) error {
	ds, err := adm.DescribeGroups(ctx, groupID)
	if err != nil {
		return err
	}
	if d, ok := ds[groupID]; ok && d.Err == nil && d.State != "Empty" && d.State != "Dead" {
		return fmt.Errorf("group %s is %s with %d members: stop its consumers first (offsets can only be reset for an inactive group)",
			groupID, d.State, len(d.Members))
	}
	starts, err := adm.ListStartOffsets(ctx, f.topic)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, f.topic)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("topic %s: %w", f.topic, err)
	}
	var target kadm.ListedOffsets
	switch {
	case f.earliest:
		target = starts
	case f.latest:
		target = ends
	case f.datetime != "":
		ts, err := time.Parse(time.RFC3339, f.datetime)
		if err != nil {
			return fmt.Errorf("--to-datetime: %w", err)
		}
		if target, err = adm.ListOffsetsAfterMilli(ctx, ts.UnixMilli(), f.topic); err != nil {
			return err
		}
	}
	only := map[int32]bool{}
	if f.partitions != "" {
		for _, s := range strings.Split(f.partitions, ",") {
			p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return fmt.Errorf("--partitions: %w", err)
			}
			only[int32(p)] = true
		}
	}
	offs := kadm.Offsets{}
	var parts []int32
	ends.Each(func(e kadm.ListedOffset) {
		if len(only) > 0 && !only[e.Partition] {
			return
		}
		start, _ := starts.Lookup(f.topic, e.Partition)
		var to int64
		switch {
		case f.offset >= 0:
			to = min(max(f.offset, start.Offset), e.Offset)
		default:
			t, ok := target.Lookup(f.topic, e.Partition)
			if !ok || t.Offset < 0 {
				to = e.Offset // no record at or after the time: the end
			} else {
				to = t.Offset
			}
		}
		offs.AddOffset(f.topic, e.Partition, to, -1)
		parts = append(parts, e.Partition)
	})
	for p := range only {
		if _, ok := ends.Lookup(f.topic, p); !ok {
			return fmt.Errorf("topic %s has no partition %d", f.topic, p)
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
	for _, p := range parts {
		o, _ := offs.Lookup(f.topic, p)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", groupID, f.topic, p, o.At)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !f.execute {
		fmt.Fprintln(w, "(dry run: add --execute to commit these offsets)")
		return nil
	}
	resp, err := adm.CommitOffsets(ctx, groupID, offs)
	if err != nil {
		return err
	}
	if err := resp.Error(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	fmt.Fprintln(w, "committed")
	return nil
}
