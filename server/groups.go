package server

// GroupsConfig configures the consumer-group coordinator (issue 6).
type GroupsConfig struct{}

// groupsState is the Server's part for the consumer-group coordinator (issue 6).
type groupsState struct{}

// initGroups is called by New after the Server is built.
func (s *Server) initGroups() {}

// closeGroups is called by Close after connections are closed.
func (s *Server) closeGroups() {}
