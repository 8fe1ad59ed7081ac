//! `ledgerlet runtime serve` in its own process, on a socket in a test directory: pods on it
//! outlive the agent, and a test can pause it (SIGSTOP) to make a runtime that stops
//! answering without going away. Dropping it sends SIGTERM (which kills its containers),
//! then SIGKILL after 20 s.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RuntimeProcess {
    child: Child,
    /// `unix://…/rt.sock`, for `--container-runtime-endpoint`.
    pub endpoint: String,
}

impl RuntimeProcess {
    /// Starts the runtime with its socket and state under `dir`; returns once it listens.
    pub fn start(dir: &Path) -> RuntimeProcess {
        let socket = dir.join("rt.sock");
        let child = Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
            .args(["runtime", "serve", "--listen"])
            .arg(format!("unix://{}", socket.display()))
            .arg("--root-dir")
            .arg(dir.join("rt-state"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the runtime");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "the runtime did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        RuntimeProcess {
            child,
            endpoint: format!("unix://{}", socket.display()),
        }
    }

    /// Freezes the runtime (SIGSTOP): its socket stays, calls hang.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Lets a paused runtime go on (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, signal: i32) {
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }
}

impl Drop for RuntimeProcess {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
