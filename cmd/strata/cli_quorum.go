package main

// `strata cluster quorum`: the metadata quorum (DescribeQuorum), asked of
// the brokers or, with --bootstrap-controller, of the controllers' own
// listeners (KIP-919), as kafka-metadata-quorum describe --status
// --replication does.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var quorumVerb = verbDoc{"quorum", "the metadata quorum: leader, epoch, voters and their lag", cmdDoc{name: "cluster quorum",
	usage: "strata cluster quorum [--bootstrap-controller host:port,...] [--tls] [--tls-ca FILE] [--sasl-mechanism M --sasl-username U] [--format text|json]",
	about: "Prints the metadata quorum (DescribeQuorum, as kafka-metadata-quorum describe --status\n" +
		"--replication): the leader, its epoch, the high watermark, and every voter and observer\n" +
		"with its log end offset, its lag behind the leader and when it last fetched and was last\n" +
		"caught up. With --bootstrap-controller it asks the controllers' controller listeners\n" +
		"(controller.listener.names) directly, brokers down or not, and also prints the cluster id\n" +
		"and every controller's endpoint (DescribeCluster for controllers). --tls, --tls-ca and\n" +
		"--sasl-* reach an SSL, SASL_SSL or SASL_PLAINTEXT listener, a broker's or a controller's\n" +
		"(a controller listener asks for ALTER on the cluster for DescribeCluster and DESCRIBE for\n" +
		"DescribeQuorum when an authorizer is on)."}}

// quorumJSON is `cluster quorum --format json`.
type quorumJSON struct {
	ClusterID     string             `json:"cluster_id,omitempty"` // --bootstrap-controller
	LeaderID      int32              `json:"leader_id"`
	LeaderEpoch   int32              `json:"leader_epoch"`
	HighWatermark int64              `json:"high_watermark"`
	Voters        []quorumMemberJSON `json:"voters"`
	Observers     []quorumMemberJSON `json:"observers"`
	Controllers   []brokerJSON       `json:"controllers,omitempty"` // --bootstrap-controller
}

type quorumMemberJSON struct {
	ID                    int32  `json:"id"`
	Status                string `json:"status"` // Leader, Follower, Observer
	LogEndOffset          int64  `json:"log_end_offset"`
	Lag                   int64  `json:"lag"`
	LastFetchTimestamp    int64  `json:"last_fetch_timestamp"` // ms since the epoch, -1: unknown
	LastCaughtUpTimestamp int64  `json:"last_caught_up_timestamp"`
}

// describeQuorumRequest asks for the metadata log's partition.
func describeQuorumRequest() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{p}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{t}
	return req
}

// clusterQuorum asks the brokers, or with --bootstrap-controller the
// controllers, for the quorum; opts are the flags' SASL and TLS options.
func clusterQuorum(f *clusterFlags, opts []kgo.Opt, stdout io.Writer) error {
	seeds := splitSeeds(f.brokers)
	if f.controllers != "" {
		seeds = splitSeeds(f.controllers)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(f.timeout))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	out := quorumJSON{Voters: []quorumMemberJSON{}, Observers: []quorumMemberJSON{}}
	var dq *kmsg.DescribeQuorumResponse
	if f.controllers == "" {
		// Brokers: kgo sends it to the controller its metadata names.
		resp, err := cl.Request(ctx, describeQuorumRequest())
		if err != nil {
			return err
		}
		dq = resp.(*kmsg.DescribeQuorumResponse)
	} else {
		// Controllers answer no Metadata: each seed in turn, directly.
		var errs []error
		for _, seed := range cl.SeedBrokers() {
			dc := kmsg.NewPtrDescribeClusterRequest()
			dc.EndpointType = 2
			r, err := seed.Request(ctx, dc)
			if err == nil {
				if c := r.(*kmsg.DescribeClusterResponse); c.ErrorCode != 0 {
					err = fmt.Errorf("DescribeCluster: %w", kerr.ErrorForCode(c.ErrorCode))
				} else {
					out.ClusterID = c.ClusterID
					for _, b := range c.Brokers {
						out.Controllers = append(out.Controllers, brokerJSON{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
					}
				}
			}
			if err == nil {
				r, err = seed.Request(ctx, describeQuorumRequest())
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			dq = r.(*kmsg.DescribeQuorumResponse)
			break
		}
		if dq == nil {
			return fmt.Errorf("no controller answered: %w", errors.Join(errs...))
		}
	}
	if dq.ErrorCode != 0 {
		return fmt.Errorf("DescribeQuorum: %w%s", kerr.ErrorForCode(dq.ErrorCode), msgSuffix(dq.ErrorMessage))
	}
	if len(dq.Topics) != 1 || len(dq.Topics[0].Partitions) != 1 {
		return errors.New("DescribeQuorum: no metadata partition in the answer")
	}
	p := dq.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return fmt.Errorf("DescribeQuorum: %w%s", kerr.ErrorForCode(p.ErrorCode), msgSuffix(p.ErrorMessage))
	}
	out.LeaderID, out.LeaderEpoch, out.HighWatermark = p.LeaderID, p.LeaderEpoch, p.HighWatermark
	leo := int64(-1)
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			leo = v.LogEndOffset
		}
	}
	member := func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState, status string) quorumMemberJSON {
		lag := int64(0)
		if leo >= 0 && r.LogEndOffset >= 0 && leo > r.LogEndOffset {
			lag = leo - r.LogEndOffset
		}
		return quorumMemberJSON{ID: r.ReplicaID, Status: status, LogEndOffset: r.LogEndOffset, Lag: lag,
			LastFetchTimestamp: r.LastFetchTimestamp, LastCaughtUpTimestamp: r.LastCaughtUpTimestamp}
	}
	for _, v := range p.CurrentVoters {
		status := "Follower"
		if v.ReplicaID == p.LeaderID {
			status = "Leader"
		}
		out.Voters = append(out.Voters, member(v, status))
	}
	for _, o := range p.Observers {
		out.Observers = append(out.Observers, member(o, "Observer"))
	}
	if f.format == formatJSON {
		return writeJSON(stdout, out)
	}
	return printQuorum(stdout, out, time.Now())
}

func msgSuffix(m *string) string {
	if m == nil || *m == "" {
		return ""
	}
	return ": " + *m
}

// printQuorum is the text form: the status lines, then one row per member.
func printQuorum(w io.Writer, q quorumJSON, now time.Time) error {
	ids := func(ms []quorumMemberJSON) string {
		var s []string
		for _, m := range ms {
			s = append(s, strconv.Itoa(int(m.ID)))
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	maxLag := int64(0)
	for _, m := range q.Voters {
		maxLag = max(maxLag, m.Lag)
	}
	if q.ClusterID != "" {
		fmt.Fprintf(w, "ClusterId:        %s\n", q.ClusterID)
	}
	fmt.Fprintf(w, "LeaderId:         %d\nLeaderEpoch:      %d\nHighWatermark:    %d\nMaxFollowerLag:   %d\nCurrentVoters:    %s\nCurrentObservers: %s\n",
		q.LeaderID, q.LeaderEpoch, q.HighWatermark, maxLag, ids(q.Voters), ids(q.Observers))
	if len(q.Controllers) > 0 {
		var eps []string
		for _, c := range q.Controllers {
			eps = append(eps, fmt.Sprintf("%d@%s", c.ID, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))))
		}
		fmt.Fprintf(w, "Controllers:      %s\n", strings.Join(eps, ","))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus")
	ago := func(ms int64) string {
		if ms < 0 {
			return "unknown"
		}
		return fmt.Sprintf("%d ms ago", max(0, now.UnixMilli()-ms))
	}
	for _, m := range append(append([]quorumMemberJSON(nil), q.Voters...), q.Observers...) {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\n", m.ID, m.LogEndOffset, m.Lag, ago(m.LastFetchTimestamp), ago(m.LastCaughtUpTimestamp), m.Status)
	}
	return tw.Flush()
}
