package server

import (
	"strconv"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeClusterEveryVersion(t *testing.T) {
	addr, _, _ := startBroker(t, func(c *Config, _ *engine.Options) { c.NodeID = 2 })
	c := dialRaw(t, addr)
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(v)
		req.EndpointType = endpointBrokers
		resp := kmsg.NewPtrDescribeClusterResponse()
		c.roundTrip(req, 60, resp)
		if resp.ErrorCode != 0 || resp.ClusterID != "strata-test-cluster" || resp.ControllerID != 2 ||
			resp.ClusterAuthorizedOperations != authorizedOpsUnset {
			t.Fatalf("v%d: %+v", v, resp)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Rack != nil ||
			resp.Brokers[0].Host+":"+strconv.Itoa(int(resp.Brokers[0].Port)) != addr {
			t.Fatalf("v%d brokers: %+v", v, resp.Brokers)
		}
		if v >= 1 && resp.EndpointType != endpointBrokers {
			t.Fatalf("v%d endpoint type %d", v, resp.EndpointType)
		}
	}
	for typ, want := range map[int8]*kerr.Error{endpointControllers: kerr.MismatchedEndpointType, 9: kerr.UnsupportedEndpointType} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(1)
		req.EndpointType = typ
		resp := kmsg.NewPtrDescribeClusterResponse()
		c.roundTrip(req, 61, resp)
		if resp.ErrorCode != want.Code || len(resp.Brokers) != 0 || resp.EndpointType != typ {
			t.Fatalf("endpoint type %d: %+v, want %v", typ, resp, want)
		}
	}
}

// TestDescribeClusterThroughFranzGo: kadm has no DescribeCluster helper in
// the pinned version, so the typed request goes through the kgo client.
func TestDescribeClusterThroughFranzGo(t *testing.T) {
	addr, _, _ := startBroker(t)
	cl := newClient(t, addr)
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp := issue[*kmsg.DescribeClusterResponse](t, cl, req)
	if resp.ErrorCode != 0 || resp.ClusterID != "strata-test-cluster" || len(resp.Brokers) != 1 {
		t.Fatalf("%+v", resp)
	}
	if got := resp.Brokers[0].Host + ":" + strconv.Itoa(int(resp.Brokers[0].Port)); got != addr {
		t.Fatalf("broker at %s, listening on %s", got, addr)
	}
	if resp.ClusterAuthorizedOperations != clusterAuthorizedOps {
		t.Fatalf("authorized operations %b", resp.ClusterAuthorizedOperations)
	}
}
