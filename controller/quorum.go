package controller

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// MaxVoters bounds a --controller-quorum list.
const MaxVoters = 64

// ParseQuorum parses Kafka's controller.quorum.voters syntax,
// "0@127.0.0.1:9093,1@127.0.0.1:9094,2@[::1]:9095", into node id → Raft
// address. Ids are non-negative and distinct, addresses distinct host:port
// pairs with a numeric port.
func ParseQuorum(s string) (map[int32]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("controller: empty quorum")
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxVoters {
		return nil, fmt.Errorf("controller: %d voters, at most %d", len(parts), MaxVoters)
	}
	out := make(map[int32]string, len(parts))
	seen := make(map[string]int32, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		at := strings.IndexByte(p, '@')
		if at <= 0 {
			return nil, fmt.Errorf("controller: quorum entry %q is not id@host:port", p)
		}
		id, err := strconv.ParseInt(p[:at], 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("controller: quorum entry %q: bad node id", p)
		}
		addr := p[at+1:]
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("controller: quorum entry %q: %v", p, err)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return nil, fmt.Errorf("controller: quorum entry %q: bad port", p)
		}
		if _, dup := out[int32(id)]; dup {
			return nil, fmt.Errorf("controller: node id %d listed twice", id)
		}
		if other, dup := seen[addr]; dup {
			return nil, fmt.Errorf("controller: address %s listed for nodes %d and %d", addr, other, id)
		}
		out[int32(id)] = addr
		seen[addr] = int32(id)
	}
	return out, nil
}

// FormatQuorum is ParseQuorum's inverse, ids ascending.
func FormatQuorum(voters map[int32]string) string {
	ids := sortedIDs(voters)
	var sb strings.Builder
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%d@%s", id, voters[id])
	}
	return sb.String()
}
