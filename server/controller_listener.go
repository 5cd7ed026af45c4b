package server

import (
	"errors"

	"github.com/stratalog/strata/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Controller listeners (KIP-919). A client can bootstrap from the
// controllers (Kafka's bootstrap.controllers, kafka-metadata-quorum
// --bootstrap-controller) on a listener named in controller.listener.names.
// Such a listener serves only what a Kafka controller serves a client:
//
//   - ApiVersions, listing only the APIs below;
//   - SaslHandshake and SaslAuthenticate (a SASL listener authenticates
//     first, as a broker listener does);
//   - DescribeCluster with EndpointType=2 (controllers): every voter with
//     an endpoint on the listener the client connected to, the cluster id
//     and the active controller (60_describe_cluster.go); EndpointType=1
//     is MISMATCHED_ENDPOINT_TYPE there, as in Kafka;
//   - DescribeQuorum (55_describe_quorum.go).
//
// Any other request closes the connection, as Kafka's socket server does
// for an API its listener does not enable. A controller-only node
// (Config.ControllerOnly) serves nothing else; a broker serves its
// controller listeners (Listener.Controller) beside the others.

// controllerAPIs are the keys a controller listener serves.
var controllerAPIs = map[int16]bool{
	17:             true, // SaslHandshake
	apiVersionsKey: true,
	36:             true, // SaslAuthenticate
	55:             true, // DescribeQuorum
	60:             true, // DescribeCluster
}

// controllerAPIKeys is ApiVersions' answer on a controller listener.
func controllerAPIKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for _, k := range apiKeys() {
		if controllerAPIs[k.ApiKey] {
			keys = append(keys, k)
		}
	}
	return keys
}

var errNotControllerAPI = errors.New("this API is not served on a controller listener")

// onControllerListener reports whether connection c arrived on a
// controller listener.
func (s *Server) onControllerListener(c peer) bool {
	if s.cfg.ControllerOnly {
		return true
	}
	m := s.ctlListeners.Load()
	return m != nil && (*m)[listenerOf(c)]
}

// noteControllerListener records name as a controller listener.
func (s *Server) noteControllerListener(name string) {
	for {
		old := s.ctlListeners.Load()
		m := map[string]bool{name: true}
		if old != nil {
			for k := range *old {
				m[k] = true
			}
		}
		if s.ctlListeners.CompareAndSwap(old, &m) {
			return
		}
	}
}

// quorumController is this node's member of the metadata quorum (nil: a
// single broker).
func (s *Server) quorumController() *controller.Controller { return s.cfg.Cluster.Controller }
