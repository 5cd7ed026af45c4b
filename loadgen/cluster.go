package loadgen

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
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

// waitFormed waits until every spawned broker's own Metadata lists every
// spawned broker as live. Each broker learns the others from its copy of
// the metadata log, which lags the controller by its own amount: one
// broker listing all of them says nothing of the next, and a CreateTopics
// answered by a broker still behind would refuse a replication factor the
// cluster can hold (INVALID_REPLICATION_FACTOR, as Kafka answers before
// brokers are unfenced). So each broker is asked itself, by its address.
func (c *Cluster) waitFormed(ctx context.Context, sec []kgo.Opt) error {
	if len(c.Brokers) <= 1 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, spawnFormTimeout)
	defer cancel()
	for _, b := range c.Brokers {
		if err := waitListsAll(ctx, b, len(c.Brokers), sec); err != nil {
			return fmt.Errorf("loadgen: spawned cluster not formed after %v: %w:\n%s",
				spawnFormTimeout, err, tailFile(b.LogPath, 2000))
		}
	}
	return nil
}

// waitListsAll waits until broker b's Metadata answer, from b itself, lists
// n brokers.
func waitListsAll(ctx context.Context, b *SpawnedBroker, n int, sec []kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.ClientID(loadgenClientID + "-spawn")}, sec...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	last := 0
	var lastErr error
	for {
		req := kmsg.NewPtrMetadataRequest()
		if seeds := cl.SeedBrokers(); len(seeds) == 1 {
			resp, err := seeds[0].Request(ctx, req)
			switch {
			case err == nil:
				if last = len(resp.(*kmsg.MetadataResponse).Brokers); last == n {
					return nil
				}
			case tlsRefused(err):
				// Waiting does not change a certificate.
				return fmt.Errorf("broker %d: %w", b.NodeID, err)
			default:
				lastErr = err
			}
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("broker %d lists %d of %d brokers (last error: %w)", b.NodeID, last, n, lastErr)
			}
			return fmt.Errorf("broker %d lists %d of %d brokers", b.NodeID, last, n)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tlsRefused says whether err is a TLS handshake that failed over
// certificates (the broker's not trusted, the client's refused), which no
// wait mends.
func tlsRefused(err error) bool {
	var verr *tls.CertificateVerificationError
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	return errors.As(err, &verr) || errors.As(err, &uerr) || errors.As(err, &herr) ||
		strings.Contains(err.Error(), "remote error: tls: ")
}
