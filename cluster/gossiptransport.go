package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// maxGossipPacket bounds one UDP read (memberlist keeps packets under the
// 1400-byte UDP MTU it assumes; larger ones are dropped by the kernel).
const maxGossipPacket = 65536

// gossipTransport is memberlist's Transport on the cluster port: packets on
// the UDP socket of the same port number, streams (push/pull, TCP
// fallback pings) as authenticated connections of the memberlist class.
type gossipTransport struct {
	t        *Transport
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	wg       sync.WaitGroup
}

func newGossipTransport(t *Transport) *gossipTransport {
	g := &gossipTransport{
		t:        t,
		packetCh: make(chan *memberlist.Packet, 256),
		streamCh: make(chan net.Conn),
	}
	t.Handle(ClassMemberlist, func(conn net.Conn, _ peerInfo) {
		select {
		case g.streamCh <- conn:
		case <-t.shutdown:
			conn.Close()
		}
	})
	g.wg.Add(1)
	go g.readPackets()
	return g
}

func (g *gossipTransport) readPackets() {
	defer g.wg.Done()
	for {
		buf := make([]byte, maxGossipPacket)
		n, addr, err := g.t.udp.ReadFrom(buf)
		if err != nil {
			select {
			case <-g.t.shutdown:
				return
			default:
			}
			g.t.log.Error("gossip packet read failed", "error", err)
			return
		}
		if n < 1 {
			continue
		}
		select {
		case g.packetCh <- &memberlist.Packet{Buf: buf[:n], From: addr, Timestamp: time.Now()}:
		case <-g.t.shutdown:
			return
		}
	}
}

func (g *gossipTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	host, port, err := net.SplitHostPort(g.t.Addr())
	if err != nil {
		return nil, 0, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return nil, 0, fmt.Errorf("cluster: advertise host %q: %v", host, err)
		}
		ip = ips[0]
	}
	p, err := strconv.Atoi(port)
	return ip, p, err
}

func (g *gossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if !g.t.faults.passPacket(g.t.Addr(), addr) {
		return time.Now(), nil
	}
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = g.t.udp.WriteTo(b, udpAddr)
	return time.Now(), err
}

func (g *gossipTransport) PacketCh() <-chan *memberlist.Packet { return g.packetCh }

func (g *gossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return g.t.Dial(ctx, addr, ClassMemberlist)
}

func (g *gossipTransport) StreamCh() <-chan net.Conn { return g.streamCh }

// Shutdown is called by memberlist; the socket belongs to the Transport,
// which closes it after memberlist has stopped; the reader is waited for
// in wait.
func (g *gossipTransport) Shutdown() error { return nil }

func (g *gossipTransport) wait() { g.wg.Wait() }
