package main

// `strata acls`: ACL administration (issue 20) against any
// Kafka-compatible cluster with an authorizer. The flags are
// kafka-acls.sh's: --allow-principal / --deny-principal, --allow-host /
// --deny-host, --operation, --topic, --group, --cluster,
// --transactional-id, --resource-pattern-type. list is kadm's
// DescribeACLs; add and remove send one CreateAcls / DeleteAcls to any
// broker: a Strata cluster keeps its ACLs in the replicated metadata
// (the broker that takes the request has the controller commit it and
// every broker applies it), as Kafka does. A secured listener is
// reached with --sasl-* (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and --tls /
// --tls-ca.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const aclsAbout = `ACL administration against a Kafka-compatible cluster with an authorizer
(authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer;
docs/security.md, "Authorization"). Every verb takes --brokers (default:
$STRATA_BROKERS, else 127.0.0.1:9092), --timeout, and for a secured listener
--sasl-mechanism, --sasl-username, --sasl-password (default:
$STRATA_SASL_PASSWORD), --tls and --tls-ca. Managing ACLs needs Alter on the
cluster (a super user), listing them Describe. Each verb sends one request to
any broker: in a cluster the ACLs are replicated metadata, and the broker that
takes a change answers once it applies it (the others follow within their
metadata lag).`

var aclsVerbs = []verbDoc{
	{"add", "create ACLs", cmdDoc{name: "acls add",
		usage: "strata acls add (--allow-principal P | --deny-principal P)... [--allow-host H] [--deny-host H]\n" +
			"    (--topic T | --group G | --transactional-id X | --cluster)... --operation OP...\n" +
			"    [--resource-pattern-type literal|prefixed]",
		about: "Creates one ACL per principal × host × resource × operation, as kafka-acls --add does.\n" +
			"Hosts default to * (every host). Operations: All, Read, Write, Create, Delete, Alter,\n" +
			"Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite (any case).\n" +
			"A literal name * matches every resource of its type; prefixed names match by prefix."}},
	{"list", "list ACLs", cmdDoc{name: "acls list",
		usage: "strata acls list [--principal P] [--topic T | --group G | --transactional-id X | --cluster]...\n" +
			"    [--resource-pattern-type any|match|literal|prefixed] [--format text|json]",
		about: "Lists the ACLs matching the filter: every ACL by default. --resource-pattern-type\n" +
			"match with --topic T lists the ACLs that apply to T (literal T, literal *, prefixes of T);\n" +
			"any (the default) matches the exact name of any pattern type."}},
	{"remove", "delete ACLs", cmdDoc{name: "acls remove",
		usage: "strata acls remove [--principal P] (--topic T | --group G | --transactional-id X | --cluster)...\n" +
			"    [--operation OP...] [--resource-pattern-type literal|prefixed|any|match]",
		about: "Deletes the ACLs matching the filter and prints them. A resource is required; operations\n" +
			"default to any and the pattern type to literal (as kafka-acls --remove)."}},
}

type aclsFlags struct {
	fs                     *flag.FlagSet
	brokers                string
	timeout                time.Duration
	allow, deny, principal multiFlag
	allowHosts, denyHosts  multiFlag
	topics, groups, txnIDs multiFlag
	ops                    multiFlag
	cluster                bool
	pattern                string
	format                 outputFormat
	sec                    secFlags
}

// secFlags are the flags that reach a secured listener, shared by the
// admin commands that speak SASL and TLS (acls, users).
type secFlags struct {
	saslMech, saslUser, pass string
	tlsOn                    bool
	tlsCA                    string
}

// register adds the flags to fs.
func (s *secFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.saslMech, "sasl-mechanism", "", "SASL `mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: none)")
	fs.StringVar(&s.saslUser, "sasl-username", "", "SASL user name")
	fs.StringVar(&s.pass, "sasl-password", "", "SASL password (default: $STRATA_SASL_PASSWORD)")
	fs.BoolVar(&s.tlsOn, "tls", false, "connect with TLS (system roots unless --tls-ca)")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "PEM `file` of the CA certificates to trust (implies --tls)")
}

// resolve fills the password from $STRATA_SASL_PASSWORD when not given.
func (s *secFlags) resolve(getenv func(string) string) {
	if s.pass == "" {
		s.pass = getenv("STRATA_SASL_PASSWORD")
	}
}

func newACLsFlags(v verbDoc) *aclsFlags {
	f := &aclsFlags{fs: flag.NewFlagSet("strata acls "+v.verb, flag.ContinueOnError), format: formatText}
	f.fs.StringVar(&f.brokers, "brokers", "", brokersHelp)
	f.fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the cluster")
	f.sec.register(f.fs)
	f.fs.Var(&f.topics, "topic", "topic `name` (repeatable)")
	f.fs.Var(&f.groups, "group", "consumer group `id` (repeatable)")
	f.fs.Var(&f.txnIDs, "transactional-id", "transactional `id` (repeatable)")
	f.fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	switch v.verb {
	case "add":
		f.fs.Var(&f.allow, "allow-principal", "`principal` to allow, User:NAME (repeatable)")
		f.fs.Var(&f.deny, "deny-principal", "`principal` to deny, User:NAME (repeatable)")
		f.fs.Var(&f.allowHosts, "allow-host", "`host` (IP) the allow applies to (default: *)")
		f.fs.Var(&f.denyHosts, "deny-host", "`host` (IP) the deny applies to (default: *)")
		f.fs.Var(&f.ops, "operation", "`operation` (repeatable)")
		f.fs.StringVar(&f.pattern, "resource-pattern-type", "literal", "literal or prefixed")
	case "list":
		f.fs.Var(&f.principal, "principal", "only this `principal`'s ACLs (repeatable)")
		f.fs.StringVar(&f.pattern, "resource-pattern-type", "any", "any, match, literal or prefixed")
		f.fs.Var(&f.format, "format", formatHelp)
	case "remove":
		f.fs.Var(&f.principal, "principal", "only this `principal`'s ACLs (repeatable)")
		f.fs.Var(&f.ops, "operation", "`operation` (repeatable; default: any)")
		f.fs.StringVar(&f.pattern, "resource-pattern-type", "literal", "literal, prefixed, any or match")
	}
	return f
}

func aclsMain(args []string, stdout, stderr io.Writer) error {
	return aclsMainEnv(args, stdout, stderr, os.Getenv)
}

func aclsMainEnv(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	v, ok, err := dispatchVerb("acls", aclsAbout, aclsVerbs, args, stdout)
	if !ok {
		return err
	}
	f := newACLsFlags(v)
	pos, err := parseFlags(f.fs, args[1:], v.doc, true, stdout)
	if err != nil {
		return err
	}
	f.brokers = resolveBrokers(f.brokers, getenv)
	f.sec.resolve(getenv)
	if len(pos) != 0 {
		return asUsage(v.doc, fmt.Errorf("%s takes no arguments, got %q", v.verb, pos))
	}
	b, err := f.builder(v.verb)
	if err != nil {
		return asUsage(v.doc, err)
	}
	opts, err := f.sec.clientOpts()
	if err != nil {
		return asUsage(v.doc, err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(splitSeeds(f.brokers)...), kgo.RequestTimeoutOverhead(f.timeout))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	if v.verb == "list" {
		return aclsList(ctx, adm, b, f.format, stdout)
	}
	// One request to any broker: a single broker applies it, and in a
	// cluster the broker that takes it has the controller replicate it
	// to every broker before it answers.
	if v.verb == "add" {
		return aclsAdd(ctx, cl, f.creations(), stdout)
	}
	return aclsRemove(ctx, cl, f.filters(), stdout)
}

// creations are the ACLs add creates: principal × host × resource ×
// operation, as kafka-acls --add.
func (f *aclsFlags) creations() []kmsg.CreateACLsRequestCreation {
	pattern, _ := parsePattern(f.pattern)
	var out []kmsg.CreateACLsRequestCreation
	for _, r := range f.resources() {
		for _, perm := range []struct {
			principals, hosts []string
			p                 kmsg.ACLPermissionType
		}{{f.allow, f.allowHosts, kmsg.ACLPermissionTypeAllow}, {f.deny, f.denyHosts, kmsg.ACLPermissionTypeDeny}} {
			hosts := perm.hosts
			if len(hosts) == 0 {
				hosts = []string{auth.WildcardHost}
			}
			for _, principal := range perm.principals {
				for _, host := range hosts {
					for _, o := range f.ops {
						op, _ := parseOperation(o)
						c := kmsg.NewCreateACLsRequestCreation()
						c.ResourceType, c.ResourceName, c.ResourcePatternType = r.t, r.name, pattern
						c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, op, perm.p
						out = append(out, c)
					}
				}
			}
		}
	}
	return out
}

// filters are the DeleteAcls filters of remove: resource × operation
// (any without --operation) × principal (any without --principal), any
// host and permission.
func (f *aclsFlags) filters() []kmsg.DeleteACLsRequestFilter {
	pattern, _ := parsePattern(f.pattern)
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAny}
	if len(f.ops) > 0 {
		ops = ops[:0]
		for _, o := range f.ops {
			op, _ := parseOperation(o)
			ops = append(ops, op)
		}
	}
	principals := []*string{nil}
	if len(f.principal) > 0 {
		principals = principals[:0]
		for _, p := range f.principal {
			principals = append(principals, kmsg.StringPtr(p))
		}
	}
	var out []kmsg.DeleteACLsRequestFilter
	for _, r := range f.resources() {
		for _, op := range ops {
			for _, p := range principals {
				d := kmsg.NewDeleteACLsRequestFilter()
				d.ResourceType, d.ResourceName, d.ResourcePatternType = r.t, kmsg.StringPtr(r.name), pattern
				d.Principal, d.Operation, d.PermissionType = p, op, kmsg.ACLPermissionTypeAny
				out = append(out, d)
			}
		}
	}
	return out
}

type aclResource struct {
	t    kmsg.ACLResourceType
	name string
}

func (f *aclsFlags) resources() []aclResource {
	var out []aclResource
	for _, n := range f.topics {
		out = append(out, aclResource{kmsg.ACLResourceTypeTopic, n})
	}
	for _, n := range f.groups {
		out = append(out, aclResource{kmsg.ACLResourceTypeGroup, n})
	}
	for _, n := range f.txnIDs {
		out = append(out, aclResource{kmsg.ACLResourceTypeTransactionalId, n})
	}
	if f.cluster {
		out = append(out, aclResource{kmsg.ACLResourceTypeCluster, auth.ClusterName})
	}
	return out
}

// clientOpts are the SASL and TLS options of the flags.
func (f *secFlags) clientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch strings.ToUpper(f.saslMech) {
	case "":
		if f.saslUser != "" {
			return nil, errors.New("--sasl-username needs --sasl-mechanism")
		}
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: f.saslUser, Pass: f.pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: f.saslUser, Pass: f.pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: f.saslUser, Pass: f.pass}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", f.saslMech)
	}
	if f.tlsOn || f.tlsCA != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.tlsCA != "" {
			pem, err := os.ReadFile(f.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", f.tlsCA)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	return opts, nil
}

// parseOperation reads an operation name in any case, with or without
// underscores (Read, CLUSTER_ACTION, clusteraction, Any).
func parseOperation(s string) (kadm.ACLOperation, error) {
	norm := func(x string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(strings.TrimSpace(x)))
	}
	for op := auth.OpAny; op <= auth.OpDescribeTokens; op++ {
		if norm(op.String()) == norm(s) {
			return kadm.ACLOperation(op), nil
		}
	}
	return 0, fmt.Errorf("--operation %q: not an operation (All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite)", s)
}

func parsePattern(s string) (kadm.ACLPattern, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "literal":
		return kadm.ACLPatternLiteral, nil
	case "prefixed":
		return kadm.ACLPatternPrefixed, nil
	case "any":
		return kadm.ACLPatternAny, nil
	case "match":
		return kadm.ACLPatternMatch, nil
	}
	return 0, fmt.Errorf("--resource-pattern-type %q: want literal, prefixed, any or match", s)
}

// builder turns the flags into the kadm ACL builder of verb, checking
// what can be checked before connecting.
func (f *aclsFlags) builder(verb string) (*kadm.ACLBuilder, error) {
	pattern, err := parsePattern(f.pattern)
	if err != nil {
		return nil, err
	}
	var ops []kadm.ACLOperation
	for _, o := range f.ops {
		op, err := parseOperation(o)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	for _, p := range append(append(append([]string{}, f.allow...), f.deny...), f.principal...) {
		if !strings.Contains(p, ":") {
			return nil, fmt.Errorf("principal %q: want TYPE:NAME, e.g. User:%s", p, p)
		}
	}
	hasResource := len(f.topics)+len(f.groups)+len(f.txnIDs) > 0 || f.cluster
	b := kadm.NewACLs().ResourcePatternType(pattern).
		MaybeTopics(f.topics...).MaybeGroups(f.groups...).MaybeTransactionalIDs(f.txnIDs...).MaybeClusters(f.cluster)
	switch verb {
	case "add":
		switch {
		case len(f.allow)+len(f.deny) == 0:
			return nil, errors.New("add: give --allow-principal or --deny-principal")
		case !hasResource:
			return nil, errors.New("add: give a resource (--topic, --group, --transactional-id or --cluster)")
		case len(ops) == 0:
			return nil, errors.New("add: give --operation")
		case pattern != kadm.ACLPatternLiteral && pattern != kadm.ACLPatternPrefixed:
			return nil, errors.New("add: --resource-pattern-type is literal or prefixed")
		}
		return b.MaybeAllow(f.allow...).MaybeAllowHosts(f.allowHosts...).
			MaybeDeny(f.deny...).MaybeDenyHosts(f.denyHosts...).Operations(ops...), nil
	case "remove":
		if !hasResource {
			return nil, errors.New("remove: give a resource (--topic, --group, --transactional-id or --cluster)")
		}
	default:
		if !hasResource {
			b.AnyResource()
		}
	}
	b.Operations(ops...) // none: any
	if len(f.principal) == 0 {
		return b.Allow().AllowHosts().Deny().DenyHosts(), nil
	}
	return b.MaybeAllow(f.principal...).AllowHosts().MaybeDeny(f.principal...).DenyHosts(), nil
}

// aclsAdd sends one CreateAcls (to whichever broker the client reaches)
// and prints each ACL as created or failed.
func aclsAdd(ctx context.Context, cl kmsg.Requestor, creations []kmsg.CreateACLsRequestCreation, w io.Writer) error {
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = creations
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Results) != len(creations) {
		err = fmt.Errorf("%d results to %d creations", len(resp.Results), len(creations))
	}
	if err != nil {
		return err
	}
	var errs error
	for i, c := range creations {
		line := aclLine(c.Principal, c.Host, c.PermissionType, c.Operation, c.ResourceType, c.ResourcePatternType, c.ResourceName)
		r := resp.Results[i]
		if e := kerr.ErrorForCode(r.ErrorCode); e != nil {
			msg := e.Error()
			if r.ErrorMessage != nil {
				msg += " " + *r.ErrorMessage
			}
			fmt.Fprintf(w, "failed  %s: %s\n", line, msg)
			errs = errors.Join(errs, e)
			continue
		}
		fmt.Fprintf(w, "created %s\n", line)
	}
	return errs
}

func aclLine(principal, host string, perm kmsg.ACLPermissionType, op kmsg.ACLOperation, rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name string) string {
	return fmt.Sprintf("%s %s %s on %s %s %q from host %s", principal, auth.Permission(perm), auth.Operation(op),
		auth.PatternType(pattern), auth.ResourceType(rt), name, host)
}

// aclJS is one ACL in --format json.
type aclJS struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Permission   string `json:"permission"`
	Operation    string `json:"operation"`
	ResourceType string `json:"resource_type"`
	PatternType  string `json:"pattern_type"`
	ResourceName string `json:"resource_name"`
}

func aclsList(ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder, format outputFormat, w io.Writer) error {
	rs, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		return err
	}
	seen := map[aclJS]bool{}
	var out []aclJS
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%w %s", r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			a := aclJS{d.Principal, d.Host, auth.Permission(d.Permission).String(), auth.Operation(d.Operation).String(),
				auth.ResourceType(d.Type).String(), auth.PatternType(d.Pattern).String(), d.Name}
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.ResourceType != y.ResourceType {
			return x.ResourceType < y.ResourceType
		}
		if x.ResourceName != y.ResourceName {
			return x.ResourceName < y.ResourceName
		}
		if x.PatternType != y.PatternType {
			return x.PatternType < y.PatternType
		}
		if x.Principal != y.Principal {
			return x.Principal < y.Principal
		}
		return x.Operation < y.Operation
	})
	if format == formatJSON {
		if out == nil {
			out = []aclJS{}
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tPATTERN\tNAME\tPRINCIPAL\tHOST\tPERMISSION\tOPERATION")
	for _, a := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ResourceType, a.PatternType, a.ResourceName, a.Principal, a.Host, a.Permission, a.Operation)
	}
	return tw.Flush()
}

// aclsRemove sends one DeleteAcls (to whichever broker the client
// reaches) and prints each deleted ACL once.
func aclsRemove(ctx context.Context, cl kmsg.Requestor, filters []kmsg.DeleteACLsRequestFilter, w io.Writer) error {
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Filters = filters
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	var errs error
	seen := map[string]bool{}
	for _, r := range resp.Results {
		if e := kerr.ErrorForCode(r.ErrorCode); e != nil {
			errs = errors.Join(errs, e)
			continue
		}
		for _, d := range r.MatchingACLs {
			line := aclLine(d.Principal, d.Host, d.PermissionType, d.Operation, d.ResourceType, d.ResourcePatternType, d.ResourceName)
			if !seen[line] {
				seen[line] = true
				fmt.Fprintf(w, "deleted %s\n", line)
			}
		}
	}
	if errs == nil {
		fmt.Fprintf(w, "%d ACL(s) deleted\n", len(seen))
	}
	return errs
}
