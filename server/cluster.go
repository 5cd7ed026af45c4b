package server

// ClusterConfig configures replication and the controller (issue 5).
type ClusterConfig struct{}

// clusterState is the Server's part for replication and the controller (issue 5).
type clusterState struct{}

// initCluster is called by New after the Server is built.
func (s *Server) initCluster() {}

// closeCluster is called by Close after connections are closed.
func (s *Server) closeCluster() {}
