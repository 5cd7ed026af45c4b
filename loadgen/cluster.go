package loadgen

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
//
// With --spawn-controllers K (SpawnOptions.Controllers) the quorum is K
// controller-only nodes instead (process.roles=controller, node ids N to
// N+K-1, each a process of its own with its quorum address on 127.0.0.1),
// started first, and the N brokers are broker-only nodes
// (process.roles=broker, ids 0 to N-1), as Kafka's separate controllers:
// a controller fault then leaves every broker's data path alone.

// maxSpawnVoters is the size of a spawned cluster's controller quorum:
// three voters tolerate the loss of any one broker, as in a typical Kafka
// KRaft deployment.
const maxSpawnVoters = 3

// spawnFormTimeout bounds the wait for a spawned cluster to list all its
// brokers.
const spawnFormTimeout = 60 * time.Second

// spawnQuorum returns the --controller-quorum value for an n-broker spawn
// with k controller-only nodes ("" for a single broker without
// controllers, which runs without a controller), and the controller-only
// nodes' quorum addresses (none when k is 0: the first brokers are the
// voters), and the brokers' by broker (n entries, "" for a broker that is
// no voter). Every address stays held (freeLoopbackAddr) until its node's
// launch.
func spawnQuorum(n, k int) (quorum string, ctlAddrs, raftAddrs []string, err error) {
	raftAddrs = make([]string, n)
	if n <= 1 && k == 0 {
		return "", nil, raftAddrs, nil
	}
	first, count := 0, min(n, maxSpawnVoters)
	if k > 0 {
		first, count = n, k
	}
	voters := make([]string, 0, count)
	for id := first; id < first+count; id++ {
		addr, err := freeLoopbackAddr()
		if err != nil {
			releaseAddrs(append(ctlAddrs, raftAddrs...)...)
			return "", nil, nil, err
		}
		voters = append(voters, fmt.Sprintf("%d@%s", id, addr))
		if k > 0 {
			ctlAddrs = append(ctlAddrs, addr)
		} else {
			raftAddrs[id] = addr
		}
	}
	return strings.Join(voters, ","), ctlAddrs, raftAddrs, nil
}

// startControllerNode starts controller-only node id on its quorum
// address addr, with the brokers' properties file props (on a file of its
// own adding a metrics listener, withMetrics), and waits until addr
// accepts connections.
func startControllerNode(ctx context.Context, bin, dir, props string, withMetrics bool, id int, addr, quorum string) (*SpawnedBroker, error) {
	name := "controller-" + strconv.Itoa(id)
	b := &SpawnedBroker{NodeID: id, Addr: addr, ListenAddr: addr,
		DataDir: filepath.Join(dir, name), LogPath: filepath.Join(dir, name+".log"), bin: bin}
	defer func() { releaseAddrs(b.MetricsAddr) }() // after a failed start; launch releases it first
	if withMetrics {
		shared, err := os.ReadFile(props)
		if err != nil {
			return nil, err
		}
		if b.MetricsAddr, err = freeLoopbackAddr(); err != nil {
			return nil, err
		}
		b.holds = []string{b.MetricsAddr}
		own := fmt.Appendf(shared, "# written by strata loadgen --spawn-controllers for node %d\n%s=http://%s\n", id, metricsListenersKey, b.MetricsAddr)
		props = filepath.Join(dir, name+".properties")
		if err := os.WriteFile(props, own, 0o644); err != nil {
			return nil, err
		}
	}
	b.holds = append(b.holds, addr)
	b.args = []string{"serve", "--process-roles", "controller", "--node-id", strconv.Itoa(id),
		"--controller-quorum", quorum, "--data-dir", b.DataDir, "--config", props}
	if err := b.launch(os.O_TRUNC); err != nil {
		return nil, err
	}
	return b, b.waitListening(ctx, spawnStartTimeout)
}

// leadingRe is the line a controller logs when it leads the quorum in a
// new term (controller.resetSessions).
var leadingRe = regexp.MustCompile(`msg="leading the metadata quorum[^"]*".* term=(\d+)`)

// leadingController is the running controller-only node that logged
// leading the quorum in the highest term, and that term (nil, 0: none).
// Every new leader logs it once its first proposal is committed; a
// controller that was paused or killed meanwhile logged a lower term.
func (c *Cluster) leadingController() (*SpawnedBroker, int) {
	var best *SpawnedBroker
	bestTerm := 0
	for _, b := range c.Controllers {
		if _, exited := b.proc(); isClosed(exited) {
			continue
		}
		data, err := os.ReadFile(b.LogPath)
		if err != nil {
			continue
		}
		for _, m := range leadingRe.FindAllSubmatch(data, -1) {
			if term, _ := strconv.Atoi(string(m[1])); term > bestTerm {
				best, bestTerm = b, term
			}
		}
	}
	return best, bestTerm
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
