// Package tlstest makes certificates for tests: a CA, and server and
// client certificates it signs, written as PEM files (Kafka's PEM store
// layout: one file with the key and the chain, one with the CA).
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for tests.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	Pool    *x509.CertPool
	// Path is the CA certificate's PEM file (a trust store).
	Path string
}

// Leaf is a certificate signed by a CA.
type Leaf struct {
	Cert     *x509.Certificate
	Key      *ecdsa.PrivateKey
	CertPEM  []byte // the certificate
	KeyPEM   []byte // PKCS#8 PRIVATE KEY
	ChainPEM []byte // the certificate then the CA's
	TLS      tls.Certificate
	// Path is a PEM file with the key and the chain (a keystore).
	Path string
}

// Certificates are valid from 2000 to 2100: no clock involved.
var (
	notBefore = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter  = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

func next() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 100))
	return n
}

// NewCA makes a CA named cn and writes its certificate to dir/<cn>-ca.pem.
func NewCA(t testing.TB, dir, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          next(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Strata Test"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.Path = filepath.Join(dir, cn+"-ca.pem")
	if err := os.WriteFile(ca.Path, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Server makes a server certificate for 127.0.0.1, ::1 and localhost
// with subject CN=cn, written to dir/<cn>.pem.
func (ca *CA) Server(t testing.TB, dir, cn string) *Leaf {
	return ca.issue(t, dir, pkix.Name{CommonName: cn}, true)
}

// Client makes a client certificate with the given subject, written to
// dir/<subject CN>.pem.
func (ca *CA) Client(t testing.TB, dir string, subject pkix.Name) *Leaf {
	return ca.issue(t, dir, subject, false)
}

func (ca *CA) issue(t testing.TB, dir string, subject pkix.Name, server bool) *Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: next(),
		Subject:      subject,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := &Leaf{Cert: cert, Key: key}
	l.CertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	l.KeyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
	l.ChainPEM = append(append([]byte{}, l.CertPEM...), ca.CertPEM...)
	l.TLS, err = tls.X509KeyPair(l.ChainPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l.Path = filepath.Join(dir, subject.CommonName+".pem")
	if err := os.WriteFile(l.Path, append(append([]byte{}, l.KeyPEM...), l.ChainPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// ClientConfig is a client's TLS configuration trusting ca, presenting
// cert if non-nil.
func ClientConfig(ca *CA, cert *Leaf) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}
	if cert != nil {
		c.Certificates = []tls.Certificate{cert.TLS}
	}
	return c
}
