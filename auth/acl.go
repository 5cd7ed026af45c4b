// Package auth is Strata's ACL authorizer: Kafka's ACL model and the rules
// of Kafka's StandardAuthorizer (org.apache.kafka.metadata.authorizer),
// with no I/O in the rules themselves (issue 20).
//
// # The model
//
// A Binding is one ACL: a resource pattern (resource type, pattern type,
// name) and an entry (principal, host, operation, permission). The codes
// of every enum are Kafka's wire codes (AclResourceType, AclPatternType,
// AclOperation, AclPermissionType), so the server passes them through.
//
// # Authorize
//
// Authorize(principal, host, op, resource type, name) answers as Kafka's
// StandardAuthorizerData.authorize:
//
//   - a principal in super.users is allowed everything;
//   - the ACLs of the resource are those whose pattern matches its name: a
//     literal pattern with the same name, a literal pattern named "*", a
//     prefixed pattern the name starts with;
//   - of those, the ones that apply to the request are those whose
//     principal is the request's or "User:*" and whose host is the
//     request's or "*";
//   - a DENY that applies and names the operation (or All) denies: DENY
//     wins over every ALLOW, and a DENY does not imply anything (a DENY
//     Read does not deny Describe);
//   - otherwise an ALLOW that applies allows the operation it names, All
//     (everything), or an operation it implies: Describe is implied by
//     Read, Write, Delete and Alter; DescribeConfigs by AlterConfigs;
//   - otherwise, when the resource has no ACL at all (of any principal,
//     host or operation), allow.everyone.if.no.acl.found decides (Kafka's
//     default false); when it has some, the request is denied.
//
// # Filters
//
// DescribeAcls and DeleteAcls select bindings with a Filter, matched as
// Kafka's AclBindingFilter: resource type Any matches every type; pattern
// type Any matches every pattern type by exact name, Match matches the
// patterns that would apply to the filter's name (the literal name, the
// literal "*", the prefixes of the name); a nil name, principal or host
// matches all; operation and permission Any match all; anything else must
// be equal.
package auth

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is Kafka's AclResourceType code.
type ResourceType int8

// Kafka's resource types.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// PatternType is Kafka's AclPatternType code.
type PatternType int8

// Kafka's pattern types; Any and Match are for filters only.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's AclOperation code.
type Operation int8

// Kafka's operations.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is Kafka's AclPermissionType code.
type Permission int8

// Kafka's permission types; Any is for filters only.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcards, Kafka's.
const (
	WildcardResource  = "*"      // a literal pattern matching every name
	WildcardPrincipal = "User:*" // every principal
	WildcardHost      = "*"      // every host
	ClusterName       = "kafka-cluster"
	Anonymous         = "User:ANONYMOUS"
)

// Binding is one ACL.
type Binding struct {
	ResourceType ResourceType `json:"resource_type"`
	ResourceName string       `json:"resource_name"`
	PatternType  PatternType  `json:"pattern_type"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

// ErrInvalid wraps every reason Validate refuses a binding or filter
// (Kafka answers INVALID_REQUEST).
var ErrInvalid = errors.New("invalid ACL")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks b as Kafka's controller checks a new ACL
// (AclControlManager.validateNewAcl and the request handler's checks).
func (b Binding) Validate() error {
	switch b.ResourceType {
	case ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID, ResourceDelegationToken, ResourceUser:
	default:
		return invalid("invalid resource type %d", b.ResourceType)
	}
	switch b.PatternType {
	case PatternLiteral, PatternPrefixed:
	default:
		return invalid("invalid patternType %s", b.PatternType)
	}
	if b.Operation <= OpAny || b.Operation > OpDescribeTokens {
		return invalid("invalid operation %d", b.Operation)
	}
	if b.Permission != PermissionAllow && b.Permission != PermissionDeny {
		return invalid("invalid permissionType %d", b.Permission)
	}
	if b.ResourceName == "" {
		return invalid("resource name should not be empty")
	}
	if b.ResourceType == ResourceCluster && b.ResourceName != ClusterName {
		return invalid("the only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if !strings.Contains(b.Principal, ":") {
		return invalid("could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", b.Principal)
	}
	if b.Host == "" {
		return invalid("host should not be empty (use %q for every host)", WildcardHost)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls). nil Name,
// Principal or Host match every value.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate refuses a filter with an unknown code, as Kafka does
// (AclBindingFilter.findIndefiniteField).
func (f Filter) Validate() error {
	if f.ResourceType <= ResourceUnknown || f.ResourceType > ResourceUser {
		return invalid("invalid resource type %d in filter", f.ResourceType)
	}
	if f.PatternType <= PatternUnknown || f.PatternType > PatternPrefixed {
		return invalid("invalid pattern type %d in filter", f.PatternType)
	}
	if f.Operation <= OpUnknown || f.Operation > OpDescribeTokens {
		return invalid("invalid operation %d in filter", f.Operation)
	}
	if f.Permission <= PermissionUnknown || f.Permission > PermissionAllow {
		return invalid("invalid permission %d in filter", f.Permission)
	}
	return nil
}

// Matches reports whether f selects b (Kafka's AclBindingFilter.matches).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if f.PatternType == PatternAny || f.PatternType == b.PatternType {
			if name != b.ResourceName {
				return false
			}
		} else { // Match
			switch b.PatternType {
			case PatternLiteral:
				if name != b.ResourceName && b.ResourceName != WildcardResource {
					return false
				}
			case PatternPrefixed:
				if !strings.HasPrefix(name, b.ResourceName) {
					return false
				}
			default:
				return false
			}
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	if f.Permission != PermissionAny && f.Permission != b.Permission {
		return false
	}
	return true
}

// Decision is the result of one rule (Kafka's findResult): whether the
// binding applies to the action and, if it does, whether it allows.
func (b Binding) decide(principal, host string, op Operation) (applies, allow bool) {
	if b.Principal != principal && b.Principal != WildcardPrincipal {
		return false, false
	}
	if b.Host != WildcardHost && b.Host != host {
		return false, false
	}
	if b.Operation != OpAll {
		if b.Permission == PermissionAllow {
			switch op {
			case OpDescribe:
				switch b.Operation {
				case OpDescribe, OpRead, OpWrite, OpDelete, OpAlter:
				default:
					return false, false
				}
			case OpDescribeConfigs:
				if b.Operation != OpDescribeConfigs && b.Operation != OpAlterConfigs {
					return false, false
				}
			default:
				if b.Operation != op {
					return false, false
				}
			}
		} else if b.Operation != op {
			return false, false
		}
	}
	return true, b.Permission == PermissionAllow
}

// Names, for logs and the CLI.

var resourceNames = map[ResourceType]string{ResourceUnknown: "UNKNOWN", ResourceAny: "ANY", ResourceTopic: "TOPIC", ResourceGroup: "GROUP",
	ResourceCluster: "CLUSTER", ResourceTransactionalID: "TRANSACTIONAL_ID", ResourceDelegationToken: "DELEGATION_TOKEN", ResourceUser: "USER"}

var patternNames = map[PatternType]string{PatternUnknown: "UNKNOWN", PatternAny: "ANY", PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED"}

var opNames = map[Operation]string{OpUnknown: "UNKNOWN", OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE", OpCreate: "CREATE",
	OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION", OpDescribeConfigs: "DESCRIBE_CONFIGS",
	OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE", OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS"}

var permNames = map[Permission]string{PermissionUnknown: "UNKNOWN", PermissionAny: "ANY", PermissionDeny: "DENY", PermissionAllow: "ALLOW"}

func name[K comparable](m map[K]string, k K, v int8) string {
	if s, ok := m[k]; ok {
		return s
	}
	return fmt.Sprintf("%d", v)
}

func (t ResourceType) String() string { return name(resourceNames, t, int8(t)) }
func (t PatternType) String() string  { return name(patternNames, t, int8(t)) }
func (o Operation) String() string    { return name(opNames, o, int8(o)) }
func (p Permission) String() string   { return name(permNames, p, int8(p)) }

func (b Binding) String() string {
	return fmt.Sprintf("(%s %s %s: %s %s %s from %s)", b.PatternType, b.ResourceType, b.ResourceName,
		b.Principal, b.Permission, b.Operation, b.Host)
}
