package cluster

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Connection classes: the byte a dialer sends after authentication, so one
// listener serves every plane on its own connections (design §6.1).
const (
	ClassRaft        byte = 1
	ClassRPC         byte = 2
	ClassReplication byte = 3
	ClassCatchup     byte = 4
	ClassMemberlist  byte = 5
)

const (
	handshakeMagic = "WRNC1"
	nonceLen       = 32
	handshakeOK    = 0x01
)

// peerInfo is what a handshake proves about the other end.
type peerInfo struct {
	name string // node name
	addr string // advertised cluster address
}

// A handshake is a mutual challenge-response over both nonces:
//
//	dialer   → magic, cluster name, nonceD
//	acceptor → magic, nonceA, name, addr
//	dialer   → name, addr, HMAC(auth, "dialer", cluster, nonceD, nonceA, name, addr)
//	acceptor → OK, HMAC(auth, "acceptor", cluster, nonceD, nonceA, name, addr)
//	dialer   → class byte
//
// The role labels keep one side's proof from being replayed as the other's;
// fresh nonces on both sides keep a recorded exchange from being replayed.
// The dialer proves first so the node that refuses an intruder is the one
// it dialed, which logs and counts it.
func handshakeDial(conn net.Conn, k []byte, cluster string, self peerInfo, class byte, timeout time.Duration) (peerInfo, error) {
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return peerInfo{}, err
	}
	br := bufio.NewReader(conn)
	nonceD := make([]byte, nonceLen)
	rand.Read(nonceD)
	hello := appendField([]byte(handshakeMagic), cluster)
	if _, err := conn.Write(append(hello, nonceD...)); err != nil {
		return peerInfo{}, err
	}
	if err := expectMagic(br); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return peerInfo{}, fmt.Errorf("%w: %s closed the connection at our hello (another cluster name?)", ErrAuthFailed, conn.RemoteAddr())
	} else if err != nil {
		return peerInfo{}, err
	}
	nonceA := make([]byte, nonceLen)
	if _, err := io.ReadFull(br, nonceA); err != nil {
		return peerInfo{}, err
	}
	peer, err := readPeer(br)
	if err != nil {
		return peerInfo{}, err
	}
	proof := appendPeer(nil, self)
	if _, err := conn.Write(append(proof, handshakeMAC(k, "dialer", cluster, nonceD, nonceA, self)...)); err != nil {
		return peerInfo{}, err
	}
	ok, err := br.ReadByte()
	if err != nil || ok != handshakeOK {
		return peerInfo{}, fmt.Errorf("%w: %s refused our proof (wrong secret or cluster name?)", ErrAuthFailed, conn.RemoteAddr())
	}
	theirs := make([]byte, sha256.Size)
	if _, err := io.ReadFull(br, theirs); err != nil {
		return peerInfo{}, err
	}
	if !hmac.Equal(theirs, handshakeMAC(k, "acceptor", cluster, nonceD, nonceA, peer)) {
		return peerInfo{}, fmt.Errorf("%w: %s (claims node %q) did not prove the cluster secret", ErrAuthFailed, conn.RemoteAddr(), peer.name)
	}
	if _, err := conn.Write([]byte{class}); err != nil {
		return peerInfo{}, err
	}
	if br.Buffered() > 0 {
		return peerInfo{}, errors.New("cluster: peer sent data before the class byte")
	}
	return peer, conn.SetDeadline(time.Time{})
}

// handshakeAccept authenticates an inbound connection and returns the peer
// and the class byte. The returned reader may hold bytes the peer sent after
// the class byte; the caller must read through it.
func handshakeAccept(conn net.Conn, k []byte, cluster string, self peerInfo, timeout time.Duration) (peerInfo, byte, *bufio.Reader, error) {
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return peerInfo{}, 0, nil, err
	}
	br := bufio.NewReader(conn)
	if err := expectMagic(br); err != nil {
		return peerInfo{}, 0, nil, err
	}
	theirCluster, err := readField(br)
	if err != nil {
		return peerInfo{}, 0, nil, err
	}
	if theirCluster != cluster {
		return peerInfo{}, 0, nil, fmt.Errorf("%w: cluster name %q, expected %q", ErrAuthFailed, theirCluster, cluster)
	}
	nonceD := make([]byte, nonceLen)
	if _, err := io.ReadFull(br, nonceD); err != nil {
		return peerInfo{}, 0, nil, err
	}
	nonceA := make([]byte, nonceLen)
	rand.Read(nonceA)
	if _, err := conn.Write(appendPeer(append([]byte(handshakeMagic), nonceA...), self)); err != nil {
		return peerInfo{}, 0, nil, err
	}
	peer, err := readPeer(br)
	if err != nil {
		return peerInfo{}, 0, nil, err
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(br, proof); err != nil {
		return peerInfo{}, 0, nil, err
	}
	if !hmac.Equal(proof, handshakeMAC(k, "dialer", cluster, nonceD, nonceA, peer)) {
		// Worded as Erlang distribution's refusal of a wrong cookie.
		return peerInfo{}, 0, nil, fmt.Errorf("%w: connection attempt from node %q (%s) rejected: invalid challenge reply (wrong cluster secret)",
			ErrAuthFailed, peer.name, conn.RemoteAddr())
	}
	reply := append([]byte{handshakeOK}, handshakeMAC(k, "acceptor", cluster, nonceD, nonceA, self)...)
	if _, err := conn.Write(reply); err != nil {
		return peerInfo{}, 0, nil, err
	}
	class, err := br.ReadByte()
	if err != nil {
		return peerInfo{}, 0, nil, err
	}
	return peer, class, br, conn.SetDeadline(time.Time{})
}

func handshakeMAC(k []byte, role, cluster string, nonceD, nonceA []byte, p peerInfo) []byte {
	m := hmac.New(sha256.New, k)
	for _, f := range []string{role, cluster, p.name, p.addr} {
		m.Write(appendField(nil, f))
	}
	m.Write(nonceD)
	m.Write(nonceA)
	return m.Sum(nil)
}

func expectMagic(br *bufio.Reader) error {
	magic := make([]byte, len(handshakeMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return err
	}
	if string(magic) != handshakeMagic {
		return fmt.Errorf("%w: not a warren cluster connection", ErrAuthFailed)
	}
	return nil
}

// appendField appends s with a one-byte length; fields are at most 255 bytes.
func appendField(b []byte, s string) []byte {
	if len(s) > 255 {
		s = s[:255]
	}
	return append(append(b, byte(len(s))), s...)
}

func readField(br *bufio.Reader) (string, error) {
	n, err := br.ReadByte()
	if err != nil {
		return "", err
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		return "", err
	}
	return string(buf), nil
}

func appendPeer(b []byte, p peerInfo) []byte {
	return appendField(appendField(b, p.name), p.addr)
}

func readPeer(br *bufio.Reader) (peerInfo, error) {
	name, err := readField(br)
	if err != nil {
		return peerInfo{}, err
	}
	addr, err := readField(br)
	return peerInfo{name: name, addr: addr}, err
}
