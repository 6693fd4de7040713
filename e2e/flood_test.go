package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// floodConfig is oneTenantConfig with maxUnauthenticated at 1: the few
// thousand silent connections a second a test can make beside the gateway
// on two CPUs press its listener as 20,000 a second press the default 256.
func floodConfig(hash string) string {
	return strings.Replace(oneTenantConfig(hash), "drainTimeout: 20s\n",
		"drainTimeout: 20s\nconnections: {maxUnauthenticated: 1}\n", 1)
}

// floodSource is the address the silent flood comes from; the real clients
// use it too, and 127.0.0.1.
const floodSource = "127.0.0.2"

// silentFlood opens TCP connections to addr from floodSource that never
// send a byte, at most rate a second and total in all, holding the newest
// hold of them open, until stop. Its connects do not wait for the
// handshake, as a flooder's would not.
type silentFlood struct {
	stopped chan struct{}
	done    chan struct{}
	opened  int
}

func startSilentFlood(t testing.TB, addr string, rate, hold, total int) *silentFlood {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	dst := syscall.SockaddrInet4{}
	copy(dst.Addr[:], net.ParseIP(host).To4())
	dst.Port, _ = strconv.Atoi(port)
	src := syscall.SockaddrInet4{}
	copy(src.Addr[:], net.ParseIP(floodSource).To4())
	f := &silentFlood{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		var held []int
		defer func() {
			for _, fd := range held {
				syscall.Close(fd)
			}
		}()
		start := time.Now()
		for f.opened < total {
			select {
			case <-f.stopped:
				return
			default:
			}
			if due := int(time.Since(start).Seconds() * float64(rate)); f.opened >= due {
				time.Sleep(time.Millisecond)
				continue
			}
			fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			if err := syscall.Bind(fd, &src); err != nil {
				syscall.Close(fd)
				continue
			}
			if err := syscall.Connect(fd, &dst); err != nil && err != syscall.EINPROGRESS {
				syscall.Close(fd)
				continue
			}
			f.opened++
			held = append(held, fd)
			if len(held) > hold {
				syscall.Close(held[0])
				held = held[1:]
			}
		}
		<-f.stopped
	}()
	t.Cleanup(func() { f.stop() })
	return f
}

// stop ends the flood, closes what it holds and says how many it opened.
func (f *silentFlood) stop() int {
	select {
	case <-f.stopped:
	default:
		close(f.stopped)
	}
	<-f.done
	return f.opened
}

// upgrade is a real client: from src it connects to addr and sends its
// WebSocket upgrade with key at once; it returns the status of the answer
// and how long connect and answer took.
func upgrade(addr, src, key string) (int, time.Duration, error) {
	start := time.Now()
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /v1/executor HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n", addr, key)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, 0, err
	}
	return resp.StatusCode, time.Since(start), nil
}

// TestRealClientsGetInThroughASilentFlood: while connections that never
// speak arrive without pause, from the real clients' address too, every
// real client that sends its upgrade at once gets its session, and the
// gateway holds few descriptors for the flood.
func TestRealClientsGetInThroughASilentFlood(t *testing.T) {
	key, hash := newKey(t)
	gw := startGatewayProcess(t, floodConfig(hash))
	addr := strings.TrimPrefix(gw.url, "http://")
	pid := gw.proc.cmd.Process.Pid
	flood := startSilentFlood(t, addr, 4000, 400, 16000)
	time.Sleep(300 * time.Millisecond)
	most := 0
	for i := range 40 {
		src := "127.0.0.1"
		if i%2 == 1 {
			src = floodSource
		}
		status, _, err := upgrade(addr, src, key)
		if err != nil || status != http.StatusSwitchingProtocols {
			t.Errorf("real client %d (from %s): status %d, %v", i, src, status, err)
		}
		most = max(most, openDescriptors(pid))
		time.Sleep(25 * time.Millisecond)
	}
	opened := flood.stop()
	t.Logf("the flood opened %d connections; the gateway held at most %d descriptors", opened, most)
	if opened < 200 {
		t.Fatalf("the flood opened only %d connections", opened)
	}
	// Its workers' pipes, the listeners, a few real clients, and at most 1
	// silent connection past the kernel.
	if most > 64 {
		t.Errorf("the gateway held %d descriptors under the flood", most)
	}
}

// BenchmarkConnectUnderSilentFlood is a real client's connect and upgrade
// with no flood and under a silent flood of 4,000 connections a second,
// side by side: ms/op is the mean; p50-ms and max-ms the distribution.
func BenchmarkConnectUnderSilentFlood(b *testing.B) {
	key, hash := newKey(b)
	gw := startGatewayProcess(b, floodConfig(hash))
	addr := strings.TrimPrefix(gw.url, "http://")
	for _, flooded := range []bool{false, true} {
		name := "quiet"
		if flooded {
			name = "flood"
		}
		b.Run(name, func(b *testing.B) {
			var flood *silentFlood
			if flooded {
				flood = startSilentFlood(b, addr, 4000, 400, 1<<30)
				time.Sleep(300 * time.Millisecond)
			}
			var took []time.Duration
			var mu sync.Mutex
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				src := "127.0.0.1"
				if i%2 == 1 {
					src = floodSource
				}
				status, d, err := upgrade(addr, src, key)
				if err != nil || status != http.StatusSwitchingProtocols {
					b.Fatalf("real client %d: status %d, %v", i, status, err)
				}
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}
			b.StopTimer()
			if flood != nil {
				flood.stop()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
		})
	}
}
