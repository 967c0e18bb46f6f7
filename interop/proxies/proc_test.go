package proxies_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stopGrace is how long a proxy has to exit after SIGTERM before it is
// killed.
const stopGrace = 5 * time.Second

// readyTimeout bounds the wait for a started proxy to accept connections.
const readyTimeout = 10 * time.Second

// binary returns the path of a proxy's executable, looked up on PATH and
// then in /usr/sbin, where Debian installs nginx and haproxy (outside a
// non-root PATH). A missing binary skips the test, or fails it when CI=true:
// CI's script installs both.
func binary(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	p := filepath.Join("/usr/sbin", name)
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return p
	}
	msg := name + " not found on PATH or in /usr/sbin (apt-get install " + name + ")"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// freePorts returns n distinct loopback ports that were free a moment ago:
// each was bound to :0 and closed. Another process may take one before the
// proxy binds it; launch starts the proxy again on new ports then.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return ports
}

// process is a proxy running as the test's child, the leader of a process
// group of its own, so that its workers (and an old generation's, during
// a reload) are reached through its pid.
type process struct {
	name   string
	cmd    *exec.Cmd
	out    string        // the file holding its stdout and stderr
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's error, set before exited closes
}

// start runs bin with args in dir as a child of the test and stops it when
// the test ends: SIGTERM, then after stopGrace SIGKILL to its whole group,
// and waits for it either way.
func start(t *testing.T, dir, bin string, args ...string) *process {
	t.Helper()
	name := filepath.Base(bin)
	out, err := os.CreateTemp(dir, name+"-*.out")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out // *os.File: no copying goroutines
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		t.Fatal(err)
	}
	_ = out.Close() // the child holds its own descriptor
	p := &process{name: name, cmd: cmd, out: out.Name(), exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// pid returns the process id, which is also its group's.
func (p *process) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process itself.
func (p *process) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(p.pid(), sig); err != nil {
		t.Fatalf("%s: kill -%d %d: %v", p.name, sig, p.pid(), err)
	}
}

// stop ends the process and waits for it. What is left of its group after
// it exited (a worker it failed to reap) is killed too.
func (p *process) stop(t *testing.T) {
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(p.pid(), syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			t.Errorf("%s (pid %d) still running %v after SIGTERM; killing its group", p.name, p.pid(), stopGrace)
			_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
			<-p.exited
		}
	}
	if err := syscall.Kill(-p.pid(), syscall.SIGKILL); err == nil {
		t.Errorf("%s (pid %d) left processes in its group; killed them", p.name, p.pid())
	}
}

// output returns what the process wrote so far.
func (p *process) output() string {
	b, _ := os.ReadFile(p.out)
	return string(b)
}

// errExited reports a process that ended before it accepted connections.
var errExited = errors.New("exited before accepting connections")

// ready waits until every addr accepts a TCP connection.
func (p *process) ready(addrs ...string) error {
	deadline := time.Now().Add(readyTimeout)
	for _, addr := range addrs {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			select {
			case <-p.exited:
				return fmt.Errorf("%s: %w (%v)", p.name, errExited, p.err)
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %s not accepting after %v: %w", p.name, addr, readyTimeout, err)
			}
		}
	}
	return nil
}

// launch calls run with n fresh ports until the process it starts accepts
// connections on them. A port taken by another process between freePorts
// and the proxy's bind makes the proxy exit with "Address already in use";
// then it runs again on new ports, at most 5 times.
func launch(t *testing.T, n int, run func(ports []int) (*process, []string)) (*process, []int) {
	t.Helper()
	for try := 1; ; try++ {
		ports := freePorts(t, n)
		p, addrs := run(ports)
		err := p.ready(addrs...)
		if err == nil {
			return p, ports
		}
		out := p.output()
		if !errors.Is(err, errExited) || !strings.Contains(out, "in use") || try == 5 {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Logf("%s: ports %v taken, starting again: %s", p.name, ports, lastLine(out))
	}
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
