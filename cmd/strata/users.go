package main

// `strata users`: SCRAM user administration (issue 20) against any
// Kafka-compatible cluster, through AlterUserScramCredentials and
// DescribeUserScramCredentials, as kafka-configs --entity-type users does:
// create salts the password here, with a random salt and the iteration
// count, and sends only the salt and the salted password (PBKDF2 with the
// mechanism's HMAC); the password never leaves the machine. The broker
// derives and keeps the stored and server keys (in a cluster, in the
// replicated metadata). The --brokers, --sasl-* and --tls flags are
// those of `strata acls`.

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const usersAbout = `SCRAM user administration (SCRAM-SHA-256, SCRAM-SHA-512; docs/security.md,
"SCRAM users"), through AlterUserScramCredentials and DescribeUserScramCredentials
as kafka-configs --entity-type users does. create salts the password on this
machine and sends only the salt, the iteration count and the salted password.
Every verb takes --brokers (default: $STRATA_BROKERS, else 127.0.0.1:9092),
--timeout, and for a secured listener --sasl-mechanism, --sasl-username,
--sasl-password (default: $STRATA_SASL_PASSWORD), --tls and --tls-ca. With an
authorizer, create and delete need Alter on the cluster, list Describe. One
request goes to any broker: in a cluster the credentials are replicated metadata.`

// userPasswordEnv is where create takes the new user's password from
// when --password is not given.
const userPasswordEnv = "STRATA_USER_PASSWORD"

// defaultScramIterations is kafka-configs' default iteration count.
const defaultScramIterations = 4096

var usersVerbs = []verbDoc{
	{"create", "create or replace a user's SCRAM credential", cmdDoc{name: "users create",
		usage: "strata users create NAME [--password P | --password -] [--mechanism SCRAM-SHA-512|SCRAM-SHA-256] [--iterations N]",
		about: "Sets NAME's credential for the mechanism (replacing one it has), as kafka-configs --alter\n" +
			"--add-config 'SCRAM-SHA-512=[iterations=N,password=P]' does. The password comes from\n" +
			"--password, from the first line of standard input with --password -, else from\n" +
			"$" + userPasswordEnv + ". It is salted here (32 random bytes, PBKDF2 with the mechanism's\n" +
			"HMAC, N iterations: 4096 to 16384, Kafka's range) and never sent."}},
	{"delete", "delete a user's SCRAM credentials", cmdDoc{name: "users delete",
		usage: "strata users delete NAME [--mechanism SCRAM-SHA-512|SCRAM-SHA-256]",
		about: "Deletes NAME's credential for the mechanism, or for every mechanism it has without\n" +
			"--mechanism. Connections already authenticated keep their session."}},
	{"list", "list SCRAM users", cmdDoc{name: "users list",
		usage: "strata users list [NAME...] [--format text|json]",
		about: "Lists the users (or the named ones) with their mechanisms and iteration counts;\n" +
			"salts and keys are never shown. A named user without credentials is an error."}},
}

type usersFlags struct {
	fs         *flag.FlagSet
	brokers    string
	timeout    time.Duration
	mechanism  string
	password   string
	iterations int
	format     outputFormat
	sec        secFlags
}

func newUsersFlags(v verbDoc) *usersFlags {
	f := &usersFlags{fs: flag.NewFlagSet("strata users "+v.verb, flag.ContinueOnError), format: formatText}
	f.fs.StringVar(&f.brokers, "brokers", "", brokersHelp)
	f.fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the cluster")
	f.sec.register(f.fs)
	switch v.verb {
	case "create":
		f.fs.StringVar(&f.mechanism, "mechanism", sasl.ScramSHA512, "SCRAM `mechanism`: SCRAM-SHA-512 or SCRAM-SHA-256")
		f.fs.StringVar(&f.password, "password", "", "the user's `password`; - reads it from standard input (default: $"+userPasswordEnv+")")
		f.fs.IntVar(&f.iterations, "iterations", defaultScramIterations, "PBKDF2 iterations, 4096 to 16384")
	case "delete":
		f.fs.StringVar(&f.mechanism, "mechanism", "", "only this SCRAM `mechanism` (default: every mechanism the user has)")
	case "list":
		f.fs.Var(&f.format, "format", formatHelp)
	}
	return f
}

func usersMain(args []string, stdout, stderr io.Writer) error {
	return usersMainEnv(args, os.Stdin, stdout, stderr, os.Getenv)
}

func usersMainEnv(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	v, ok, err := dispatchVerb("users", usersAbout, usersVerbs, args, stdout)
	if !ok {
		return err
	}
	f := newUsersFlags(v)
	pos, err := parseFlags(f.fs, args[1:], v.doc, true, stdout)
	if err != nil {
		return err
	}
	f.brokers = resolveBrokers(f.brokers, getenv)
	f.sec.resolve(getenv)
	mech := ""
	if f.mechanism != "" {
		if mech = strings.ToUpper(strings.TrimSpace(f.mechanism)); !sasl.IsScram(mech) {
			return usagef(v.doc, "--mechanism %q: want SCRAM-SHA-512 or SCRAM-SHA-256", f.mechanism)
		}
	}
	switch v.verb {
	case "create", "delete":
		if len(pos) != 1 || pos[0] == "" {
			return usagef(v.doc, "%s takes one user name, got %q", v.verb, pos)
		}
	}
	var upsert kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	if v.verb == "create" {
		if f.iterations < 4096 || f.iterations > 16384 {
			return usagef(v.doc, "--iterations %d: want 4096 to 16384 (Kafka's range)", f.iterations)
		}
		pw := f.password
		switch {
		case pw == "-":
			line, err := bufio.NewReader(stdin).ReadString('\n')
			if err != nil && !(errors.Is(err, io.EOF) && line != "") {
				return fmt.Errorf("--password -: reading standard input: %w", err)
			}
			pw = strings.TrimRight(line, "\r\n")
		case pw == "":
			pw = getenv(userPasswordEnv)
		}
		if pw == "" {
			return usagef(v.doc, "give the password with --password, --password - (standard input) or $%s", userPasswordEnv)
		}
		if upsert, err = scramUpsertion(pos[0], mech, pw, f.iterations); err != nil {
			return err
		}
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
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	switch v.verb {
	case "create":
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		req.Upsertions = append(req.Upsertions, upsert)
		if err := alterUsers(ctx, cl, req); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "user %s: %s credential set (%d iterations)\n", pos[0], mech, f.iterations)
		return nil
	case "delete":
		mechs := []string{mech}
		if mech == "" {
			users, err := describeUsers(ctx, cl, pos)
			if err != nil {
				return err
			}
			mechs = mechs[:0]
			for _, c := range users[0].creds {
				mechs = append(mechs, c.Mechanism)
			}
		}
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		for _, m := range mechs {
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = pos[0], scramMechanismCode(m)
			req.Deletions = append(req.Deletions, d)
		}
		if err := alterUsers(ctx, cl, req); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "user %s: %s credential(s) deleted\n", pos[0], strings.Join(mechs, ", "))
		return nil
	}
	users, err := describeUsers(ctx, cl, pos)
	if err != nil {
		return err
	}
	return printUsers(users, f.format, stdout)
}

// scramUpsertion is the AlterUserScramCredentials upsertion of user's
// credential for mech: a random 32-byte salt, iterations, and the salted
// password (PBKDF2 with the mechanism's HMAC), never the password.
func scramUpsertion(user, mech, password string, iterations int) (kmsg.AlterUserSCRAMCredentialsRequestUpsertion, error) {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return u, err
	}
	salted, err := sasl.SaltedPassword(mech, password, salt, iterations)
	if err != nil {
		return u, err
	}
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, scramMechanismCode(mech), int32(iterations), salt, salted
	return u, nil
}

// scramMechanismCode is the protocol's code of a SCRAM mechanism (1
// SCRAM-SHA-256, 2 SCRAM-SHA-512).
func scramMechanismCode(mech string) int8 {
	if mech == sasl.ScramSHA256 {
		return 1
	}
	return 2
}

func scramMechanismName(code int8) string {
	switch code {
	case 1:
		return sasl.ScramSHA256
	case 2:
		return sasl.ScramSHA512
	}
	return fmt.Sprintf("UNKNOWN(%d)", code)
}

// alterUsers sends req once (to any broker) and returns the users'
// errors, each with the broker's message.
func alterUsers(ctx context.Context, cl kmsg.Requestor, req *kmsg.AlterUserSCRAMCredentialsRequest) error {
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	var errs error
	for _, r := range resp.Results {
		if e := kerr.ErrorForCode(r.ErrorCode); e != nil {
			if r.ErrorMessage != nil && *r.ErrorMessage != "" {
				e = fmt.Errorf("user %s: %w: %s", r.User, e, *r.ErrorMessage)
			} else {
				e = fmt.Errorf("user %s: %w", r.User, e)
			}
			errs = errors.Join(errs, e)
		}
	}
	return errs
}

// userCredential is one mechanism of a user in list's output.
type userCredential struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

type userCredentials struct {
	name  string
	creds []userCredential
}

// describeUsers asks for names' credentials (every user's when names is
// empty), sorted by name.
func describeUsers(ctx context.Context, cl kmsg.Requestor, names []string) ([]userCredentials, error) {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	if len(names) > 0 {
		for _, n := range names {
			u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			u.Name = n
			req.Users = append(req.Users, u)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if e := kerr.ErrorForCode(resp.ErrorCode); e != nil {
		if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
			return nil, fmt.Errorf("%w: %s", e, *resp.ErrorMessage)
		}
		return nil, e
	}
	var out []userCredentials
	var errs error
	for _, r := range resp.Results {
		if e := kerr.ErrorForCode(r.ErrorCode); e != nil {
			errs = errors.Join(errs, fmt.Errorf("user %s: %w", r.User, e))
			continue
		}
		u := userCredentials{name: r.User}
		for _, c := range r.CredentialInfos {
			u.creds = append(u.creds, userCredential{scramMechanismName(c.Mechanism), c.Iterations})
		}
		sort.Slice(u.creds, func(i, j int) bool { return u.creds[i].Mechanism < u.creds[j].Mechanism })
		out = append(out, u)
	}
	if errs != nil {
		return nil, errs
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func printUsers(users []userCredentials, format outputFormat, w io.Writer) error {
	if format == formatJSON {
		type userJS struct {
			User        string           `json:"user"`
			Credentials []userCredential `json:"credentials"`
		}
		out := []userJS{}
		for _, u := range users {
			out = append(out, userJS{u.name, u.creds})
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
	for _, u := range users {
		for _, c := range u.creds {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", u.name, c.Mechanism, c.Iterations)
		}
	}
	return tw.Flush()
}
