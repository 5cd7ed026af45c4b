package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kgoplain "github.com/segmentio/kafka-go/sasl/plain"
	"github.com/stratalog/strata/internal/tlstest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saramaSCRAM adapts franz-go's SCRAM client to sarama's SCRAMClient
// (sarama leaves the SCRAM implementation to its user).
type saramaSCRAM struct {
	mech  func(scram.Auth) kgosasl.Mechanism
	sess  kgosasl.Session
	first []byte
	done  bool
}

func (s *saramaSCRAM) Begin(user, pass, _ string) error {
	var err error
	s.sess, s.first, err = s.mech(scram.Auth{User: user, Pass: pass}).Authenticate(context.Background(), "")
	return err
}

func (s *saramaSCRAM) Step(challenge string) (string, error) {
	if s.first != nil {
		first := s.first
		s.first = nil
		return string(first), nil
	}
	done, next, err := s.sess.Challenge([]byte(challenge))
	s.done = done
	return string(next), err
}

func (s *saramaSCRAM) Done() bool { return s.done }

// TestSASLSaramaAndKafkaGo: sarama with PLAIN over a v0 handshake (bare
// tokens, what sarama up to 1.40 sent by default) and over v1, and with
// SCRAM-SHA-512; kafka-go with PLAIN: each produces and reads back its
// records on a SASL_PLAINTEXT listener.
func TestSASLSaramaAndKafkaGo(t *testing.T) {
	addr := freeAddr(t)
	b := startBrokerProps(t, addr, saslProps("SASL_PLAINTEXT", addr))
	ctx := testCtx(t, 2*time.Minute)
	admin := b.client(kgo.SASL(saslMechanisms()[0].mech))

	for _, c := range []struct {
		name string
		set  func(*sarama.Config)
	}{
		{"plain-v0", func(cfg *sarama.Config) {
			cfg.ApiVersionsRequest = false // sarama requires it with v0
			cfg.Net.SASL.Version = sarama.SASLHandshakeV0
			cfg.Net.SASL.Mechanism, cfg.Net.SASL.User, cfg.Net.SASL.Password = sarama.SASLTypePlaintext, "alice", "alice-secret"
		}},
		{"plain-v1", func(cfg *sarama.Config) {
			cfg.Net.SASL.Mechanism, cfg.Net.SASL.User, cfg.Net.SASL.Password = sarama.SASLTypePlaintext, "alice", "alice-secret"
		}},
		{"scram-sha-512", func(cfg *sarama.Config) {
			cfg.Net.SASL.Mechanism, cfg.Net.SASL.User, cfg.Net.SASL.Password = sarama.SASLTypeSCRAMSHA512, "bob", "bob-secret"
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
				return &saramaSCRAM{mech: func(a scram.Auth) kgosasl.Mechanism { return a.AsSha512Mechanism() }}
			}
		}},
	} {
		t.Run("sarama-"+c.name, func(t *testing.T) {
			topic := "sarama-sasl-" + c.name
			createSASLTopic(t, ctx, admin, topic)
			cfg := sarama.NewConfig()
			cfg.ClientID = "strata-e2e-sarama-sasl"
			cfg.Version = sarama.V2_8_0_0
			cfg.Net.SASL.Enable = true
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			c.set(cfg)
			p, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatalf("producer: %v\n%s", err, b.logs)
			}
			defer p.Close()
			for i := 0; i < 20; i++ {
				if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(strconv.Itoa(i))}); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
			cons, err := sarama.NewConsumer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			for i := 0; i < 20; i++ {
				select {
				case m := <-pc.Messages():
					if string(m.Value) != strconv.Itoa(i) {
						t.Fatalf("message %d is %q", i, m.Value)
					}
				case <-ctx.Done():
					t.Fatalf("consumed %d of 20", i)
				}
			}
		})
	}

	t.Run("kafka-go-plain", func(t *testing.T) {
		topic := "kafka-go-sasl"
		createSASLTopic(t, ctx, admin, topic)
		mech := kgoplain.Mechanism{Username: "alice", Password: "alice-secret"}
		transport := &kafka.Transport{ClientID: "strata-e2e-kafka-go-sasl", SASL: mech}
		defer transport.CloseIdleConnections()
		w := &kafka.Writer{Addr: kafka.TCP(addr), Transport: transport, Topic: topic, RequiredAcks: kafka.RequireAll,
			BatchTimeout: 5 * time.Millisecond}
		var msgs []kafka.Message
		for i := 0; i < 20; i++ {
			msgs = append(msgs, kafka.Message{Value: []byte(strconv.Itoa(i))})
		}
		err := w.WriteMessages(ctx, msgs...)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("kafka-go produce: %v\n%s", err, b.logs)
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: 0,
			Dialer: &kafka.Dialer{Timeout: 10 * time.Second, SASLMechanism: mech}})
		defer r.Close()
		for i := 0; i < 20; i++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("kafka-go read %d: %v", i, err)
			}
			if string(m.Value) != strconv.Itoa(i) {
				t.Fatalf("message %d is %q", i, m.Value)
			}
		}
	})
	noSecrets(t, b)
}

// createSASLTopic creates a one-partition topic through cl.
func createSASLTopic(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// TestSASLKcat: kcat (librdkafka) over SASL_SSL with SCRAM-SHA-512,
// configured as against Apache Kafka, produces and consumes; with a wrong
// password it fails and prints the broker's authentication message.
func TestSASLKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: scripts/test installs it (apt-get install kcat)")
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	addr := freeAddr(t)
	b := startBrokerProps(t, addr, saslProps("SASL_SSL", addr)+"ssl.keystore.location="+srv.Path+"\n")
	ctx := testCtx(t, 2*time.Minute)
	args := func(pass string) []string {
		return []string{"-b", addr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + ca.Path,
			"-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=bob", "-X", "sasl.password=" + pass}
	}
	var in bytes.Buffer
	var want []string
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&in, "%d\n", i)
		want = append(want, strconv.Itoa(i))
	}
	prod := exec.CommandContext(ctx, kcat, append(args("bob-secret"), "-P", "-t", "kcat-sasl", "-X", "acks=all")...)
	prod.Stdin = &in
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce over SASL_SSL: %v\n%s\nbroker:\n%s", err, out, b.logs)
	}
	out, err := exec.CommandContext(ctx, kcat, append(args("bob-secret"), "-C", "-t", "kcat-sasl", "-o", "beginning", "-e", "-f", "%s\n")...).Output()
	if err != nil {
		t.Fatalf("kcat consume over SASL_SSL: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, want) {
		t.Fatalf("kcat read %d records, want %d", len(got), len(want))
	}
	out, err = exec.CommandContext(ctx, kcat, append(args("wrong-secret"), "-L", "-m", "5")...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Authentication failed") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
	}
	noSecrets(t, b)
}
