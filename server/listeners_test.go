package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/tlstest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// twoListeners serves one engine on a PLAINTEXT and an SSL listener (the
// SSL one advertised under another name) and returns their addresses
// and a client TLS configuration.
func twoListeners(tb testing.TB) (plain, ssl string, clientTLS *tls.Config) {
	tb.Helper()
	dir := tb.TempDir()
	ca := tlstest.NewCA(tb, dir, "ca")
	srv := ca.Server(tb, dir, "broker")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(engine.Options{Dir: tb.TempDir(), Log: engine.DefaultLogConfig(), Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	s := New(Config{NodeID: 0, ClusterID: "listeners", AutoCreateTopics: true, Logger: logger}, eng)
	var served []chan error
	for _, l := range []Listener{
		{Name: "PLAINTEXT", InterBroker: true},
		{Name: "SSL", TLS: &tls.Config{Certificates: []tls.Certificate{srv.TLS}}},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		if l.Name == "PLAINTEXT" {
			plain = ln.Addr().String()
		} else {
			ssl = ln.Addr().String()
		}
		done := make(chan error, 1)
		served = append(served, done)
		go func() { done <- s.ServeListener(ln, l) }()
	}
	tb.Cleanup(func() {
		s.Close()
		for _, done := range served {
			if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
				tb.Errorf("ServeListener: %v", err)
			}
		}
		eng.Close()
	})
	return plain, ssl, tlstest.ClientConfig(ca, nil)
}

// Each listener advertises itself; DescribeConfigs lists both.
func TestListenersAdvertiseThemselves(t *testing.T) {
	plain, ssl, clientTLS := twoListeners(t)
	ctx := testCtx(t)
	for _, c := range []struct {
		addr string
		opts []kgo.Opt
	}{{plain, nil}, {ssl, []kgo.Opt{kgo.DialTLSConfig(clientTLS)}}} {
		cl := newClient(t, c.addr, c.opts...)
		md := issue[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
		if got := net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))); got != c.addr {
			t.Fatalf("Metadata on %s advertises %s", c.addr, got)
		}
		dc := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeBroker, "0", []string{"advertised.listeners"}
		dc.Resources = append(dc.Resources, r)
		resp, err := dc.RequestWith(ctx, cl)
		if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
			t.Fatalf("DescribeConfigs: %v %+v", err, resp)
		}
		if v := resp.Resources[0].Configs[0].Value; v == nil || *v != "PLAINTEXT://"+plain+",SSL://"+ssl {
			t.Fatalf("advertised.listeners = %v", v)
		}
	}
}

// BenchmarkListener compares the PLAINTEXT and SSL listeners of one
// broker in one run: producing 1 MiB (1 KiB records, acks=1) and
// fetching 4 MiB of stored batches (sendfile on PLAINTEXT, pread and
// write through TLS on SSL) per operation, client and broker in this
// process over loopback.
func BenchmarkListener(b *testing.B) {
	plain, ssl, clientTLS := twoListeners(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, 1024) // incompressible: the bytes on the wire are the bytes counted
	rand.Read(value)
	const fetchBytes = 4 << 20
	// The fetched topic: 64 MiB, written once.
	// acks=1: what the listener costs, not the disk's fsync rate.
	fast := []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.MaxVersions(kversion.V2_8_0()),
		kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression())}
	seed, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(plain)}, fast...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer seed.Close()
	seeded := time.Now()
	for i := 0; i < 64<<10; i++ {
		seed.Produce(ctx, &kgo.Record{Topic: "fetched", Value: value}, failOn(b))
	}
	if err := seed.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded 64 MiB in %v", time.Since(seeded))
	for _, l := range []struct {
		name string
		addr string
		opts []kgo.Opt
	}{{"PLAINTEXT", plain, nil}, {"SSL", ssl, []kgo.Opt{kgo.DialTLSConfig(clientTLS)}}} {
		cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(l.addr)}, fast...), l.opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		b.Run(l.name+"/produce", func(b *testing.B) {
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			for range b.N {
				for range 1024 {
					cl.Produce(ctx, &kgo.Record{Topic: "produced-" + l.name, Value: value}, failOn(b))
				}
				if err := cl.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(l.name+"/fetch", func(b *testing.B) {
			b.SetBytes(fetchBytes)
			b.ReportAllocs()
			for i := range b.N {
				offset := int64(i%12) * 4096 // records: 12 windows of 4 MiB over 48 MiB
				req := kmsg.NewPtrFetchRequest()
				req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, fetchBytes
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = "fetched"
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.FetchOffset, rp.PartitionMaxBytes = offset, fetchBytes
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					b.Fatal(err)
				}
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != 0 || len(p.RecordBatches) < fetchBytes/2 {
					b.Fatalf("fetch at %d: code %d, %d bytes", offset, p.ErrorCode, len(p.RecordBatches))
				}
			}
		})
	}
}

// failOn is a produce callback that fails b on an error.
func failOn(b *testing.B) func(*kgo.Record, error) {
	return func(_ *kgo.Record, err error) {
		if err != nil {
			b.Error(err)
		}
	}
}
