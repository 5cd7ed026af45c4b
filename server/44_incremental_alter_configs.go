package server

import (
	"context"
	"strings"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/configkeys"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs v0..v1.
func init() { register(44, 0, 1, handleIncrementalAlterConfigs) }

// handleIncrementalAlterConfigs edits the dynamic configs of TOPIC resources
// key by key (KIP-339): SET a value, DELETE an override (back to the broker
// default; deleting a key that is not set is a no-op), APPEND items to or
// SUBTRACT items from a LIST key's current value (a List key of
// internal/configkeys: cleanup.policy; other keys: INVALID_CONFIG). A null value for SET/APPEND/SUBTRACT, an unknown
// operation or a key named twice in one resource is INVALID_REQUEST; the
// rest is checked as in AlterConfigs (same errors, validate_only,
// persistence, application without restart). BROKER resources: the same
// operations on the dynamic broker configs (dynconfig.go).
func handleIncrementalAlterConfigs(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.IncrementalAlterConfigsRequest)
	run := func(ctx context.Context) {
		resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
		dups := duplicateResources(len(req.Resources), func(i int) (int8, string) {
			return int8(req.Resources[i].ResourceType), req.Resources[i].ResourceName
		})
		for i := range req.Resources {
			rr := &req.Resources[i]
			out := kmsg.NewIncrementalAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
			var err error
			switch {
			case dups[resourceKey{int8(rr.ResourceType), rr.ResourceName}]:
				err = newAPIError(kerr.InvalidRequest, "resource %v %q appears more than once", rr.ResourceType, rr.ResourceName)
			case s.configsDenied(rc, auth.OpAlterConfigs, rr.ResourceType, rr.ResourceName) != nil: // authz.go
				err = s.configsDenied(rc, auth.OpAlterConfigs, rr.ResourceType, rr.ResourceName)
			case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
				if err = checkIncrementalOps(rr.Configs); err == nil {
					ops := rr.Configs
					err = s.alterTopicConfigs(ctx, rr.ResourceName, req.ValidateOnly,
						func(over map[string]string, cur engine.LogConfig) (map[string]string, error) {
							return applyIncrementalOps(over, cur, ops)
						})
				}
			case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
				if err = checkIncrementalOps(rr.Configs); err == nil {
					err = s.alterBrokerConfigs(ctx, rr.ResourceName, req.ValidateOnly,
						s.incrementalBrokerEdit(rr.Configs, rr.ResourceName != "")) // dynconfig.go
				}
			case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
				err = s.alterGroupConfigs(ctx, rc, rr.ResourceName, rr.Configs, req.ValidateOnly) // share.go
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

// checkIncrementalOps rejects malformed operations before anything is read.
func checkIncrementalOps(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if seen[op.Name] {
			return newAPIError(kerr.InvalidRequest, "config %q appears more than once", op.Name)
		}
		seen[op.Name] = true
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpDelete:
		case kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if op.Value == nil {
				return newAPIError(kerr.InvalidRequest, "config %q: %v with a null value", op.Name, op.Op)
			}
		default:
			return newAPIError(kerr.InvalidRequest, "config %q: unknown operation %d", op.Name, op.Op)
		}
	}
	return nil
}

// applyIncrementalOps edits over (owned by the caller) with ops.
func applyIncrementalOps(over map[string]string, cur engine.LogConfig, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			over[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(over, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if k, ok := configkeys.TopicKey(op.Name); !ok || k.Type != configkeys.List {
				return nil, newAPIError(kerr.InvalidConfig, "config %q is not a list: %v is not allowed", op.Name, op.Op)
			}
			base, ok := over[op.Name]
			if !ok {
				base, _ = cur.Value(op.Name)
			}
			over[op.Name] = applyListOp(base, *op.Value, op.Op)
		}
	}
	return over, nil
}

// applyListOp is IncrementalAlterConfigs' APPEND or SUBTRACT of the list
// value's items to or from the list base (comma-separated): appended items
// already present and subtracted items absent change nothing.
func applyListOp(base, value string, op kmsg.IncrementalAlterConfigOp) string {
	items := splitList(base)
	for _, v := range splitList(value) {
		i := indexOf(items, v)
		switch {
		case op == kmsg.IncrementalAlterConfigOpAppend && i < 0:
			items = append(items, v)
		case op == kmsg.IncrementalAlterConfigOpSubtract && i >= 0:
			items = append(items[:i], items[i+1:]...)
		}
	}
	return strings.Join(items, ",")
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func indexOf(items []string, v string) int {
	for i, x := range items {
		if x == v {
			return i
		}
	}
	return -1
}
