package loadgen

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Multi-broker spawns (--spawn N, N > 1) form one Strata cluster: the first
// min(N, maxSpawnVoters) brokers are the controller quorum's voters
// (combined broker + controller, each with a Raft port of its own on
// 127.0.0.1), the others join as observers. Spawn returns once every broker
// is registered and unfenced, i.e. listed in Metadata.

// maxSpawnVoters is the size of a spawned cluster's controller quorum:
// three voters tolerate the loss of any one broker, as in a typical Kafka
// KRaft deployment.
const maxSpawnVoters = 3

// spawnFormTimeout bounds the wait for a spawned cluster to list all its
// brokers.
const spawnFormTimeout = 60 * time.Second

// spawnQuorum returns the --controller-quorum value for an n-broker spawn
// ("" for a single broker, which runs without a controller).
func spawnQuorum(n int) (string, error) {
	if n <= 1 {
		return "", nil
	}
	voters := make([]string, 0, min(n, maxSpawnVoters))
	for id := 0; id < min(n, maxSpawnVoters); id++ {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return "", err
		}
		voters = append(voters, fmt.Sprintf("%d@%s", id, addr))
	}
	return strings.Join(voters, ","), nil
}

// waitFormed waits until a broker's Metadata lists every spawned broker.
func (c *Cluster) waitFormed(ctx context.Context) error {
	if len(c.Brokers) <= 1 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID(loadgenClientID+"-spawn"))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, spawnFormTimeout)
	defer cancel()
	last := 0
	for {
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			if last = len(resp.Brokers); last == len(c.Brokers) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loadgen: spawned cluster lists %d of %d brokers after %v:\n%s",
				last, len(c.Brokers), spawnFormTimeout, tailFile(c.Brokers[0].LogPath, 2000))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
