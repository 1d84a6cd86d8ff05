package bench

import "syscall"

// setPdeathsig makes the kernel end a private PostgreSQL server (immediate
// shutdown) if this process dies without stopping it, so that a killed
// bench leaves no server behind.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGQUIT }
