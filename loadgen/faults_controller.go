package loadgen

// Controller-quorum faults (--faults controller-kill, controller-pause).
// A spawned cluster's first three brokers are also the controller
// quorum's voters (combined broker + controller, cluster.go), unless
// --spawn-controllers started controller-only processes as the voters.
// These faults aim at the quorum: each one finds the active controller
// (the Raft leader: with combined nodes the broker every broker's
// Metadata names as ControllerID; with controller-only nodes the one that
// logged leading the quorum in the highest term, since Metadata names
// brokers only) and
//
//   - controller-kill: SIGKILLs it and, while it is down, writes metadata
//     through another broker (the probe below), then starts it again on
//     the same data and ports;
//   - controller-pause: SIGSTOPs it for --fault-pause, or until the probe
//     succeeded if that takes longer, then SIGCONTs it (a leader that
//     comes back still believing it leads, which Raft's terms must
//     settle).
//
// The probe is what "metadata keeps working with a majority" means: with
// the old leader down, the remaining voters must elect a new one and
// commit metadata changes. Through one surviving broker (which forwards
// controller requests to the quorum leader) it creates a topic of one
// partition and deletes it again, retrying while there is no leader,
// and then asks that broker's Metadata for the controller. The fault fails
// when the probe does not succeed within controllerProbeTimeout, or when
// the surviving broker still names the stopped controller after the
// writes were committed (with controller-only nodes: when no other
// controller logs leading the quorum). With combined nodes the voters
// are brokers too, and the stopped controller's partitions lose their
// leader as with kill and pause; with controller-only nodes the brokers'
// data path is not touched.

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Controller fault kinds.
const (
	FaultControllerKill  = "controller-kill"
	FaultControllerPause = "controller-pause"
)

const (
	// controllerProbeTimeout bounds the probe of one controller fault: an
	// election (the voters' election timeout) and two commits.
	controllerProbeTimeout = 30 * time.Second
	// controllerFindTimeout bounds the wait for the brokers to agree on
	// the active controller before a fault.
	controllerFindTimeout = 20 * time.Second
	// probeAttemptMillis is the timeout of each of the probe's requests.
	probeAttemptMillis = 1000
)

// isControllerFault reports whether kind aims at the controller quorum.
func isControllerFault(kind string) bool {
	return kind == FaultControllerKill || kind == FaultControllerPause
}

// needsQuorum reports whether faults include a controller fault, which
// needs a quorum of three voters (a majority left with one stopped).
func needsQuorum(faults []string) bool {
	return slices.ContainsFunc(faults, isControllerFault)
}

// activeController asks every running broker's Metadata for the
// controller and returns the one a majority of the brokers name (a broker
// names itself while it knows no leader, so one answer is not enough),
// waiting at most controllerFindTimeout.
func (d *faultDriver) activeController(ctx context.Context) (*SpawnedBroker, error) {
	ctx, cancel := context.WithTimeout(ctx, controllerFindTimeout)
	defer cancel()
	if len(d.cluster.Controllers) > 0 {
		return d.leadingController(ctx, nil)
	}
	var last map[int32]int
	for {
		votes := map[int32]int{}
		for _, b := range d.cluster.Brokers {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, d.admin.Broker(b.NodeID))
			rcancel()
			if err == nil && resp.ControllerID >= 0 {
				votes[resp.ControllerID]++
			}
		}
		last = votes
		for id, n := range votes {
			if 2*n > len(d.cluster.Brokers) {
				for _, b := range d.cluster.Brokers {
					if int32(b.NodeID) == id {
						return b, nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the brokers did not agree on an active controller within %v (controller ids named: %v)", controllerFindTimeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// leadingController waits (until ctx ends) for a running controller-only
// node other than not to be the one that logged leading the quorum in the
// highest term (Cluster.leadingController).
func (d *faultDriver) leadingController(ctx context.Context, not *SpawnedBroker) (*SpawnedBroker, error) {
	for {
		c, term := d.cluster.leadingController()
		if c != nil && c != not {
			return c, nil
		}
		select {
		case <-ctx.Done():
			if c == nil {
				return nil, fmt.Errorf("no running controller logged leading the quorum within %v", controllerFindTimeout)
			}
			return nil, fmt.Errorf("controller %d still leads the quorum (term %d) as far as the controllers' logs say", c.NodeID, term)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// controllerFault stops the active controller c as kind says, probes the
// metadata through another broker meanwhile, and brings c back. It returns
// the seconds from the fault's start until the probe's writes were
// committed and the controller the other broker named then.
func (d *faultDriver) controllerFault(ctx context.Context, kind string, c *SpawnedBroker, began time.Duration) (float64, int32, error) {
	cmd, exited := c.proc()
	if isClosed(exited) {
		return 0, -1, fmt.Errorf("controller %d had exited before the fault", c.NodeID)
	}
	var via *SpawnedBroker // the surviving broker the probe goes through
	for _, b := range d.cluster.Brokers {
		if b != c {
			via = b
			break
		}
	}
	if via == nil {
		return 0, -1, fmt.Errorf("no broker besides controller %d to probe the metadata through", c.NodeID)
	}
	d.probes++
	probe := fmt.Sprintf("%s-controller-probe-%d", d.topic, d.probes)
	switch kind {
	case FaultControllerKill:
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return 0, -1, fmt.Errorf("SIGKILL: %w", err)
		}
		select {
		case <-exited:
		case <-time.After(faultExitTimeout):
			return 0, -1, fmt.Errorf("controller %d did not exit within %v of SIGKILL", c.NodeID, faultExitTimeout)
		}
		// The controller comes back whatever the probe found: the
		// read-back needs every broker.
		metaS, named, perr := d.probeMetadata(ctx, via, probe, c, began)
		if err := d.restart(c); err != nil {
			return metaS, named, err
		}
		return metaS, named, perr
	default: // FaultControllerPause
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return 0, -1, fmt.Errorf("SIGSTOP: %w", err)
		}
		metaS, named, perr := d.probeMetadata(ctx, via, probe, c, began)
		if rest := d.pause - (d.clock() - began); rest > 0 {
			t := time.NewTimer(rest)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			return metaS, named, fmt.Errorf("SIGCONT: %w", err)
		}
		return metaS, named, perr
	}
}

// probeMetadata creates topic probe (one partition, one replica) through
// broker via and deletes it again, each retried until it is committed, at
// most controllerProbeTimeout (when the run ends first it gives up
// without an error: the fault was cut short); then it asks via's Metadata for the
// controller, which must not be the stopped one. It returns the seconds
// from began until both writes were committed and the controller named.
func (d *faultDriver) probeMetadata(runCtx context.Context, via *SpawnedBroker, probe string, stopped *SpawnedBroker, began time.Duration) (float64, int32, error) {
	ctx, cancel := context.WithTimeout(runCtx, controllerProbeTimeout)
	defer cancel()
	// Each attempt has a short timeout (the broker forwards with the
	// request's timeout): one forwarded to a stopped leader waits all of
	// it, which would be counted as time without metadata (with 5 s, every
	// pause measured 5.2-5.4 s, a kill 0.7-1.5 s).
	req := d.admin.Broker(via.NodeID)
	var lastErr error
	retry := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
			return true
		}
	}
	for created := false; !created; {
		cr := kmsg.NewPtrCreateTopicsRequest()
		cr.TimeoutMillis = probeAttemptMillis
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = probe, 1, 1
		cr.Topics = append(cr.Topics, t)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := cr.RequestWith(rctx, req)
		rcancel()
		switch {
		case err != nil:
			lastErr = err
		case len(resp.Topics) != 1:
			lastErr = fmt.Errorf("CreateTopics answered %d topics", len(resp.Topics))
		default:
			// TOPIC_ALREADY_EXISTS: an earlier attempt that timed out
			// was committed after all.
			code := resp.Topics[0].ErrorCode
			if code == 0 || code == kerr.TopicAlreadyExists.Code {
				created = true
				continue
			}
			lastErr = fmt.Errorf("CreateTopics: %w", kerr.ErrorForCode(code))
		}
		if !retry() {
			if runCtx.Err() != nil {
				return 0, -1, nil // the run ended first: cut short, not failed
			}
			return 0, -1, fmt.Errorf("no metadata written through broker %d within %v of stopping controller %d (creating %s: %v)",
				via.NodeID, controllerProbeTimeout, stopped.NodeID, probe, lastErr)
		}
	}
	for deleted := false; !deleted; {
		dr := kmsg.NewPtrDeleteTopicsRequest()
		dr.TimeoutMillis = probeAttemptMillis
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(probe)
		dr.Topics = append(dr.Topics, dt)
		dr.TopicNames = append(dr.TopicNames, probe)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := dr.RequestWith(rctx, req)
		rcancel()
		switch {
		case err != nil:
			lastErr = err
		case len(resp.Topics) != 1:
			lastErr = fmt.Errorf("DeleteTopics answered %d topics", len(resp.Topics))
		default:
			code := resp.Topics[0].ErrorCode
			if code == 0 || code == kerr.UnknownTopicOrPartition.Code {
				deleted = true
				continue
			}
			lastErr = fmt.Errorf("DeleteTopics: %w", kerr.ErrorForCode(code))
		}
		if !retry() {
			if runCtx.Err() != nil {
				return 0, -1, nil
			}
			return 0, -1, fmt.Errorf("topic %s created but not deleted through broker %d within %v of stopping controller %d: %v",
				probe, via.NodeID, controllerProbeTimeout, stopped.NodeID, lastErr)
		}
	}
	metaS := (d.clock() - began).Seconds()
	if len(d.cluster.Controllers) > 0 {
		// Brokers name brokers as the controller: the new leader is the
		// controller that logged leading in a later term.
		lctx, lcancel := context.WithTimeout(ctx, controllerFindTimeout)
		c, err := d.leadingController(lctx, stopped)
		lcancel()
		if err != nil {
			return metaS, -1, fmt.Errorf("metadata written, but: %w", err)
		}
		return metaS, int32(c.NodeID), nil
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, req)
	rcancel()
	if err != nil {
		return metaS, -1, fmt.Errorf("metadata written, then broker %d's Metadata failed: %w", via.NodeID, err)
	}
	if resp.ControllerID == int32(stopped.NodeID) {
		return metaS, resp.ControllerID, fmt.Errorf("metadata written, yet broker %d still names the stopped controller %d", via.NodeID, stopped.NodeID)
	}
	return metaS, resp.ControllerID, nil
}
