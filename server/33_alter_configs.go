package server

import (
	"context"
	"maps"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs v0..v2.
func init() { register(33, 0, 2, handleAlterConfigs) }

// alterConfigsTimeoutMs bounds a cluster-mode alteration (the requests
// carry no timeout).
const alterConfigsTimeoutMs = 30_000

// configEdit turns a topic's current overrides (a private copy it may
// change) into the next ones; current is the effective config, for
// IncrementalAlterConfigs' APPEND and SUBTRACT.
type configEdit func(overrides map[string]string, current engine.LogConfig) (map[string]string, error)

// handleAlterConfigs replaces the dynamic configs of TOPIC resources, as
// Kafka's AlterConfigs does: the request's set becomes the topic's whole
// override set (keys not listed return to the broker defaults). Values are
// validated like CreateTopics' (unknown key or bad value: INVALID_CONFIG; a
// null value: INVALID_REQUEST); an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION; a resource named twice in one request is
// INVALID_REQUEST. validate_only checks without applying. The change is
// persisted (the engine's topic file, or the controller in cluster mode) and
// applied without a restart. BROKER resources (dynconfig.go): the set
// becomes the dynamic configs of the cluster-wide default (name "") or of
// a broker (its id); a key that is not dynamic at the broker, unknown or
// badly valued is INVALID_REQUEST naming it, as Kafka answers; other
// resource types: INVALID_REQUEST.
func handleAlterConfigs(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.AlterConfigsRequest)
	run := func(ctx context.Context) {
		resp := kmsg.NewPtrAlterConfigsResponse()
		dups := duplicateResources(len(req.Resources), func(i int) (int8, string) {
			return int8(req.Resources[i].ResourceType), req.Resources[i].ResourceName
		})
		for i := range req.Resources {
			rr := &req.Resources[i]
			out := kmsg.NewAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
			var err error
			switch {
			case dups[resourceKey{int8(rr.ResourceType), rr.ResourceName}]:
				err = newAPIError(kerr.InvalidRequest, "resource %v %q appears more than once", rr.ResourceType, rr.ResourceName)
			case s.configsDenied(rc, auth.OpAlterConfigs, rr.ResourceType, rr.ResourceName) != nil: // authz.go
				err = s.configsDenied(rc, auth.OpAlterConfigs, rr.ResourceType, rr.ResourceName)
			case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
				set := make(map[string]string, len(rr.Configs))
				for _, c := range rr.Configs {
					if c.Value == nil {
						err = newAPIError(kerr.InvalidRequest, "config %q has a null value", c.Name)
						break
					}
					if _, dup := set[c.Name]; dup {
						err = newAPIError(kerr.InvalidRequest, "config %q is given twice", c.Name)
						break
					}
					set[c.Name] = *c.Value
				}
				if err == nil {
					err = s.alterTopicConfigs(ctx, rr.ResourceName, req.ValidateOnly,
						func(map[string]string, engine.LogConfig) (map[string]string, error) { return set, nil })
				}
			case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
				err = s.alterBrokerConfigs(ctx, rr.ResourceName, req.ValidateOnly, setBrokerConfigs(rr.Configs)) // dynconfig.go
			default:
				err = newAPIError(kerr.InvalidRequest, "unsupported resource type %v", rr.ResourceType)
			}
			if err != nil {
				out.ErrorCode, out.ErrorMessage = apiErrCode(err), errMessage(err)
			}
			resp.Resources = append(resp.Resources, out)
		}
		rc.respond(resp)
	}
	if s.clustered() {
		s.goAdmin(alterConfigsTimeoutMs, run)
		return
	}
	run(context.Background())
}

type resourceKey struct {
	typ  int8
	name string
}

// duplicateResources returns the resources named more than once.
func duplicateResources(n int, at func(i int) (int8, string)) map[resourceKey]bool {
	seen := make(map[resourceKey]int, n)
	for i := 0; i < n; i++ {
		t, name := at(i)
		seen[resourceKey{t, name}]++
	}
	dups := map[resourceKey]bool{}
	for k, c := range seen {
		if c > 1 {
			dups[k] = true
		}
	}
	return dups
}

// alterTopicConfigs applies edit to topic name's overrides: validated,
// then (unless validateOnly) persisted and applied.
func (s *Server) alterTopicConfigs(ctx context.Context, name string, validateOnly bool, edit configEdit) error {
	if err := validTopicName(name); err != nil {
		return newAPIError(kerr.InvalidTopicException, "%v", err)
	}
	if s.clustered() {
		return s.clusterAlterTopicConfigs(ctx, name, validateOnly, edit)
	}
	t := s.eng.Topic(name)
	if t == nil {
		return newAPIError(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	next, err := edit(t.Overrides(), t.Config())
	if err != nil {
		return err
	}
	if _, err := s.logDefaults().Apply(next); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	if err := s.eng.SetTopicConfig(name, next); err != nil {
		return err
	}
	s.log.Info("altered topic configs", "topic", name, "configs", next)
	return nil
}

// clusterAlterTopicConfigs proposes the new override set to the controller
// (which persists it) and applies the engine's share locally at once; the
// other brokers apply it when their metadata view reaches the change.
func (s *Server) clusterAlterTopicConfigs(ctx context.Context, name string, validateOnly bool, edit configEdit) error {
	if err := s.catchUp(ctx); err != nil { // edit the configs in force, not a lagging copy
		return err
	}
	vt := s.topicInView(ctx, name)
	if vt == nil {
		return newAPIError(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	cur := s.logDefaults()
	if c, err := s.logDefaults().Apply(engineConfigs(vt.Configs)); err == nil {
		cur = c
	}
	next, err := edit(maps.Clone(vt.Configs), cur)
	if err != nil {
		return err
	}
	overrides, err := splitClusterConfigs(next)
	if err != nil {
		return err
	}
	if _, err := s.logDefaults().Apply(overrides); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	r, err := s.cluster.ctl.Propose(ctx, controller.AlterConfigs{Topic: name, Replace: true, Set: next})
	if err != nil {
		return proposeErr(err)
	}
	if r.Code != 0 {
		return resultErr(r.Code, r.Message)
	}
	if s.eng.Topic(name) != nil {
		if err := s.eng.SetTopicConfig(name, overrides); err != nil {
			s.log.Warn("applying altered topic configs locally", "topic", name, "err", err)
		}
	}
	s.log.Info("altered topic configs", "topic", name, "configs", next, "metadata_offset", r.Offset)
	return s.waitView(ctx, r.Offset)
}

// viewLagGrace is how long a request naming a topic this broker's metadata
// view does not hold yet waits for the view to catch up: a topic created
// through another broker a moment ago is known to the controller before it
// reaches this broker.
const viewLagGrace = 2 * time.Second

// topicInView returns the view's topic name, waiting up to viewLagGrace
// (bounded by ctx) for it to appear; nil if it does not.
func (s *Server) topicInView(ctx context.Context, name string) *viewTopic {
	timer := time.NewTimer(viewLagGrace)
	defer timer.Stop()
	for {
		v := s.cluster.view.Load()
		if vt := v.Topics[name]; vt != nil {
			return vt
		}
		select {
		case <-v.Changed:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
