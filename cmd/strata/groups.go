package main

// `strata groups`: consumer-group administration against any
// Kafka-compatible cluster, built on franz-go's kadm (ListGroups,
// DescribeGroups, OffsetFetch, ListOffsets, DescribeConfigs, OffsetCommit,
// DeleteGroups; for share groups, KIP-932, ShareGroupDescribe,
// DescribeShareGroupOffsets and AlterShareGroupOffsets; DeleteGroups
// deletes share groups too).
//
// Share groups are listed with their type ("share") and described as
// Kafka's kafka-share-groups.sh --describe shows them: per partition the
// share-partition start offset (SPSO), the end offset and the lag (the
// records from the start offset up to the end not yet acknowledged or
// archived: DescribeShareGroupOffsets v1's Lag, KIP-1226), then the
// members and their assignments (--members).
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
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const groupsAbout = `Consumer-group administration against any Kafka-compatible cluster.
Every verb takes --brokers (default: $STRATA_BROKERS, else 127.0.0.1:9092)
and --timeout.`

// groupsVerbs are the groups verbs and their help.
var groupsVerbs = []verbDoc{
	{"list", "list groups, their types and states", cmdDoc{name: "groups list", usage: "strata groups list [--type TYPE ...] [--state STATE ...] [--format text|json]",
		about: "Prints each group's name, type (classic, consumer or share), state and protocol type.\n" +
			"--type keeps only groups of that type (repeatable). --state keeps only groups in that\n" +
			"state (repeatable; one of " + strings.Join(groupStates, ", ") + ",\n" +
			"in any case, as Kafka's tools accept). --format json prints an array of objects."}},
	{"describe", "per-partition offsets, lag and retention cliff", cmdDoc{name: "groups describe", usage: "strata groups describe GROUP ... [--format text|json]",
		about: "Prints per partition the committed offset, log start, end, lag in records and time, and\n" +
			"the retention cliff: the time until the oldest unconsumed record falls off retention.ms\n" +
			"(LOST when the committed offset is below the log start already). A share group\n" +
			"(KIP-932) prints per partition its share-partition start offset, end and lag (records\n" +
			"not yet acknowledged or archived), then its members and their assignments.\n" +
			"--format json prints an array of groups, times in milliseconds (null where the text\n" +
			"prints \"-\")."}},
	{"delete", "delete groups and their committed offsets", cmdDoc{name: "groups delete", usage: "strata groups delete GROUP ...",
		about: "Deletes each named group with its committed offsets (DeleteGroups). A share group\n" +
			"(KIP-932) is deleted with its share-partitions' state (start offsets, delivery states),\n" +
			"so its next consumer starts where share.auto.offset.reset says; its group configs stay.\n" +
			"A group with members is refused (NON_EMPTY_GROUP): stop its consumers first."}},
	{"reset-offsets", "move a group's committed offsets", cmdDoc{name: "groups reset-offsets",
		usage: "strata groups reset-offsets GROUP --topic T [--partitions 0,1,...]\n" +
			"    (--to-earliest | --to-latest | --to-datetime 2006-01-02T15:04:05Z | --to-offset N) [--execute]",
		about: "Prints the new offsets, and commits them only with --execute. The group must have no\n" +
			"members (stop its consumers first), as in Kafka. For a share group the new offsets are\n" +
			"its share-partitions' start offsets (AlterShareGroupOffsets)."}},
}

// groupStates are Kafka's group states (GroupState: the classic protocol's
// and KIP-848's), as ListGroups' StatesFilter takes them.
var groupStates = []string{"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead", "Assigning", "Reconciling"}

// groupTypes are Kafka's group types (ListGroups' TypesFilter, KIP-848 and
// KIP-932).
var groupTypes = []string{"classic", "consumer", "share", "streams"}

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
	types      multiFlag
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
		f.fs.Var(&f.types, "type", "only groups of this `type`: classic, consumer, share or streams (repeatable)")
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
		for i, v := range f.types {
			v = strings.ToLower(strings.TrimSpace(v))
			if !slices.Contains(groupTypes, v) {
				return fmt.Errorf("--type %q: not a group type (%s)", f.types[i], strings.Join(groupTypes, ", "))
			}
			f.types[i] = v
		}
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
	listed, err := adm.ListGroupsByType(ctx, f.types, f.states...)
	if err != nil {
		return err
	}
	if f.format == formatJSON {
		out := []groupListOut{}
		for _, g := range listed.Sorted() {
			out = append(out, groupListOut{groupListJSON{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType}, g.GroupType})
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE\tPROTOCOL-TYPE")
	for _, g := range listed.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Group, orDash(g.GroupType), g.State, orDash(g.ProtocolType))
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

// groupListOut is what `groups list --format json` prints: groupListJSON
// and the group's type (empty from brokers before ListGroups v5).
type groupListOut struct {
	groupListJSON
	Type string `json:"type"`
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
	shares, err := adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return err
	}
	var classic []string
	for _, g := range groups {
		if _, ok := shares[g]; !ok {
			classic = append(classic, g)
		}
	}
	lags := kadm.DescribedGroupLags{}
	if len(classic) > 0 {
		if lags, err = adm.Lag(ctx, classic...); err != nil {
			return err
		}
	}
	var out []any
	for gi, g := range groups {
		if _, ok := shares[g]; ok {
			sg, err := describeShareGroup(ctx, adm, g)
			if err != nil {
				return err
			}
			if format == formatJSON {
				out = append(out, sg)
				continue
			}
			if gi > 0 {
				fmt.Fprintln(w)
			}
			if err := sg.text(w); err != nil {
				return err
			}
			continue
		}
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
			gj := &groupJSON{Group: g, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol,
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
		if out == nil {
			out = []any{}
		}
		return writeJSON(w, out)
	}
	return nil
}

// shareGroupJSON is a share group of `groups describe --format json`.
type shareGroupJSON struct {
	Group       string              `json:"group"`
	Type        string              `json:"type"` // "share"
	State       string              `json:"state"`
	GroupEpoch  int32               `json:"group_epoch"`
	Assignor    string              `json:"assignor"`
	Coordinator int32               `json:"coordinator"`
	Partitions  []sharePartitionJS  `json:"partitions"`
	Members     []shareGroupMemberJ `json:"members"`
}

// sharePartitionJS is one share-partition of a share group.
type sharePartitionJS struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"` // the SPSO; -1: no state
	EndOffset   int64  `json:"end_offset"`
	Lag         *int64 `json:"lag"` // null: the broker does not report it
	Error       string `json:"error,omitempty"`
}

// shareGroupMemberJ is one member of a share group.
type shareGroupMemberJ struct {
	MemberID   string           `json:"member_id"`
	ClientID   string           `json:"client_id"`
	Host       string           `json:"host"`
	Epoch      int32            `json:"member_epoch"`
	Assignment map[string][]int `json:"assignment"`
}

// describeShareGroup describes share group g: ShareGroupDescribe for its
// state and members, DescribeShareGroupOffsets for its share-partitions'
// start offsets and lag, ListEndOffsets for their ends.
func describeShareGroup(ctx context.Context, adm *kadm.Client, g string) (*shareGroupJSON, error) {
	described, err := adm.DescribeShareGroups(ctx, g)
	if err != nil {
		return nil, err
	}
	d, ok := described[g]
	if !ok {
		return nil, fmt.Errorf("share group %s: no answer", g)
	}
	switch {
	case errors.Is(d.Err, kerr.GroupIDNotFound):
		// Listed as a share group but not described: a restarted broker
		// knows it by its share-partitions' state only (members are not
		// persisted) until a member joins. It has none: Empty.
		d = kadm.DescribedShareGroup{GroupID: g, Coordinator: d.Coordinator, GroupState: "Empty"}
	case d.Err != nil:
		return nil, fmt.Errorf("share group %s: %w", g, d.Err)
	}
	offs, err := adm.DescribeShareGroupOffsets(ctx, g)
	if err != nil {
		return nil, err
	}
	o := offs[g]
	if o.Err != nil {
		return nil, fmt.Errorf("share group %s offsets: %w", g, o.Err)
	}
	out := &shareGroupJSON{Group: g, Type: "share", State: d.GroupState, GroupEpoch: d.GroupEpoch, Assignor: d.Assignor,
		Coordinator: d.Coordinator.NodeID, Partitions: []sharePartitionJS{}, Members: []shareGroupMemberJ{}}
	var topics []string
	for t := range o.Offsets {
		topics = append(topics, t)
	}
	ends := kadm.ListedOffsets{}
	if len(topics) > 0 {
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return nil, err
		}
	}
	for _, so := range o.Offsets.Sorted() {
		p := sharePartitionJS{Topic: so.Topic, Partition: so.Partition, StartOffset: so.StartOffset, EndOffset: -1}
		if e, ok := ends.Lookup(so.Topic, so.Partition); ok && e.Err == nil {
			p.EndOffset = e.Offset
		}
		if so.Lag >= 0 {
			lag := so.Lag
			p.Lag = &lag
		}
		if so.Err != nil {
			p.Error = so.Err.Error()
		}
		out.Partitions = append(out.Partitions, p)
	}
	for _, m := range d.Members {
		mj := shareGroupMemberJ{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Epoch: m.MemberEpoch, Assignment: map[string][]int{}}
		for t, ps := range m.Assignment {
			for p := range ps {
				mj.Assignment[t] = append(mj.Assignment[t], int(p))
			}
			sort.Ints(mj.Assignment[t])
		}
		out.Members = append(out.Members, mj)
	}
	return out, nil
}

// text prints a share group as kafka-share-groups.sh --describe (and
// --members) shows it.
func (g *shareGroupJSON) text(w io.Writer) error {
	fmt.Fprintf(w, "Share group %s: state %s, %d members, group epoch %d, coordinator %d\n",
		g.Group, g.State, len(g.Members), g.GroupEpoch, g.Coordinator)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART-OFFSET\tEND\tLAG")
	for _, p := range g.Partitions {
		start, end, lag := "-", "-", "-"
		if p.StartOffset >= 0 {
			start = strconv.FormatInt(p.StartOffset, 10)
		}
		if p.EndOffset >= 0 {
			end = strconv.FormatInt(p.EndOffset, 10)
		}
		if p.Lag != nil {
			lag = strconv.FormatInt(*p.Lag, 10)
		}
		if p.Error != "" {
			lag = "error: " + p.Error
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Topic, p.Partition, start, end, lag)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(g.Members) == 0 {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER-ID\tCLIENT-ID\tHOST\t#PARTITIONS\tASSIGNMENT")
	for _, m := range g.Members {
		var parts []string
		n := 0
		topics := make([]string, 0, len(m.Assignment))
		for t := range m.Assignment {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		for _, t := range topics {
			ps := make([]string, len(m.Assignment[t]))
			for i, p := range m.Assignment[t] {
				ps[i] = strconv.Itoa(p)
			}
			n += len(ps)
			parts = append(parts, t+":"+strings.Join(ps, ","))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", m.MemberID, orDash(m.ClientID), orDash(m.Host), n, orDash(strings.Join(parts, " ")))
	}
	return tw.Flush()
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
		case errors.Is(r.Err, kerr.NonEmptyGroup):
			errs = append(errs, fmt.Errorf("deleting %s: %w%s (it has members: stop its consumers first)", g, r.Err, errDetail(r.Err, r.ErrMessage)))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("deleting %s: %w%s", g, r.Err, errDetail(r.Err, r.ErrMessage)))
		default:
			fmt.Fprintf(w, "Deleted group %s.\n", g)
		}
	}
	return errors.Join(errs...)
}

func groupsReset(ctx context.Context, adm *kadm.Client, f *groupsFlags, groupID string, w io.Writer) error {
	// A share group's offsets are its share-partitions' start offsets
	// (AlterShareGroupOffsets, KIP-932); the group must have no members
	// either.
	shares, err := adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return err
	}
	_, isShare := shares[groupID]
	if isShare {
		ds, err := adm.DescribeShareGroups(ctx, groupID)
		if err != nil {
			return err
		}
		if d, ok := ds[groupID]; ok && d.Err == nil && len(d.Members) > 0 {
			return fmt.Errorf("share group %s is %s with %d members: stop its consumers first (offsets can only be reset for an inactive group)",
				groupID, d.GroupState, len(d.Members))
		}
	} else {
		ds, err := adm.DescribeGroups(ctx, groupID)
		if err != nil {
			return err
		}
		if d, ok := ds[groupID]; ok && d.Err == nil && d.State != "Empty" && d.State != "Dead" {
			return fmt.Errorf("group %s is %s with %d members: stop its consumers first (offsets can only be reset for an inactive group)",
				groupID, d.State, len(d.Members))
		}
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
	if isShare {
		resp, err := adm.AlterShareGroupOffsets(ctx, groupID, offs)
		if err != nil {
			return err
		}
		if err := resp.Error(); err != nil {
			return fmt.Errorf("alter share group offsets: %w", err)
		}
		fmt.Fprintln(w, "altered the share-partitions' start offsets")
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
