package config

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// Encrypted PKCS#8 keys (ssl.key.password), which crypto/x509 does not
// read: PBES2 (RFC 8018) with PBKDF2 and AES-CBC, what
// `openssl pkcs8 -topk8 -v2 aes-256-cbc` and Kafka's own tooling write.
//
//	EncryptedPrivateKeyInfo ::= SEQUENCE { encryptionAlgorithm AlgorithmIdentifier (PBES2), encryptedData OCTET STRING }
//	PBES2-params ::= SEQUENCE { keyDerivationFunc AlgorithmIdentifier (PBKDF2), encryptionScheme AlgorithmIdentifier (aesN-CBC, iv) }
//	PBKDF2-params ::= SEQUENCE { salt OCTET STRING, iterationCount INTEGER, keyLength INTEGER OPTIONAL, prf AlgorithmIdentifier DEFAULT hmacWithSHA1 }

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

type encryptedPrivateKeyInfo struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

type pbes2Params struct {
	KDF pkix.AlgorithmIdentifier
	Enc pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt   []byte
	Iter   int
	KeyLen int                      `asn1:"optional"`
	PRF    pkix.AlgorithmIdentifier `asn1:"optional"`
}

// maxPBKDF2Iterations bounds the work a hostile key file can ask for.
const maxPBKDF2Iterations = 10_000_000

// decryptPKCS8 returns the DER PKCS#8 key inside an encrypted one.
func decryptPKCS8(der, password []byte) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) != 0 {
		return nil, errors.New("not an encrypted PKCS#8 key")
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted key scheme %v: only PBES2 (openssl pkcs8 -topk8 -v2 aes-256-cbc) is supported", info.Algo.Algorithm)
	}
	var p pbes2Params
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &p); err != nil || !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, errors.New("encrypted key: only PBKDF2 key derivation is supported")
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(p.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, errors.New("encrypted key: bad PBKDF2 parameters")
	}
	if kdf.Iter < 1 || kdf.Iter > maxPBKDF2Iterations {
		return nil, fmt.Errorf("encrypted key: %d PBKDF2 iterations", kdf.Iter)
	}
	var h func() hash.Hash
	switch prf := kdf.PRF.Algorithm; {
	case len(prf) == 0 || prf.Equal(oidHMACSHA1):
		h = sha1.New
	case prf.Equal(oidHMACSHA256):
		h = sha256.New
	case prf.Equal(oidHMACSHA384):
		h = sha512.New384
	case prf.Equal(oidHMACSHA512):
		h = sha512.New
	default:
		return nil, fmt.Errorf("encrypted key: PBKDF2 PRF %v not supported", prf)
	}
	var keyLen int
	switch enc := p.Enc.Algorithm; {
	case enc.Equal(oidAES128CBC):
		keyLen = 16
	case enc.Equal(oidAES192CBC):
		keyLen = 24
	case enc.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, fmt.Errorf("encrypted key: cipher %v not supported (AES-CBC only)", enc)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(p.Enc.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return nil, errors.New("encrypted key: bad AES-CBC IV")
	}
	if len(info.Data) == 0 || len(info.Data)%aes.BlockSize != 0 {
		return nil, errors.New("encrypted key: data is not whole AES blocks")
	}
	key, err := pbkdf2.Key(h, string(password), kdf.Salt, kdf.Iter, keyLen)
	if err != nil {
		return nil, err
	}
	block, _ := aes.NewCipher(key)
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	// PKCS#7 padding; a wrong password shows here (or in the parse after).
	pad := int(out[len(out)-1])
	if pad < 1 || pad > aes.BlockSize {
		return nil, errKeyPassword
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, errKeyPassword
		}
	}
	out = out[:len(out)-pad]
	var probe asn1.RawValue
	if rest, err := asn1.Unmarshal(out, &probe); err != nil || len(rest) != 0 {
		return nil, errKeyPassword
	}
	return out, nil
}
