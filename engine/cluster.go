package engine

// Cluster support: what a broker of a replicated cluster needs from its
// engine beyond the single-broker API.
//
// In a cluster the controller owns topic ids: every broker holding a replica
// of a topic creates its local logs with the controller's id, so the id in
// each partition.metadata, in Metadata responses and in the controller's
// state is one and the same (Kafka's KRaft brokers do the same).

// ControllerDirName is the directory inside the data directory where a
// broker keeps its controller (Raft) state. The engine leaves it alone
// instead of treating it as a stray partition directory.
const ControllerDirName = "controller"

// CreateTopicWithID is CreateTopic with the topic id given by the caller (the
// controller) instead of a random one. A zero id is ErrInvalidTopic; an id
// already used by another local topic is ErrTopicExists.
func (e *Engine) CreateTopicWithID(name string, id [16]byte, partitions int32, configs map[string]string) (*Topic, error) {
	if id == ([16]byte{}) {
		return nil, ErrInvalidTopic
	}
	return e.createTopic(name, id, partitions, configs)
}
