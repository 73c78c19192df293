//! A process-mode worker started without the runner waiting for its
#![allow(unsafe_code)]
//! `execve`.
//!
//! `posix_spawn` is a vfork: the calling thread sleeps until the child has
//! exec'd. On a busy machine that is a third of a millisecond a worker, in
//! which the runtime's one thread (every slot's progress) waits, and is then
//! woken onto a CPU its child took. Here the child is cloned sharing our
//! memory (as vfork does, so no page tables are copied) but the parent goes
//! on at once; the child runs on a stack of its own, makes only raw system
//! calls (it shares the calling thread's TLS, so nothing may set `errno`),
//! and reports a failed `execve` on a close-on-exec pipe. [`Launching::done`]
//! waits on that pipe through the runtime: EOF is the exec. What the child
//! reads (its stack, argv, envp) lives in [`Launching`] until then.
//!
//! Linux on x86_64 and aarch64 only (the raw calls); elsewhere
//! `posix_spawn` serves (`posix::launch`).

use std::ffi::{CString, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Mutex;

use nix::fcntl::OFlag;
use nix::unistd::{Pid, pipe2};
use tokio::io::unix::AsyncFd;

/// The child's own stack: its few frames need far less.
const STACK: usize = 64 * 1024;

/// What the cloned child reads until it exec's: kept at one address
/// (boxed) and alive until [`Launching::done`] saw the exec or the end.
struct ChildData {
    path: CString,
    /// Owners of the strings `argv` and `envp` point at (the runner's own
    /// environment is `Prepared`'s, which outlives every spawn of its slot).
    _args: Vec<CString>,
    _own: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// The child's ends of its stdin, stdout and stderr.
    stdio: [RawFd; 3],
    /// The write end of the report pipe.
    report: RawFd,
}

/// A mapped stack with a guard page below it, unmapped on drop; kept in
/// [`SPARE`] between spawns (a mapping each costs three calls).
struct Stack {
    base: *mut c_void,
}

// SAFETY: a private mapping no child runs on once it is given back.
unsafe impl Send for Stack {}

/// Stacks of children that exec'd, for the next spawns.
static SPARE: Mutex<Vec<Stack>> = Mutex::new(Vec::new());
/// Spares kept at most: a slot holds one at a time.
const SPARES: usize = 64;
const GUARD: usize = 4096;

impl Stack {
    fn take() -> io::Result<Stack> {
        if let Some(stack) = SPARE.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(stack);
        }
        // SAFETY: an anonymous private mapping; no memory of ours is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                GUARD + STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base };
        // An overflow faults instead of writing below, into our memory.
        // SAFETY: the lowest page of the mapping just made.
        if unsafe { libc::mprotect(base, GUARD, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    fn top(&self) -> *mut c_void {
        // SAFETY: one past the mapping's end, 16-byte aligned (pages are).
        unsafe { self.base.cast::<u8>().add(GUARD + STACK).cast() }
    }

    /// Kept for another child: the caller knows none runs on it.
    fn give_back(self) {
        let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
        if spare.len() < SPARES {
            spare.push(self);
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: mapped by `take`, and no child runs on it any more.
        unsafe { libc::munmap(self.base, GUARD + STACK) };
    }
}

/// A child cloned and not yet known to have exec'd.
pub struct Launching {
    pub pid: Pid,
    /// Its pidfd, from the clone itself.
    pub pidfd: OwnedFd,
    report: Option<OwnedFd>,
    /// Read by the child until it exec'd: only kept.
    _data: Box<ChildData>,
    stack: Option<Stack>,
}

// SAFETY: the raw pointers in `ChildData` point into strings it (or the
// slot's `Prepared`) owns; nothing is shared with another thread.
unsafe impl Send for Launching {}

impl Launching {
    /// Clones the child that exec's `path` with `args` and `envp` (the
    /// prepared environment plus `own`), in its own process group, with
    /// `stdio` as its 0–2 and every signal to its default but the ignored.
    pub fn start(
        path: &Path,
        args: Vec<CString>,
        base: &[CString],
        own: Vec<CString>,
        stdio: [RawFd; 3],
    ) -> io::Result<Launching> {
        use std::os::unix::ffi::OsStrExt;
        let path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
        let (report_r, report_w) = pipe2(OFlag::O_CLOEXEC)?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> =
            base.iter().chain(own.iter()).map(|e| e.as_ptr()).collect();
        envp.push(std::ptr::null());
        let data = Box::new(ChildData {
            path,
            _args: args,
            _own: own,
            argv,
            envp,
            stdio,
            report: report_w.as_raw_fd(),
        });
        let stack = Stack::take()?;
        let mut pidfd: c_int = -1;
        // Every signal blocked across the clone, so the child starts with
        // none delivered to a handler that would run on our memory.
        let all = nix::sys::signal::SigSet::all();
        let mut old = nix::sys::signal::SigSet::empty();
        nix::sys::signal::pthread_sigmask(
            nix::sys::signal::SigmaskHow::SIG_SETMASK,
            Some(&all),
            Some(&mut old),
        )?;
        // SAFETY: the child runs `child` on its own stack with `data`,
        // both alive until the report pipe says it exec'd or ended; it
        // touches no memory of ours but them, and makes raw calls only.
        let pid = unsafe {
            libc::clone(
                child,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_PIDFD | libc::SIGCHLD,
                std::ptr::from_ref::<ChildData>(&data).cast_mut().cast(),
                &mut pidfd as *mut c_int,
            )
        };
        let cloned = io::Error::last_os_error();
        nix::sys::signal::pthread_sigmask(
            nix::sys::signal::SigmaskHow::SIG_SETMASK,
            Some(&old),
            None,
        )?;
        drop(report_w);
        if pid < 0 {
            return Err(cloned);
        }
        Ok(Launching {
            pid: Pid::from_raw(pid),
            // SAFETY: the clone made it ours.
            pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) },
            report: Some(report_r),
            _data: data,
            stack: Some(stack),
        })
    }

    /// Waits for the child's `execve`: `Ok` once it runs the program,
    /// its error when it could not (the child has then ended, unreaped).
    pub async fn done(&mut self) -> io::Result<()> {
        let Some(report) = self.report.take() else {
            return Ok(());
        };
        nix::fcntl::fcntl(&report, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        #[allow(deprecated)]
        let fd = AsyncFd::new(report)?;
        let mut buf = [0u8; 4];
        let got = loop {
            let mut ready = fd.readable().await?;
            match nix::unistd::read(fd.get_ref(), &mut buf) {
                Ok(n) => break n,
                Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        };
        // Exec'd or ended: nothing reads our memory any more.
        if let Some(stack) = self.stack.take() {
            stack.give_back();
        }
        if got == 4 {
            return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)));
        }
        Ok(())
    }
}

impl Drop for Launching {
    fn drop(&mut self) {
        // Dropped before `done`: it may still read our memory, so it is
        // killed and its exec or end waited for before the stack goes.
        if let Some(report) = self.report.take() {
            let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
            let mut buf = [0u8; 4];
            while let Err(nix::errno::Errno::EINTR) = nix::unistd::read(&report, &mut buf) {}
        }
    }
}

/// The cloned child: its own group, signals to their defaults (a handler
/// of ours must not run here), its pipes on 0–2, an empty mask, the exec.
/// Raw calls only: see the module's comment.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `ChildData` the parent keeps alive for us.
    let d = unsafe { &*(arg as *const ChildData) };
    // SAFETY: each call passes valid pointers or none.
    unsafe {
        raw::call(libc::SYS_setpgid, [0, 0, 0, 0]);
        let dfl = raw::Sigaction::default();
        for sig in 1..=64usize {
            if sig == libc::SIGKILL as usize || sig == libc::SIGSTOP as usize {
                continue;
            }
            let mut old = raw::Sigaction::default();
            if raw::call(libc::SYS_rt_sigaction, [sig, 0, (&raw mut old) as usize, 8]) != 0 {
                continue;
            }
            let ignored = old.handler == libc::SIG_IGN;
            let default = old.handler == libc::SIG_DFL;
            // SIGPIPE: the Rust runtime ignores it; a worker gets it back.
            if (!ignored && !default) || sig == libc::SIGPIPE as usize {
                raw::call(
                    libc::SYS_rt_sigaction,
                    [sig, (&raw const dfl) as usize, 0, 8],
                );
            }
        }
        for (target, fd) in d.stdio.iter().enumerate() {
            if raw::call(libc::SYS_dup3, [*fd as usize, target, 0, 0]) < 0 {
                return fail(d, -1);
            }
        }
        let empty: u64 = 0;
        raw::call(
            libc::SYS_rt_sigprocmask,
            [
                libc::SIG_SETMASK as usize,
                (&raw const empty) as usize,
                0,
                8,
            ],
        );
        let err = raw::call(
            libc::SYS_execve,
            [
                d.path.as_ptr() as usize,
                d.argv.as_ptr() as usize,
                d.envp.as_ptr() as usize,
                0,
            ],
        );
        fail(d, err)
    }
}

/// Tells the parent the exec failed (`-errno`) and ends the child.
unsafe fn fail(d: &ChildData, err: isize) -> c_int {
    let code = (-err) as i32;
    let bytes = code.to_ne_bytes();
    // SAFETY: a write of four bytes from our stack to the report pipe.
    unsafe {
        raw::call(
            libc::SYS_write,
            [d.report as usize, bytes.as_ptr() as usize, 4, 0],
        );
        raw::call(libc::SYS_exit, [127, 0, 0, 0]);
    }
    127
}

/// System calls without libc: they return `-errno` and touch no TLS.
mod raw {
    /// The kernel's `struct sigaction` on x86_64 and aarch64 (both define
    /// `SA_RESTORER`), with a 64-signal mask.
    #[repr(C)]
    #[derive(Default)]
    pub struct Sigaction {
        pub handler: usize,
        pub flags: u64,
        pub restorer: usize,
        pub mask: u64,
    }

    #[cfg(target_arch = "x86_64")]
    pub unsafe fn call(n: libc::c_long, a: [usize; 4]) -> isize {
        let ret: isize;
        // SAFETY: the caller's; `syscall` clobbers rcx and r11 only.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") n as isize => ret,
                in("rdi") a[0],
                in("rsi") a[1],
                in("rdx") a[2],
                in("r10") a[3],
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    #[cfg(target_arch = "aarch64")]
    pub unsafe fn call(n: libc::c_long, a: [usize; 4]) -> isize {
        let ret: isize;
        // SAFETY: the caller's.
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") n,
                inlateout("x0") a[0] as isize => ret,
                in("x1") a[1],
                in("x2") a[2],
                in("x3") a[3],
                options(nostack),
            );
        }
        ret
    }
}
