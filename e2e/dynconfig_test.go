package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Three strata serve processes: a cluster-wide default retention set
// through broker 0 with IncrementalAlterConfigs reaches every broker (issue
// 20, dynamic broker configs): broker 2 describes it as
// DYNAMIC_DEFAULT_BROKER_CONFIG, and every replica of a topic without a
// retention override deletes its old segments (the records' timestamps
// are two hours old, the new default one hour; the properties file's is
// 7 days); a topic with its own retention.ms keeps them.
func TestClusterDynamicBrokerConfigsWithTheBinary(t *testing.T) {
	c := startClusterProps(t, 3, 3, clusterProps+"log.retention.check.interval.ms=200\n")
	cl := c.client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.waitBrokers(ctx, cl, 0, 3)
	small := map[string]*string{"segment.bytes": kmsg.StringPtr("16384"), "file.delete.delay.ms": kmsg.StringPtr("0")}
	for _, topic := range []string{"aging", "kept"} {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
		for k, v := range small {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = k, v
			rt.Configs = append(rt.Configs, cfg)
		}
		if topic == "kept" {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("-1")
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %v %+v", topic, err, resp)
		}
	}
	value := make([]byte, 4000)
	rand.Read(value) // incompressible: a few records per 16 KiB segment
	old := time.Now().Add(-2 * time.Hour)
	for i := 0; i < 30; i++ {
		for _, topic := range []string{"aging", "kept"} {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value, Timestamp: old}).FirstErr(); err != nil {
				t.Fatalf("produce: %v\n%s", err, c.warnings())
			}
		}
	}
	segments := func(b *broker, topic string) int {
		m, _ := filepath.Glob(filepath.Join(b.dataDir, topic+"-0", "*.log"))
		return len(m)
	}
	waitFor(t, time.Minute, func() string {
		for i, b := range c.brokers {
			if n := segments(b, "aging"); n < 4 {
				return fmt.Sprintf("broker %d holds %d segments of aging", i, n)
			}
		}
		return ""
	})

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, ""
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Value = "log.retention.ms", kmsg.StringPtr("3600000")
	rr.Configs = append(rr.Configs, op)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl.Broker(0))
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter through broker 0: %v %+v", err, resp)
	}

	waitFor(t, time.Minute, func() string {
		d := kmsg.NewPtrDescribeConfigsRequest()
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeBroker, "2", []string{"log.retention.ms"}
		d.Resources = append(d.Resources, dr)
		resp, err := d.RequestWith(ctx, cl.Broker(2))
		if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
			return fmt.Sprintf("describe on broker 2: %v %+v", err, resp)
		}
		cfg := resp.Resources[0].Configs[0]
		if v := cfg.Value; v == nil || *v != "3600000" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
			return fmt.Sprintf("broker 2 describes log.retention.ms = %v from %v", cfg.Value, cfg.Source)
		}
		for i, b := range c.brokers {
			if n := segments(b, "aging"); n != 1 {
				return fmt.Sprintf("broker %d still holds %d segments of aging", i, n)
			}
		}
		return ""
	})
	for i, b := range c.brokers {
		if n := segments(b, "kept"); n < 4 {
			t.Fatalf("broker %d: kept (retention.ms=-1) has %d segments left", i, n)
		}
		if _, err := os.Stat(filepath.Join(b.dataDir, "dynamic-broker-configs.json")); err != nil {
			t.Fatalf("broker %d keeps no copy of the dynamic configs: %v", i, err)
		}
	}
}
