package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// SSL is one listener's resolved ssl.* settings (Kafka's names; PEM only).
// ServerTLS and ClientTLS build crypto/tls configurations from it that
// reload the key, certificates and trust store when their files change.
type SSL struct {
	Listener string // the listener's name, for log lines

	KeystoreLocation string // ssl.keystore.location: a PEM file with the private key and the certificate chain
	KeystoreChain    string // ssl.keystore.certificate.chain: inline PEM
	KeystoreKey      string // ssl.keystore.key: inline PEM
	KeyPassword      string // ssl.key.password: of an encrypted PKCS#8 key

	TruststoreLocation string // ssl.truststore.location: PEM certificates
	TruststoreCerts    string // ssl.truststore.certificates: inline PEM

	ClientAuth   tls.ClientAuthType // ssl.client.auth
	MinVersion   uint16             // ssl.enabled.protocols, capped by ssl.protocol
	MaxVersion   uint16
	CipherSuites []uint16 // ssl.cipher.suites (TLS 1.2; nil: Go's defaults)
	// VerifyHostname is ssl.endpoint.identification.algorithm=https: a
	// broker dialing another checks the certificate's names.
	VerifyHostname bool

	principal *principalMapper // ssl.principal.mapping.rules

	// keys names, per setting, the key it came from (a listener.name.
	// override or the global key), so errors name what to fix.
	keys map[string]string

	// storeMu guards KeystoreLocation and TruststoreLocation once the
	// listener serves: SetStores changes them (dynamic broker configs).
	storeMu sync.Mutex
}

// storeLocations returns the keystore and trust store files in use.
func (s *SSL) storeLocations() (keystore, truststore string) {
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	return s.KeystoreLocation, s.TruststoreLocation
}

// Locations returns the keystore and trust store files in use (SetStores
// changes them).
func (s *SSL) Locations() (keystore, truststore string) { return s.storeLocations() }

// CheckStores loads the key, certificate chain and trust store s names,
// as a handshake would, and reports why they do not load.
func (s *SSL) CheckStores() error {
	_, _, err := s.load()
	return err
}

// SetStores makes the listener use the key and certificates of keystore
// and the CAs of truststore (ssl.keystore.location and
// ssl.truststore.location changed at runtime, Kafka's dynamic SSL
// reconfiguration): they are loaded first and refused, with nothing
// changed, when they do not load (or when s has inline PEM instead of
// files: the file and the inline form exclude each other); new
// handshakes and dials use them, connections open keep theirs.
func (s *SSL) SetStores(keystore, truststore string) error {
	if (keystore != "" && (s.KeystoreChain != "" || s.KeystoreKey != "")) || (truststore != "" && s.TruststoreCerts != "") {
		return s.errf("ssl.keystore.location", "set either a store location or its inline PEM, not both")
	}
	if keystore == "" && s.KeystoreChain == "" {
		return s.errf("ssl.keystore.location", "an SSL listener needs a private key and certificate chain")
	}
	if s.ClientAuth != tls.NoClientCert && truststore == "" && s.TruststoreCerts == "" {
		return s.errf("ssl.truststore.location", "client certificates are verified against the trust store")
	}
	probe := &SSL{Listener: s.Listener, KeystoreLocation: keystore, KeystoreChain: s.KeystoreChain, KeystoreKey: s.KeystoreKey,
		KeyPassword: s.KeyPassword, TruststoreLocation: truststore, TruststoreCerts: s.TruststoreCerts, keys: s.keys}
	if err := probe.CheckStores(); err != nil {
		return err
	}
	s.storeMu.Lock()
	s.KeystoreLocation, s.TruststoreLocation = keystore, truststore
	s.storeMu.Unlock()
	return nil
}

// Kafka's TLS protocol names.
var tlsVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// newSSL resolves a listener's settings; get returns a key's value and
// the name it was set under.
func newSSL(listener string, get func(key string) (value, from string)) (*SSL, error) {
	s := &SSL{Listener: listener, keys: map[string]string{}}
	val := func(key string) string {
		v, from := get(key)
		s.keys[key] = from
		return v
	}
	errf := func(key, format string, args ...any) error {
		return fmt.Errorf("config: %s (listener %s): %s", s.keys[key], listener, fmt.Sprintf(format, args...))
	}
	for _, key := range []string{"ssl.keystore.type", "ssl.truststore.type"} {
		if t := val(key); t != "" && !strings.EqualFold(t, "PEM") {
			return nil, errf(key, "%s stores are not supported; only PEM (convert with openssl or keytool)", t)
		}
	}
	for _, key := range []string{"ssl.keystore.password", "ssl.truststore.password"} {
		if val(key) != "" {
			return nil, errf(key, "a PEM store has no store password (only ssl.key.password, for an encrypted key), as in Kafka")
		}
	}
	s.KeystoreLocation = val("ssl.keystore.location")
	s.KeystoreChain = val("ssl.keystore.certificate.chain")
	s.KeystoreKey = val("ssl.keystore.key")
	s.KeyPassword = val("ssl.key.password")
	s.TruststoreLocation = val("ssl.truststore.location")
	s.TruststoreCerts = val("ssl.truststore.certificates")
	switch {
	case s.KeystoreLocation != "" && (s.KeystoreChain != "" || s.KeystoreKey != ""):
		return nil, errf("ssl.keystore.location", "set either ssl.keystore.location or ssl.keystore.certificate.chain and ssl.keystore.key, not both")
	case s.KeystoreLocation == "" && s.KeystoreChain == "" && s.KeystoreKey == "":
		return nil, errf("ssl.keystore.location", "an SSL listener needs a private key and certificate chain (ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key)")
	case s.KeystoreLocation == "" && (s.KeystoreChain == "" || s.KeystoreKey == ""):
		return nil, errf("ssl.keystore.key", "ssl.keystore.certificate.chain and ssl.keystore.key go together")
	}
	if s.TruststoreLocation != "" && s.TruststoreCerts != "" {
		return nil, errf("ssl.truststore.location", "set either ssl.truststore.location or ssl.truststore.certificates, not both")
	}
	switch ca := val("ssl.client.auth"); ca {
	case "", "none":
		s.ClientAuth = tls.NoClientCert
	case "requested":
		s.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		s.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, errf("ssl.client.auth", "%q is not required, requested or none", ca)
	}
	if s.ClientAuth != tls.NoClientCert && s.TruststoreLocation == "" && s.TruststoreCerts == "" {
		return nil, errf("ssl.client.auth", "client certificates are verified against the trust store: set ssl.truststore.location or ssl.truststore.certificates")
	}
	protos := val("ssl.enabled.protocols")
	if protos == "" {
		protos = "TLSv1.2,TLSv1.3"
	}
	for _, p := range strings.Split(protos, ",") {
		v, ok := tlsVersions[strings.TrimSpace(p)]
		if !ok {
			return nil, errf("ssl.enabled.protocols", "%q: only TLSv1.2 and TLSv1.3 are supported", p)
		}
		if s.MinVersion == 0 || v < s.MinVersion {
			s.MinVersion = v
		}
		s.MaxVersion = max(s.MaxVersion, v)
	}
	switch p := val("ssl.protocol"); p {
	case "", "TLS", "TLSv1.3":
	case "TLSv1.2":
		// Kafka: with ssl.protocol=TLSv1.2 TLS 1.3 is not used even if enabled.
		s.MaxVersion = min(s.MaxVersion, tls.VersionTLS12)
		if s.MinVersion > s.MaxVersion {
			return nil, errf("ssl.protocol", "TLSv1.2 while ssl.enabled.protocols allows only TLSv1.3")
		}
	default:
		return nil, errf("ssl.protocol", "%q: TLS, TLSv1.2 or TLSv1.3", p)
	}
	if cs := val("ssl.cipher.suites"); cs != "" {
		suites, err := cipherSuites(cs)
		if err != nil {
			return nil, errf("ssl.cipher.suites", "%v", err)
		}
		s.CipherSuites = suites
	}
	switch a := val("ssl.endpoint.identification.algorithm"); strings.ToLower(a) {
	case "https": // Kafka's default (sslDefaults)
		s.VerifyHostname = true
	case "":
	default:
		return nil, errf("ssl.endpoint.identification.algorithm", "%q: https or empty", a)
	}
	pm, err := parsePrincipalRules(val("ssl.principal.mapping.rules"))
	if err != nil {
		return nil, errf("ssl.principal.mapping.rules", "%v", err)
	}
	s.principal = pm
	// Load once now: a missing file or a key that does not match its
	// certificate is a start-up error, not a failed handshake later.
	if _, _, err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// cipherSuites maps IANA suite names (what Kafka's ssl.cipher.suites
// takes) to Go's. TLS 1.3 suites are always on in Go: they are accepted
// and have no effect.
func cipherSuites(v string) ([]uint16, error) {
	byName := map[string]uint16{}
	for _, c := range tls.CipherSuites() {
		byName[c.Name] = c.ID
	}
	var out []uint16
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		switch n {
		case "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256":
			continue
		}
		id, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("%q is not a secure cipher suite Go's crypto/tls implements", n)
		}
		out = append(out, id)
	}
	return out, nil
}

// fileStamp identifies a version of a file without reading it.
type fileStamp struct {
	path  string
	size  int64
	mtime time.Time
}

func stampFiles(paths ...string) []fileStamp {
	var out []fileStamp
	for _, p := range paths {
		if p == "" {
			continue
		}
		st := fileStamp{path: p, size: -1}
		if fi, err := os.Stat(p); err == nil {
			st.size, st.mtime = fi.Size(), fi.ModTime()
		}
		out = append(out, st)
	}
	return out
}

// material is what the files hold: the listener's certificate and the
// CAs it trusts (nil: the system's, for a client; none, for a server).
type material struct {
	cert  tls.Certificate
	roots *x509.CertPool
}

// load reads the key, chain and trust store.
func (s *SSL) load() (*material, []fileStamp, error) {
	keystore, truststore := s.storeLocations()
	stamps := stampFiles(keystore, truststore)
	m := &material{}
	var keyPEM, chainPEM []byte
	keyKey := "ssl.keystore.key"
	if keystore != "" {
		b, err := os.ReadFile(keystore)
		if err != nil {
			return nil, nil, s.errf("ssl.keystore.location", "%v", err)
		}
		keyPEM, chainPEM, keyKey = b, b, "ssl.keystore.location"
	} else {
		keyPEM, chainPEM = normalizePEM(s.KeystoreKey), normalizePEM(s.KeystoreChain)
	}
	cert, err := keyPair(chainPEM, keyPEM, s.KeyPassword)
	if err != nil {
		if errors.Is(err, errKeyPassword) {
			keyKey = "ssl.key.password"
		}
		return nil, nil, s.errf(keyKey, "%v", err)
	}
	m.cert = cert
	var caPEM []byte
	caKey := "ssl.truststore.certificates"
	if truststore != "" {
		b, err := os.ReadFile(truststore)
		if err != nil {
			return nil, nil, s.errf("ssl.truststore.location", "%v", err)
		}
		caPEM, caKey = b, "ssl.truststore.location"
	} else if s.TruststoreCerts != "" {
		caPEM = normalizePEM(s.TruststoreCerts)
	}
	if caPEM != nil {
		m.roots = x509.NewCertPool()
		if !m.roots.AppendCertsFromPEM(caPEM) {
			return nil, nil, s.errf(caKey, "no PEM certificate found")
		}
	}
	return m, stamps, nil
}

func (s *SSL) errf(key, format string, args ...any) error {
	name := s.keys[key]
	if name == "" {
		name = key
	}
	return fmt.Errorf("config: %s (listener %s): %s", name, s.Listener, fmt.Sprintf(format, args...))
}

var errKeyPassword = errors.New("wrong ssl.key.password, or none given for an encrypted key")

// keyPair builds the certificate from PEM: the chain's CERTIFICATE
// blocks (leaf first) and the key's PRIVATE KEY block (PKCS#8, PKCS#1 or
// SEC 1), or ENCRYPTED PRIVATE KEY with password.
func keyPair(chainPEM, keyPEM []byte, password string) (tls.Certificate, error) {
	var certs bytes.Buffer
	var key []byte
	for rest := chainPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			pem.Encode(&certs, b)
		}
	}
	if certs.Len() == 0 {
		return tls.Certificate{}, errors.New("no PEM CERTIFICATE found (ssl.keystore.type is PEM: JKS and PKCS12 files must be converted)")
	}
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return tls.Certificate{}, errKeyPassword
			}
			der, err := decryptPKCS8(b.Bytes, []byte(password))
			if err != nil {
				return tls.Certificate{}, err
			}
			key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			if _, encrypted := b.Headers["DEK-Info"]; encrypted {
				return tls.Certificate{}, errors.New("a legacy OpenSSL-encrypted key (DEK-Info): use an encrypted PKCS#8 key (openssl pkcs8 -topk8 -v2 aes-256-cbc)")
			}
			key = pem.EncodeToMemory(b)
		default:
			continue
		}
		break
	}
	if key == nil {
		return tls.Certificate{}, errors.New("no PEM PRIVATE KEY found")
	}
	return tls.X509KeyPair(certs.Bytes(), key)
}

var pemBlockRE = regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END ([A-Z0-9 ]+)-----`)

// normalizePEM puts inline PEM (a properties value: newlines lost to line
// continuations, as in Kafka's examples) back into lines pem.Decode reads.
func normalizePEM(v string) []byte {
	var out bytes.Buffer
	for _, m := range pemBlockRE.FindAllStringSubmatch(v, -1) {
		body := strings.Join(strings.Fields(m[2]), "")
		der, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			continue
		}
		pem.Encode(&out, &pem.Block{Type: m[1], Bytes: der})
	}
	return out.Bytes()
}

// Principal returns the principal of a verified client certificate, in
// Kafka's form: "User:" and the subject's distinguished name (RFC 2253,
// as Java prints it: CN=client,O=Example,C=US) mapped by
// ssl.principal.mapping.rules. No rule matching is an error (Kafka fails
// the authentication).
func (s *SSL) Principal(cert *x509.Certificate) (string, error) {
	name, err := s.principal.apply(distinguishedName(cert))
	if err != nil {
		return "", err
	}
	return "User:" + name, nil
}

// reloader caches a built configuration and rebuilds it when a file's
// size or modification time changes, checked on every use (a handshake
// or a dial: a stat per file, no goroutine).
type reloader struct {
	s     *SSL
	log   *slog.Logger
	build func(m *material) *tls.Config

	mu     sync.Mutex
	cur    *tls.Config
	stamps []fileStamp
	failed []fileStamp // files whose reload failed: not retried until they change again
}

func (r *reloader) get() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := stampFiles(r.s.storeLocations())
	if r.cur != nil && (slices.Equal(now, r.stamps) || slices.Equal(now, r.failed)) {
		return r.cur
	}
	m, stamps, err := r.s.load()
	if err != nil {
		r.failed = now
		if r.cur == nil {
			return nil
		}
		r.log.Error("TLS files changed but do not load; keeping the previous key and certificates", "listener", r.s.Listener, "err", err)
		return r.cur
	}
	first := r.cur == nil
	r.cur, r.stamps, r.failed = r.build(m), stamps, nil
	if !first {
		r.log.Info("TLS key, certificates and trust store reloaded", "listener", r.s.Listener,
			"subject", subjectOf(m.cert), "not_after", notAfterOf(m.cert))
	}
	return r.cur
}

func subjectOf(c tls.Certificate) string {
	if c.Leaf != nil {
		return c.Leaf.Subject.String()
	}
	return ""
}

func notAfterOf(c tls.Certificate) string {
	if c.Leaf != nil {
		return c.Leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	return ""
}

// ServerTLS returns the listener's server configuration. Each handshake
// takes the current files (GetConfigForClient): replaced certificates
// apply to new connections without a restart; a replacement that does not
// load is logged and the previous one stays in use.
func (s *SSL) ServerTLS(log *slog.Logger) *tls.Config {
	if log == nil {
		log = slog.Default()
	}
	r := &reloader{s: s, log: log, build: func(m *material) *tls.Config {
		return &tls.Config{
			Certificates: []tls.Certificate{m.cert},
			ClientAuth:   s.ClientAuth,
			ClientCAs:    m.roots,
			MinVersion:   s.MinVersion,
			MaxVersion:   s.MaxVersion,
			CipherSuites: s.CipherSuites,
		}
	}}
	base := &tls.Config{MinVersion: s.MinVersion, MaxVersion: s.MaxVersion}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		if c := r.get(); c != nil {
			return c, nil
		}
		return nil, errors.New("no usable TLS key and certificate")
	}
	return base
}

// ClientTLS returns a function giving the configuration a broker dials
// another broker's listener with (replication, transaction markers): the
// keystore as the client certificate, the trust store as the roots (the
// system's when none is set), and the certificate's names checked against
// serverName when VerifyHostname. Each call takes the current files.
func (s *SSL) ClientTLS(log *slog.Logger) func(serverName string) *tls.Config {
	if log == nil {
		log = slog.Default()
	}
	r := &reloader{s: s, log: log, build: func(m *material) *tls.Config {
		return &tls.Config{
			Certificates: []tls.Certificate{m.cert},
			RootCAs:      m.roots,
			MinVersion:   s.MinVersion,
			MaxVersion:   s.MaxVersion,
			CipherSuites: s.CipherSuites,
		}
	}}
	return func(serverName string) *tls.Config {
		c := r.get()
		if c == nil {
			c = &tls.Config{MinVersion: s.MinVersion, MaxVersion: s.MaxVersion}
		}
		c = c.Clone()
		c.ServerName = serverName
		if !s.VerifyHostname {
			roots := c.RootCAs
			// Chain verified, names not (ssl.endpoint.identification.algorithm empty).
			c.InsecureSkipVerify = true
			c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
				return verifyChain(raw, roots)
			}
		}
		return c
	}
}

// verifyChain verifies a peer's chain against roots without checking
// its names.
func verifyChain(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("tls: no certificate from the peer")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	return err
}
