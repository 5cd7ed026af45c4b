package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// onlyBroker sends req to the broker at addr alone (not where the client's
// metadata would route it), over a new connection authenticated with mech.
func onlyBroker(ctx context.Context, addr string, mech kgosasl.Mechanism, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// TestClusterSecurityWithTheBinary: two `strata serve` brokers with a
// controller quorum, SASL SCRAM and the StandardAuthorizer. A SCRAM user,
// an ACL and a client quota made with kadm (which sends them to one broker)
// are in force on both brokers: the user logs in and is allowed on each,
// each describes the quota.
func TestClusterSecurityWithTheBinary(t *testing.T) {
	voters := []string{"0@" + freeAddr(t), "1@" + freeAddr(t)}
	var brokers []*broker
	for i := range voters {
		addr := freeAddr(t)
		props := saslProps("SASL_PLAINTEXT", addr) + clusterProps +
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:admin\n"
		brokers = append(brokers, startBrokerProps(t, addr, props,
			"--node-id", strconv.Itoa(i), "--controller-quorum", strings.Join(voters, ",")))
	}
	ctx := testCtx(t, 2*time.Minute)
	admin := scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr, brokers[1].addr), kgo.SASL(admin))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
	acl := kadm.NewACLs().Allow("User:carol").AllowHosts("*").Clusters().Operations(kadm.OpDescribe)
	cres, err := adm.CreateACLs(ctx, acl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cres {
		if r.Err != nil {
			t.Fatalf("CreateACLs: %v", r.Err)
		}
	}
	var qb kadm.AlterClientQuotaEntry
	qb.Entity = []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("carol")}}
	qb.Ops = []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 2048}}
	qres, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{qb})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range qres {
		if r.Err != nil {
			t.Fatalf("AlterClientQuotas: %v", r.Err)
		}
	}

	carol := scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()
	for _, b := range brokers {
		last := ""
		for i := 0; i < 200; i++ {
			last = ""
			dreq := kmsg.NewPtrDescribeACLsRequest()
			dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp, err := onlyBroker(ctx, b.addr, carol, dreq)
			switch {
			case err != nil:
				last = "carol's login: " + err.Error()
			case resp.(*kmsg.DescribeACLsResponse).ErrorCode != 0:
				last = "carol's DescribeAcls: " + kerr.ErrorForCode(resp.(*kmsg.DescribeACLsResponse).ErrorCode).Error()
			}
			if last == "" {
				qreq := kmsg.NewPtrDescribeClientQuotasRequest()
				c := kmsg.NewDescribeClientQuotasRequestComponent()
				c.EntityType, c.Match = "user", kmsg.StringPtr("carol")
				qreq.Components = append(qreq.Components, c)
				resp, err := onlyBroker(ctx, b.addr, admin, qreq)
				if err != nil {
					last = err.Error()
				} else if es := resp.(*kmsg.DescribeClientQuotasResponse).Entries; len(es) != 1 || len(es[0].Values) != 1 || es[0].Values[0].Value != 2048 {
					last = fmt.Sprintf("quotas %+v", es)
				}
			}
			if last == "" {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if last != "" {
			t.Fatalf("broker %s: %s\n%s", b.addr, last, b.logs)
		}
	}
}
