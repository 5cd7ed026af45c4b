package cluster

import (
	"sort"

	"github.com/stratalog/strata/controller"
)

// View is an immutable snapshot of the controller's state: the brokers, and
// the topics with their partitions' leaders, ISRs, epochs and
// reassignments. Request handlers read it without locks; Changed is closed
// when a newer view replaces it. Build one with BuildView; never modify it.
type View struct {
	Offset  int64
	Brokers []Broker // registered brokers, ascending id
	Topics  map[string]*Topic
	ByID    map[[16]byte]*Topic
	Changed chan struct{}
}

// Broker is a registered broker.
type Broker struct {
	ID     int32
	Host   string // the inter-broker listener's advertised endpoint
	Port   int32
	Rack   string
	Fenced bool // fenced or shutting down
	// Epoch is the registration's broker epoch (KIP-903: a leader refuses
	// a follower fetch carrying an older one).
	Epoch int64
	// OfflineDir: the broker reported its data directory offline
	// (KIP-112). It stays registered and listed (not Fenced), but its
	// replicas are offline: it leads nothing and is in no ISR it is not
	// the last member of.
	OfflineDir bool
	// Listeners are the advertised endpoints of every listener the broker
	// registered (nil: Host and Port for every listener). Shared with the
	// controller's state: read only.
	Listeners []controller.Endpoint
}

// Endpoint returns b's advertised address on the listener named name
// (controller.Broker.Endpoint): ok is false when b registered listeners
// and that one is not among them, so a client of that listener cannot
// reach b.
func (b *Broker) Endpoint(name string) (host string, port int32, ok bool) {
	cb := controller.Broker{Host: b.Host, Port: b.Port, Listeners: b.Listeners}
	return cb.Endpoint(name)
}

// Topic is a topic the controller knows.
type Topic struct {
	Name    string
	ID      [16]byte
	Configs map[string]string
	Parts   []Partition
}

// Partition is one partition of a Topic.
type Partition struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	Offline        []int32 // replicas that are not registered, fenced or shutting down, or whose directory is offline
	Adding         []int32
	Removing       []int32
}

// EmptyView is the view before the first BuildView: no broker, no topic.
func EmptyView() *View {
	return &View{Topics: map[string]*Topic{}, ByID: map[[16]byte]*Topic{}, Changed: make(chan struct{})}
}

// BuildView reads the controller's current state into a new View.
func BuildView(ctl *controller.Controller) *View {
	v := &View{Changed: make(chan struct{})}
	ctl.Read(func(st *controller.State) {
		v.Offset = st.Offset()
		live := map[int32]bool{}
		for _, b := range st.Brokers() {
			v.Brokers = append(v.Brokers, Broker{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack, Epoch: b.Epoch,
				Fenced: b.Fenced || b.ShuttingDown, OfflineDir: b.OfflineDir, Listeners: b.Listeners})
			live[b.ID] = b.Live()
		}
		topics := st.Topics()
		v.Topics = make(map[string]*Topic, len(topics))
		v.ByID = make(map[[16]byte]*Topic, len(topics))
		for _, t := range topics {
			vt := &Topic{Name: t.Name, ID: t.ID, Configs: make(map[string]string, len(t.Configs)),
				Parts: make([]Partition, len(t.Partitions))}
			for k, val := range t.Configs {
				vt.Configs[k] = val
			}
			for i := range t.Partitions {
				p := &t.Partitions[i]
				vp := Partition{
					Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
					Replicas: cloneIDs(p.Replicas), ISR: cloneIDs(p.ISR),
					Adding: cloneIDs(p.Adding), Removing: cloneIDs(p.Removing),
				}
				for _, r := range p.Replicas {
					if !live[r] {
						vp.Offline = append(vp.Offline, r)
					}
				}
				vt.Parts[i] = vp
			}
			v.Topics[t.Name] = vt
			v.ByID[t.ID] = vt
		}
	})
	return v
}

func cloneIDs(v []int32) []int32 {
	if len(v) == 0 {
		return []int32{}
	}
	return append(make([]int32, 0, len(v)), v...)
}

// Broker returns a registered broker of v.
func (v *View) Broker(id int32) (Broker, bool) {
	i := sort.Search(len(v.Brokers), func(i int) bool { return v.Brokers[i].ID >= id })
	if i < len(v.Brokers) && v.Brokers[i].ID == id {
		return v.Brokers[i], true
	}
	return Broker{}, false
}

// LiveBrokers counts the brokers new replicas can be placed on: unfenced,
// with their directory online.
func (v *View) LiveBrokers() int {
	n := 0
	for _, b := range v.Brokers {
		if !b.Fenced && !b.OfflineDir {
			n++
		}
	}
	return n
}
