package harness

import (
	"os/exec"
	"runtime"
	"sync"
)

// spawner starts child processes from one locked OS thread that lives as
// long as the harness: Linux delivers the parent-death signal when the
// *thread* that forked a child exits, so forking from arbitrary Go threads
// could kill children early if such a thread ever ended.
type spawner struct {
	reqs chan spawnReq
	quit chan struct{} // closed by close: no more starts
	done chan struct{} // closed when the thread's goroutine has ended
	once sync.Once
}

type spawnReq struct {
	cmd  *exec.Cmd
	resp chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after every child is gone
		defer close(s.done)
		for {
			select {
			case r := <-s.reqs:
				r.resp <- r.cmd.Start()
			case <-s.quit:
				return
			}
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	resp := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd: cmd, resp: resp}:
		return <-resp
	case <-s.quit:
		return ErrClosed
	}
}

// close ends the thread; later starts return ErrClosed. Idempotent.
func (s *spawner) close() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}
