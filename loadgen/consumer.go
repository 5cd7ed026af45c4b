package loadgen

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumer tails the topic and records end-to-end latency: from a record's
// scheduled send time (its value stamp) to the poll that returned it. With
// direct assignment each consumer owns partitions p ≡ k (mod n) from the
// end offsets listed before producing started, so it sees exactly this
// run's records; in a group, members share the partitions and start at the
// run's start time (ListOffsets by timestamp); in a share group, members
// fetch records of the same partitions from where runOnce set the group's
// start (sharegroup.go) and accept every record they polled.
type consumer struct {
	env   *runEnv
	cl    *kgo.Client
	rec   *recorder
	share bool
}

// newTailConsumer makes consumer k of the run with the configured engine;
// nil when it has no partitions.
func newTailConsumer(env *runEnv, k int, startOffsets map[int32]int64, rec *recorder) (tailConsumer, error) {
	if env.cfg.consumerEngine() == EngineNative {
		c, err := newNativeConsumer(env, k, startOffsets, rec)
		if c == nil || err != nil {
			return nil, err
		}
		return c, nil
	}
	c, err := newConsumer(env, k, startOffsets, rec)
	if c == nil || err != nil {
		return nil, err
	}
	return c, nil
}

func newConsumer(env *runEnv, k int, startOffsets map[int32]int64, rec *recorder) (*consumer, error) {
	cfg := env.cfg
	opts := []kgo.Opt{
		kgo.SeedBrokers(env.seeds...),
		kgo.ClientID(loadgenClientID + "-consumer"),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	switch {
	case cfg.ShareGroup != "":
		opts = append(opts,
			kgo.ShareGroup(cfg.ShareGroup),
			kgo.ConsumeTopics(cfg.Topic),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) { noteShareAckErrors(env.st, rs) }))
	case cfg.Group != "":
		startMs := time.Unix(0, env.baseUnix+int64(env.startOff)).UnixMilli()
		opts = append(opts,
			kgo.ConsumerGroup(cfg.Group),
			kgo.ConsumeTopics(cfg.Topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(startMs)))
	default:
		parts := map[int32]kgo.Offset{}
		for p := int32(k); p < env.topic.partitions; p += int32(cfg.Consumers) {
			parts[p] = kgo.NewOffset().At(startOffsets[p])
		}
		if len(parts) == 0 {
			return nil, nil // more consumers than partitions
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: parts}))
	}
	opts, err := cfg.clientOpts(opts...)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &consumer{env: env, cl: cl, rec: rec, share: cfg.ShareGroup != ""}, nil
}

// noteShareAckErrors counts the share acknowledgements the broker refused
// or the client could not deliver (their records come again) as consume
// errors; those failing because the client is closing are not.
func noteShareAckErrors(st *runStats, rs kgo.ShareAckResults) {
	for _, r := range rs {
		if r.Err == nil || errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, kgo.ErrClientClosed) {
			continue
		}
		st.consumeErrors.Add(1)
		st.noteError("share acknowledge: "+r.Err.Error(), 1)
	}
}

func (c *consumer) close() { c.cl.Close() }

// run polls until ctx is done, then closes the client.
func (c *consumer) run(ctx context.Context) {
	defer c.cl.Close()
	env := c.env
	runStart := env.baseUnix + int64(env.measureOff)
	for ctx.Err() == nil {
		fs := c.cl.PollFetches(ctx)
		now := env.now()
		fs.EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				return
			}
			env.st.consumeErrors.Add(1)
			env.st.noteError("consume: "+err.Error(), 1)
		})
		n, again := int64(0), int64(0)
		c.rec.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			stamp, ok := readStamp(r.Value)
			if !ok || stamp < runStart {
				return // not this run's record
			}
			n++
			if c.share && r.DeliveryCount() > 1 {
				again++
			}
			c.rec.recordLocked(now - time.Duration(stamp-env.baseUnix))
		})
		c.rec.mu.Unlock()
		if c.share {
			// Every record of the poll, the lead-in's and older ones too:
			// sent with the next ShareFetch (or the close's).
			c.cl.MarkAcks(kgo.AckAccept)
			env.st.redelivered.Add(again)
		}
		env.st.consumed.Add(n)
	}
}
