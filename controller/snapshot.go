package controller

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// stateMagic opens an encoded State (a Raft snapshot's contents).
var stateMagic = [4]byte{'S', 'M', 'D', 'S'}

// StateVersion is the layout version AppendTo writes. Version 1 (no
// nextProducerID) still decodes, with nextProducerID = FirstProducerID: no
// block can have been allocated by a version that did not know them.
// Version 2 (no security part) decodes with no ACLs, credentials or
// quotas, nothing seeded. Version 3 (no list of brokers whose directory
// is offline) decodes with every directory online. Version 4 (no dynamic
// broker configs) decodes with none. Version 5 (no listeners part)
// decodes with every broker registered by its one endpoint.
const StateVersion byte = 6

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendTo appends the canonical encoding of s to dst: brokers ascending by
// id, topics ascending by name, configs ascending by key. Equal States have
// equal encodings, so the encoding is also what tests compare.
func (s *State) AppendTo(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, stateMagic[:]...)
	dst = append(dst, StateVersion)
	dst = appendInt(dst, s.offset)
	ids := s.brokerIDs()
	dst = appendCount(dst, len(ids))
	for _, id := range ids {
		b := s.brokers[id]
		dst = appendInt(dst, int64(b.ID))
		dst = append(dst, b.IncarnationID[:]...)
		dst = appendString(dst, b.Host)
		dst = appendInt(dst, int64(b.Port))
		dst = appendString(dst, b.Rack)
		dst = appendInt(dst, b.Epoch)
		dst = appendBool(dst, b.Fenced)
		dst = appendBool(dst, b.ShuttingDown)
		dst = appendInt(dst, b.LastHeartbeatMs)
	}
	names := s.topicNames()
	dst = appendCount(dst, len(names))
	for _, name := range names {
		t := s.topics[name]
		dst = appendString(dst, t.Name)
		dst = append(dst, t.ID[:]...)
		dst = appendStringMap(dst, t.Configs)
		dst = appendCount(dst, len(t.Partitions))
		for i := range t.Partitions {
			p := &t.Partitions[i]
			dst = appendInt32s(dst, p.Replicas)
			dst = appendInt32s(dst, p.ISR)
			dst = appendInt(dst, int64(p.Leader))
			dst = appendInt(dst, int64(p.LeaderEpoch))
			dst = appendInt(dst, int64(p.PartitionEpoch))
			dst = appendInt32s(dst, p.Adding)
			dst = appendInt32s(dst, p.Removing)
		}
	}
	dst = appendInt(dst, s.nextProducerID) // version 2
	dst = s.appendSecurity(dst)            // version 3
	var offline []int32                    // version 4: brokers whose directory is offline, ascending
	for _, id := range ids {
		if s.brokers[id].OfflineDir {
			offline = append(offline, id)
		}
	}
	dst = appendInt32s(dst, offline)
	dst = s.appendBrokerConfigs(dst)  // version 5 (brokerconfigs.go)
	dst = s.appendListeners(dst, ids) // version 6
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeState parses AppendTo's encoding, checks the CRC and the canonical
// order, and verifies the State's invariants (Check). Errors wrap
// ErrCorrupt or ErrInvariant; it never panics.
func DecodeState(b []byte) (*State, error) {
	if len(b) < len(stateMagic)+1+4 {
		return nil, fmt.Errorf("%w: state of %d bytes", ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: state checksum mismatch", ErrCorrupt)
	}
	if [4]byte(body[:4]) != stateMagic || body[4] < 1 || body[4] > StateVersion {
		return nil, fmt.Errorf("%w: state magic/version % x", ErrCorrupt, body[:5])
	}
	r := &reader{b: body[5:]}
	s := NewState()
	s.offset = r.int64()
	nb := r.count(20)
	var lastID int32
	for i := 0; i < nb && r.err == nil; i++ {
		br := &Broker{ID: r.int32(), IncarnationID: r.uuid(), Host: r.string(), Port: r.int32(), Rack: r.string(),
			Epoch: r.int64(), Fenced: r.bool(), ShuttingDown: r.bool(), LastHeartbeatMs: r.int64()}
		if r.err == nil && i > 0 && br.ID <= lastID {
			r.fail("brokers not ascending")
		}
		lastID = br.ID
		s.brokers[br.ID] = br
	}
	nt := r.count(20)
	prev := ""
	for i := 0; i < nt && r.err == nil; i++ {
		t := &Topic{Name: r.string(), ID: r.uuid(), Configs: r.stringMap()}
		if r.err == nil && i > 0 && t.Name <= prev {
			r.fail("topics not ascending")
		}
		prev = t.Name
		np := r.count(8)
		if r.err != nil {
			break
		}
		t.Partitions = make([]Partition, np)
		for j := range t.Partitions {
			t.Partitions[j] = Partition{Replicas: r.int32s(), ISR: r.int32s(), Leader: r.int32(),
				LeaderEpoch: r.int32(), PartitionEpoch: r.int32(), Adding: nilIfEmpty(r.int32s()), Removing: nilIfEmpty(r.int32s())}
		}
		if r.err == nil && s.byID[t.ID] != nil {
			r.fail("duplicate topic id")
		}
		s.topics[t.Name] = t
		s.byID[t.ID] = t
	}
	if body[4] >= 2 {
		s.nextProducerID = r.int64()
	}
	if body[4] >= 3 {
		s.readSecurity(r)
	}
	if body[4] >= 4 {
		var last int32 = -1
		for _, id := range r.int32s() {
			b := s.brokers[id]
			if r.err == nil && (b == nil || id <= last) {
				r.fail("offline-directory brokers not registered or not ascending")
			}
			if b != nil {
				b.OfflineDir = true
			}
			last = id
		}
	}
	if body[4] >= 5 {
		s.readBrokerConfigs(r)
	}
	if body[4] >= 6 {
		s.readListeners(r)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

// appendListeners writes the brokers that registered their listeners
// (ascending id, as ids is): count, then id and endpoints each.
func (s *State) appendListeners(dst []byte, ids []int32) []byte {
	n := 0
	for _, id := range ids {
		if len(s.brokers[id].Listeners) > 0 {
			n++
		}
	}
	dst = appendCount(dst, n)
	for _, id := range ids {
		if b := s.brokers[id]; len(b.Listeners) > 0 {
			dst = appendInt(dst, int64(id))
			dst = appendEndpoints(dst, b.Listeners)
		}
	}
	return dst
}

// readListeners reads appendListeners' part: every id must be a broker
// read before, ascending, with at least one endpoint.
func (s *State) readListeners(r *reader) {
	n := r.count(2)
	last := int32(-1)
	for i := 0; i < n && r.err == nil; i++ {
		id := r.int32()
		eps := readEndpoints(r)
		if r.err != nil {
			return
		}
		b := s.brokers[id]
		switch {
		case b == nil:
			r.fail("listeners of an unknown broker")
		case i > 0 && id <= last:
			r.fail("listeners not ascending")
		case len(eps) == 0:
			r.fail("empty listeners")
		default:
			b.Listeners = eps
		}
		last = id
	}
}
