package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
)

// MinIterations is the smallest SCRAM iteration count Kafka accepts (4096).
const MinIterations = 4096

// MaxIterations is the largest (Kafka's 16384).
const MaxIterations = 16384

// ScramCredential is what the broker keeps of a SCRAM password (RFC 5802
// section 3): never the password or the salted password.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
	Iterations int
}

func hashFor(mech string) (func() hash.Hash, bool) {
	switch mech {
	case ScramSHA256:
		return sha256.New, true
	case ScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

// IsScram reports whether mech is a SCRAM mechanism.
func IsScram(mech string) bool { _, ok := hashFor(mech); return ok }

// SaltedPassword is Hi(password, salt, iterations) of RFC 5802 (PBKDF2
// with the mechanism's HMAC), what AlterUserScramCredentials carries.
func SaltedPassword(mech, password string, salt []byte, iterations int) ([]byte, error) {
	h, ok := hashFor(mech)
	if !ok {
		return nil, errors.New("sasl: " + mech + " is not a SCRAM mechanism")
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// CredentialFromSalted derives the stored credential from a salted
// password.
func CredentialFromSalted(mech string, salted, salt []byte, iterations int) (ScramCredential, error) {
	h, ok := hashFor(mech)
	if !ok {
		return ScramCredential{}, errors.New("sasl: " + mech + " is not a SCRAM mechanism")
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return ScramCredential{}, errors.New("sasl: iterations must be between " + strconv.Itoa(MinIterations) + " and " + strconv.Itoa(MaxIterations))
	}
	if len(salt) == 0 || len(salted) != h().Size() {
		return ScramCredential{}, errors.New("sasl: " + mech + " needs a salt and a salted password of " + strconv.Itoa(h().Size()) + " bytes")
	}
	clientKey := hmacSum(h, salted, []byte("Client Key"))
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacSum(h, salted, []byte("Server Key")),
		Iterations: iterations,
	}, nil
}

// NewCredential salts password with a fresh random salt.
func NewCredential(mech, password string, iterations int) (ScramCredential, error) {
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := SaltedPassword(mech, password, salt, iterations)
	if err != nil {
		return ScramCredential{}, err
	}
	return CredentialFromSalted(mech, salted, salt, iterations)
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// scramFailed is what Kafka tells a client whose SCRAM proof or user is
// wrong (SaslServerAuthenticator wraps ScramSaslServer's SaslException).
func scramFailed(mech string) error {
	return &AuthError{Msg: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech}
}

// scramServer runs RFC 5802's exchange: client-first, server-first,
// client-final, server-final.
type scramServer struct {
	mech  string
	store *Store
	step  int

	gs2       string // the client's gs2 header ("n,," or "n,a=user,")
	user      string
	nonce     string // client nonce + server nonce
	firstBare string // client-first-message-bare
	srvFirst  string
	cred      ScramCredential
	principal string
}

func (s *scramServer) Principal() string { return s.principal }

func (s *scramServer) Step(token []byte) (out []byte, done bool, err error) {
	switch s.step {
	case 0:
		s.step = 1
		out, done, err = s.clientFirst(string(token))
	case 1:
		s.step = 2
		out, done, err = s.clientFinal(string(token))
	default:
		return nil, false, &AuthError{Msg: "Authentication failed: SCRAM exchange already complete"}
	}
	if err != nil {
		s.step = 2 // a failed exchange takes no further message
	}
	return out, done, err
}

func invalid(what string) error {
	return &AuthError{Msg: "Authentication failed: invalid SCRAM message: " + what}
}

// clientFirst parses gs2-header client-first-message-bare:
// "n,[a=authzid]," "n=saslname,r=nonce[,ext=value]*".
func (s *scramServer) clientFirst(msg string) ([]byte, bool, error) {
	if !strings.HasPrefix(msg, "n,") {
		// "y" and "p" (channel binding) are refused, as Kafka does.
		return nil, false, invalid("channel binding is not supported (expected the gs2 header n,,)")
	}
	rest := msg[2:]
	authzPart, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, false, invalid("no client-first-message-bare")
	}
	authz := ""
	if authzPart != "" {
		a, ok := strings.CutPrefix(authzPart, "a=")
		if !ok {
			return nil, false, invalid("bad authorization id")
		}
		if authz, ok = decodeSaslName(a); !ok {
			return nil, false, invalid("bad authorization id")
		}
	}
	s.gs2 = msg[:2+len(authzPart)+1]
	s.firstBare = bare
	fields := strings.Split(bare, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, false, invalid("expected n=<user>,r=<nonce>")
	}
	user, ok := decodeSaslName(fields[0][2:])
	if !ok || user == "" {
		return nil, false, invalid("bad user name")
	}
	cnonce := fields[1][2:]
	if cnonce == "" || !printable(cnonce) {
		return nil, false, invalid("bad nonce")
	}
	for _, ext := range fields[2:] {
		k, _, _ := strings.Cut(ext, "=")
		if k == "tokenauth" {
			return nil, false, &AuthError{Msg: "Authentication failed: delegation tokens are not supported"}
		}
	}
	if authz != "" && authz != user {
		return nil, false, &AuthError{Msg: "Authentication failed: Client requested an authorization id that is different from username"}
	}
	cred, ok := s.store.Get(user, s.mech)
	if !ok {
		return nil, false, scramFailed(s.mech)
	}
	s.user, s.cred = user, cred
	var nb [24]byte
	rand.Read(nb[:])
	s.nonce = cnonce + base64.RawURLEncoding.EncodeToString(nb[:])
	s.srvFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(s.srvFirst), false, nil
}

// clientFinal checks "c=<gs2 base64>,r=<nonce>[,ext]*,p=<proof>".
func (s *scramServer) clientFinal(msg string) ([]byte, bool, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, false, invalid("no proof")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, false, invalid("expected c=<binding>,r=<nonce>")
	}
	if fields[0][2:] != base64.StdEncoding.EncodeToString([]byte(s.gs2)) {
		return nil, false, invalid("channel binding does not match the gs2 header")
	}
	// Kafka's ScramSaslServer checks that the nonce ends with the server
	// nonce, not that it equals it: librdkafka (confluent-kafka-python,
	// kcat) sends its client nonce before the combined nonce. The proof
	// covers the message as sent, so nothing else is accepted.
	if !strings.HasSuffix(fields[1][2:], s.nonce) {
		return nil, false, invalid("nonce mismatch")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	h, _ := hashFor(s.mech)
	if err != nil || len(proof) != h().Size() {
		return nil, false, invalid("bad proof")
	}
	authMsg := []byte(s.firstBare + "," + s.srvFirst + "," + withoutProof)
	sig := hmacSum(h, s.cred.StoredKey, authMsg)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ sig[j]
	}
	d := h()
	d.Write(clientKey)
	if subtle.ConstantTimeCompare(d.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, false, scramFailed(s.mech)
	}
	s.principal = "User:" + s.user
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSum(h, s.cred.ServerKey, authMsg))), true, nil
}

// decodeSaslName undoes RFC 5802's escaping (=2C is ',' and =3D is '=').
func decodeSaslName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}
