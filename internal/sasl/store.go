package sasl

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Store holds SCRAM credentials by user and mechanism. A Store with a path
// keeps them in that file (JSON: salt, stored key, server key and
// iterations; never a password) and rewrites it, by rename, on every
// change. Safe for concurrent use; a nil *Store holds nothing.
type Store struct {
	mu    sync.RWMutex
	path  string
	creds map[string]map[string]ScramCredential // user → mechanism → credential
}

// NewStore returns an empty in-memory Store.
func NewStore() *Store { return &Store{creds: map[string]map[string]ScramCredential{}} }

// OpenStore loads the Store kept in path (a missing file is an empty
// Store) and keeps it there.
func OpenStore(path string) (*Store, error) {
	s := NewStore()
	s.path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	var file storeFile
	if err := json.Unmarshal(b, &file); err != nil {
		return nil, errors.New("sasl: " + path + ": " + err.Error())
	}
	for _, u := range file.Users {
		if !IsScram(u.Mechanism) || u.Name == "" || u.Iterations < MinIterations || len(u.Salt) == 0 {
			return nil, errors.New("sasl: " + path + ": a credential of user " + u.Name + " is not valid")
		}
		s.setLocked(u.Name, u.Mechanism, ScramCredential{Salt: u.Salt, StoredKey: u.StoredKey, ServerKey: u.ServerKey, Iterations: u.Iterations})
	}
	return s, nil
}

type storeFile struct {
	Users []storeEntry `json:"users"`
}

type storeEntry struct {
	Name       string `json:"name"`
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int    `json:"iterations"`
}

// Get returns user's credential for mech.
func (s *Store) Get(user, mech string) (ScramCredential, bool) {
	if s == nil {
		return ScramCredential{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.creds[user][mech]
	return c, ok
}

func (s *Store) setLocked(user, mech string, c ScramCredential) {
	if s.creds[user] == nil {
		s.creds[user] = map[string]ScramCredential{}
	}
	s.creds[user][mech] = c
}

// Set stores (or replaces) user's credential for mech, and the file.
func (s *Store) Set(user, mech string, c ScramCredential) error {
	return s.Update(func(tx *StoreTx) error { tx.Set(user, mech, c); return nil })
}

// Mechanisms returns the mechanisms user has credentials for, sorted.
func (s *Store) Mechanisms(user string) []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.creds[user]))
}

// Users returns the users with a credential, sorted.
func (s *Store) Users() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.creds))
}

// StoreTx is a batch of changes applied by Update.
type StoreTx struct {
	creds map[string]map[string]ScramCredential
}

// Set sets user's credential for mech.
func (tx *StoreTx) Set(user, mech string, c ScramCredential) {
	if tx.creds[user] == nil {
		tx.creds[user] = map[string]ScramCredential{}
	}
	tx.creds[user][mech] = c
}

// Delete removes user's credential for mech; false if there was none.
func (tx *StoreTx) Delete(user, mech string) bool {
	if _, ok := tx.creds[user][mech]; !ok {
		return false
	}
	delete(tx.creds[user], mech)
	if len(tx.creds[user]) == 0 {
		delete(tx.creds, user)
	}
	return true
}

// Has reports whether user has a credential for mech in the batch.
func (tx *StoreTx) Has(user, mech string) bool { _, ok := tx.creds[user][mech]; return ok }

// Update applies fn's changes all together: written to the file first
// (when the Store has one), then visible. An error from fn or from the
// write changes nothing.
func (s *Store) Update(fn func(tx *StoreTx) error) error {
	if s == nil {
		return errors.New("sasl: no credential store")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]map[string]ScramCredential{}
	for u, m := range s.creds {
		next[u] = maps.Clone(m)
	}
	tx := &StoreTx{creds: next}
	if err := fn(tx); err != nil {
		return err
	}
	if s.path != "" {
		if err := writeStore(s.path, next); err != nil {
			return err
		}
	}
	s.creds = next
	return nil
}

func writeStore(path string, creds map[string]map[string]ScramCredential) error {
	var file storeFile
	file.Users = []storeEntry{}
	for _, u := range slices.Sorted(maps.Keys(creds)) {
		for _, m := range slices.Sorted(maps.Keys(creds[u])) {
			c := creds[u][m]
			file.Users = append(file.Users, storeEntry{u, m, c.Salt, c.StoredKey, c.ServerKey, c.Iterations})
		}
	}
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(append(b, '\n')); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
